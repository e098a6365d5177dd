// Multi-head dot-product attention with T5 semantics (t5x examples/t5/layers.py
// MultiHeadDotProductAttention; t5x.md 4), written against global named dims.
//
// Parameters under `prefix` (no biases):
//   query/kernel [embed, joined_kv = heads*head_dim]   variance_scaling(1, fan_in, normal) / sqrt(head_dim)
//   key/kernel, value/kernel [embed, joined_kv = heads*head_dim]  variance_scaling(1, fan_in, normal)
//     or, grouped, [embed, kv_heads, kv]
//   out/kernel [joined_kv, embed]                      variance_scaling(1, fan_in, normal)
// Multi-head kernels are stored 2-D (t5x DenseGeneral) and reshaped to
// [embed, heads, kv] at use. There is no 1/sqrt(head_dim) scaling at run
// time (it lives in the query init).
// Grouped-query / multi-query attention (Ainslie et al. 2023; G = num_kv_heads
// < num_heads, dividing it; G = 1 is MQA): the key / value kernels are
// [embed, kv_heads=G, kv] (logical axis "kv_heads": split over 'model' when
// G is divisible by it, else replicated, mesh/logical_axis_rules.h), and query
// head h reads K/V head h / (num_heads / G), i.e. consecutive query heads form
// a group (transformers' repeat_kv, the order `t5x ckpt convert-gqa` pools).
// num_kv_heads = num_heads is multi-head attention, bitwise (2-D kernels).
//
// Activations: queries [batch, length, heads, kv], keys / values
// [batch, kv_length, heads|kv_heads, kv], outputs [batch, length, embed].
// Masks follow flax make_attention_mask / make_decoder_mask: masked logits get
// -1e10 added, a fully masked query row therefore averages the values.
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "core/array.h"
#include "nn/dropout.h"
#include "nn/params.h"
#include "ops/einsum.h"

namespace t5x::nn {

struct AttentionConfig {
  int64_t num_heads = 1;
  int64_t num_kv_heads = 0;  // 0: = num_heads
  int64_t head_dim = 1;
  DType dtype = DType::f32;  // activation / compute dtype
  int64_t kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  bool grouped() const { return kv_heads() != num_heads; }
};

// Which (query, key) pairs may attend. Every field is optional.
struct MaskSpec {
  bool causal = false;              // key pos <= query pos (+ kv_length - length)
  Array q_segment_ids;              // int [batch, length]; with kv_segment_ids: equal and != 0
  Array kv_segment_ids;             // int [batch, kv_length]
  Array q_mask;                     // bool [batch, length]
  Array kv_mask;                    // bool [batch, kv_length]
  Array bidirectional_prefix;       // int/bool [batch, length] (decoder_causal_attention,
                                    // self-attention only): pairs inside it ignore causality
};

// f32 [batch, length, kv_length]: 0 where allowed, -1e10 elsewhere.
Array attention_mask_bias(const MaskSpec& mask, int64_t batch, int64_t length, int64_t kv_length);

// Throws std::invalid_argument "[attention] num_kv_heads G must divide num_heads H".
ParamSpecs attention_param_specs(const std::string& prefix, int64_t embed, const AttentionConfig& cfg);

// x [batch, length, embed] -> [batch, length, heads, kv].
Array project_query(const ParamTree& p, const std::string& prefix, const Array& x, const AttentionConfig& cfg);
// x [batch, length|kv_length, embed] -> keys, values [batch, kv_length, heads|kv_heads, kv].
std::pair<Array, Array> project_key_value(const ParamTree& p, const std::string& prefix, const Array& x,
                                          const AttentionConfig& cfg);
// [batch, kv_length, kv_heads, kv] -> [batch, kv_length, heads, kv] (no-op without GQA).
Array expand_kv_heads(const Array& kv, const AttentionConfig& cfg);
// Core attention: q [batch, length, heads, kv]; k, v [batch, kv_length, heads|kv_heads, kv];
// bias: dims within {batch, heads, length, kv_length} (relative position bias) or null.
// Grouped k / v go to the fused kernel as they are when nothing is split
// (it reads K/V head h / group), else are repeated to `heads` first.
// Attention-probability dropout (broadcast over the query length) when `dropout` is active.
Array attend(const Array& q, const Array& k, const Array& v, const MaskSpec& mask, const Array& bias,
             const AttentionConfig& cfg, Dropout& dropout);
// ctx [batch, length, heads, kv] -> [batch, length, embed].
Array project_out(const ParamTree& p, const std::string& prefix, const Array& ctx, const AttentionConfig& cfg);

// project_query / project_key_value / attend / project_out in one call.
// x_kv may be x_q (self-attention).
Array multi_head_attention(const ParamTree& p, const std::string& prefix, const Array& x_q, const Array& x_kv,
                           const MaskSpec& mask, const Array& bias, const AttentionConfig& cfg, Dropout& dropout);

// The einsum precision that takes a kernel (kept float32, t5x's param_dtype)
// in the compute dtype `dt` (flax's dtype): cast as the product reads it,
// without a cast pass where the product allows (EinsumPrecision::operand_dtype).
EinsumPrecision in_dtype(DType dt);

}  // namespace t5x::nn
