// Fused ops of the T5 stack. Each runs a fused CPU kernel (backend/kernels.h; f32; 16-bit
// inputs are cast to f32 around it) and keeps a plain-op decomposition,
// `*_reference`, that is its test oracle and fallback. Fused and reference
// versions agree to f32 rounding (tests/ops/fused_test.cpp).
//
// Errors: std::invalid_argument("[op] ...") naming the dims / dtypes at fault.
#pragma once
#include <string>

#include "core/array.h"

namespace t5x {

// Process-wide switch (default on): when off, every fused op below runs its
// `*_reference` decomposition instead of the backend kernel (debugging,
// backends without a kernel). Thread-safe to read; set it before running ops.
void set_fused_kernels_enabled(bool enabled);
bool fused_kernels_enabled();

// ---------------------------------------------------------------- RMSNorm
// T5 "LayerNorm" (t5x/examples/t5/layers.py LayerNorm; Zhang & Sennrich 2019):
//   y = x * rsqrt(mean_dim(x^2) + eps) * scale, computed in f32, cast to x's dtype.
// x: [..., dim=E, ...] floating; scale: [dim=E] floating. Output: x's shape and
// dtype. Gradients for x and scale. (The reference rounds x*rsqrt(...) to x's
// dtype before multiplying by scale, as flax; for f32 both are the same.)
Array rms_norm(const Array& x, const Array& scale, const std::string& dim = "embed", double eps = 1e-6);
Array rms_norm_reference(const Array& x, const Array& scale, const std::string& dim = "embed", double eps = 1e-6);

// ---------------------------------------------------- dot-product attention
// T5 / flax dot_product_attention with NO 1/sqrt(depth) scaling by default
// (T5 folds it into the query initialisation):
//   logits[batch, heads, length, kv_length] = scale * sum_kv q k
//                                              + (mask_bias + bias)
//   out[batch, length, heads, kv] = sum_kv_length softmax(logits) v
// mask_bias is 0 where attention is allowed, -1e10 elsewhere (flax
// make_attention_mask + combine_biases), so a fully masked query row averages v.
// Allowed when all requested conditions hold:
//   causal:      kv position j <= query position i + (kv_length - length)
//   segment ids: q_segment_ids[b, i] == kv_segment_ids[b, j] != 0 (packing; 0 = padding)
//   masks:       q_mask[b, i] && kv_mask[b, j] (bool; e.g. tokens > 0)
// Shapes (dim names configurable below; any dim order):
//   q [batch, length, heads, kv]; k, v [batch, kv_length, heads, kv] (if k and v
//   use `length` instead of `kv_length` they are renamed); output: q's dims.
//   Grouped-query / multi-query attention: k and v may carry `kv_heads=G`
//   instead of `heads`, G dividing heads; query head h reads kv head
//   h / (heads / G) (no copy of k, v in the fused path).
//   bias: dims within {batch, heads, length, kv_length}, e.g. T5's relative
//   position bias [heads, length, kv_length]; broadcast by name; differentiable.
// dtypes: q, k, v share a floating dtype (the kernel computes in f32), except
// that k and v may both be f32 copies for a bf16 / f16 q (e.g. a decode
// cache widened once instead of at every step; same result); the output has
// q's dtype. ids int32/int64.
struct AttentionOptions {
  std::string batch = "batch", length = "length", kv_length = "kv_length", heads = "heads", depth = "kv";
  std::string kv_heads = "kv_heads";
  Array bias;
  bool causal = false;
  Array q_segment_ids, kv_segment_ids;  // both or neither
  Array q_mask, kv_mask;                // each optional
  double scale = 1.0;
};
Array dot_product_attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& opt = {});
Array dot_product_attention_reference(const Array& q, const Array& k, const Array& v,
                                      const AttentionOptions& opt = {});

// ------------------------------------------- softmax cross-entropy (t5x losses.py)
// Per-token loss of logits[..., vocab=V] against integer targets[...]
// (targets' dims = logits' dims without vocab, any order), as t5x
// compute_weighted_cross_entropy before weights / summation:
//   confidence c = 1 - label_smoothing, off value o = label_smoothing / (V - 1)
//   soft targets t = c at the target, o elsewhere
//   lse = logsumexp(logits);  z_loss = z_loss_coef * lse^2
//   loss = -sum_vocab t (logits - lse) - normalizing_constant + z_loss
//   normalizing_constant = -(c log c + (V - 1) o log(o + 1e-20))
// Both outputs are f32 with logits' non-vocab dims (in logits' order). As
// t5x's custom vjp, only `loss` carries a gradient (z_loss is reported).
struct CrossEntropy {
  Array loss;    // includes the z-loss term
  Array z_loss;  // the z-loss term alone
};
CrossEntropy softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& targets,
                                                       double z_loss = 0.0, double label_smoothing = 0.0,
                                                       const std::string& vocab = "vocab");
CrossEntropy softmax_cross_entropy_with_integer_labels_reference(const Array& logits, const Array& targets,
                                                                 double z_loss = 0.0, double label_smoothing = 0.0,
                                                                 const std::string& vocab = "vocab");

// ------------------------------------------------------------- gated GELU
// T5.1.1 MLP inner product (mlp_activations = ('gelu', 'linear'); Shazeer 2020
// "GLU Variants", GEGLU): gelu_tanh(h0) * h1. h0 and h1 have the same dims
// (h1 may be ordered differently); output: h0's shape and dtype.
Array gated_gelu(const Array& h0, const Array& h1);
Array gated_gelu_reference(const Array& h0, const Array& h1);
// Whole MLP: wo . (gelu(x . wi_0) * (x . wi_1)).
//   x [..., embed], wi_0 / wi_1 [embed, mlp], wo [mlp, embed] -> [..., embed]
// The kernels are taken in x's dtype (float32 params of a bfloat16 model:
// EinsumPrecision::operand_dtype, no cast pass).
Array gated_gelu_mlp(const Array& x, const Array& wi_0, const Array& wi_1, const Array& wo,
                     const std::string& embed = "embed", const std::string& mlp = "mlp");

}  // namespace t5x
