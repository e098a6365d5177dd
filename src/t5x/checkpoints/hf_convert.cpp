#include "t5x/checkpoints/hf_convert.h"

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"

namespace t5x {

namespace {

bool is_float(const std::string& d) { return d == "float32" || d == "bfloat16" || d == "float16"; }

HostTensor maybe_cast(HostTensor t, const std::string& dtype) {
  if (dtype.empty() || t.dtype == dtype || !is_float(t.dtype)) return t;
  return cast_host_tensor(t, dtype);
}

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
  if (!(c.layer_norm_epsilon > 0) || !std::isfinite(c.layer_norm_epsilon))
    throw CheckpointError(where + ": config.json's layer_norm_epsilon is " + std::to_string(c.layer_norm_epsilon) +
                          "; it must be a positive number");
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

HfExportResult export_hf_t5(const std::string& ckpt_dir, const std::string& out_dir,
                            const std::string& dtype) {
  CheckpointReader r = CheckpointReader::open(ckpt_dir);
  NamedTensors params;
  for (const auto& p : r.array_paths()) {
    if (p.rfind("target/", 0) != 0) continue;
    params.emplace_back(p.substr(7), maybe_cast(r.read(p), dtype));
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
  return res;
}

NamedTensors read_hf_tensors(const std::string& hf_dir) {
  NamedTensors hf;
  const std::string index = fileio::join(hf_dir, "model.safetensors.index.json");
  if (fileio::exists(index)) {
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
    for (const auto& f : files) {
      SafetensorsFile sf = read_safetensors(fileio::join(hf_dir, f));
      for (auto& nt : sf.tensors) hf.push_back(std::move(nt));
    }
  } else {
    SafetensorsFile sf = read_safetensors(fileio::join(hf_dir, "model.safetensors"));
    hf = std::move(sf.tensors);
  }
  return hf;
}

std::string import_hf_t5(const std::string& hf_dir, const std::string& model_dir,
                         const HfImportOptions& opt) {
  const std::string cfg_path = fileio::join(hf_dir, "config.json");
  HfT5Config cfg = HfT5Config::from_json(fileio::read_text(cfg_path), cfg_path);
  NamedTensors hf = read_hf_tensors(hf_dir);
  check_against_config(hf, cfg, hf_dir);
  // t5x has one token embedding; a stack's own copy must be shared.weight.
  const HostTensor* shared = nullptr;
  for (const auto& [n, t] : hf) if (n == "shared.weight") shared = &t;
  for (const auto& [n, t] : hf)
    if (shared && (n == "encoder.embed_tokens.weight" || n == "decoder.embed_tokens.weight") && !(t == *shared))
      throw CheckpointError(hf_dir + ": " + n + " differs from shared.weight, but t5x's T5 has one token embedding "
                            "for the encoder, the decoder (and, tied, the logits)\n  hint: transformers 5 unties "
                            "them in a model made with tie_word_embeddings=False; copy shared.weight into both "
                            "embed_tokens before save_pretrained");
  NamedTensors params = hf_params_to_t5x(hf, cfg);
  std::vector<SaveLeaf> leaves;
  for (auto& [name, t] : params) {
    HostTensor v = maybe_cast(std::move(t), opt.dtype);
    leaves.push_back(SaveLeaf::whole("target/" + name, std::move(v)));
  }
  return save_converted_checkpoint(model_dir, opt.step, std::move(leaves), opt.compressor, opt.durable);
}

}  // namespace t5x
