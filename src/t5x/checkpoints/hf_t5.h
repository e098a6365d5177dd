// Hugging Face T5 <-> t5x T5 parameter names, layouts and config.json.
//
// t5x names are relative to the param tree (no "target/" prefix), as in
// t5x/examples/t5/network.py (t5x.md §4); HF names follow
// transformers' T5ForConditionalGeneration state dict. t5x DenseGeneral
// kernels are [in, out]; HF nn.Linear weights are [out, in], so every kernel
// and the relative-position table ([heads, buckets] vs [buckets, heads]) is
// transposed. Embedding and RMSNorm scales keep their layout.
//
//   token_embedder/embedding                     <-> shared.weight
//   encoder/relpos_bias/rel_embedding (T)        <-> encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight
//   encoder/layers_i/attention/{query,key,value,out}/kernel (T)
//                                                <-> encoder.block.i.layer.0.SelfAttention.{q,k,v,o}.weight
//   encoder/layers_i/pre_attention_layer_norm/scale <-> encoder.block.i.layer.0.layer_norm.weight
//   encoder/layers_i/mlp/{wi_0,wi_1,wi,wo}/kernel (T) <-> encoder.block.i.layer.1.DenseReluDense.{wi_0,wi_1,wi,wo}.weight
//   encoder/layers_i/pre_mlp_layer_norm/scale    <-> encoder.block.i.layer.1.layer_norm.weight
//   encoder/encoder_norm/scale                   <-> encoder.final_layer_norm.weight
//   decoder/layers_i/{self_attention, encoder_decoder_attention}/* (T)
//                                                <-> decoder.block.i.layer.{0.SelfAttention,1.EncDecAttention}.*
//   decoder/layers_i/pre_{self,cross}_attention_layer_norm, pre_mlp_layer_norm
//                                                <-> decoder.block.i.layer.{0,1,2}.layer_norm.weight
//   decoder/layers_i/mlp/* (T)                   <-> decoder.block.i.layer.2.DenseReluDense.*
//   decoder/decoder_norm/scale                   <-> decoder.final_layer_norm.weight
//   decoder/logits_dense/kernel (T)              <-> lm_head.weight   (untied T5.1.1 only)
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "t5x/checkpoints/safetensors.h"

namespace t5x {

// The fields of transformers' T5Config that describe T5 / T5.1.1 shapes.
struct HfT5Config {
  int64_t vocab_size = 32128;
  int64_t d_model = 768;
  int64_t d_kv = 64;
  int64_t d_ff = 2048;
  int64_t num_layers = 12;
  int64_t num_decoder_layers = 12;
  int64_t num_heads = 12;
  int64_t relative_attention_num_buckets = 32;
  int64_t relative_attention_max_distance = 128;
  double dropout_rate = 0.1;
  double layer_norm_epsilon = 1e-6;
  std::string feed_forward_proj = "gated-gelu";  // T5.1.1; "relu" for T5.1.0
  bool tie_word_embeddings = false;              // T5.1.1 false; T5.1.0 true
  bool is_gated_act() const { return feed_forward_proj.rfind("gated-", 0) == 0; }
  // The activation transformers applies: "gated-X" -> X, except that it maps
  // "gated-gelu" to the tanh GELU ("gelu_new"), which is flax's nn.gelu.
  std::string dense_act_fn() const {
    if (!is_gated_act()) return feed_forward_proj;
    const std::string act = feed_forward_proj.substr(6);
    return act == "gelu" ? "gelu_new" : act;
  }

  // config.json text (architectures T5ForConditionalGeneration, model_type t5,
  // is_gated_act, pad 0 / eos 1 / decoder_start 0, ...).
  std::string to_json() const;
  // Parses config.json; missing fields keep transformers' defaults.
  static HfT5Config from_json(const std::string& text, const std::string& where);
};

// A Hugging Face config.json's object. Throws CheckpointError "<where>: ..."
// for invalid JSON, a non-object, or a "model_type" other than `model_type`
// (an absent one is accepted).
nlohmann::json parse_hf_config(const std::string& text, const std::string& where, const std::string& model_type);

struct HfNameMapping {
  std::string name;      // the name on the other side
  bool transpose = false;
};

// Pure name functions; nullopt when the name has no counterpart.
std::optional<HfNameMapping> t5x_to_hf_name(const std::string& t5x_name);
std::optional<HfNameMapping> hf_to_t5x_name(const std::string& hf_name);

// One parameter's name and dims (unlike mesh/partition_spec.h's NamedShape, which names each dim).
struct ParamShape {
  std::string name;
  std::vector<int64_t> shape;
};
struct TensorMapping {
  std::string from, to;
  std::vector<int64_t> from_shape, to_shape;
  bool transpose = false;
};
// Maps a whole parameter set by names + shapes. Throws CheckpointError listing
// every unmapped name. hf -> t5x drops encoder/decoder.embed_tokens.weight
// (tied copies of shared.weight) and lm_head.weight when config ties them.
std::vector<TensorMapping> map_t5x_to_hf(const std::vector<ParamShape>& t5x_params);
std::vector<TensorMapping> map_hf_to_t5x(const std::vector<ParamShape>& hf_params,
                                         const HfT5Config& config);

// Infers the HF config from t5x parameter shapes (vocab, d_model, heads from
// the relpos table, d_kv, d_ff, layer counts, gated MLP, tied embeddings).
HfT5Config infer_hf_t5_config(const std::vector<ParamShape>& t5x_params);

// Applies a mapping to tensors (transposing 2-D arrays where needed).
NamedTensors apply_tensor_mapping(const NamedTensors& tensors, const std::vector<TensorMapping>& plan);

// Convenience: t5x params (names without "target/") -> HF tensors and back.
NamedTensors t5x_params_to_hf(const NamedTensors& t5x_params);
NamedTensors hf_params_to_t5x(const NamedTensors& hf_params, const HfT5Config& config);

HostTensor transpose_2d(const HostTensor& t);

}  // namespace t5x
