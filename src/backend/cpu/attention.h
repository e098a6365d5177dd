// Fused dot-product attention (forward and backward), T5 / flax semantics,
// computed flash-attention style: tiles over kv with an online softmax, so the
// [batch, heads, q_length, kv_length] logits are never materialised
// (Dao et al. 2022, "FlashAttention", Alg. 1; backward as in Alg. 2/4, with
// probabilities recomputed from the saved per-row logsumexp).
//
// Shapes (row-major f32, named dims as in t5x/flax):
//   q, out, dq, dout   [batch, q_length, heads, kv]
//   k, v, dk, dv       [batch, kv_length, kv_heads, kv]
//   lse                [batch, heads, q_length]
//   bias, dbias        [heads, q_length, kv_length]  (kHeads: broadcast over
//                      batch, e.g. T5's relative position bias) or
//                      [batch, heads, q_length, kv_length] (kBatchHeads)
//   segment ids        [batch, q_length] / [batch, kv_length] int32
//   q_mask, kv_mask    [batch, q_length] / [batch, kv_length] uint8, 1 = token
// kv_heads must divide heads: head h reads kv head h / (heads / kv_heads)
// (grouped-query attention; kv_heads = 1 is multi-query attention).
//
// Formula, for each batch b, head h, query i and key j:
//   logit[i, j] = scale * sum_d q[b, i, h, d] k[b, j, hk, d]
//                 + (mask_bias[i, j] + bias[h, i, j])
//   mask_bias   = 0 where attention is allowed, else kAttentionMaskedLogit
//   out[b, i, h, :] = sum_j softmax_j(logit[i, :]) v[b, j, hk, :]
//   lse[b, h, i]    = logsumexp_j logit[i, j]
// Attention from i to j is allowed when all requested conditions hold:
//   causal:        j <= i + (kv_length - q_length)  (== flax make_causal_mask
//                  when the lengths are equal; aligned to the last query)
//   segment ids:   q_seg[b, i] == kv_seg[b, j] and q_seg[b, i] != 0 (0 = padding)
//   q_mask/kv_mask nonzero at i / j
// This is flax `make_attention_mask` + `combine_biases` with the -1e10 fill,
// so a fully masked row is a uniform average of v rather than NaN (its lse is
// -1e10 + log(kv_length) rounded to f32; the backward handles such rows). There is
// NO 1/sqrt(kv) factor unless `scale` says so: T5 folds it into the query
// initialisation.
//
// Backward (dout -> dq, dk, dv, and dbias when requested), with
// P = softmax(logit), Delta_i = sum_d dout_i,d out_i,d:
//   dlogit = P * (dout . v^T - Delta)         (per row i)
//   dq = scale * dlogit k;  dk = scale * dlogit^T q;  dv = P^T dout
//   dbias = dlogit (summed over batch for kHeads)
// dk/dv sum over the heads of a group. Every output element is owned by one
// task and summed in a fixed order: results do not depend on the thread count.
//
// Errors: std::invalid_argument("[attention] ...") for non-positive sizes,
// kv_heads not dividing heads, a bias pointer without a layout (or the
// reverse), one segment-id array without the other, or a null lse in backward.
#pragma once
#include <cstdint>

#include "backend/kernels.h"
#include "core/dtype_bf16.h"

namespace t5x::cpu {

// flax/t5x fill value for disallowed logits (make_attention_mask + combine_biases).
inline constexpr float kAttentionMaskedLogit = -1e10f;

// The backend-neutral descriptors of backend/kernels.h, under the names this
// kernel's contract uses.
using AttentionBiasLayout = kernels::AttentionBias;  // kNone, kHeads, kBatchHeads
using AttentionShape = kernels::AttentionDims;        // head_dim is the `kv` dim
using AttentionParams = kernels::AttentionArgs;

// lse may be null when no backward pass follows. q, k and v are all f32 or
// all bf16 (bf16 activations, a decode cache in the activation dtype): bf16 is
// widened exactly as the tiles load it, so the results are the bits of the
// f32 call on the widened values.
// logl (rows like lse, may be null): for a row with no allowed key (all
// masked: -1e10 + log(sum) is not representable in f32) lse gets the row's
// max logit and logl its log(sum exp(logit - max)); other rows get logl = 0.
// Passed on to attention_backward, it spares the backward recomputing these
// rows (on padded batches, most of the encoder's query rows).
void attention_forward(const AttentionShape& s, const AttentionParams& p, const float* q,
                       const float* k, const float* v, float* out, float* lse, float* logl = nullptr);
void attention_forward(const AttentionShape& s, const AttentionParams& p, const bfloat16* q,
                       const bfloat16* k, const bfloat16* v, float* out, float* lse, float* logl = nullptr);

// out and lse from attention_forward. dq, dk, dv are overwritten; dbias (same
// layout as p.bias, may be null) is overwritten too. The dk/dv pass keeps each
// dlogit tile for the dq pass when all of them fit in 64 MiB (else the dq pass
// recomputes them): the same bits either way, one pass of logits, exp and
// dout v^T fewer.
// logl: the forward's (with the lse it wrote alongside), or null (the rows
// with no allowed key are then recomputed, one scalar pass each).
// q, k and v all f32 or all bf16 (widened exactly as read: the bits of the
// f32 call on the widened values); out, dout and the gradients are f32.
void attention_backward(const AttentionShape& s, const AttentionParams& p, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        const float* dout, float* dq, float* dk, float* dv, float* dbias,
                        const float* logl = nullptr);
void attention_backward(const AttentionShape& s, const AttentionParams& p, const bfloat16* q,
                        const bfloat16* k, const bfloat16* v, const float* out, const float* lse,
                        const float* dout, float* dq, float* dk, float* dv, float* dbias,
                        const float* logl = nullptr);

// For tests: the backward keeps its dlogit tiles only when they take at most
// `floats` (0: always recomputes them), for the scope's lifetime. Not
// thread-safe: create it where no attention runs concurrently.
class ScopedAttentionStashLimit {
 public:
  explicit ScopedAttentionStashLimit(int64_t floats);
  ~ScopedAttentionStashLimit();
  ScopedAttentionStashLimit(const ScopedAttentionStashLimit&) = delete;
  ScopedAttentionStashLimit& operator=(const ScopedAttentionStashLimit&) = delete;

 private:
  int64_t saved_;
};

}  // namespace t5x::cpu
