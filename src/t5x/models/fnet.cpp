#include "t5x/models/fnet.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "ops/ops.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/hf_convert.h"
#include "t5x/checkpoints/hf_t5.h"
#include "t5x/checkpoints/json_int.h"

namespace t5x {
namespace {

using nn::InitSpec;
using nn::ParamSpec;

// HF's tanh GELU under its several names; t5x's gelu is the same formula.
bool is_tanh_gelu(const std::string& act) {
  return act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast";
}

std::string layer(int64_t i) { return "encoder/layers_" + std::to_string(i) + "/"; }

// One row of the HF -> t5x table: the HF name (without "fnet."), ours, and
// whether nn.Linear's [out, in] weight is transposed.
struct HfName {
  std::string hf, ours;
  bool transpose = false;
};

std::vector<HfName> hf_names(const FNetConfig& cfg) {
  std::vector<HfName> n = {
      {"embeddings.word_embeddings.weight", "embedder/word_embeddings"},
      {"embeddings.position_embeddings.weight", "embedder/position_embeddings"},
      {"embeddings.token_type_embeddings.weight", "embedder/type_embeddings"},
      {"embeddings.LayerNorm.weight", "embedder/layer_norm/scale"},
      {"embeddings.LayerNorm.bias", "embedder/layer_norm/bias"},
      {"embeddings.projection.weight", "embedder/hidden_mapping_in/kernel", true},
      {"embeddings.projection.bias", "embedder/hidden_mapping_in/bias"},
      {"pooler.dense.weight", "pooler/kernel", true},
      {"pooler.dense.bias", "pooler/bias"},
  };
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string h = "encoder.layer." + std::to_string(i) + ".", o = layer(i);
    n.push_back({h + "fourier.output.LayerNorm.weight", o + "mixing_layer_norm/scale"});
    n.push_back({h + "fourier.output.LayerNorm.bias", o + "mixing_layer_norm/bias"});
    n.push_back({h + "intermediate.dense.weight", o + "mlp/wi/kernel", true});
    n.push_back({h + "intermediate.dense.bias", o + "mlp/wi/bias"});
    n.push_back({h + "output.dense.weight", o + "mlp/wo/kernel", true});
    n.push_back({h + "output.dense.bias", o + "mlp/wo/bias"});
    n.push_back({h + "output.LayerNorm.weight", o + "output_layer_norm/scale"});
    n.push_back({h + "output.LayerNorm.bias", o + "output_layer_norm/bias"});
  }
  return n;
}

// Centred LayerNorm over embed (torch.nn.LayerNorm, biased variance), in f32.
Array layer_norm(const ParamTree& p, const std::string& name, const Array& x, double eps) {
  Array c = sub(x, mean(x, {"embed"}));
  Array inv = rsqrt(add(mean(square(c), {"embed"}), eps));
  return add(mul(mul(c, inv), nn::get(p, name + "/scale")), nn::get(p, name + "/bias"));
}

// x [..., in] . kernel [in, out] + bias [out].
Array dense(const ParamTree& p, const std::string& name, const Array& x, const std::string& in) {
  return add(matmul(x, nn::get(p, name + "/kernel"), in), nn::get(p, name + "/bias"));
}

// The [embed, embed] projections read x's embed as their input dim.
Array dense_embed(const ParamTree& p, const std::string& name, const Array& x) {
  return dense(p, name, rename(x, {{"embed", "embed_in"}}), "embed_in");
}

}  // namespace

FNetConfig FNetConfig::from_json(const std::string& text, const std::string& where) {
  const nlohmann::json j = parse_hf_config(text, where, "fnet");
  FNetConfig c;
  // Each field is read on its own so that a bad one is named (nlohmann's
  // type_error does not say which key it was reading).
  auto field = [&](const char* key, auto read) {
    if (!j.contains(key) || j[key].is_null()) return;
    try { read(j[key]); } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(where + ": field \"" + key + "\" is " + j[key].dump() + " (" + e.what() +
                            "); fix it or delete it for FNetConfig's default");
    }
  };
  auto size = [&](const char* key, int64_t& v) {
    field(key, [&](const nlohmann::json& x) { v = json_int(x); });
    if (v <= 0)
      throw CheckpointError(where + ": field \"" + key + "\" is " + std::to_string(v) + "; it must be positive");
  };
  size("vocab_size", c.vocab_size);
  size("hidden_size", c.hidden_size);
  size("intermediate_size", c.intermediate_size);
  size("num_hidden_layers", c.num_hidden_layers);
  size("max_position_embeddings", c.max_position_embeddings);
  size("type_vocab_size", c.type_vocab_size);
  field("layer_norm_eps", [&](const nlohmann::json& x) { c.layer_norm_eps = x.get<double>(); });
  if (!(c.layer_norm_eps >= 0) || !std::isfinite(c.layer_norm_eps))
    throw CheckpointError(where + ": field \"layer_norm_eps\" is " + j.at("layer_norm_eps").dump() +
                          "; it must be a finite number >= 0 (FNetConfig's default: 1e-12)");
  field("hidden_act", [&](const nlohmann::json& x) { c.hidden_act = x.get<std::string>(); });
  bool tpu = false;
  field("use_tpu_fourier_optimizations", [&](const nlohmann::json& x) { tpu = x.get<bool>(); });
  if (!is_tanh_gelu(c.hidden_act))
    throw CheckpointError(where + ": hidden_act \"" + c.hidden_act +
                          "\" is not supported; FNet here uses the tanh GELU (\"gelu_new\", FNetConfig's default)");
  if (tpu)
    throw CheckpointError(where + ": use_tpu_fourier_optimizations=true is not supported (it changes the "
                          "mixing length to tpu_short_seq_length); set it to false");
  return c;
}

nn::ParamSpecs fnet_param_specs(const FNetConfig& cfg) {
  const Dim embed{"embed", cfg.hidden_size}, embed_in{"embed_in", cfg.hidden_size}, mlp{"mlp", cfg.intermediate_size};
  // HF's _init_weights: normal(initializer_range = 0.02) weights, zero biases, unit LN scales.
  const InitSpec w = InitSpec::normal(0.02), zero{}, one = InitSpec::ones();
  nn::ParamSpecs s = {
      {"embedder/word_embeddings", Shape{{"vocab", cfg.vocab_size}, embed}, w},
      {"embedder/position_embeddings", Shape{{"length", cfg.max_position_embeddings}, embed}, w},
      {"embedder/type_embeddings", Shape{{"type", cfg.type_vocab_size}, embed}, w},
      {"embedder/layer_norm/scale", Shape{embed}, one},
      {"embedder/layer_norm/bias", Shape{embed}, zero},
      {"embedder/hidden_mapping_in/kernel", Shape{embed_in, embed}, w},
      {"embedder/hidden_mapping_in/bias", Shape{embed}, zero},
      {"pooler/kernel", Shape{embed_in, embed}, w},
      {"pooler/bias", Shape{embed}, zero},
  };
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string o = layer(i);
    for (const char* ln : {"mixing_layer_norm", "output_layer_norm"}) {
      s.push_back({o + ln + "/scale", Shape{embed}, one});
      s.push_back({o + ln + "/bias", Shape{embed}, zero});
    }
    s.push_back({o + "mlp/wi/kernel", Shape{embed, mlp}, w});
    s.push_back({o + "mlp/wi/bias", Shape{mlp}, zero});
    s.push_back({o + "mlp/wo/kernel", Shape{mlp, embed}, w});
    s.push_back({o + "mlp/wo/bias", Shape{embed}, zero});
  }
  return s;
}

ParamTree fnet_params_from_hf(const NamedTensors& hf, const FNetConfig& cfg, const std::string& where) {
  std::map<std::string, const HostTensor*> by_name;
  for (const auto& [name, t] : hf) by_name[name.rfind("fnet.", 0) == 0 ? name.substr(5) : name] = &t;
  std::map<std::string, Shape> shapes;
  for (const ParamSpec& s : fnet_param_specs(cfg)) shapes[s.name] = s.shape;
  ParamTree params;
  for (const HfName& n : hf_names(cfg)) {
    auto it = by_name.find(n.hf);
    if (it == by_name.end())
      throw CheckpointError(where + ": missing tensor '" + n.hf + "' (FNetModel with num_hidden_layers=" +
                            std::to_string(cfg.num_hidden_layers) + " per config.json)");
    HostTensor t = cast_host_tensor(*it->second, "float32");
    if (n.transpose) t = transpose_2d(t);
    const Shape& want = shapes.at(n.ours);
    std::vector<int64_t> dims;
    for (const Dim& d : want.dims()) dims.push_back(d.size);
    if (t.shape != dims) {
      std::string got;
      for (int64_t d : it->second->shape) got += (got.empty() ? "" : ",") + std::to_string(d);
      throw CheckpointError(where + ": tensor '" + n.hf + "' has shape [" + got + "], config.json implies " +
                            want.to_string() + (n.transpose ? " (transposed)" : "") +
                            "; check hidden_size / intermediate_size / vocab sizes");
    }
    params[n.ours] = Array::from_floats(want, t.values<float>());
  }
  // A layer past num_hidden_layers would otherwise be dropped silently (a
  // smaller model with other outputs).
  const std::string next = "encoder.layer." + std::to_string(cfg.num_hidden_layers) + ".";
  if (auto it = by_name.lower_bound(next); it != by_name.end() && it->first.rfind(next, 0) == 0)
    throw CheckpointError(where + ": tensor '" + it->first + "' is past num_hidden_layers=" +
                          std::to_string(cfg.num_hidden_layers) +
                          " of config.json; set num_hidden_layers to the checkpoint's layer count");
  return params;
}

FNetModelFiles load_hf_fnet(const std::string& hf_dir) {
  const std::string cfg_path = fileio::join(hf_dir, "config.json");
  FNetModelFiles m;
  m.config = FNetConfig::from_json(fileio::read_text(cfg_path), cfg_path);
  m.params = fnet_params_from_hf(read_hf_tensors(hf_dir), m.config, hf_dir);
  return m;
}

FNetOutputs fnet_encode(const FNetConfig& cfg, const ParamTree& p, const Array& input_ids,
                        const Array& token_type_ids) {
  const int64_t L = input_ids.dim("length");
  if (L > cfg.max_position_embeddings)
    throw_invalid("fnet", "input length " + std::to_string(L) + " exceeds max_position_embeddings=" +
                              std::to_string(cfg.max_position_embeddings));
  Array types = token_type_ids.valid() ? token_type_ids : Array::zeros(input_ids.shape(), DType::i32);
  Array h = take(nn::get(p, "embedder/word_embeddings"), input_ids, "vocab");
  h = add(h, take(nn::get(p, "embedder/type_embeddings"), types, "type"));
  h = add(h, slice(nn::get(p, "embedder/position_embeddings"), "length", 0, L));
  h = layer_norm(p, "embedder/layer_norm", h, cfg.layer_norm_eps);
  h = dense_embed(p, "embedder/hidden_mapping_in", h);
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i) {
    const std::string o = layer(i);
    h = layer_norm(p, o + "mixing_layer_norm", add(h, fourier_mix(h, "length", "embed")), cfg.layer_norm_eps);
    Array ff = dense(p, o + "mlp/wo", gelu(dense(p, o + "mlp/wi", h, "embed")), "mlp");
    h = layer_norm(p, o + "output_layer_norm", add(h, ff), cfg.layer_norm_eps);
  }
  h = transpose(h, {"batch", "length", "embed"});
  Array first = squeeze(slice(h, "length", 0, 1), "length");
  return {h, tanh(dense_embed(p, "pooler", first))};
}

}  // namespace t5x
