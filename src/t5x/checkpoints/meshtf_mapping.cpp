#include "t5x/checkpoints/meshtf_mapping.h"

#include <regex>

namespace t5x {

namespace {

// SLOT_MAP of checkpoint_importer.py; "" is the parameter itself.
std::optional<std::string> with_slot(const std::string& param, const std::string& slot) {
  if (slot.empty()) return "target/" + param;
  if (slot == "_slot_v") return "state/param_states/" + param + "/v";
  if (slot == "_slot_vr") return "state/param_states/" + param + "/v_row";
  if (slot == "_slot_vc") return "state/param_states/" + param + "/v_col";
  return std::nullopt;
}

std::string tower(const std::string& t) { return t == "transformer" ? "decoder" : t; }
std::string layer(const std::string& block) { return "layers_" + std::to_string(std::stoll(block)); }

const std::regex& re(const char* s) {
  static std::map<const char*, std::regex> cache;
  auto it = cache.find(s);
  if (it == cache.end()) it = cache.emplace(s, std::regex(s, std::regex::ECMAScript | std::regex::optimize)).first;
  return it->second;
}

}  // namespace

std::optional<std::string> meshtf_to_t5x_path(const std::string& n) {
  std::smatch m;
  if (n == "global_step") return "state/step";
  if (std::regex_match(n, m, re(R"(shared/embedding(\w*))"))) return with_slot("token_embedder/embedding", m[1]);
  if (std::regex_match(n, m, re(R"((encoder|decoder|transformer)/embedding(\w*))")))
    return with_slot(tower(m[1]) + "/token_embedder/embedding", m[2]);
  if (std::regex_match(
          n, m, re(R"((encoder|decoder|transformer)/block_(\d+)/layer_000/SelfAttention/relative_attention_bias(\w*))")))
    return with_slot(tower(m[1]) + "/" + layer(m[2]) + "/relpos_bias/rel_embedding", m[3]);
  if (std::regex_match(
          n, m, re(R"((encoder|decoder|transformer)/block_(\d+)/layer_\d+/(SelfAttention|EncDecAttention)/(q|k|v|o)(\w*))"))) {
    static const std::map<std::string, std::string> mat = {{"q", "query"}, {"k", "key"}, {"v", "value"}, {"o", "out"}};
    const std::string t = tower(m[1]);
    const std::string attn = t == "encoder" ? "attention" : m[3] == "SelfAttention" ? "self_attention" : "encoder_decoder_attention";
    return with_slot(t + "/" + layer(m[2]) + "/" + attn + "/" + mat.at(m[4]) + "/kernel", m[5]);
  }
  if (std::regex_match(
          n, m, re(R"((encoder|decoder|transformer)/block_(\d+)/layer_\d+/DenseReluDense/(wi|wo)(?:_(\d+))?/kernel(\w*))"))) {
    const std::string io = m[3].str() + (m[4].matched ? "_" + m[4].str() : "");
    return with_slot(tower(m[1]) + "/" + layer(m[2]) + "/mlp/" + io + "/kernel", m[5]);
  }
  if (std::regex_match(
          n, m, re(R"((encoder|decoder|transformer)/block_(\d+)/layer_(\d+)/(?:layer|rms)_norm/scale(\w*))"))) {
    static const std::map<std::string, std::vector<std::string>> kinds = {
        {"encoder", {"pre_attention_layer_norm", "pre_mlp_layer_norm"}},
        {"decoder", {"pre_self_attention_layer_norm", "pre_cross_attention_layer_norm", "pre_mlp_layer_norm"}},
        {"transformer", {"pre_self_attention_layer_norm", "pre_mlp_layer_norm"}}};
    const auto& k = kinds.at(m[1]);
    const long long sub = std::stoll(m[3]);
    if (sub < 0 || sub >= (long long)k.size()) return std::nullopt;  // t5x: IndexError
    return with_slot(tower(m[1]) + "/" + layer(m[2]) + "/" + k[size_t(sub)] + "/scale", m[4]);
  }
  if (std::regex_match(n, m, re(R"((encoder|decoder|transformer)/(?:final_layer|rms)_norm/scale(\w*))")))
    return with_slot(tower(m[1]) + "/" + (m[1] == "encoder" ? "encoder_norm" : "decoder_norm") + "/scale", m[2]);
  if (std::regex_match(n, m, re(R"((?:decoder|transformer)/logits/kernel(\w*))")))
    return with_slot("decoder/logits_dense/kernel", m[1]);
  return std::nullopt;
}

MeshTfImport import_meshtf(const tf::TfBundleReader& r) {
  MeshTfImport out;
  std::string unmapped;
  for (const auto& name : r.names()) {
    auto p = meshtf_to_t5x_path(name);
    if (!p) {
      unmapped += (unmapped.empty() ? "'" : ", '") + name + "'";
      continue;
    }
    if (out.source.count(*p))
      throw CheckpointError(r.index_file() + ": tensors '" + out.source[*p] + "' and '" + name +
                            "' both map to " + *p);
    out.source[*p] = name;
  }
  if (!unmapped.empty())
    throw CheckpointError(r.index_file() + ": Unmapped tensor keys exist: " + unmapped +
                          "\n  hint: t5x.cpp imports Mesh-TF T5 names (t5x checkpoint_importer.py rules); "
                          "Adafactor slots _slot_v/_slot_vr/_slot_vc only (no _slot_m)");
  for (const auto& [path, name] : out.source) {
    HostTensor t = r.read(name);
    if (path == "state/step") {
      const int64_t v = t.dtype == "int64" ? t.values<int64_t>().at(0)
                        : t.dtype == "int32" ? t.values<int32_t>().at(0)
                                             : throw CheckpointError(r.index_file() + ": global_step has dtype " + t.dtype);
      t = HostTensor::from_values<int32_t>("int32", {}, {int32_t(v)});
    }
    out.leaves.emplace(path, std::move(t));
  }
  // _maybe_correct_relpos_bias: a bias only in layers_0 is the shared one.
  static const std::regex layer_bias(R"(layers_(\d+)/relpos_bias)");
  long long max_layer = 0;
  for (const auto& [p, t] : out.leaves) {
    std::smatch m;
    if (std::regex_search(p, m, layer_bias)) max_layer = std::max(max_layer, std::stoll(m[1]));
  }
  if (max_layer == 0) {
    MeshTfImport fixed;
    for (auto& [p, t] : out.leaves) {
      const std::string q = std::regex_replace(p, std::regex(R"(layers_\d+/relpos_bias)"), "relpos_bias");
      fixed.source[q] = out.source[p];
      fixed.leaves.emplace(q, std::move(t));
    }
    out = std::move(fixed);
  }
  // _add_missing_param_states.
  std::map<std::string, HostTensor> add;
  const HostTensor zero = HostTensor::zeros("float32", {1});
  for (const auto& [p, t] : out.leaves) {
    if (p.rfind("target/", 0) != 0) continue;
    const std::string s = "state/param_states/" + p.substr(7);
    add[s + "/m"] = zero;
    if (out.leaves.count(s + "/v")) {
      add[s + "/v_row"] = zero;
      add[s + "/v_col"] = zero;
    } else if (out.leaves.count(s + "/v_row")) {
      add[s + "/v"] = zero;
    }
  }
  for (auto& [p, t] : add) {
    out.leaves[p] = std::move(t);
    out.source[p] = "";
  }
  return out;
}

}  // namespace t5x
