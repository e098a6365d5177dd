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
    // umT5: each layer's own (only with relpos_per_layer from the HF side).
    {"encoder/layers_{i}/relpos_bias/rel_embedding",
     "encoder.block.{i}.layer.0.SelfAttention.relative_attention_bias.weight", true},
    {"decoder/layers_{i}/relpos_bias/rel_embedding",
     "decoder.block.{i}.layer.0.SelfAttention.relative_attention_bias.weight", true},
    {"encoder/layers_{i}/attention/{proj}/kernel", "encoder.block.{i}.layer.0.SelfAttention.{proj}.weight", true},
    {"encoder/layers_{i}/pre_attention_layer_norm/scale", "encoder.block.{i}.layer.0.layer_norm.weight", false},
    {"encoder/layers_{i}/mlp/{mlp}/kernel", "encoder.block.{i}.layer.1.DenseReluDense.{mlp}.weight", true},
    {"encoder/layers_{i}/pre_mlp_layer_norm/scale", "encoder.block.{i}.layer.1.layer_norm.weight", false},
    {"encoder/layers_{i}/mlp/router/router_weights/w/kernel",
     "encoder.block.{i}.layer.1.DenseReluDense.router.classifier.weight", true},
    {"encoder/encoder_norm/scale", "encoder.final_layer_norm.weight", false},
    {"decoder/layers_{i}/self_attention/{proj}/kernel", "decoder.block.{i}.layer.0.SelfAttention.{proj}.weight", true},
    {"decoder/layers_{i}/pre_self_attention_layer_norm/scale", "decoder.block.{i}.layer.0.layer_norm.weight", false},
    {"decoder/layers_{i}/encoder_decoder_attention/{proj}/kernel",
     "decoder.block.{i}.layer.1.EncDecAttention.{proj}.weight", true},
    {"decoder/layers_{i}/pre_cross_attention_layer_norm/scale", "decoder.block.{i}.layer.1.layer_norm.weight", false},
    {"decoder/layers_{i}/mlp/{mlp}/kernel", "decoder.block.{i}.layer.2.DenseReluDense.{mlp}.weight", true},
    {"decoder/layers_{i}/pre_mlp_layer_norm/scale", "decoder.block.{i}.layer.2.layer_norm.weight", false},
    {"decoder/layers_{i}/mlp/router/router_weights/w/kernel",
     "decoder.block.{i}.layer.2.DenseReluDense.router.classifier.weight", true},
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

// HF -> t5x reads block i's relative_attention_bias as the stack's table
// (i = 0; T5) or as layer i's (relpos_per_layer; umT5).
std::optional<HfNameMapping> map_name(const std::string& name, bool to_hf, bool relpos_per_layer = false) {
  for (const Rule& r : kRules) {
    const std::string src = to_hf ? r.t5x : r.hf, dst = to_hf ? r.hf : r.t5x;
    const std::string t5x = r.t5x;
    if (!to_hf && t5x.ends_with("/relpos_bias/rel_embedding") &&
        (t5x.find("/layers_") != std::string::npos) != relpos_per_layer)
      continue;
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

// Switch names an MLP `.mlp.` where T5 says `.DenseReluDense.`.
std::string replace_once(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// Expert kernels: t5x <stack>/layers_i/mlp/expert/{wi,wo}/kernel <->
// HF <stack>.block.i.layer.{1|2}.mlp.experts.expert_j.{wi,wo}.weight.
const std::regex kT5xExpert(R"((encoder|decoder)/layers_(\d+)/mlp/expert/(wi|wo|wi_0|wi_1)/kernel)");
const std::regex kHfExpert(R"((encoder|decoder)\.block\.(\d+)\.layer\.(\d)\.mlp\.experts\.expert_(\d+)\.(wi|wo)\.weight)");

std::string hf_expert_name(const std::string& stack, const std::string& layer, int64_t j, const std::string& w) {
  return stack + ".block." + layer + ".layer." + (stack == "encoder" ? "1" : "2") + ".mlp.experts.expert_" +
         std::to_string(j) + "." + w + ".weight";
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

std::optional<HfNameMapping> t5x_to_hf_name(const std::string& n, bool switch_names) {
  auto m = map_name(n, true);
  if (m && switch_names) m->name = replace_once(m->name, ".DenseReluDense.", ".mlp.");
  return m;
}
std::optional<HfNameMapping> hf_to_t5x_name(const std::string& n, bool relpos_per_layer) {
  auto m = map_name(n, false, relpos_per_layer);
  if (!m && n.find(".mlp.") != std::string::npos)
    m = map_name(replace_once(n, ".mlp.", ".DenseReluDense."), false, relpos_per_layer);
  return m;
}

std::vector<TensorMapping> map_t5x_to_hf(const std::vector<ParamShape>& params) {
  std::vector<TensorMapping> plan;
  std::string unmapped;
  bool switch_names = false;
  for (const auto& p : params) switch_names |= p.name.find("/mlp/router/") != std::string::npos;
  for (const auto& p : params) {
    std::smatch e;
    if (std::regex_match(p.name, e, kT5xExpert)) {
      if (e[3] == "wi_0" || e[3] == "wi_1")
        throw CheckpointError("t5x parameter '" + p.name + "': a gated expert MLP (wi_0/wi_1) has no Hugging Face "
                              "Switch Transformers equivalent (its experts have one wi and one activation)");
      if (p.shape.size() != 3)
        throw CheckpointError("t5x parameter '" + p.name + "' has rank " + std::to_string(p.shape.size()) + ", not 3 ([expert, in, out])");
      for (int64_t j = 0; j < p.shape[0]; ++j)
        plan.push_back({p.name, hf_expert_name(e[1], e[2], j, e[3]), p.shape, {p.shape[2], p.shape[1]}, true, j});
      continue;
    }
    if (switch_names && p.name == "token_embedder/embedding")  // transformers 5 unties these unless written
      for (const char* copy : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"})
        plan.push_back({p.name, copy, p.shape, p.shape, false});
    auto m = t5x_to_hf_name(p.name, switch_names);
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
  std::map<std::string, std::set<int64_t>> experts;  // t5x kernel -> expert indices seen
  for (const auto& p : params) {
    if (p.name == "encoder.embed_tokens.weight" || p.name == "decoder.embed_tokens.weight") continue;
    if (p.name == "lm_head.weight" && cfg.tie_word_embeddings) continue;
    std::smatch e;
    if (std::regex_match(p.name, e, kHfExpert) && p.shape.size() == 2) {
      const int64_t j = std::stoll(e[4]);
      const std::string to = std::string(e[1]) + "/layers_" + std::string(e[2]) + "/mlp/expert/" + std::string(e[5]) + "/kernel";
      if (j >= cfg.num_experts)
        throw CheckpointError("Hugging Face tensor '" + p.name + "' is expert " + std::to_string(j) +
                              " but config.json has num_experts = " + std::to_string(cfg.num_experts) +
                              "\n  hint: the checkpoint and config.json disagree on the expert count");
      experts[to].insert(j);
      plan.push_back({p.name, to, p.shape, {cfg.num_experts, p.shape[1], p.shape[0]}, true, j});
      continue;
    }
    auto m = hf_to_t5x_name(p.name, cfg.relpos_per_layer);
    if (!m) { unmapped += " " + p.name; continue; }
    plan.push_back({p.name, m->name, p.shape, maybe_t(p.shape, m->transpose), m->transpose});
  }
  if (!unmapped.empty())
    throw CheckpointError("no t5x name for Hugging Face T5 tensor(s):" + unmapped);
  for (const auto& [to, seen] : experts)
    if (int64_t(seen.size()) != cfg.num_experts)
      throw CheckpointError("t5x parameter '" + to + "': the Hugging Face files hold " + std::to_string(seen.size()) +
                            " experts of this layer, config.json has num_experts = " + std::to_string(cfg.num_experts) +
                            "\n  hint: the checkpoint and config.json disagree on the expert count");
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

// One expert's [a, b] matrix inside a stacked [E, a, b] tensor.
static size_t expert_bytes(const std::vector<int64_t>& stacked, const std::string& dtype) {
  return size_t(stacked[1] * stacked[2]) * dtype_itemsize(dtype);
}

NamedTensors apply_tensor_mapping(const NamedTensors& tensors, const std::vector<TensorMapping>& plan) {
  NamedTensors out;
  std::map<std::string, size_t> stacked;  // expert kernel being assembled -> index in out
  for (const auto& m : plan) {
    const HostTensor* src = nullptr;
    for (const auto& [n, t] : tensors) if (n == m.from) { src = &t; break; }
    if (!src) throw CheckpointError("tensor '" + m.from + "' is missing");
    if (src->shape != m.from_shape)
      throw CheckpointError("tensor '" + m.from + "' has shape " + src->shape_string() +
                            ", the mapping expected another");
    if (m.expert < 0) {
      out.emplace_back(m.to, m.transpose && src->shape.size() == 2 ? transpose_2d(*src) : *src);
    } else if (src->shape.size() == 3) {  // t5x [E, a, b] -> HF expert_j [b, a]
      HostTensor slice = HostTensor::zeros(src->dtype, {src->shape[1], src->shape[2]});
      const size_t n = expert_bytes(src->shape, src->dtype);
      std::memcpy(slice.data.data(), src->data.data() + m.expert * n, n);
      out.emplace_back(m.to, transpose_2d(slice));
    } else {  // HF expert_j [b, a] -> slice j of t5x [E, a, b]
      auto it = stacked.find(m.to);
      if (it == stacked.end()) {
        it = stacked.emplace(m.to, out.size()).first;
        out.emplace_back(m.to, HostTensor::zeros(src->dtype, m.to_shape));
      }
      HostTensor& dst = out[it->second].second;
      if (dst.dtype != src->dtype)
        throw CheckpointError("tensor '" + m.from + "' is " + src->dtype + " but the other experts of '" + m.to +
                              "' are " + dst.dtype);
      const HostTensor t = transpose_2d(*src);
      const size_t n = expert_bytes(m.to_shape, src->dtype);
      std::memcpy(dst.data.data() + m.expert * n, t.data.data(), n);
    }
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
  // umT5: the layers' tables and no stack's.
  c.relpos_per_layer = !find_shape(params, "encoder/relpos_bias/rel_embedding") &&
                       find_shape(params, "encoder/layers_0/relpos_bias/rel_embedding");
  const std::string rel_name =
      c.relpos_per_layer ? "encoder/layers_0/relpos_bias/rel_embedding" : "encoder/relpos_bias/rel_embedding";
  const auto& rel = need(rel_name);
  c.num_heads = rel[0];
  c.relative_attention_num_buckets = rel[1];
  // The heads come from the relpos table; the kernels must split into them.
  const int64_t width = need("encoder/layers_0/attention/query/kernel")[1];
  if (c.num_heads < 1 || width % c.num_heads != 0)
    throw CheckpointError(rel_name + " has " + std::to_string(c.num_heads) +
                          " heads but encoder/layers_0/attention/query/kernel is " + std::to_string(width) +
                          " wide, not num_heads x head_dim\n  hint: pass the model's --gin_file, or check the checkpoint");
  c.d_kv = width / c.num_heads;
  auto count = [&](const std::string& prefix) {
    int64_t n = 0;
    while (find_shape(params, prefix + std::to_string(n) + "/pre_mlp_layer_norm/scale")) ++n;
    return n;
  };
  c.num_layers = count("encoder/layers_");
  c.num_decoder_layers = count("decoder/layers_");
  for (const char* stack : {"encoder", "decoder"}) {  // transformers' UMT5 builds a table in every layer
    const std::string owner = std::string(stack) + "/layers_";
    for (int64_t i = 0; i < (stack == std::string("encoder") ? c.num_layers : c.num_decoder_layers); ++i) {
      const std::string t = owner + std::to_string(i) + "/relpos_bias/rel_embedding";
      const bool have = find_shape(params, t) != nullptr;
      if (have != c.relpos_per_layer)
        throw CheckpointError(
            "t5x parameter '" + t + "' is " + (have ? "there" : "missing") + " but " +
            (c.relpos_per_layer ? "encoder/layers_0 has its own relative-position table (umT5)"
                                : "the stacks share one table (T5)") +
            "\n  hint: Hugging Face T5 has one table per stack, umT5 one in every layer; a mix has no equivalent");
    }
  }
  c.tie_word_embeddings = find_shape(params, "decoder/logits_dense/kernel") == nullptr;
  auto router = [&](const std::string& stack, int64_t i) {
    return find_shape(params, stack + "/layers_" + std::to_string(i) + "/mlp/router/router_weights/w/kernel");
  };
  // The MLP's d_ff from the first dense layer (the expert kernels if all are sparse).
  const char* const stacks[] = {"encoder", "decoder"};
  std::string first_mlp;
  for (const std::string stack : stacks)
    for (int64_t i = 0; first_mlp.empty() && i < (stack == "encoder" ? c.num_layers : c.num_decoder_layers); ++i)
      if (!router(stack, i)) first_mlp = stack + "/layers_" + std::to_string(i) + "/mlp/";
  const bool gated = !first_mlp.empty() && find_shape(params, first_mlp + "wi_0/kernel") != nullptr;
  if (!first_mlp.empty()) c.d_ff = need(first_mlp + (gated ? "wi_0/kernel" : "wi/kernel"))[1];
  c.feed_forward_proj = gated ? "gated-gelu" : "relu";
  bool moe = false;
  for (const auto& p : params) moe |= p.name.find("/mlp/router/") != std::string::npos;
  if (!moe) {
    if (first_mlp.empty()) need("encoder/layers_0/mlp/wi/kernel");  // no layers: the old error
    return c;
  }

  // Switch Transformers.
  if (c.relpos_per_layer)
    throw CheckpointError("a Mixture-of-Experts checkpoint with a relative-position table in each layer (umT5) has no "
                          "Hugging Face equivalent (Switch Transformers shares one table per stack)");
  c.switch_transformers = true;
  c.router_jitter_noise = 0.0;  // t5x's moe.gin (JITTER_NOISE); the gin's value when export-hf reads one
  std::string sparse_any;
  for (const std::string stack : stacks)
    for (int64_t i = 0; sparse_any.empty() && i < (stack == "encoder" ? c.num_layers : c.num_decoder_layers); ++i)
      if (router(stack, i)) sparse_any = stack + "/layers_" + std::to_string(i) + "/mlp/";
  c.num_experts = need(sparse_any + "router/router_weights/w/kernel")[1];
  if (find_shape(params, sparse_any + "expert/wi_0/kernel"))
    throw CheckpointError("t5x parameter '" + sparse_any + "expert/wi_0/kernel': a gated expert MLP (wi_0/wi_1) has "
                          "no Hugging Face Switch Transformers equivalent (its experts have one wi and one activation)");
  const int64_t expert_ff = need(sparse_any + "expert/wi/kernel")[2];
  if (first_mlp.empty()) c.d_ff = expert_ff;
  if (gated)
    throw CheckpointError("t5x parameter '" + first_mlp + "wi_0/kernel': a gated MLP has no Hugging Face Switch "
                          "Transformers equivalent (its MLPs have one wi and one activation)");
  if (expert_ff != c.d_ff)
    throw CheckpointError("t5x parameter '" + sparse_any + "expert/wi/kernel' has expert_mlp " + std::to_string(expert_ff) +
                          " but the dense MLPs have mlp_dim " + std::to_string(c.d_ff) +
                          ": Hugging Face Switch Transformers has one d_ff for both");
  // transformers places sparse layers at i % (L / n) == 1; find the n that
  // gives the checkpoint's sparse layers.
  for (const std::string stack : stacks) {
    const bool enc = stack == "encoder";
    const int64_t L = enc ? c.num_layers : c.num_decoder_layers;
    std::string have;
    int64_t count = 0;
    for (int64_t i = 0; i < L; ++i)
      if (router(stack, i)) have += (have.empty() ? "" : ", ") + std::to_string(i), ++count;
    bool found = false;
    for (int64_t k = -1; k <= L && !found; ++k) {  // the sparse count itself first
      (enc ? c.num_sparse_encoder_layers : c.num_sparse_decoder_layers) = k < 0 ? count : k;
      found = true;
      for (int64_t i = 0; i < L; ++i) found &= c.hf_sparse_layer(enc, i) == (router(stack, i) != nullptr);
    }
    if (!found)
      throw CheckpointError("the checkpoint's sparse " + stack + " layers {" + have + "} of " + std::to_string(L) +
                            " have no Hugging Face Switch Transformers placement: transformers makes layer i sparse "
                            "iff i % (num_layers / num_sparse) == 1 (every layer when that step is 1; layer 1 when "
                            "num_sparse is 0)\n  hint: t5x's MIXED layout with num_layers / num_sparse = 2 (every "
                            "other layer, from layer 1) or = 1 (all layers) converts");
  }
  return c;
}

bool HfT5Config::hf_sparse_layer(bool encoder, int64_t layer) const {
  const int64_t L = encoder ? num_layers : num_decoder_layers;
  const int64_t n = encoder ? num_sparse_encoder_layers : num_sparse_decoder_layers;
  const int64_t step = n > 0 ? L / n : L;
  return step > 0 && (step == 1 || layer % step == 1);
}

std::string HfT5Config::to_json() const {
  // nlohmann's json object keeps its keys sorted, so the order here is free.
  json j = {
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
      {"dense_act_fn", dense_act_fn()},
      {"tie_word_embeddings", tie_word_embeddings},
      {"is_encoder_decoder", true},
      {"use_cache", true},
      {"pad_token_id", 0},
      {"eos_token_id", 1},
      {"decoder_start_token_id", 0},
  };
  if (!switch_transformers) {
    j["architectures"] = {relpos_per_layer ? "UMT5ForConditionalGeneration" : "T5ForConditionalGeneration"};
    j["model_type"] = relpos_per_layer ? "umt5" : "t5";
    j["feed_forward_proj"] = feed_forward_proj;
    j["is_gated_act"] = is_gated_act();
    j["scale_decoder_outputs"] = tie_word_embeddings;  // transformers 5 reads this, not tie_word_embeddings
    return j.dump(2) + "\n";
  }
  j["architectures"] = {"SwitchTransformersForConditionalGeneration"};
  j["model_type"] = "switch_transformers";
  j["num_experts"] = num_experts;
  j["num_sparse_encoder_layers"] = num_sparse_encoder_layers;
  j["num_sparse_decoder_layers"] = num_sparse_decoder_layers;
  j["expert_capacity"] = expert_capacity;
  j["router_bias"] = false;
  j["router_dtype"] = "float32";
  j["router_jitter_noise"] = router_jitter_noise;
  j["router_ignore_padding_tokens"] = router_ignore_padding_tokens;
  j["router_z_loss_coef"] = router_z_loss_coef;
  j["router_aux_loss_coef"] = router_aux_loss_coef;
  return j.dump(2) + "\n";
}

json parse_hf_config(const std::string& text, const std::string& where, const std::string& model_type) {
  return parse_hf_config(text, where, std::vector<std::string>{model_type});
}

json parse_hf_config(const std::string& text, const std::string& where, const std::vector<std::string>& model_types) {
  json j;
  try { j = json::parse(text); } catch (const std::exception& e) {
    throw CheckpointError(where + ": invalid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw CheckpointError(where + ": not a JSON object");
  if (j.contains("model_type") &&
      std::find(model_types.begin(), model_types.end(), j["model_type"]) == model_types.end()) {
    std::string want;
    for (const auto& t : model_types) want += (want.empty() ? "\"" : " or \"") + t + "\"";
    throw CheckpointError(where + ": model_type " + j["model_type"].dump() + " is not " + want);
  }
  return j;
}

HfT5Config HfT5Config::from_json(const std::string& text, const std::string& where) {
  const json j = parse_hf_config(text, where, std::vector<std::string>{"t5", "mt5", "umt5", "switch_transformers"});
  HfT5Config c;
  const std::string model_type = j.value("model_type", "");
  c.switch_transformers = model_type == "switch_transformers";
  c.relpos_per_layer = model_type == "umt5";
  bool mt5 = model_type == "mt5";
  if (model_type.empty() && j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"]) {
      c.switch_transformers |= a == "SwitchTransformersForConditionalGeneration";
      c.relpos_per_layer |= a == "UMT5ForConditionalGeneration" || a == "UMT5Model";
      mt5 |= a == "MT5ForConditionalGeneration" || a == "MT5Model";
    }
  // transformers' T5Config defaults (t5-small) for absent fields.
  c.vocab_size = 32128; c.d_model = 512; c.d_kv = 64; c.d_ff = 2048; c.num_layers = 6;
  c.num_heads = 8; c.feed_forward_proj = "relu"; c.tie_word_embeddings = true;
  if (c.switch_transformers) {  // SwitchTransformersConfig's defaults (switch-base-8)
    c.d_model = 768; c.num_layers = 12; c.num_heads = 12;
    try {
      c.num_experts = json_int_or(j, "num_experts", 8);
      c.num_sparse_encoder_layers = json_int_or(j, "num_sparse_encoder_layers", 3);
      c.num_sparse_decoder_layers = json_int_or(j, "num_sparse_decoder_layers", 3);
      c.expert_capacity = json_int_or(j, "expert_capacity", 64);
      c.router_jitter_noise = j.value("router_jitter_noise", 0.01);
      c.router_ignore_padding_tokens = j.value("router_ignore_padding_tokens", false);
      c.router_z_loss_coef = j.value("router_z_loss_coef", 0.001);
      c.router_aux_loss_coef = j.value("router_aux_loss_coef", 0.001);
      // Its MLPs have one activation; older files also carry feed_forward_proj.
      c.feed_forward_proj = j.value("dense_act_fn", j.value("feed_forward_proj", std::string("relu")));
      if (j.value("router_bias", false))
        throw CheckpointError(where + ": router_bias = true: t5x's router (flaxformer RouterWeights, use_bias=False "
                              "in moe.gin) has no bias\n  hint: only bias-free Switch routers (router_bias false, "
                              "as every released Switch checkpoint) convert");
      const std::string router_dtype = j.value("router_dtype", std::string("float32"));
      if (router_dtype != "float32")
        throw CheckpointError(where + ": router_dtype = \"" + router_dtype + "\": t5x routes in float32 "
                              "(selective precision)\n  hint: set router_dtype to \"float32\"");
    } catch (const json::exception& e) {
      throw CheckpointError(where + ": malformed Switch Transformers config (" + e.what() + ")");
    }
    if (c.num_experts < 1)
      throw CheckpointError(where + ": num_experts = " + std::to_string(c.num_experts) + " (need at least 1)");
    if (c.is_gated_act())
      throw CheckpointError(where + ": a gated activation '" + c.feed_forward_proj +
                            "' in a Switch Transformers config (its MLPs have one wi)");
  }
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
    if (!c.switch_transformers) c.feed_forward_proj = j.value("feed_forward_proj", c.feed_forward_proj);
    c.tie_word_embeddings = j.value("tie_word_embeddings", c.tie_word_embeddings);
    c.scale_decoder_outputs = c.switch_transformers ? c.tie_word_embeddings
                              : mt5                 ? false
                                                    : j.value("scale_decoder_outputs", c.tie_word_embeddings);
  } catch (const json::exception& e) {
    throw CheckpointError(where + ": malformed T5 config (" + e.what() + ")");
  }
  return c;
}

}  // namespace t5x
