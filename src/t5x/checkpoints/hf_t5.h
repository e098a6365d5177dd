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
//
// mT5 (model_type "mt5") has T5.1.1's names. umT5 (model_type "umt5",
// transformers' UMT5ForConditionalGeneration) has a relative-position table in
// every layer's self-attention (T5Config::relpos_per_layer):
//   <stack>/layers_i/relpos_bias/rel_embedding (T)
//                                                <-> <stack>.block.i.layer.0.SelfAttention.relative_attention_bias.weight
//
// Switch Transformers (transformers' SwitchTransformersForConditionalGeneration,
// model_type "switch_transformers"; moe.md 2.2, 2.5) use the same names except
// that an MLP is `...layer.{1|2}.mlp.*` (not DenseReluDense), and a sparse
// layer's MLP is split per expert:
//   <stack>/layers_i/mlp/router/router_weights/w/kernel [embed, E] (T)
//                                                <-> <stack>.block.i.layer.{1|2}.mlp.router.classifier.weight [E, embed]
//   <stack>/layers_i/mlp/expert/{wi,wo}/kernel [E, a, b] (slice j, T)
//                                                <-> <stack>.block.i.layer.{1|2}.mlp.experts.expert_j.{wi,wo}.weight [b, a]
// transformers' Switch MLPs have one activation (dense_act_fn), so gated
// (wi_0/wi_1) experts have no counterpart.
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
  // transformers 5's T5 multiplies the decoder output by d_model^-0.5 before
  // lm_head when this is set: config.json's scale_decoder_outputs, else
  // tie_word_embeddings != false (Switch: tie_word_embeddings). Its lm_head is
  // the file's lm_head.weight, else shared.weight (T5Config always ties).
  bool scale_decoder_outputs = false;
  // umT5 (model_type "umt5"): one relative-position table per layer.
  bool relpos_per_layer = false;
  // SwitchTransformersConfig (model_type "switch_transformers"). Its MLPs are
  // never gated: feed_forward_proj then holds config.json's dense_act_fn.
  bool switch_transformers = false;
  int64_t num_experts = 0;
  int64_t num_sparse_encoder_layers = 0;
  int64_t num_sparse_decoder_layers = 0;
  // transformers' fixed per-sequence capacity: the (expert_capacity+1)-th token
  // of a sequence routed to one expert is dropped. t5x's is per group,
  // max(round(cf * group_size / E), min_expert_capacity) (docs/checkpoints.md).
  int64_t expert_capacity = 64;
  double router_jitter_noise = 0.01;
  bool router_ignore_padding_tokens = false;
  double router_z_loss_coef = 0.001;
  double router_aux_loss_coef = 0.001;
  // Whether transformers builds layer `layer` of the encoder (else decoder)
  // stack as sparse: SwitchTransformersStack's i % step == 1 (every layer
  // when step == 1), step = num_layers / num_sparse (num_layers when 0 sparse,
  // which still makes layer 1 sparse: a transformers quirk reproduced here).
  bool hf_sparse_layer(bool encoder, int64_t layer) const;
  bool is_gated_act() const { return feed_forward_proj.rfind("gated-", 0) == 0; }
  // The activation transformers applies: "gated-X" -> X, except that it maps
  // "gated-gelu" to the tanh GELU ("gelu_new"), which is flax's nn.gelu.
  std::string dense_act_fn() const {
    if (!is_gated_act()) return feed_forward_proj;
    const std::string act = feed_forward_proj.substr(6);
    return act == "gelu" ? "gelu_new" : act;
  }

  // config.json text (architectures T5ForConditionalGeneration, model_type t5,
  // is_gated_act, pad 0 / eos 1 / decoder_start 0, ...; with
  // relpos_per_layer: UMT5ForConditionalGeneration, model_type umt5; with
  // switch_transformers: SwitchTransformersForConditionalGeneration and its
  // fields, router_bias false, router_dtype float32).
  std::string to_json() const;
  // Parses a T5, mT5, umT5 or Switch config.json; missing fields keep
  // transformers' defaults. An mT5 never scales its decoder output
  // (transformers' MT5 has no scale_decoder_outputs). Throws CheckpointError
  // "<where>: ..." for another model_type and for Switch settings t5x's
  // router lacks (router_bias true, router_dtype other than float32,
  // num_experts < 1, a gated MLP).
  static HfT5Config from_json(const std::string& text, const std::string& where);
};

// A Hugging Face config.json's object. Throws CheckpointError "<where>: ..."
// for invalid JSON, a non-object, or a "model_type" other than `model_type`
// (an absent one is accepted).
nlohmann::json parse_hf_config(const std::string& text, const std::string& where, const std::string& model_type);
// The same, accepting any of `model_types`.
nlohmann::json parse_hf_config(const std::string& text, const std::string& where,
                               const std::vector<std::string>& model_types);

struct HfNameMapping {
  std::string name;      // the name on the other side
  bool transpose = false;
};

// Pure name functions; nullopt when the name has no counterpart. Expert
// kernels (one t5x array, E HF tensors) are not 1:1 and map only through
// map_t5x_to_hf / map_hf_to_t5x. `switch_names`: Switch's ".mlp." instead of
// ".DenseReluDense." (hf_to_t5x_name accepts both). `relpos_per_layer`
// (umT5): block i's relative_attention_bias is layer i's table, block 0's
// included (else block 0's is the stack's and the others have none).
std::optional<HfNameMapping> t5x_to_hf_name(const std::string& t5x_name, bool switch_names = false);
std::optional<HfNameMapping> hf_to_t5x_name(const std::string& hf_name, bool relpos_per_layer = false);

// One parameter's name and dims (unlike mesh/partition_spec.h's NamedShape, which names each dim).
struct ParamShape {
  std::string name;
  std::vector<int64_t> shape;
};
struct TensorMapping {
  std::string from, to;
  std::vector<int64_t> from_shape, to_shape;
  bool transpose = false;
  // >= 0: an expert kernel. t5x -> HF takes slice `expert` of the leading
  // expert dim of `from`; HF -> t5x writes `from` into that slice of `to`.
  int64_t expert = -1;
};
// Maps a whole parameter set by names + shapes. Throws CheckpointError listing
// every unmapped name. hf -> t5x drops encoder/decoder.embed_tokens.weight
// (tied copies of shared.weight) and lm_head.weight when config ties them.
// A t5x set with router kernels maps to Switch names, plus copies of the
// embedding as encoder/decoder.embed_tokens.weight (transformers 5 leaves
// those untied, so randomly initialised, in an untied Switch model whose
// file lacks them); hf -> t5x stacks
// expert_0 .. expert_{E-1} (E = config.num_experts; a missing or extra
// expert is an error naming the layer).
std::vector<TensorMapping> map_t5x_to_hf(const std::vector<ParamShape>& t5x_params);
std::vector<TensorMapping> map_hf_to_t5x(const std::vector<ParamShape>& hf_params,
                                         const HfT5Config& config);

// Infers the HF config from t5x parameter shapes (vocab, d_model, heads from
// the relpos table, d_kv, d_ff, layer counts, gated MLP, tied embeddings;
// umT5 when the tables are the layers', which then must all have one).
// With router kernels: a Switch config (num_experts, and the
// num_sparse_*_layers whose transformers placement is the checkpoint's sparse
// layers). Throws CheckpointError when transformers cannot express it (gated
// experts, expert_mlp_dim != mlp_dim, sparse layers not at i % step == 1).
HfT5Config infer_hf_t5_config(const std::vector<ParamShape>& t5x_params);

// Applies a mapping to tensors (transposing 2-D arrays where needed).
NamedTensors apply_tensor_mapping(const NamedTensors& tensors, const std::vector<TensorMapping>& plan);

// Convenience: t5x params (names without "target/") -> HF tensors and back.
NamedTensors t5x_params_to_hf(const NamedTensors& t5x_params);
NamedTensors hf_params_to_t5x(const NamedTensors& hf_params, const HfT5Config& config);

HostTensor transpose_2d(const HostTensor& t);

}  // namespace t5x
