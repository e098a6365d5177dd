#include "backend/cpu/attention_tile.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "backend/cpu/small_gemm.h"
#include "backend/cpu/vec_math.h"

namespace t5x::cpu::attention_detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// dst[i * D + d] = factor * x[b, i0 + i, h, d] for x laid out [batch, L, H, D].
void load_rows(const float* x, int64_t L, int64_t H, int64_t D, int64_t b, int64_t h,
               int64_t i0, int64_t n, float factor, float* dst) {
  for (int64_t i = 0; i < n; ++i) {
    const float* src = x + ((b * L + i0 + i) * H + h) * D;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) dst[i * D + d] = factor * src[d];
  }
}

#if defined(__AVX512F__)
// In-register transpose of 16 rows of 16 floats.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]),
            c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      t[8 * i + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0x88);
      t[8 * i + 4 + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0xdd);
    }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xdd);
  }
}
#endif

// dst[d * kBk + j] = x[b, j0 + j, h, d]; columns j >= n are zero.
void load_transposed(const float* x, int64_t L, int64_t H, int64_t D, int64_t b, int64_t h,
                     int64_t j0, int64_t n, float* dst) {
#if defined(__AVX512F__)
  const int64_t row_stride = H * D;
  const float* base = x + ((b * L + j0) * H + h) * D;
  for (int64_t jb = 0; jb < kBk; jb += 16) {
    for (int64_t db = 0; db < D; db += 16) {
      int64_t dn = std::min<int64_t>(16, D - db);
      __mmask16 dmask = dn == 16 ? __mmask16(0xffff) : __mmask16((1u << dn) - 1);
      __m512 r[16];
      for (int64_t jj = 0; jj < 16; ++jj)
        r[jj] = jb + jj < n ? _mm512_maskz_loadu_ps(dmask, base + (jb + jj) * row_stride + db)
                            : _mm512_setzero_ps();
      transpose16(r);
      for (int64_t dd = 0; dd < dn; ++dd) _mm512_storeu_ps(dst + (db + dd) * kBk + jb, r[dd]);
    }
  }
#else
  for (int64_t j = 0; j < n; ++j) {
    const float* src = x + ((b * L + j0 + j) * H + h) * D;
    for (int64_t d = 0; d < D; ++d) dst[d * kBk + j] = src[d];
  }
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = n; j < kBk; ++j) dst[d * kBk + j] = 0.f;
#endif
}

bool allowed(const Problem& pr, int64_t b, int64_t i, int64_t j) {
  const AttentionParams& p = pr.p;
  if (p.causal && j > i + pr.causal_off) return false;
  if (p.q_mask && !p.q_mask[b * pr.s.q_length + i]) return false;
  if (p.kv_mask && !p.kv_mask[b * pr.s.kv_length + j]) return false;
  if (p.q_segment_ids) {
    int32_t qs = p.q_segment_ids[b * pr.s.q_length + i];
    if (qs == 0 || qs != p.kv_segment_ids[b * pr.s.kv_length + j]) return false;
  }
  return true;
}

// S = scale q k^T (qc is pre-scaled) + (mask_bias + bias), in flax's order of
// additions; padding columns j >= nk get -inf.
void logits_tile(const Problem& pr, TileScratch& ts, int64_t b, int64_t h, int64_t i0,
                 int64_t nq, int64_t j0, int64_t nk) {
  const int64_t D = pr.s.head_dim;
  float* S = ts.s.data();
  std::fill(S, S + nq * kBk, 0.f);
  small_gemm_acc(nq, kBk, D, ts.qc.data(), D, 1, ts.kt.data(), kBk, S, kBk);
  const AttentionParams& p = pr.p;
  // Per-column facts of this key tile, then a branch-free pass per row.
  int32_t kv_seg[kBk];
  uint8_t kv_ok[kBk];
  if (pr.any_mask)
    for (int64_t j = 0; j < nk; ++j) {
      kv_ok[j] = p.kv_mask ? p.kv_mask[b * pr.s.kv_length + j0 + j] != 0 : 1;
      kv_seg[j] = p.kv_segment_ids ? p.kv_segment_ids[b * pr.s.kv_length + j0 + j] : 0;
    }
  for (int64_t i = 0; i < nq; ++i) {
    float* row = S + i * kBk;
    const float* brow = p.bias ? p.bias + pr.bias_row(b, h, i0 + i) + j0 : nullptr;
    if (pr.any_mask) {
      int64_t qi = b * pr.s.q_length + i0 + i;
      bool q_ok = !p.q_mask || p.q_mask[qi];
      int32_t qs = p.q_segment_ids ? p.q_segment_ids[qi] : 0;
      if (p.q_segment_ids && qs == 0) q_ok = false;
      // Last allowed key index (relative to j0) under the causal rule.
      int64_t last = p.causal ? i0 + i + pr.causal_off - j0 : kBk;
      bool use_seg = p.q_segment_ids != nullptr;
      for (int64_t j = 0; j < nk; ++j) {
        bool ok = q_ok && kv_ok[j] && j <= last && (!use_seg || kv_seg[j] == qs);
        float mb = ok ? 0.f : kAttentionMaskedLogit;
        row[j] += brow ? mb + brow[j] : mb;
      }
    } else if (brow) {
      for (int64_t j = 0; j < nk; ++j) row[j] += brow[j];
    }
    for (int64_t j = nk; j < kBk; ++j) row[j] = kNegInf;
  }
}

// From qc, doc, kt, vt: pm = P = exp(S - lse), dp = dS = P * (dout v^T - delta).
void probs_and_dlogits(const Problem& pr, TileScratch& ts, int64_t b, int64_t h, int64_t i0,
                       int64_t nq, int64_t j0, int64_t nk, const float* lse_row,
                       const float* logl_row, const float* delta_row) {
  const int64_t D = pr.s.head_dim;
  logits_tile(pr, ts, b, h, i0, nq, j0, nk);
  float* P = ts.pm.data();
  float* dP = ts.dp.data();
  std::fill(dP, dP + nq * kBk, 0.f);
  small_gemm_acc(nq, kBk, D, ts.doc.data(), D, 1, ts.vt.data(), kBk, dP, kBk);
  for (int64_t i = 0; i < nq; ++i) {
    const float* srow = ts.s.data() + i * kBk;
    float* prow = P + i * kBk;
    float* drow = dP + i * kBk;
    float dl = delta_row[i];
    exp_shift_sum(srow, prow, kBk, lse_row[i]);
    if (logl_row[i] != 0.f) {  // row with no allowed key, see masked_row_stats
      float f = std::exp(-logl_row[i]);
      for (int64_t j = 0; j < kBk; ++j) prow[j] *= f;
    }
#pragma omp simd
    for (int64_t j = 0; j < kBk; ++j) drow[j] = prow[j] * (drow[j] - dl);
  }
}

bool rows_have_allowed_key(const float* lse_row, int64_t nq) {
  for (int64_t i = 0; i < nq; ++i)
    if (!(lse_row[i] >= kFullyMaskedBelow)) return false;
  return true;
}

}  // namespace

void masked_row_stats(const Problem& pr, const float* q, const float* k, int64_t b, int64_t h,
                      int64_t i, float* m, float* logl) {
  const AttentionShape& s = pr.s;
  const int64_t D = s.head_dim, hk = h / pr.group;
  const float* qi = q + ((b * s.q_length + i) * s.heads + h) * D;
  std::vector<float> logit(static_cast<size_t>(s.kv_length));
  float mx = kNegInf;
  for (int64_t j = 0; j < s.kv_length; ++j) {
    const float* kj = k + ((b * s.kv_length + j) * s.kv_heads + hk) * D;
    float acc = 0.f;
    for (int64_t d = 0; d < D; ++d) acc += pr.p.scale * qi[d] * kj[d];
    float mb = allowed(pr, b, i, j) ? 0.f : kAttentionMaskedLogit;
    float x = acc + (pr.p.bias ? mb + pr.p.bias[pr.bias_row(b, h, i) + j] : mb);
    logit[size_t(j)] = x;
    mx = std::max(mx, x);
  }
  double sum = 0;
  for (float x : logit) sum += std::exp(double(x - mx));
  *m = mx;
  *logl = float(std::log(sum));
}

TileScratch& scratch(int64_t head_dim) {
  thread_local TileScratch ts;
  size_t qd = size_t(kBq * head_dim), kd = size_t(kBk * head_dim), qk = size_t(kBq * kBk);
  if (ts.qc.size() < qd) {
    for (auto* v : {&ts.qc, &ts.doc, &ts.acc}) v->assign(qd, 0.f);
    for (auto* v : {&ts.kt, &ts.vt, &ts.dk, &ts.dv}) v->assign(kd, 0.f);
  }
  if (ts.s.size() < qk) {
    for (auto* v : {&ts.s, &ts.pm, &ts.dp}) v->assign(qk, 0.f);
    for (auto* v : {&ts.m, &ts.l}) v->assign(size_t(kBq), 0.f);
  }
  return ts;
}

void forward_tile(const Problem& pr, const float* q, const float* k, const float* v, int64_t b,
                  int64_t h, int64_t i0, float* out, float* lse, TileScratch& ts) {
  const AttentionShape& s = pr.s;
  const int64_t D = s.head_dim, nq = std::min(kBq, s.q_length - i0), hk = h / pr.group;
  float* S = ts.s.data();
  float* acc = ts.acc.data();
  float* m = ts.m.data();
  float* l = ts.l.data();
  load_rows(q, s.q_length, s.heads, D, b, h, i0, nq, pr.p.scale, ts.qc.data());
  for (bool allow_skip : {true, false}) {
    std::fill(m, m + nq, kNegInf);
    std::fill(l, l + nq, 0.f);
    std::fill(acc, acc + nq * D, 0.f);
    bool skipped = false;
    for (int64_t j0 = 0; j0 < s.kv_length; j0 += kBk) {
      int64_t nk = std::min(kBk, s.kv_length - j0);
      if (allow_skip && pr.causally_masked(i0, nq, j0)) {
        skipped = true;  // so are all later tiles
        break;
      }
      load_transposed(k, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.kt.data());
      logits_tile(pr, ts, b, h, i0, nq, j0, nk);
      for (int64_t i = 0; i < nq; ++i) {
        float* row = S + i * kBk;
        float nm = std::max(m[i], max_of(row, nk));
        float corr = m[i] == kNegInf ? 0.f : std::exp(m[i] - nm);
        float sum = exp_shift_sum(row, row, kBk, nm);
        l[i] = l[i] * corr + sum;
        m[i] = nm;
        if (corr != 1.f) {
          float* ar = acc + i * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) ar[d] *= corr;
        }
      }
      const float* vrows = v + ((b * s.kv_length + j0) * s.kv_heads + hk) * D;
      small_gemm_acc(nq, D, nk, S, kBk, 1, vrows, s.kv_heads * D, acc, D);
    }
    bool redo = false;
    if (skipped)
      for (int64_t i = 0; i < nq; ++i) redo = redo || m[i] < kFullyMaskedBelow;
    if (!redo) break;
  }
  for (int64_t i = 0; i < nq; ++i) {
    float* o = out + ((b * s.q_length + i0 + i) * s.heads + h) * D;
    float inv = 1.f / l[i];
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) o[d] = acc[i * D + d] * inv;
    if (lse) lse[(b * s.heads + h) * s.q_length + i0 + i] = m[i] + std::log(l[i]);
  }
}

void backward_kv_tile(const Problem& pr, const float* q, const float* k, const float* v,
                      const float* lse, const float* logl, const float* delta,
                      const float* dout, int64_t b,
                      int64_t hk, int64_t j0, float* dk, float* dv, TileScratch& ts) {
  const AttentionShape& s = pr.s;
  const int64_t D = s.head_dim, nk = std::min(kBk, s.kv_length - j0);
  load_transposed(k, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.kt.data());
  load_transposed(v, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.vt.data());
  std::fill(ts.dk.begin(), ts.dk.begin() + nk * D, 0.f);
  std::fill(ts.dv.begin(), ts.dv.begin() + nk * D, 0.f);
  for (int64_t g = 0; g < pr.group; ++g) {
    int64_t h = hk * pr.group + g;
    for (int64_t i0 = 0; i0 < s.q_length; i0 += kBq) {
      int64_t nq = std::min(kBq, s.q_length - i0);
      const float* lse_row = lse + (b * s.heads + h) * s.q_length + i0;
      const float* logl_row = logl + (b * s.heads + h) * s.q_length + i0;
      const float* delta_row = delta + (b * s.heads + h) * s.q_length + i0;
      if (pr.causally_masked(i0, nq, j0) && rows_have_allowed_key(lse_row, nq)) continue;
      load_rows(q, s.q_length, s.heads, D, b, h, i0, nq, pr.p.scale, ts.qc.data());
      load_rows(dout, s.q_length, s.heads, D, b, h, i0, nq, 1.f, ts.doc.data());
      probs_and_dlogits(pr, ts, b, h, i0, nq, j0, nk, lse_row, logl_row, delta_row);
      // dv += P^T dout; dk += dS^T (scale q).
      small_gemm_acc(nk, D, nq, ts.pm.data(), 1, kBk, ts.doc.data(), D, ts.dv.data(), D);
      small_gemm_acc(nk, D, nq, ts.dp.data(), 1, kBk, ts.qc.data(), D, ts.dk.data(), D);
    }
  }
  for (int64_t j = 0; j < nk; ++j) {
    int64_t off = ((b * s.kv_length + j0 + j) * s.kv_heads + hk) * D;
    std::copy(ts.dk.begin() + j * D, ts.dk.begin() + (j + 1) * D, dk + off);
    std::copy(ts.dv.begin() + j * D, ts.dv.begin() + (j + 1) * D, dv + off);
  }
}

void backward_q_tile(const Problem& pr, const float* q, const float* k, const float* v,
                     const float* lse, const float* logl, const float* delta,
                     const float* dout, int64_t h,
                     int64_t i0, float* dq, float* dbias, TileScratch& ts) {
  const AttentionShape& s = pr.s;
  const int64_t D = s.head_dim, nq = std::min(kBq, s.q_length - i0), hk = h / pr.group;
  const bool broadcast_bias = pr.p.bias_layout == AttentionBiasLayout::kHeads;
  if (dbias && broadcast_bias)
    std::fill(dbias + pr.bias_row(0, h, i0), dbias + pr.bias_row(0, h, i0 + nq), 0.f);
  for (int64_t b = 0; b < s.batch; ++b) {
    if (dbias && !broadcast_bias)
      std::fill(dbias + pr.bias_row(b, h, i0), dbias + pr.bias_row(b, h, i0 + nq), 0.f);
    const float* lse_row = lse + (b * s.heads + h) * s.q_length + i0;
    const float* logl_row = logl + (b * s.heads + h) * s.q_length + i0;
    const float* delta_row = delta + (b * s.heads + h) * s.q_length + i0;
    bool may_skip = rows_have_allowed_key(lse_row, nq);
    load_rows(q, s.q_length, s.heads, D, b, h, i0, nq, pr.p.scale, ts.qc.data());
    load_rows(dout, s.q_length, s.heads, D, b, h, i0, nq, 1.f, ts.doc.data());
    float* acc = ts.acc.data();
    std::fill(acc, acc + nq * D, 0.f);
    for (int64_t j0 = 0; j0 < s.kv_length; j0 += kBk) {
      int64_t nk = std::min(kBk, s.kv_length - j0);
      if (may_skip && pr.causally_masked(i0, nq, j0)) break;
      load_transposed(k, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.kt.data());
      load_transposed(v, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.vt.data());
      probs_and_dlogits(pr, ts, b, h, i0, nq, j0, nk, lse_row, logl_row, delta_row);
      const float* krows = k + ((b * s.kv_length + j0) * s.kv_heads + hk) * D;
      small_gemm_acc(nq, D, nk, ts.dp.data(), kBk, 1, krows, s.kv_heads * D, acc, D);
      if (dbias)
        for (int64_t i = 0; i < nq; ++i) {
          float* brow = dbias + pr.bias_row(b, h, i0 + i) + j0;
          const float* drow = ts.dp.data() + i * kBk;
          for (int64_t j = 0; j < nk; ++j) brow[j] += drow[j];
        }
    }
    for (int64_t i = 0; i < nq; ++i) {
      float* o = dq + ((b * s.q_length + i0 + i) * s.heads + h) * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) o[d] = pr.p.scale * acc[i * D + d];
    }
  }
}

}  // namespace t5x::cpu::attention_detail
