// Tiled attention kernels; see attention.h for the contract.
//
// Work is split into tiles of kBq queries x kBk keys. Each tile's logits live
// in a small [kBq, kBk] buffer; the key tile is transposed to [head_dim, kBk]
// so that a logit row is a sum of head_dim axpy's over kBk contiguous lanes.
// Causally masked tiles are skipped when that is exact: a skipped logit is
// -1e10 + O(1), whose exp underflows to 0 against any row that has one
// allowed entry. Rows with no allowed entry (uniform softmax over all keys)
// are detected from their max / lse and recomputed without skipping.
#include "backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/attention_tile.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {

using attention_detail::kBk;
using attention_detail::kBq;
using attention_detail::Problem;
using attention_detail::TileScratch;

// Largest dS stash of the backward (floats): 64 MiB; tests lower it.
int64_t g_max_stash_floats = int64_t(16) << 20;

void check(const AttentionShape& s, const AttentionParams& p) {
  auto str = [](int64_t v) { return std::to_string(v); };
  if (s.batch <= 0 || s.q_length <= 0 || s.kv_length <= 0 || s.heads <= 0 || s.kv_heads <= 0 ||
      s.head_dim <= 0)
    throw std::invalid_argument("[attention] sizes must be positive: batch=" + str(s.batch) +
                                " q_length=" + str(s.q_length) + " kv_length=" +
                                str(s.kv_length) + " heads=" + str(s.heads) +
                                " kv_heads=" + str(s.kv_heads) + " kv=" + str(s.head_dim));
  if (s.heads % s.kv_heads != 0)
    throw std::invalid_argument("[attention] kv_heads=" + str(s.kv_heads) +
                                " must divide heads=" + str(s.heads));
  if ((p.bias == nullptr) != (p.bias_layout == AttentionBiasLayout::kNone))
    throw std::invalid_argument("[attention] bias pointer and bias_layout must be given together");
  if ((p.q_segment_ids == nullptr) != (p.kv_segment_ids == nullptr))
    throw std::invalid_argument("[attention] q_segment_ids and kv_segment_ids must be given together");
}

template <typename T>
void forward(const AttentionShape& s, const AttentionParams& p, const T* q, const T* k, const T* v, float* out,
             float* lse, float* logl) {
  check(s, p);
  simd_init();  // before the threads: an unknown T5X_CPU_ISA throws here
  Problem pr(s, p);
  int64_t q_tiles = (s.q_length + kBq - 1) / kBq;
  int64_t tasks = s.batch * s.heads * q_tiles;
  parallel_for_chunks(tasks, 1, [&](int64_t t, int64_t, int64_t) {
    int64_t qt = t % q_tiles, bh = t / q_tiles;
    int64_t h = bh % s.heads, b = bh / s.heads;
    TileScratch& ts = attention_detail::scratch(s.head_dim);
    attention_detail::forward_tile(pr, q, k, v, b, h, qt * kBq, out, lse, logl, ts);
  });
}

}  // namespace

void attention_forward(const AttentionShape& s, const AttentionParams& p, const float* q,
                       const float* k, const float* v, float* out, float* lse, float* logl) {
  forward(s, p, q, k, v, out, lse, logl);
}

void attention_forward(const AttentionShape& s, const AttentionParams& p, const bfloat16* q,
                       const bfloat16* k, const bfloat16* v, float* out, float* lse, float* logl) {
  forward(s, p, q, k, v, out, lse, logl);
}

namespace {

template <typename T>
void backward(const AttentionShape& s, const AttentionParams& p, const T* q, const T* k, const T* v,
              const float* out, const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias,
              const float* logl) {
  check(s, p);
  if (lse == nullptr) throw std::invalid_argument("[attention] backward needs lse from forward");
  simd_init();
  Problem pr(s, p);
  // Delta[b, h, i] = dout_i . out_i, shared by both passes.
  std::vector<float> delta(size_t(s.batch * s.heads * s.q_length));
  parallel_for(s.batch * s.q_length, 64, [&](int64_t b0, int64_t e0) {
    attention_detail::delta_rows(s, out, dout, b0, e0, delta.data());
  });
  // Rows with no allowed key need (max, log-sum): the forward's logl output
  // has them; without it they are recomputed. Others use lse.
  std::vector<float> row_lse(lse, lse + s.batch * s.heads * s.q_length);
  std::vector<float> row_logl(row_lse.size(), 0.f);
  if (logl) {
    std::copy(logl, logl + row_logl.size(), row_logl.begin());
  } else {
    parallel_for(int64_t(row_lse.size()), 16, [&](int64_t b0, int64_t e0) {
      for (int64_t r = b0; r < e0; ++r) {
        if (row_lse[size_t(r)] >= attention_detail::kFullyMaskedBelow) continue;
        int64_t i = r % s.q_length, bh = r / s.q_length;
        attention_detail::masked_row_stats(pr, q, k, bh / s.heads, bh % s.heads, i,
                                           &row_lse[size_t(r)], &row_logl[size_t(r)]);
      }
    });
  }
  // Pass A: dk, dv; one task per (batch, kv head, kv tile). It stashes each
  // dS tile for pass B when the stash is small (T5 lengths: 3 MiB for batch 8,
  // 6 heads, 128 x 128), sparing pass B the logits, exp and dout v^T again.
  int64_t kv_tiles = (s.kv_length + kBk - 1) / kBk;
  const int64_t q_tiles = (s.q_length + kBq - 1) / kBq;
  const int64_t stash_floats = s.batch * s.heads * q_tiles * kv_tiles * kBq * kBk;
  std::unique_ptr<float[]> stash;
  if (stash_floats <= g_max_stash_floats) stash.reset(new float[size_t(stash_floats)]);
  parallel_for_chunks(s.batch * s.kv_heads * kv_tiles, 1, [&](int64_t t, int64_t, int64_t) {
    int64_t jt = t % kv_tiles, bk = t / kv_tiles;
    int64_t hk = bk % s.kv_heads, b = bk / s.kv_heads;
    TileScratch& ts = attention_detail::scratch(s.head_dim);
    attention_detail::backward_kv_tile(pr, q, k, v, row_lse.data(), row_logl.data(),
                                       delta.data(), dout, b, hk, jt * kBk, dk,
                                       dv, stash.get(), ts);
  });
  // Pass B: dq and dbias; one task per (head, q tile), looping over batch so
  // a broadcast dbias is summed over batch in order.
  parallel_for_chunks(s.heads * q_tiles, 1, [&](int64_t t, int64_t, int64_t) {
    int64_t qt = t % q_tiles, h = t / q_tiles;
    TileScratch& ts = attention_detail::scratch(s.head_dim);
    attention_detail::backward_q_tile(pr, q, k, v, row_lse.data(), row_logl.data(),
                                      delta.data(), dout, h, qt * kBq, dq,
                                      dbias, stash.get(), ts);
  });
}

}  // namespace

void attention_backward(const AttentionShape& s, const AttentionParams& p, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        const float* dout, float* dq, float* dk, float* dv, float* dbias, const float* logl) {
  backward(s, p, q, k, v, out, lse, dout, dq, dk, dv, dbias, logl);
}

void attention_backward(const AttentionShape& s, const AttentionParams& p, const bfloat16* q,
                        const bfloat16* k, const bfloat16* v, const float* out, const float* lse,
                        const float* dout, float* dq, float* dk, float* dv, float* dbias, const float* logl) {
  backward(s, p, q, k, v, out, lse, dout, dq, dk, dv, dbias, logl);
}

ScopedAttentionStashLimit::ScopedAttentionStashLimit(int64_t floats) : saved_(g_max_stash_floats) {
  g_max_stash_floats = floats;
}
ScopedAttentionStashLimit::~ScopedAttentionStashLimit() { g_max_stash_floats = saved_; }

}  // namespace t5x::cpu
