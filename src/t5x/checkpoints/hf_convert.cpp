#include "t5x/checkpoints/hf_convert.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <nlohmann/json.hpp>
#include <set>

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"

namespace t5x {

namespace {

namespace fs = std::filesystem;

bool is_float(const std::string& d) { return d == "float32" || d == "bfloat16" || d == "float16"; }

HostTensor maybe_cast(HostTensor t, const std::string& dtype) {
  if (dtype.empty() || t.dtype == dtype || !is_float(t.dtype)) return t;
  return cast_host_tensor(t, dtype);
}

void require_regular_file(const std::string& path) {
  fileio::require_regular_file(path, "give a directory with the files save_pretrained writes");
}

// An HF weight's dtype -> what import writes: floats cast to `dtype` (float64,
// which t5x's models don't use, to float32 when `dtype` is empty = keep).
HostTensor import_dtype(HostTensor t, const std::string& name, const std::string& where, const std::string& dtype) {
  if (t.dtype == "float64") {
    HostTensor f = HostTensor::zeros("float32", t.shape);
    const double* s = reinterpret_cast<const double*>(t.data.data());
    float* d = reinterpret_cast<float*>(f.data.data());
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = float(s[i]);
    t = std::move(f);
  }
  if (!is_float(t.dtype))
    throw CheckpointError(where + ": tensor '" + name + "' is " + t.dtype + ", not a float (float16, bfloat16, "
                          "float32, float64)\n  hint: quantized checkpoints are not supported; save the model in a "
                          "float dtype");
  return maybe_cast(std::move(t), dtype);
}

// float16 holds |x| < 65520 (max 65504); larger values would be written as inf.
void check_float16_range(const std::string& name, const HostTensor& t) {
  const HostTensor f = cast_host_tensor(t, "float32");
  const float* v = reinterpret_cast<const float*>(f.data.data());
  float mx = 0;
  for (int64_t i = 0; i < f.numel(); ++i) mx = std::max(mx, std::abs(v[i]));
  if (mx >= 65520.f)
    throw CheckpointError("t5x parameter '" + name + "' has max |value| " + std::to_string(mx) +
                          ", beyond float16's range (65504): it would be written as inf\n  hint: export with "
                          "--dtype=bfloat16 or float32");
}

// The tensors transformers builds for `c`, against the files: a missing one
// would be randomly initialised, an extra one ignored (or imported wrongly).
void check_tensor_names(const NamedTensors& hf, const HfT5Config& c, const std::string& where) {
  std::set<std::string> want = {"shared.weight", "encoder.final_layer_norm.weight", "decoder.final_layer_norm.weight",
                                "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                                "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"};
  const std::string relpos = ".layer.0.SelfAttention.relative_attention_bias.weight";
  // Optional: tied copies (checked against shared.weight), lm_head (see
  // resolve_logits), and the bias transformers ignores on load.
  const std::set<std::string> optional = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight",
                                          "lm_head.weight",
                                          "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"};
  if (c.switch_transformers && !c.tie_word_embeddings) want.insert("lm_head.weight");
  for (const bool enc : {true, false}) {
    const std::string stack = enc ? "encoder" : "decoder";
    for (int64_t i = 0; i < (enc ? c.num_layers : c.num_decoder_layers); ++i) {
      const std::string b = stack + ".block." + std::to_string(i) + ".layer.";
      if (c.relpos_per_layer) want.insert(stack + ".block." + std::to_string(i) + relpos);  // umT5: every layer's
      std::vector<std::string> attn = {"0.SelfAttention"};
      if (!enc) attn.push_back("1.EncDecAttention");
      for (const auto& a : attn)
        for (const char* p : {"q", "k", "v", "o"}) want.insert(b + a + "." + p + ".weight");
      const int n = enc ? 2 : 3;  // sub-layers: attention(s), MLP
      for (int k = 0; k < n; ++k) want.insert(b + std::to_string(k) + ".layer_norm.weight");
      const std::string mlp = b + std::to_string(n - 1) + (c.switch_transformers ? ".mlp." : ".DenseReluDense.");
      if (c.switch_transformers && c.hf_sparse_layer(enc, i)) {
        want.insert(mlp + "router.classifier.weight");
        for (int64_t j = 0; j < c.num_experts; ++j)
          for (const char* w : {"wi", "wo"}) want.insert(mlp + "experts.expert_" + std::to_string(j) + "." + w + ".weight");
        continue;
      }
      for (const char* w : c.is_gated_act() ? std::vector<const char*>{"wi_0", "wi_1", "wo"}
                                            : std::vector<const char*>{"wi", "wo"})
        want.insert(mlp + w + ".weight");
    }
  }
  std::set<std::string> have;
  for (const auto& [n, t] : hf) have.insert(n);
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t k = 0; k < v.size() && k < 8; ++k) s += "\n    " + v[k];
    if (v.size() > 8) s += "\n    ... (" + std::to_string(v.size() - 8) + " more)";
    return s;
  };
  std::vector<std::string> missing, extra;
  for (const auto& n : want) if (!have.count(n)) missing.push_back(n);
  for (const auto& n : have) if (!want.count(n) && !optional.count(n)) extra.push_back(n);
  if (missing.empty() && extra.empty()) return;
  std::string msg = where + ": the tensors are not the model config.json describes";
  if (!missing.empty()) msg += "\n  missing:" + list(missing);
  if (!extra.empty()) msg += "\n  unexpected:" + list(extra);
  bool mlp = false;
  for (const auto& v : {missing, extra})
    for (const auto& n : v) mlp |= std::regex_search(n, std::regex(R"(\.(wi|wi_0|wi_1)\.weight$)"));
  if (mlp)
    msg += "\n  config.json's feed_forward_proj is \"" + c.feed_forward_proj + "\" (" +
           (c.is_gated_act() ? "gated: wi_0, wi_1" : "not gated: one wi") + " per MLP)";
  // A table past block 0 where config.json says T5, or one missing where it says umT5.
  bool tables = false;
  for (const auto& v : {missing, extra})
    for (const auto& n : v) tables |= n.find(relpos) != std::string::npos;
  if (tables)
    msg += c.relpos_per_layer ? "\n  config.json says umT5 (model_type \"umt5\"): a relative_attention_bias in every block"
                              : "\n  config.json says T5 (model_type \"t5\" or \"mt5\"): one relative_attention_bias "
                                "per stack, in block 0; a table in every block is umT5 (model_type \"umt5\")";
  throw CheckpointError(msg + "\n  hint: config.json must describe the saved model (feed_forward_proj, layer counts); "
                        "re-save it with save_pretrained");
}

// What transformers computes, as t5x's logits: logits_via_embedding (shared,
// scaled by d_model^-0.5) or a logits_dense kernel (unscaled). Sets
// c.tie_word_embeddings to the former; adds lm_head.weight for the latter.
void resolve_logits(NamedTensors& hf, HfT5Config& c, const std::string& where) {
  auto find = [&](const std::string& n) -> const HostTensor* {
    for (const auto& [k, t] : hf) if (k == n) return &t;
    return nullptr;
  };
  const HostTensor* shared = find("shared.weight");
  const HostTensor* lm = find("lm_head.weight");
  if (c.scale_decoder_outputs) {
    if (lm && !(*lm == *shared))
      throw CheckpointError(where + ": lm_head.weight differs from shared.weight but config.json scales the decoder "
                            "output by d_model^-0.5 (scale_decoder_outputs, or tie_word_embeddings not false); "
                            "t5x scales only logits computed with the token embedding\n  hint: t5x cannot represent "
                            "this model; a T5.1.1 model has scale_decoder_outputs (or tie_word_embeddings) false");
    std::erase_if(hf, [](const auto& nt) { return nt.first == "lm_head.weight"; });
    c.tie_word_embeddings = true;
  } else {
    if (!lm) {  // transformers' lm_head is then shared.weight, unscaled
      HostTensor copy = *shared;
      hf.emplace_back("lm_head.weight", std::move(copy));
    }
    c.tie_word_embeddings = false;
  }
}

std::string json_number(double x) { return nlohmann::json(x).dump(); }

// Expected HF shapes from config.json, to refuse mismatched files early.
void check_against_config(const NamedTensors& hf, const HfT5Config& c, const std::string& where) {
  const int64_t inner = c.num_heads * c.d_kv;
  std::string bad;
  for (const auto& [name, t] : hf) {
    std::vector<int64_t> want;
    if (name == "shared.weight" || name == "lm_head.weight") want = {c.vocab_size, c.d_model};
    else if (name.find("relative_attention_bias") != std::string::npos)
      want = {c.relative_attention_num_buckets, c.num_heads};
    else if (name.ends_with(".q.weight") || name.ends_with(".k.weight") || name.ends_with(".v.weight"))
      want = {inner, c.d_model};
    else if (name.ends_with(".o.weight")) want = {c.d_model, inner};
    else if (name.ends_with(".router.classifier.weight")) want = {c.num_experts, c.d_model};
    else if (name.ends_with("wi.weight") || name.ends_with("wi_0.weight") || name.ends_with("wi_1.weight"))
      want = {c.d_ff, c.d_model};
    else if (name.ends_with("wo.weight")) want = {c.d_model, c.d_ff};
    else if (name.ends_with("layer_norm.weight")) want = {c.d_model};
    else continue;
    if (t.shape != want) {
      HostTensor w;
      w.shape = want;
      bad += "\n  " + name + " " + t.shape_string() + " (config.json implies " + w.shape_string() + ")";
    }
  }
  if (!bad.empty()) throw CheckpointError(where + ": tensor shapes disagree with config.json:" + bad);
  // The blocks present against num_layers / num_decoder_layers (a count that
  // disagreed imported, and a run then ignored or missed layers).
  for (const bool enc : {true, false}) {
    const std::string stack = enc ? "encoder" : "decoder";
    std::set<int64_t> blocks;
    for (const auto& [name, t] : hf)
      if (name.rfind(stack + ".block.", 0) == 0) blocks.insert(std::atoll(name.c_str() + stack.size() + 7));
    const int64_t want = enc ? c.num_layers : c.num_decoder_layers;
    const int64_t have = int64_t(blocks.size());
    const bool contiguous = blocks.empty() || (*blocks.begin() == 0 && *blocks.rbegin() == have - 1);
    if (have != want || !contiguous)
      throw CheckpointError(where + ": the tensors hold " + std::to_string(have) + " " + stack + " block(s)" +
                            (contiguous ? "" : " (not numbered 0..n-1)") + ", config.json's " +
                            (enc ? "num_layers" : "num_decoder_layers") + " is " + std::to_string(want) +
                            "\n  hint: config.json must describe the saved model; fix its layer counts");
  }
  if (std::abs(c.layer_norm_epsilon - 1e-6) > 1e-12)
    throw CheckpointError(where + ": config.json's layer_norm_epsilon is " + json_number(c.layer_norm_epsilon) +
                          ", but t5x's T5 layer norm uses 1e-6\n  hint: only models trained with "
                          "layer_norm_epsilon 1e-6 (every T5 release) convert");
  if (!c.switch_transformers) return;
  // Sparse layers where transformers would build them (hf_sparse_layer).
  std::set<std::string> routers;
  for (const auto& [name, t] : hf)
    if (name.ends_with(".router.classifier.weight")) routers.insert(name);
  for (const bool enc : {true, false})
    for (int64_t i = 0; i < (enc ? c.num_layers : c.num_decoder_layers); ++i) {
      const std::string r = std::string(enc ? "encoder" : "decoder") + ".block." + std::to_string(i) + ".layer." +
                            (enc ? "1" : "2") + ".mlp.router.classifier.weight";
      if (routers.count(r) != size_t(c.hf_sparse_layer(enc, i)))
        bad += "\n  " + r + (routers.count(r) ? " is there but" : " is missing but") + " config.json's num_sparse_" +
               (enc ? "encoder" : "decoder") + "_layers makes layer " + std::to_string(i) +
               (c.hf_sparse_layer(enc, i) ? " sparse" : " dense");
    }
  if (!bad.empty()) throw CheckpointError(where + ": sparse layers disagree with config.json:" + bad);
}

}  // namespace

// Weight files transformers could load instead of (or besides) ours; called
// after model.safetensors is written, so a stale index is still there to read.
std::vector<std::string> stale_weight_files(const std::string& dir) {
  static const std::regex kWeights(
      R"(model\.safetensors\.index\.json|model-\d+-of-\d+\.safetensors|pytorch_model\.bin(\.index\.json)?|)"
      R"(pytorch_model-\d+-of-\d+\.bin|tf_model\.h5|flax_model\.msgpack)");
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (std::regex_match(e.path().filename().string(), kWeights)) out.insert(e.path().filename().string());
  // The shards an old index names, whatever their names (a damaged index lists none).
  try {
    const auto j = nlohmann::json::parse(fileio::read_text(fileio::join(dir, "model.safetensors.index.json")));
    for (const auto& [n, f] : j.at("weight_map").items())
      if (f.is_string() && f.get<std::string>().find('/') == std::string::npos &&
          f.get<std::string>().ends_with(".safetensors") && f.get<std::string>() != "model.safetensors" &&
          fs::is_regular_file(fileio::join(dir, f.get<std::string>())))
        out.insert(f.get<std::string>());
  } catch (const std::exception&) {
  }
  return {out.begin(), out.end()};
}

HfExportResult export_hf_t5(const std::string& ckpt_dir, const std::string& out_dir,
                            const std::string& dtype, const ParamLayout& layout) {
  CheckpointReader r = CheckpointReader::open(ckpt_dir);
  NamedTensors params;
  for (const auto& p : layout.model_paths(r.array_paths())) {
    if (p.rfind("target/", 0) != 0) continue;
    const auto shape = layout.model_shape(p);
    HostTensor t = shape ? layout.read(r, p, *shape, std::nullopt) : r.read(p);
    if (dtype == "float16" && t.dtype != "float16" && is_float(t.dtype)) check_float16_range(p.substr(7), t);
    params.emplace_back(p.substr(7), maybe_cast(std::move(t), dtype));
  }
  if (params.empty()) throw CheckpointError(ckpt_dir + ": checkpoint has no target/ parameters");
  std::vector<ParamShape> shapes;
  for (const auto& [n, t] : params) shapes.push_back({n, t.shape});
  HfExportResult res;
  res.config = infer_hf_t5_config(shapes);
  NamedTensors hf = t5x_params_to_hf(params);
  for (const auto& [n, t] : hf) res.num_params += t.numel();
  res.num_tensors = int64_t(hf.size());
  fileio::make_dirs(out_dir);
  write_safetensors(fileio::join(out_dir, "model.safetensors"), hf, {{"format", "pt"}});
  fileio::write_text(fileio::join(out_dir, "config.json"), res.config.to_json(), true);
  // An older export's shards or other formats would contradict this model.
  for (const auto& f : stale_weight_files(out_dir)) {
    fileio::remove_all(fileio::join(out_dir, f));
    res.removed.push_back(f);
  }
  return res;
}

NamedTensors read_hf_tensors(const std::string& hf_dir) {
  NamedTensors hf;
  const std::string single = fileio::join(hf_dir, "model.safetensors");
  const std::string index = fileio::join(hf_dir, "model.safetensors.index.json");
  // transformers' order: model.safetensors, else the sharded index.
  if (fileio::exists(single) || !fileio::exists(index)) {
    require_regular_file(single);
    return read_safetensors(single).tensors;
  }
  require_regular_file(index);
  nlohmann::json j;
  try { j = nlohmann::json::parse(fileio::read_text(index)); } catch (const std::exception& e) {
    throw CheckpointError(index + ": invalid JSON (" + e.what() + ")");
  }
  // weight_map: {tensor name: shard file in hf_dir}, as save_pretrained writes it.
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object() || j["weight_map"].empty())
    throw CheckpointError(index + ": no \"weight_map\" object of tensor name -> shard file"
                          "\n  hint: re-save the model with save_pretrained(dir, safe_serialization=True)");
  std::set<std::string> files;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string() || file.get<std::string>().empty() ||
        file.get<std::string>().find('/') != std::string::npos || file.get<std::string>() == "..")
      throw CheckpointError(index + ": weight_map[\"" + name + "\"] is " + file.dump() +
                            ", not the file name of a shard in " + hf_dir);
    files.insert(file.get<std::string>());
  }
  std::map<std::string, std::string> shard_of;  // tensor -> shard file
  for (const auto& f : files) {
    const std::string path = fileio::join(hf_dir, f);
    require_regular_file(path);
    SafetensorsFile sf = read_safetensors(path);
    for (auto& nt : sf.tensors) {
      if (auto [it, fresh] = shard_of.emplace(nt.first, f); !fresh)
        throw CheckpointError(index + ": tensor '" + nt.first + "' is in two shards, " + it->second + " and " + f +
                              "\n  hint: re-save the model with save_pretrained (each tensor in one shard)");
      hf.push_back(std::move(nt));
    }
  }
  return hf;
}

std::string import_hf_t5(const std::string& hf_dir, const std::string& model_dir, const HfImportOptions& opt,
                         HfT5Config* resolved) {
  const std::string cfg_path = fileio::join(hf_dir, "config.json");
  require_regular_file(cfg_path);
  HfT5Config cfg = HfT5Config::from_json(fileio::read_text(cfg_path), cfg_path);
  NamedTensors hf = read_hf_tensors(hf_dir);
  check_against_config(hf, cfg, hf_dir);
  check_tensor_names(hf, cfg, hf_dir);
  // transformers ignores this bias on load (T5's _keys_to_ignore_on_load_unexpected).
  std::erase_if(hf, [](const auto& nt) {
    return nt.first == "decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight";
  });
  for (auto& [n, t] : hf) t = import_dtype(std::move(t), n, hf_dir, opt.dtype);
  // t5x has one token embedding; a stack's own copy must be shared.weight.
  const HostTensor* shared = nullptr;
  for (const auto& [n, t] : hf) if (n == "shared.weight") shared = &t;
  for (const auto& [n, t] : hf)
    if (shared && (n == "encoder.embed_tokens.weight" || n == "decoder.embed_tokens.weight") && !(t == *shared))
      throw CheckpointError(hf_dir + ": " + n + " differs from shared.weight, but t5x's T5 has one token embedding "
                            "for the encoder, the decoder (and, tied, the logits)\n  hint: transformers 5 unties "
                            "them in a model made with tie_word_embeddings=False; copy shared.weight into both "
                            "embed_tokens before save_pretrained");
  resolve_logits(hf, cfg, hf_dir);
  NamedTensors params = hf_params_to_t5x(hf, cfg);
  std::vector<SaveLeaf> leaves;
  for (auto& [name, t] : params) leaves.push_back(SaveLeaf::whole("target/" + name, std::move(t)));
  if (resolved) *resolved = cfg;
  return save_converted_checkpoint(model_dir, opt.step, std::move(leaves), opt.compressor, opt.durable);
}

}  // namespace t5x
