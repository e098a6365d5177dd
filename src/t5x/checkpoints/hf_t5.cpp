#include "t5x/checkpoints/hf_t5.h"
#include "t5x/checkpoints/json_int.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

namespace t5x {

using json = nlohmann::json;

namespace {

// Placeholders: {i} layer index, {proj} attention projection, {mlp} MLP kernel.
struct Rule { const char* t5x; const char* hf; bool transpose; };
constexpr Rule kRules[] = {
    {"token_embedder/embedding", "shared.weight", false},
    {"encoder/relpos_bias/rel_embedding",
     "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", true},
    {"decoder/relpos_bias/rel_embedding",
     "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", true},
    {"encoder/layers_{i}/attention/{proj}/kernel", "encoder.block.{i}.layer.0.SelfAttention.{proj}.weight", true},
    {"encoder/layers_{i}/pre_attention_layer_norm/scale", "encoder.block.{i}.layer.0.layer_norm.weight", false},
    {"encoder/layers_{i}/mlp/{mlp}/kernel", "encoder.block.{i}.layer.1.DenseReluDense.{mlp}.weight", true},
    {"encoder/layers_{i}/pre_mlp_layer_norm/scale", "encoder.block.{i}.layer.1.layer_norm.weight", false},
    {"encoder/encoder_norm/scale", "encoder.final_layer_norm.weight", false},
    {"decoder/layers_{i}/self_attention/{proj}/kernel", "decoder.block.{i}.layer.0.SelfAttention.{proj}.weight", true},
    {"decoder/layers_{i}/pre_self_attention_layer_norm/scale", "decoder.block.{i}.layer.0.layer_norm.weight", false},
    {"decoder/layers_{i}/encoder_decoder_attention/{proj}/kernel",
     "decoder.block.{i}.layer.1.EncDecAttention.{proj}.weight", true},
    {"decoder/layers_{i}/pre_cross_attention_layer_norm/scale", "decoder.block.{i}.layer.1.layer_norm.weight", false},
    {"decoder/layers_{i}/mlp/{mlp}/kernel", "decoder.block.{i}.layer.2.DenseReluDense.{mlp}.weight", true},
    {"decoder/layers_{i}/pre_mlp_layer_norm/scale", "decoder.block.{i}.layer.2.layer_norm.weight", false},
    {"decoder/decoder_norm/scale", "decoder.final_layer_norm.weight", false},
    {"decoder/logits_dense/kernel", "lm_head.weight", true},
};

const std::map<std::string, std::string> kProjT5xToHf = {
    {"query", "q"}, {"key", "k"}, {"value", "v"}, {"out", "o"}};

std::vector<std::string> placeholders(const std::string& pat) {
  std::vector<std::string> out;
  static const std::regex ph(R"(\{(i|proj|mlp)\})");
  for (std::sregex_iterator it(pat.begin(), pat.end(), ph), end; it != end; ++it)
    out.push_back((*it)[1]);
  return out;
}

std::regex compile(const std::string& pat, bool hf_side) {
  std::string re;
  for (size_t i = 0; i < pat.size();) {
    if (pat.compare(i, 3, "{i}") == 0) { re += R"((\d+))"; i += 3; }
    else if (pat.compare(i, 6, "{proj}") == 0) { re += hf_side ? "(q|k|v|o)" : "(query|key|value|out)"; i += 6; }
    else if (pat.compare(i, 5, "{mlp}") == 0) { re += "(wi_0|wi_1|wi|wo)"; i += 5; }
    else {
      if (pat[i] == '.') re += "\\.";
      else re += pat[i];
      ++i;
    }
  }
  return std::regex(re);
}

std::string fill(const std::string& pat, const std::vector<std::string>& names,
                 const std::vector<std::string>& values) {
  std::string out = pat;
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string tok = "{" + names[k] + "}";
    out.replace(out.find(tok), tok.size(), values[k]);
  }
  return out;
}

std::optional<HfNameMapping> map_name(const std::string& name, bool to_hf) {
  for (const Rule& r : kRules) {
    const std::string src = to_hf ? r.t5x : r.hf, dst = to_hf ? r.hf : r.t5x;
    std::smatch m;
    if (!std::regex_match(name, m, compile(src, !to_hf))) continue;
    auto names = placeholders(src);
    std::vector<std::string> vals;
    for (size_t k = 0; k < names.size(); ++k) {
      std::string v = m[k + 1];
      if (names[k] == "proj") {
        if (to_hf) v = kProjT5xToHf.at(v);
        else for (const auto& [a, b] : kProjT5xToHf) if (b == v) { v = a; break; }
      }
      vals.push_back(v);
    }
    return HfNameMapping{fill(dst, names, vals), r.transpose};
  }
  return std::nullopt;
}

std::vector<int64_t> maybe_t(const std::vector<int64_t>& s, bool t) {
  if (!t || s.size() != 2) return s;
  return {s[1], s[0]};
}

const std::vector<int64_t>* find_shape(const std::vector<ParamShape>& v, const std::string& n) {
  for (const auto& x : v) if (x.name == n) return &x.shape;
  return nullptr;
}

}  // namespace

std::optional<HfNameMapping> t5x_to_hf_name(const std::string& n) { return map_name(n, true); }
std::optional<HfNameMapping> hf_to_t5x_name(const std::string& n) { return map_name(n, false); }

std::vector<TensorMapping> map_t5x_to_hf(const std::vector<ParamShape>& params) {
  std::vector<TensorMapping> plan;
  std::string unmapped;
  for (const auto& p : params) {
    auto m = t5x_to_hf_name(p.name);
    if (!m) { unmapped += " " + p.name; continue; }
    plan.push_back({p.name, m->name, p.shape, maybe_t(p.shape, m->transpose), m->transpose});
  }
  if (!unmapped.empty())
    throw CheckpointError("no Hugging Face T5 name for t5x parameter(s):" + unmapped);
  return plan;
}

std::vector<TensorMapping> map_hf_to_t5x(const std::vector<ParamShape>& params, const HfT5Config& cfg) {
  std::vector<TensorMapping> plan;
  std::string unmapped;
  for (const auto& p : params) {
    if (p.name == "encoder.embed_tokens.weight" || p.name == "decoder.embed_tokens.weight") continue;
    if (p.name == "lm_head.weight" && cfg.tie_word_embeddings) continue;
    auto m = hf_to_t5x_name(p.name);
    if (!m) { unmapped += " " + p.name; continue; }
    plan.push_back({p.name, m->name, p.shape, maybe_t(p.shape, m->transpose), m->transpose});
  }
  if (!unmapped.empty())
    throw CheckpointError("no t5x name for Hugging Face T5 tensor(s):" + unmapped);
  return plan;
}

HostTensor transpose_2d(const HostTensor& t) {
  if (t.shape.size() != 2) throw std::invalid_argument("[transpose_2d] rank must be 2, got " + t.shape_string());
  const int64_t r = t.shape[0], c = t.shape[1];
  const size_t isz = dtype_itemsize(t.dtype);
  HostTensor o = HostTensor::zeros(t.dtype, {c, r});
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      std::memcpy(o.data.data() + (j * r + i) * isz, t.data.data() + (i * c + j) * isz, isz);
  return o;
}

NamedTensors apply_tensor_mapping(const NamedTensors& tensors, const std::vector<TensorMapping>& plan) {
  NamedTensors out;
  for (const auto& m : plan) {
    const HostTensor* src = nullptr;
    for (const auto& [n, t] : tensors) if (n == m.from) { src = &t; break; }
    if (!src) throw CheckpointError("tensor '" + m.from + "' is missing");
    if (src->shape != m.from_shape)
      throw CheckpointError("tensor '" + m.from + "' has shape " + src->shape_string() +
                            ", the mapping expected another");
    out.emplace_back(m.to, m.transpose && src->shape.size() == 2 ? transpose_2d(*src) : *src);
  }
  return out;
}

static std::vector<ParamShape> shapes_of(const NamedTensors& t) {
  std::vector<ParamShape> s;
  for (const auto& [n, x] : t) s.push_back({n, x.shape});
  return s;
}

NamedTensors t5x_params_to_hf(const NamedTensors& p) {
  return apply_tensor_mapping(p, map_t5x_to_hf(shapes_of(p)));
}

NamedTensors hf_params_to_t5x(const NamedTensors& p, const HfT5Config& cfg) {
  return apply_tensor_mapping(p, map_hf_to_t5x(shapes_of(p), cfg));
}

HfT5Config infer_hf_t5_config(const std::vector<ParamShape>& params) {
  HfT5Config c;
  auto need = [&](const std::string& n) -> const std::vector<int64_t>& {
    const auto* s = find_shape(params, n);
    if (!s) throw CheckpointError("cannot infer the T5 config: parameter '" + n + "' is missing");
    return *s;
  };
  const auto& emb = need("token_embedder/embedding");
  c.vocab_size = emb[0];
  c.d_model = emb[1];
  const auto& rel = need("encoder/relpos_bias/rel_embedding");
  c.num_heads = rel[0];
  c.relative_attention_num_buckets = rel[1];
  c.d_kv = need("encoder/layers_0/attention/query/kernel")[1] / c.num_heads;
  const bool gated = find_shape(params, "encoder/layers_0/mlp/wi_0/kernel") != nullptr;
  c.d_ff = need(gated ? "encoder/layers_0/mlp/wi_0/kernel" : "encoder/layers_0/mlp/wi/kernel")[1];
  c.feed_forward_proj = gated ? "gated-gelu" : "relu";
  c.tie_word_embeddings = find_shape(params, "decoder/logits_dense/kernel") == nullptr;
  auto count = [&](const std::string& prefix) {
    int64_t n = 0;
    while (find_shape(params, prefix + std::to_string(n) + "/pre_mlp_layer_norm/scale")) ++n;
    return n;
  };
  c.num_layers = count("encoder/layers_");
  c.num_decoder_layers = count("decoder/layers_");
  return c;
}

std::string HfT5Config::to_json() const {
  json j = {
      {"architectures", {"T5ForConditionalGeneration"}},
      {"model_type", "t5"},
      {"vocab_size", vocab_size},
      {"d_model", d_model},
      {"d_kv", d_kv},
      {"d_ff", d_ff},
      {"num_layers", num_layers},
      {"num_decoder_layers", num_decoder_layers},
      {"num_heads", num_heads},
      {"relative_attention_num_buckets", relative_attention_num_buckets},
      {"relative_attention_max_distance", relative_attention_max_distance},
      {"dropout_rate", dropout_rate},
      {"layer_norm_epsilon", layer_norm_epsilon},
      {"initializer_factor", 1.0},
      {"feed_forward_proj", feed_forward_proj},
      {"is_gated_act", is_gated_act()},
      {"dense_act_fn", dense_act_fn()},
      {"tie_word_embeddings", tie_word_embeddings},
      {"is_encoder_decoder", true},
      {"use_cache", true},
      {"pad_token_id", 0},
      {"eos_token_id", 1},
      {"decoder_start_token_id", 0},
  };
  return j.dump(2) + "\n";
}

json parse_hf_config(const std::string& text, const std::string& where, const std::string& model_type) {
  json j;
  try { j = json::parse(text); } catch (const std::exception& e) {
    throw CheckpointError(where + ": invalid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw CheckpointError(where + ": not a JSON object");
  if (j.contains("model_type") && j["model_type"] != model_type)
    throw CheckpointError(where + ": model_type " + j["model_type"].dump() + " is not \"" + model_type + "\"");
  return j;
}

HfT5Config HfT5Config::from_json(const std::string& text, const std::string& where) {
  const json j = parse_hf_config(text, where, "t5");
  HfT5Config c;
  // transformers' T5Config defaults (t5-small) for absent fields.
  c.vocab_size = 32128; c.d_model = 512; c.d_kv = 64; c.d_ff = 2048; c.num_layers = 6;
  c.num_heads = 8; c.feed_forward_proj = "relu"; c.tie_word_embeddings = true;
  try {
    // An absent (or null, for num_decoder_layers) field keeps its default.
    auto integer = [&](const char* key, int64_t dflt) { return json_int_or(j, key, dflt); };
    c.vocab_size = integer("vocab_size", c.vocab_size);
    c.d_model = integer("d_model", c.d_model);
    c.d_kv = integer("d_kv", c.d_kv);
    c.d_ff = integer("d_ff", c.d_ff);
    c.num_layers = integer("num_layers", c.num_layers);
    c.num_decoder_layers = integer("num_decoder_layers", c.num_layers);
    c.num_heads = integer("num_heads", c.num_heads);
    c.relative_attention_num_buckets = integer("relative_attention_num_buckets", 32);
    c.relative_attention_max_distance = integer("relative_attention_max_distance", 128);
    c.dropout_rate = j.value("dropout_rate", 0.1);
    c.layer_norm_epsilon = j.value("layer_norm_epsilon", 1e-6);
    c.feed_forward_proj = j.value("feed_forward_proj", c.feed_forward_proj);
    c.tie_word_embeddings = j.value("tie_word_embeddings", c.tie_word_embeddings);
  } catch (const json::exception& e) {
    throw CheckpointError(where + ": malformed T5 config (" + e.what() + ")");
  }
  return c;
}

}  // namespace t5x
