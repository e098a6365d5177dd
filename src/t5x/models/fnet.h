// FNet encoder (Lee-Thorp et al. 2021, arXiv 2105.03824; google-research/f_net
// models.py), laid out as Hugging Face `FNetModel` (transformers
// models/fnet/modeling_fnet.py), so that an HF FNet checkpoint loads as is.
//
//   embeddings:  h = LN(word[ids] + type[token_type_ids] + position[0..L)) . W_in + b_in
//                (the `hidden_mapping_in` projection; HF `embeddings.projection`)
//   each layer:  h = LN(h + Re(DFT_length(DFT_embed(h))))          (ops/fourier.h)
//                h = LN(h + (gelu_tanh(h . W_i + b_i) . W_o + b_o))
//   pooler:      pooled = tanh(h[:, 0] . W_p + b_p)
// LN is the centred LayerNorm with scale and bias, eps `layer_norm_eps`
// (1e-12). Post-LN blocks; no attention mask anywhere: padding positions are
// mixed like the others (FNet's reference does the same). Dropout is not
// applied (inference and parity; training through `t5x train` is not wired).
// The activation is HF's `gelu_new` (the tanh approximation, t5x's gelu),
// FNetConfig's default; other `hidden_act` values are refused on load.
//
// Parameters (t5x-style paths; dim names are logical axes; f32):
//   embedder/word_embeddings [vocab, embed]      <- embeddings.word_embeddings.weight
//   embedder/position_embeddings [length, embed] <- embeddings.position_embeddings.weight
//   embedder/type_embeddings [type, embed]       <- embeddings.token_type_embeddings.weight
//   embedder/layer_norm/{scale,bias} [embed]     <- embeddings.LayerNorm.{weight,bias}
//   embedder/hidden_mapping_in/kernel [embed_in, embed], bias [embed]  <- embeddings.projection (T)
//   encoder/layers_i/mixing_layer_norm/{scale,bias}   <- encoder.layer.i.fourier.output.LayerNorm
//   encoder/layers_i/mlp/wi/kernel [embed, mlp], bias [mlp]  <- encoder.layer.i.intermediate.dense (T)
//   encoder/layers_i/mlp/wo/kernel [mlp, embed], bias [embed] <- encoder.layer.i.output.dense (T)
//   encoder/layers_i/output_layer_norm/{scale,bias}   <- encoder.layer.i.output.LayerNorm
//   pooler/kernel [embed_in, embed], bias [embed]      <- pooler.dense (T)
// HF names may carry a "fnet." prefix (FNetForMaskedLM and the other heads);
// head-only tensors (cls.*) are ignored. (T): nn.Linear's [out, in] weight is
// transposed to the [in, out] kernel.
#pragma once
#include <cstdint>
#include <string>

#include "core/array.h"
#include "nn/params.h"
#include "ops/autodiff.h"
#include "t5x/checkpoints/safetensors.h"

namespace t5x {

// The shape fields of transformers' FNetConfig (its defaults: fnet-base).
struct FNetConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 768;
  int64_t intermediate_size = 3072;
  int64_t num_hidden_layers = 12;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 4;
  double layer_norm_eps = 1e-12;
  std::string hidden_act = "gelu_new";
  // Parses an HF config.json; absent fields keep FNetConfig's defaults.
  // Throws CheckpointError "<where>: ..." for bad JSON, a model_type other
  // than "fnet", a field of the wrong type (named), a size that is not
  // positive, a negative layer_norm_eps, use_tpu_fourier_optimizations=true,
  // or a hidden_act other than gelu_new / gelu_pytorch_tanh / gelu_fast.
  static FNetConfig from_json(const std::string& text, const std::string& where);
};

nn::ParamSpecs fnet_param_specs(const FNetConfig& cfg);

// HF FNet tensors (any float dtype) -> the parameter tree above, in f32.
// Throws CheckpointError naming the missing tensor, the tensor whose shape
// disagrees with `cfg` (with both shapes), or a layer tensor past
// cfg.num_hidden_layers (it would be dropped).
ParamTree fnet_params_from_hf(const NamedTensors& hf, const FNetConfig& cfg, const std::string& where);

struct FNetModelFiles {
  FNetConfig config;
  ParamTree params;
};
// Reads <hf_dir>/config.json and its safetensors (hf_convert.h read_hf_tensors).
FNetModelFiles load_hf_fnet(const std::string& hf_dir);

struct FNetOutputs {
  Array last_hidden_state;  // f32 [batch, length, embed]
  Array pooled;             // f32 [batch, embed]
};
// input_ids int [batch, length] (length <= max_position_embeddings);
// token_type_ids int [batch, length] or null (all type 0, as HF).
// Throws std::invalid_argument "[fnet] ..." for a too-long input.
FNetOutputs fnet_encode(const FNetConfig& cfg, const ParamTree& params, const Array& input_ids,
                        const Array& token_type_ids = Array());

}  // namespace t5x
