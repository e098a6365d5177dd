#include "backend/cpu/attention_tile.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/attention_tile.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"
#include "backend/cpu/small_gemm-inl.h"
#include "backend/cpu/vec_math-inl.h"

// The tile code is compiled once per SIMD target (like every kernel here) and
// calls the small GEMM and the row primitives inline on that target. Every
// step is elementwise, a sum over k in order (the small GEMM), or a row sum in
// the fixed 16-lane order (vec_math-inl.h), so every target gives the same bits.
HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {
namespace {

using attention_detail::kBk;
using attention_detail::kBq;
using attention_detail::kFullyMaskedBelow;
using attention_detail::Problem;
using attention_detail::TileScratch;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The columns a tile of nk keys is computed over: nk rounded up to whole
// 16-lane blocks of the row sums. Past nk the logits are -inf and the
// probabilities 0, which add +0 to a row sum (the same bits as over kBk).
HWY_INLINE int64_t KeyColumns(int64_t nk) { return std::min(kBk, (nk + 15) / 16 * 16); }

HWY_INLINE float ExpOf(float x) {
  return OneLane(x, [](auto d, auto v) { return Exp(d, v); });
}

// dst[i * D + d] = factor * x[b, i0 + i, h, d] for x laid out [batch, L, H, D]
// (f32 or bf16 x, widened exactly).
template <typename T>
HWY_INLINE void LoadRows(const T* x, int64_t L, int64_t H, int64_t D, int64_t b, int64_t h, int64_t i0,
                         int64_t n, float factor, float* dst) {
  const DF d;
  const VF f = hn::Set(d, factor);
  for (int64_t i = 0; i < n; ++i) {
    const T* src = x + ((b * L + i0 + i) * H + h) * D;
    float* row = dst + i * D;
    ForVectors(D, [&](int64_t j, size_t valid) {
      StorePart(d, hn::Mul(f, LoadPart(d, src + j, valid)), row + j, valid);
    });
  }
}

// dst[d * kBk + j] = x[b, j0 + j, h, d] (f32 or bf16 x, widened exactly);
// columns j in [n, KeyColumns(n)) are zero.
template <typename T>
HWY_INLINE void LoadTransposed(const T* x, int64_t L, int64_t H, int64_t D, int64_t b, int64_t h, int64_t j0,
                               int64_t n, float* dst) {
  const DF d;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  static_assert(kBk % N == 0, "key tiles are whole vectors");
  const int64_t row_stride = H * D;
  const T* base = x + ((b * L + j0) * H + h) * D;
  for (int64_t jb = 0; jb < KeyColumns(n); jb += N)
    for (int64_t db = 0; db < D; db += N) {
      if (jb + N <= n && db + N <= D) {
        // A whole N x N block: constant trip counts, so the rows stay in
        // registers (the general case below spilled them and branched per
        // row; it held most of a decode step's attention time).
        VF r[N];
        for (int64_t jj = 0; jj < N; ++jj) r[jj] = LoadF(d, base + (jb + jj) * row_stride + db);
        TransposeSquare(d, r);
        for (int64_t dd = 0; dd < N; ++dd) hn::StoreU(r[dd], d, dst + (db + dd) * kBk + jb);
        continue;
      }
      const size_t dn = size_t(std::min(N, D - db));
      VF r[N];
      for (int64_t jj = 0; jj < N; ++jj)
        r[jj] = jb + jj < n ? LoadPart(d, base + (jb + jj) * row_stride + db, dn) : hn::Zero(d);
      TransposeSquare(d, r);
      for (size_t dd = 0; dd < dn; ++dd) hn::StoreU(r[dd], d, dst + (db + int64_t(dd)) * kBk + jb);
    }
}

// S = scale q k^T (qc is pre-scaled) + (mask_bias + bias), in flax's order of
// additions, over KeyColumns(nk) columns; those past nk get -inf.
void LogitsTile(const Problem& pr, TileScratch& ts, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0,
                int64_t nk) {
  const int64_t D = pr.s.head_dim;
  float* S = ts.s.data();
  const int64_t nkp = KeyColumns(nk);
  SmallGemm<false>(nq, nkp, D, ts.qc.data(), D, 1, ts.kt.data(), kBk, S, kBk);
  const AttentionParams& p = pr.p;
  // Per-column facts of this key tile as int32 lanes, so that a row's mask is
  // a few vector compares rather than a branchy scalar loop per logit.
  HWY_ALIGN int32_t kv_seg[kBk];
  HWY_ALIGN int32_t kv_ok[kBk];
  // Without segments, an allowed row's mask_bias is the keys' (kv_bias),
  // masked past the causal limit.
  HWY_ALIGN float kv_bias[kBk];
  if (pr.any_mask)
    for (int64_t j = 0; j < nk; ++j) {
      kv_ok[j] = p.kv_mask ? p.kv_mask[b * pr.s.kv_length + j0 + j] != 0 : 1;
      kv_seg[j] = p.kv_segment_ids ? p.kv_segment_ids[b * pr.s.kv_length + j0 + j] : 0;
      kv_bias[j] = kv_ok[j] ? 0.f : kAttentionMaskedLogit;
    }
  const DF d;
  const hn::RebindToSigned<DF> di;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  const VF masked = hn::Set(d, kAttentionMaskedLogit);
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
      // row[j] += mask_bias (+ bias), mask_bias = 0 where allowed, else
      // kAttentionMaskedLogit: the same additions, a vector at a time.
      const auto end = hn::Set(di, int32_t(std::clamp<int64_t>(last, -1, kBk) + 1));
      const auto seg = hn::Set(di, qs);
      int64_t j = 0;
      if (q_ok && !use_seg)
        for (; j + N <= nk; j += N) {
          VF mb = hn::Load(d, kv_bias + j);
          if (last < j + N - 1)
            mb = hn::IfThenElse(hn::RebindMask(d, hn::Lt(hn::Iota(di, int32_t(j)), end)), mb, masked);
          const VF x = hn::LoadU(d, row + j);
          hn::StoreU(hn::Add(x, brow ? hn::Add(mb, hn::LoadU(d, brow + j)) : mb), d, row + j);
        }
      for (; j + N <= nk; j += N) {
        VF mb = masked;
        if (q_ok) {
          auto ok = hn::And(hn::Ne(hn::Load(di, kv_ok + j), hn::Zero(di)), hn::Lt(hn::Iota(di, int32_t(j)), end));
          if (use_seg) ok = hn::And(ok, hn::Eq(hn::Load(di, kv_seg + j), seg));
          mb = hn::IfThenZeroElse(hn::RebindMask(d, ok), masked);
        }
        const VF x = hn::LoadU(d, row + j);
        hn::StoreU(hn::Add(x, brow ? hn::Add(mb, hn::LoadU(d, brow + j)) : mb), d, row + j);
      }
      for (; j < nk; ++j) {
        bool ok = q_ok && kv_ok[j] && j <= last && (!use_seg || kv_seg[j] == qs);
        float mb = ok ? 0.f : kAttentionMaskedLogit;
        row[j] += brow ? mb + brow[j] : mb;
      }
    } else if (brow) {
      for (int64_t j = 0; j < nk; ++j) row[j] += brow[j];
    }
    for (int64_t j = nk; j < nkp; ++j) row[j] = kNegInf;
  }
}

// From qc, doc, kt, vt: pm = P = exp(S - lse), and dS = P * (dout v^T - delta)
// into dP ([nq, kBk] rows, KeyColumns(nk) of them written; ts.dp, or pass A's
// stash tile, which then needs no copy).
void ProbsAndDlogits(const Problem& pr, TileScratch& ts, int64_t b, int64_t h, int64_t i0, int64_t nq, int64_t j0,
                     int64_t nk, const float* lse_row, const float* logl_row, const float* delta_row, float* dP) {
  const int64_t D = pr.s.head_dim;
  LogitsTile(pr, ts, b, h, i0, nq, j0, nk);
  float* P = ts.pm.data();
  const int64_t nkp = KeyColumns(nk);
  SmallGemm<false>(nq, nkp, D, ts.doc.data(), D, 1, ts.vt.data(), kBk, dP, kBk);
  for (int64_t i = 0; i < nq; ++i) {
    const float* srow = ts.s.data() + i * kBk;
    float* prow = P + i * kBk;
    float* drow = dP + i * kBk;
    const float dl = delta_row[i];
    RowExpShiftSum(srow, prow, nkp, lse_row[i]);
    if (logl_row[i] != 0.f) {  // row with no allowed key, see masked_row_stats
      const float f = ExpOf(-logl_row[i]);
      for (int64_t j = 0; j < nkp; ++j) prow[j] *= f;
    }
    for (int64_t j = 0; j < nkp; ++j) drow[j] = prow[j] * (drow[j] - dl);
  }
}

bool RowsHaveAllowedKey(const float* lse_row, int64_t nq) {
  for (int64_t i = 0; i < nq; ++i)
    if (!(lse_row[i] >= kFullyMaskedBelow)) return false;
  return true;
}

}  // namespace

// Rows [j0, j0 + n) of head hk of x [batch, kv_length, kv_heads, D] into
// the caches kTo names, rows past kv_length left out.
template <PrefetchTo kTo = PrefetchTo::kL1, typename T>
HWY_INLINE void PrefetchRows(const T* x, const AttentionShape& s, int64_t D, int64_t b, int64_t hk, int64_t j0,
                             int64_t n) {
  n = std::min(n, s.kv_length - j0);
  const T* base = x + ((b * s.kv_length + j0) * s.kv_heads + hk) * D;
  const int64_t stride = s.kv_heads * D, line = 64 / int64_t(sizeof(T));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < D; d += line) PrefetchLine<kTo>(base + j * stride + d);
}

// A decode step's K / V rows come from memory (the layer kernels streamed
// in between evict them): the first this many rows of a head are requested
// into the outer caches when its task starts, and each tile requests the rows
// this far ahead of it, besides the L1 prefetch one tile ahead. Cold, AVX2, 2 threads,
// batch 8 x 128 keys: 176-215 against 203-262 us per call (docs/performance.md,
// session 43).
constexpr int64_t kOuterAheadRows = 4 * kBk;

// Q, K and V in f32, or in bf16 (activations, a decode cache kept in the
// activation dtype: half the bytes read; widened exactly as loaded, so the
// same bits).
template <typename T>
HWY_INLINE void ForwardTile(const Problem& pr, const T* q, const T* k, const T* v, int64_t b, int64_t h,
                            int64_t i0, float* out, float* lse, float* logl, TileScratch& ts) {
  const AttentionShape& s = pr.s;
  const int64_t D = s.head_dim, nq = std::min(kBq, s.q_length - i0), hk = h / pr.group;
  float* S = ts.s.data();
  float* acc = ts.acc.data();
  float* m = ts.m.data();
  float* l = ts.l.data();
  LoadRows(q, s.q_length, s.heads, D, b, h, i0, nq, pr.p.scale, ts.qc.data());
  // A decode step's few queries do little work per key: the tiles wait on the
  // strided cache rows (one head's D values per row), so they are prefetched
  // a tile ahead.
  const bool few_queries = nq <= 4;
  if (few_queries) {
    PrefetchRows<PrefetchTo::kOuter>(k, s, D, b, hk, 0, kOuterAheadRows);
    PrefetchRows<PrefetchTo::kOuter>(v, s, D, b, hk, 0, kOuterAheadRows);
  }
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
      LoadTransposed(k, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.kt.data());
      if (few_queries) {
        PrefetchRows<PrefetchTo::kOuter>(k, s, D, b, hk, j0 + kOuterAheadRows, kBk);
        PrefetchRows<PrefetchTo::kOuter>(v, s, D, b, hk, j0 + kOuterAheadRows, kBk);
        PrefetchRows(v, s, D, b, hk, j0, nk);
        if (j0 + kBk < s.kv_length)
          PrefetchRows(k, s, D, b, hk, j0 + kBk, std::min(kBk, s.kv_length - j0 - kBk));
        else if (h + 1 < s.heads)  // the next task's (b, h + 1) first keys
          PrefetchRows(k, s, D, b, (h + 1) / pr.group, 0, std::min(kBk, s.kv_length));
      }
      LogitsTile(pr, ts, b, h, i0, nq, j0, nk);
      // Online softmax: the rows' new maxima, then their corrections
      // exp(m - nm) a vector of rows at a time (0 where m = -inf: nothing
      // summed yet, and acc is still zero).
      HWY_ALIGN float nm[kBq];
      HWY_ALIGN float corr[kBq];
      for (int64_t i = 0; i < nq; ++i) nm[i] = std::max(m[i], RowMax(S + i * kBk, nk));
      ForVectors(nq, [&](int64_t i, size_t valid) {
        const DF d;
        const VF mv = LoadPart(d, m + i, valid), nv = LoadPart(d, nm + i, valid);
        const VF c = hn::IfThenZeroElse(hn::Eq(mv, hn::Set(d, kNegInf)), Exp(d, hn::Sub(mv, nv)));
        StorePart(d, c, corr + i, valid);
      });
      for (int64_t i = 0; i < nq; ++i) {
        const float sum = RowExpShiftSum(S + i * kBk, S + i * kBk, KeyColumns(nk), nm[i]);
        const bool first = m[i] == kNegInf;
        l[i] = l[i] * corr[i] + sum;
        m[i] = nm[i];
        if (!first && corr[i] != 1.f) {
          float* ar = acc + i * D;
          for (int64_t d = 0; d < D; ++d) ar[d] *= corr[i];
        }
      }
      const T* vrows = v + ((b * s.kv_length + j0) * s.kv_heads + hk) * D;
      SmallGemm<true>(nq, D, nk, S, kBk, 1, vrows, s.kv_heads * D, acc, D);
    }
    bool redo = false;
    if (skipped)
      for (int64_t i = 0; i < nq; ++i) redo = redo || m[i] < kFullyMaskedBelow;
    if (!redo) break;
  }
  for (int64_t i = 0; i < nq; ++i) {
    float* o = out + ((b * s.q_length + i0 + i) * s.heads + h) * D;
    const float inv = 1.f / l[i];
    for (int64_t d = 0; d < D; ++d) o[d] = acc[i * D + d] * inv;
    if (!lse) continue;
    const int64_t r = (b * s.heads + h) * s.q_length + i0 + i;
    if (logl && m[i] < kFullyMaskedBelow) {  // no allowed key: -1e10 + log(l) would round to -1e10
      lse[r] = m[i];
      logl[r] = std::log(l[i]);
    } else {
      lse[r] = m[i] + std::log(l[i]);
      if (logl) logl[r] = 0.f;
    }
  }
}

void AttnForwardTile(const Problem& pr, const float* q, const float* k, const float* v, int64_t b, int64_t h,
                     int64_t i0, float* out, float* lse, float* logl, TileScratch& ts) {
  ForwardTile(pr, q, k, v, b, h, i0, out, lse, logl, ts);
}
void AttnForwardTileBf16(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v, int64_t b,
                         int64_t h, int64_t i0, float* out, float* lse, float* logl, TileScratch& ts) {
  ForwardTile(pr, q, k, v, b, h, i0, out, lse, logl, ts);
}

// q, k and v in f32 or bf16 (widened exactly as the tiles load them).
template <typename T>
HWY_INLINE void BackwardKvTile(const Problem& pr, const T* q, const T* k, const T* v, const float* lse,
                               const float* logl, const float* delta, const float* dout, int64_t b, int64_t hk,
                               int64_t j0, float* dk, float* dv, float* ds_stash, TileScratch& ts) {
  const AttentionShape& s = pr.s;
  const int64_t D = s.head_dim, nk = std::min(kBk, s.kv_length - j0);
  LoadTransposed(k, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.kt.data());
  LoadTransposed(v, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.vt.data());
  std::fill(ts.dk.begin(), ts.dk.begin() + nk * D, 0.f);
  std::fill(ts.dv.begin(), ts.dv.begin() + nk * D, 0.f);
  for (int64_t g = 0; g < pr.group; ++g) {
    int64_t h = hk * pr.group + g;
    for (int64_t i0 = 0; i0 < s.q_length; i0 += kBq) {
      int64_t nq = std::min(kBq, s.q_length - i0);
      const float* lse_row = lse + (b * s.heads + h) * s.q_length + i0;
      const float* logl_row = logl + (b * s.heads + h) * s.q_length + i0;
      const float* delta_row = delta + (b * s.heads + h) * s.q_length + i0;
      if (pr.causally_masked(i0, nq, j0) && RowsHaveAllowedKey(lse_row, nq)) continue;
      LoadRows(q, s.q_length, s.heads, D, b, h, i0, nq, pr.p.scale, ts.qc.data());
      LoadRows(dout, s.q_length, s.heads, D, b, h, i0, nq, 1.f, ts.doc.data());
      float* ds = ds_stash ? ds_stash + pr.stash_tile(b, h, i0, j0) : ts.dp.data();
      ProbsAndDlogits(pr, ts, b, h, i0, nq, j0, nk, lse_row, logl_row, delta_row, ds);
      // dv += P^T dout; dk += dS^T (scale q).
      SmallGemm<true>(nk, D, nq, ts.pm.data(), 1, kBk, ts.doc.data(), D, ts.dv.data(), D);
      SmallGemm<true>(nk, D, nq, ds, 1, kBk, ts.qc.data(), D, ts.dk.data(), D);
    }
  }
  for (int64_t j = 0; j < nk; ++j) {
    int64_t off = ((b * s.kv_length + j0 + j) * s.kv_heads + hk) * D;
    std::copy(ts.dk.begin() + j * D, ts.dk.begin() + (j + 1) * D, dk + off);
    std::copy(ts.dv.begin() + j * D, ts.dv.begin() + (j + 1) * D, dv + off);
  }
}

template <typename T>
HWY_INLINE void BackwardQTile(const Problem& pr, const T* q, const T* k, const T* v, const float* lse,
                              const float* logl, const float* delta, const float* dout, int64_t h, int64_t i0,
                              float* dq, float* dbias, const float* ds_stash, TileScratch& ts) {
  const AttentionShape& s = pr.s;
  const int64_t D = s.head_dim, nq = std::min(kBq, s.q_length - i0), hk = h / pr.group;
  const bool broadcast_bias = pr.p.bias_layout == AttentionBiasLayout::kHeads;
  if (dbias && broadcast_bias) std::fill(dbias + pr.bias_row(0, h, i0), dbias + pr.bias_row(0, h, i0 + nq), 0.f);
  for (int64_t b = 0; b < s.batch; ++b) {
    if (dbias && !broadcast_bias)
      std::fill(dbias + pr.bias_row(b, h, i0), dbias + pr.bias_row(b, h, i0 + nq), 0.f);
    const float* lse_row = lse + (b * s.heads + h) * s.q_length + i0;
    const float* logl_row = logl + (b * s.heads + h) * s.q_length + i0;
    const float* delta_row = delta + (b * s.heads + h) * s.q_length + i0;
    bool may_skip = RowsHaveAllowedKey(lse_row, nq);
    if (!ds_stash) {  // only a recomputed dS reads them
      LoadRows(q, s.q_length, s.heads, D, b, h, i0, nq, pr.p.scale, ts.qc.data());
      LoadRows(dout, s.q_length, s.heads, D, b, h, i0, nq, 1.f, ts.doc.data());
    }
    float* acc = ts.acc.data();
    std::fill(acc, acc + nq * D, 0.f);
    for (int64_t j0 = 0; j0 < s.kv_length; j0 += kBk) {
      int64_t nk = std::min(kBk, s.kv_length - j0);
      if (may_skip && pr.causally_masked(i0, nq, j0)) break;
      // dS of this tile: as pass A stashed it (it skips exactly the tiles
      // skipped here), else recomputed, the same bits either way.
      const float* ds = ds_stash ? ds_stash + pr.stash_tile(b, h, i0, j0) : nullptr;
      if (!ds) {
        LoadTransposed(k, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.kt.data());
        LoadTransposed(v, s.kv_length, s.kv_heads, D, b, hk, j0, nk, ts.vt.data());
        ProbsAndDlogits(pr, ts, b, h, i0, nq, j0, nk, lse_row, logl_row, delta_row, ts.dp.data());
        ds = ts.dp.data();
      }
      const T* krows = k + ((b * s.kv_length + j0) * s.kv_heads + hk) * D;
      SmallGemm<true>(nq, D, nk, ds, kBk, 1, krows, s.kv_heads * D, acc, D);
      if (dbias)
        for (int64_t i = 0; i < nq; ++i) {
          float* brow = dbias + pr.bias_row(b, h, i0 + i) + j0;
          const float* drow = ds + i * kBk;
          for (int64_t j = 0; j < nk; ++j) brow[j] += drow[j];
        }
    }
    for (int64_t i = 0; i < nq; ++i) {
      float* o = dq + ((b * s.q_length + i0 + i) * s.heads + h) * D;
      for (int64_t d = 0; d < D; ++d) o[d] = pr.p.scale * acc[i * D + d];
    }
  }
}

void AttnBackwardKvTile(const Problem& pr, const float* q, const float* k, const float* v, const float* lse,
                        const float* logl, const float* delta, const float* dout, int64_t b, int64_t hk, int64_t j0,
                        float* dk, float* dv, float* ds_stash, TileScratch& ts) {
  BackwardKvTile(pr, q, k, v, lse, logl, delta, dout, b, hk, j0, dk, dv, ds_stash, ts);
}
void AttnBackwardKvTileBf16(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                            const float* lse, const float* logl, const float* delta, const float* dout, int64_t b,
                            int64_t hk, int64_t j0, float* dk, float* dv, float* ds_stash, TileScratch& ts) {
  BackwardKvTile(pr, q, k, v, lse, logl, delta, dout, b, hk, j0, dk, dv, ds_stash, ts);
}
void AttnBackwardQTile(const Problem& pr, const float* q, const float* k, const float* v, const float* lse,
                       const float* logl, const float* delta, const float* dout, int64_t h, int64_t i0, float* dq,
                       float* dbias, const float* ds_stash, TileScratch& ts) {
  BackwardQTile(pr, q, k, v, lse, logl, delta, dout, h, i0, dq, dbias, ds_stash, ts);
}
void AttnBackwardQTileBf16(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                           const float* lse, const float* logl, const float* delta, const float* dout, int64_t h,
                           int64_t i0, float* dq, float* dbias, const float* ds_stash, TileScratch& ts) {
  BackwardQTile(pr, q, k, v, lse, logl, delta, dout, h, i0, dq, dbias, ds_stash, ts);
}

// delta[b, h, i] = dout_i . out_i for the (b, i) rows [r0, r1) of all heads.
void AttnDeltaRows(const AttentionShape& s, const float* out, const float* dout, int64_t r0, int64_t r1,
                   float* delta) {
  for (int64_t bi = r0; bi < r1; ++bi) {
    const int64_t b = bi / s.q_length, i = bi % s.q_length;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t off = (bi * s.heads + h) * s.head_dim;
      delta[(b * s.heads + h) * s.q_length + i] = RowDot(out + off, dout + off, s.head_dim);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/simd.h"

namespace t5x::cpu {

HWY_EXPORT(AttnForwardTile);
HWY_EXPORT(AttnForwardTileBf16);
HWY_EXPORT(AttnBackwardKvTile);
HWY_EXPORT(AttnBackwardKvTileBf16);
HWY_EXPORT(AttnBackwardQTile);
HWY_EXPORT(AttnBackwardQTileBf16);
HWY_EXPORT(AttnDeltaRows);

namespace attention_detail {
namespace {

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

template <typename T>
void row_stats(const Problem& pr, const T* q, const T* k, int64_t b, int64_t h, int64_t i, float* m, float* logl) {
  const AttentionShape& s = pr.s;
  const int64_t D = s.head_dim, hk = h / pr.group;
  const T* qi = q + ((b * s.q_length + i) * s.heads + h) * D;
  std::vector<float> logit(static_cast<size_t>(s.kv_length));
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < s.kv_length; ++j) {
    const T* kj = k + ((b * s.kv_length + j) * s.kv_heads + hk) * D;
    float acc = 0.f;
    for (int64_t d = 0; d < D; ++d) acc += pr.p.scale * float(qi[d]) * float(kj[d]);
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

}  // namespace

void masked_row_stats(const Problem& pr, const float* q, const float* k, int64_t b, int64_t h, int64_t i, float* m,
                      float* logl) {
  row_stats(pr, q, k, b, h, i, m, logl);
}
void masked_row_stats(const Problem& pr, const bfloat16* q, const bfloat16* k, int64_t b, int64_t h, int64_t i,
                      float* m, float* logl) {
  row_stats(pr, q, k, b, h, i, m, logl);
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

void forward_tile(const Problem& pr, const float* q, const float* k, const float* v, int64_t b, int64_t h,
                  int64_t i0, float* out, float* lse, float* logl, TileScratch& ts) {
  T5X_DISPATCH(AttnForwardTile)(pr, q, k, v, b, h, i0, out, lse, logl, ts);
}

void forward_tile(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v, int64_t b, int64_t h,
                  int64_t i0, float* out, float* lse, float* logl, TileScratch& ts) {
  T5X_DISPATCH(AttnForwardTileBf16)(pr, q, k, v, b, h, i0, out, lse, logl, ts);
}

void backward_kv_tile(const Problem& pr, const float* q, const float* k, const float* v, const float* lse,
                      const float* logl, const float* delta, const float* dout, int64_t b, int64_t hk, int64_t j0,
                      float* dk, float* dv, float* ds_stash, TileScratch& ts) {
  T5X_DISPATCH(AttnBackwardKvTile)(pr, q, k, v, lse, logl, delta, dout, b, hk, j0, dk, dv, ds_stash, ts);
}

void backward_kv_tile(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v, const float* lse,
                      const float* logl, const float* delta, const float* dout, int64_t b, int64_t hk, int64_t j0,
                      float* dk, float* dv, float* ds_stash, TileScratch& ts) {
  T5X_DISPATCH(AttnBackwardKvTileBf16)(pr, q, k, v, lse, logl, delta, dout, b, hk, j0, dk, dv, ds_stash, ts);
}

void backward_q_tile(const Problem& pr, const float* q, const float* k, const float* v, const float* lse,
                     const float* logl, const float* delta, const float* dout, int64_t h, int64_t i0, float* dq,
                     float* dbias, const float* ds_stash, TileScratch& ts) {
  T5X_DISPATCH(AttnBackwardQTile)(pr, q, k, v, lse, logl, delta, dout, h, i0, dq, dbias, ds_stash, ts);
}

void backward_q_tile(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v, const float* lse,
                     const float* logl, const float* delta, const float* dout, int64_t h, int64_t i0, float* dq,
                     float* dbias, const float* ds_stash, TileScratch& ts) {
  T5X_DISPATCH(AttnBackwardQTileBf16)(pr, q, k, v, lse, logl, delta, dout, h, i0, dq, dbias, ds_stash, ts);
}

void delta_rows(const AttentionShape& s, const float* out, const float* dout, int64_t r0, int64_t r1,
                float* delta) {
  T5X_DISPATCH(AttnDeltaRows)(s, out, dout, r0, r1, delta);
}

}  // namespace attention_detail
}  // namespace t5x::cpu
#endif
