// Fused ops of the T5 stack on sharded global arrays (ops/fused.h semantics).
//
// rms_norm: with `dim` unsplit in x, the fused kernel runs on each shard
//   (scale is gathered along dim if split; with 2-D parameter rules that is
//   the ZeRO-3 gather, its gradient reduce-scattered). With `dim` split (2-D
//   activations) and mesh_invariant off, the one-process arithmetic runs as
//   plain ops in the same dtypes (float32, the output rounded to x's dtype;
//   see fused.cpp): mean over the split dim is a local sum + all-reduce.
// softmax_cross_entropy_with_integer_labels: vocab unsplit -> fused kernel per
//   shard; vocab split -> the t5x formula from sharded ops in float32 (logsumexp with
//   max/sum all-reduces, target logit via a local one-hot in the vocab
//   layout). Both outputs keep the layout of logits' other dims.
// dot_product_attention: batch and heads may stay split (attention is
//   independent per batch row and head); length, kv_length, the depth dim and
//   kv_heads are gathered if split; grouped K/V (kv_heads) with q's heads
//   split is refused (the group map is global: repeat K/V to heads first,
//   as nn::attend does). Mask / bias / segment-id arrays in the
//   options are laid out like q, k, v.
// fourier_mix: as attention, the batch dims may stay split (each example is
//   mixed on its own); a split length or embed dim is all-gathered first.
#pragma once
#include <string>

#include "core/array.h"
#include "ops/fused.h"

namespace t5x::spmd {

Array rms_norm(const Array& x, const Array& scale, const std::string& dim = "embed", double eps = 1e-6);
CrossEntropy softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& targets, double z_loss = 0.0,
                                                       double label_smoothing = 0.0, const std::string& vocab = "vocab");
Array dot_product_attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& opt = {});
Array fourier_mix(const Array& x, const std::string& length = "length", const std::string& embed = "embed");

}  // namespace t5x::spmd
