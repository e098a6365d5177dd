// Internal: per-tile pieces of the fused attention (attention.h is the API),
// each run on the CPU's SIMD target (backend/cpu/simd.h), bitwise the same on all.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cpu/attention.h"

namespace t5x::cpu::attention_detail {

inline constexpr int64_t kBq = 32;  // queries per tile
inline constexpr int64_t kBk = 64;  // keys per tile
// Rows whose max logit / lse lies below this had no allowed key.
inline constexpr float kFullyMaskedBelow = 0.5f * kAttentionMaskedLogit;

struct Problem {
  AttentionShape s;
  AttentionParams p;
  int64_t group;       // heads per kv head
  int64_t causal_off;  // kv_length - q_length
  bool any_mask;
  Problem(const AttentionShape& shape, const AttentionParams& params)
      : s(shape), p(params), group(shape.heads / shape.kv_heads),
        causal_off(shape.kv_length - shape.q_length),
        any_mask(params.causal || params.q_segment_ids || params.q_mask || params.kv_mask) {}

  // Offset of bias[b?, h, i, 0].
  int64_t bias_row(int64_t b, int64_t h, int64_t i) const {
    int64_t hb = p.bias_layout == AttentionBiasLayout::kBatchHeads ? b * s.heads + h : h;
    return (hb * s.q_length + i) * s.kv_length;
  }
  // Offset of the [kBq, kBk] dS tile of (b, h, queries from i0, keys from j0)
  // in the backward's stash (tiles of one (b, h) adjacent).
  int64_t stash_tile(int64_t b, int64_t h, int64_t i0, int64_t j0) const {
    const int64_t q_tiles = (s.q_length + kBq - 1) / kBq, kv_tiles = (s.kv_length + kBk - 1) / kBk;
    return (((b * s.heads + h) * q_tiles + i0 / kBq) * kv_tiles + j0 / kBk) * kBq * kBk;
  }
  // True when tile [i0, i0+nq) x [j0, ...) is entirely above the causal diagonal.
  bool causally_masked(int64_t i0, int64_t nq, int64_t j0) const {
    return p.causal && j0 > i0 + nq - 1 + causal_off;
  }
};

struct TileScratch {
  std::vector<float> qc, doc, kt, vt, s, pm, dp, acc, dk, dv, m, l;
};

// Thread-local scratch sized for head_dim.
TileScratch& scratch(int64_t head_dim);

// out/lse (and logl) rows of queries [i0, i0 + kBq) of (b, h); q, k, v all
// in f32 or all in bf16. With logl, a row with no
// allowed key gets lse = its max logit and logl = log(sum exp(logit - max));
// every other row lse = max + log-sum and logl = 0.
void forward_tile(const Problem& pr, const float* q, const float* k, const float* v, int64_t b,
                  int64_t h, int64_t i0, float* out, float* lse, float* logl, TileScratch& ts);
void forward_tile(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v, int64_t b,
                  int64_t h, int64_t i0, float* out, float* lse, float* logl, TileScratch& ts);

// The backward recomputes P = exp((logit - lse) - logl) with logl = 0, except
// for rows with no allowed key: their lse (-1e10 + log(sum)) is not
// representable in f32, so (max logit, log sum) come from the forward's logl
// output, or, without it, from this full-row pass.
void masked_row_stats(const Problem& pr, const float* q, const float* k, int64_t b, int64_t h,
                      int64_t i, float* m, float* logl);
void masked_row_stats(const Problem& pr, const bfloat16* q, const bfloat16* k, int64_t b, int64_t h,
                      int64_t i, float* m, float* logl);

// dk/dv rows [j0, j0 + kBk) of (b, hk). With ds_stash (non-null), each dS
// tile computed is also stored there at pr.stash_tile(...). q, k, v all f32
// or all bf16 (as in backward_q_tile).
void backward_kv_tile(const Problem& pr, const float* q, const float* k, const float* v,
                      const float* lse, const float* logl, const float* delta,
                      const float* dout, int64_t b,
                      int64_t hk, int64_t j0, float* dk, float* dv, float* ds_stash, TileScratch& ts);
void backward_kv_tile(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                      const float* lse, const float* logl, const float* delta,
                      const float* dout, int64_t b,
                      int64_t hk, int64_t j0, float* dk, float* dv, float* ds_stash, TileScratch& ts);

// delta[b, h, i] = dout[b, i, h, :] . out[b, i, h, :] (a row sum in the fixed
// 16-lane order) for the (b, i) rows [r0, r1) (r = b * q_length + i), all heads.
void delta_rows(const AttentionShape& s, const float* out, const float* dout, int64_t r0, int64_t r1,
                float* delta);

// dq rows [i0, i0 + kBq) of head h for every batch, and the matching dbias
// rows; dS from ds_stash when non-null (filled by backward_kv_tile), else
// recomputed.
void backward_q_tile(const Problem& pr, const float* q, const float* k, const float* v,
                     const float* lse, const float* logl, const float* delta,
                     const float* dout, int64_t h,
                     int64_t i0, float* dq, float* dbias, const float* ds_stash, TileScratch& ts);
void backward_q_tile(const Problem& pr, const bfloat16* q, const bfloat16* k, const bfloat16* v,
                     const float* lse, const float* logl, const float* delta,
                     const float* dout, int64_t h,
                     int64_t i0, float* dq, float* dbias, const float* ds_stash, TileScratch& ts);

}  // namespace t5x::cpu::attention_detail
