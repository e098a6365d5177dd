#include "ckpt_cmd.h"

#include <filesystem>
#include <iostream>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <unistd.h>

#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/gqa_convert.h"
#include "t5x/checkpoints/hf_convert.h"
#include "t5x/checkpoints/inspect.h"
#include "t5x/checkpoints/meshtf_mapping.h"
#include "t5x/checkpoints/tf_bundle.h"
#include "t5x/checkpoints/tf_convert.h"
#include "t5x/checkpoints/upcycle.h"
#include "t5x/gin/flags.h"
#include "t5x/models/gin_model.h"
#include "t5x/trainer/train_state.h"

namespace t5x::cli {

namespace fs = std::filesystem;

const char* const kCkptUsage =
    "usage: t5x ckpt info PATH [--digest | --digest_only] [--verify=checksums|sizes|decode|none] [--threads=N]\n"
    "       t5x ckpt export-hf CKPT OUT [--dtype=float32|bfloat16|float16] [--feed_forward_proj=P]\n"
    "           [--relative_attention_max_distance=N] [--dropout_rate=X] [--expert_capacity=N]\n"
    "           [--gin_file=F ...] [--gin.NAME=V ...]\n"
    "       t5x ckpt import-hf HF_DIR MODEL_DIR [--step=N] [--dtype=float32|bfloat16|float16|keep]\n"
    "           [--compressor=gzip|zstd|raw]\n"
    "       t5x ckpt import-tf PREFIX MODEL_DIR [--step=N] [--dtype=float32|bfloat16|float16|keep] [--compressor=gzip|zstd|raw]\n"
    "       t5x ckpt convert-gqa CKPT MODEL_DIR --num_kv_heads=G [--encoder_num_kv_heads=E] [--num_heads=H]\n"
    "           [--step=N] [--compressor=gzip|zstd|raw] [--gin_file=F ...] [--gin.NAME=V ...]\n"
    "       t5x ckpt upcycle --gin_file=MOE_MODEL_GIN --checkpoint_dir=CKPT --output_dir=MODEL_DIR [--step=N]\n"
    "           [--num_experts=E] [--seed=S] [--compressor=gzip|zstd|raw] [--gin.NAME=V ...]\n"
    "  info       arrays with dtypes, shapes (logical axes from model-info.txt), sizes and storage;\n"
    "             --digest adds a 64-bit FNV-1a hash of every array (--digest_only: just path dtype shape hash);\n"
    "             first verifies the checkpoint (default: sizes and CRC-32C of manifest.t5xcpp.json) and\n"
    "             exits 1 naming the damaged file\n"
    "  export-hf  model.safetensors + config.json with Hugging Face T5 names (T5ForConditionalGeneration);\n"
    "             the config comes from --gin_file, else MODEL_DIR/config.gin, else the shapes\n"
    "             (gated MLP -> T5.1.1 'gated-gelu', plain -> T5.1.0 'relu'); flags override; a checkpoint with\n"
    "             MoE layers exports as SwitchTransformersForConditionalGeneration (--expert_capacity: its\n"
    "             per-sequence capacity, default 64)\n"
    "  import-hf  config.json + model.safetensors -> MODEL_DIR/checkpoint_<step> and MODEL_DIR/model.gin\n"
    "             (T5 or Switch Transformers)\n"
    "  import-tf  a TensorFlow Mesh-TF T5 checkpoint (PREFIX.index + PREFIX.data-*) -> MODEL_DIR/checkpoint_<step>\n"
    "             (t5x's checkpoint_importer names) and MODEL_DIR/model.gin; step defaults to global_step\n"
    "  convert-gqa  grouped-query uptraining (Ainslie et al.): the decoder's key / value kernels (and the\n"
    "             encoder's with --encoder_num_kv_heads) mean-pooled over each group of num_heads/G heads, the rest\n"
    "             copied, the optimizer state dropped, the step kept -> MODEL_DIR/checkpoint_<step>; num_heads from\n"
    "             --num_heads, --gin_file, else CKPT's MODEL_DIR/config.gin; train it with\n"
    "             --gin.network.T5Config.num_kv_heads=G\n"
    "  upcycle    sparse upcycling (Komatsuzaki et al.; t5x UpcycleCheckpointer): the dense checkpoint as the\n"
    "             MoE model of the gin: each sparse layer's experts E copies of its dense MLP kernels, routers\n"
    "             fresh (normal 0.02, --seed), the rest copied, the optimizer state dropped, the step kept\n"
    "             (--step=0 restarts the schedule) -> MODEL_DIR/checkpoint_<step>; --num_experts, when given,\n"
    "             must equal the gin's\n"
    "  info PREFIX lists a TensorFlow checkpoint: names, dtypes, shapes, shards, CRC status, t5x paths\n"
    "  PREFIX may be a directory with TensorFlow's `checkpoint` state file (its newest checkpoint)\n"
    "  PATH/CKPT is a checkpoint_<step> directory or a MODEL_DIR (its newest complete checkpoint)\n";

namespace {

struct Args {
  std::vector<std::string> pos;
  std::map<std::string, std::string> opt;  // --key=value / --flag ("")
  gin::GinFlags gin;
};

Args parse(const std::vector<std::string>& in) {
  Args a;
  std::vector<std::string> rest;
  a.gin = gin::parse_gin_flags(in, &rest);
  for (const auto& s : rest) {
    if (s.rfind("--", 0) == 0) {
      auto eq = s.find('=');
      if (eq == std::string::npos) a.opt[s.substr(2)] = "";
      else a.opt[s.substr(2, eq - 2)] = s.substr(eq + 1);
    } else {
      a.pos.push_back(s);
    }
  }
  return a;
}

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void allow_only(const Args& a, std::initializer_list<const char*> names, size_t npos, bool gin_ok = false) {
  for (const auto& [k, v] : a.opt) {
    bool ok = false;
    for (const char* n : names) ok = ok || k == n;
    if (!ok) throw Usage("unknown option --" + k);
  }
  if (!gin_ok && (!a.gin.files.empty() || !a.gin.bindings.empty())) throw Usage("gin flags are not used here");
  if (a.pos.size() != npos) throw Usage("expected " + std::to_string(npos) + " path(s), got " + std::to_string(a.pos.size()));
}

int64_t to_int(const std::string& flag, const std::string& v) {
  try {
    size_t n = 0;
    int64_t x = std::stoll(v, &n);
    if (n == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw Usage("--" + flag + " needs an integer, got '" + v + "'");
}

double to_double(const std::string& flag, const std::string& v) {
  try {
    size_t n = 0;
    double x = std::stod(v, &n);
    if (n == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw Usage("--" + flag + " needs a number, got '" + v + "'");
}

std::string shape_text(const std::vector<int64_t>& s) {
  HostTensor t;
  t.shape = s;
  return t.shape_string();
}

// `t5x ckpt info PREFIX` of a TensorFlow checkpoint: every tensor is read and
// its CRC checked. Exit 1 when any tensor cannot be read.
int cmd_info_tf(const std::string& prefix, std::ostream& out) {
  tf::TfBundleReader r = tf::TfBundleReader::open(prefix);
  out << "TensorFlow checkpoint " << prefix << ": " << r.names().size() << " tensors in " << r.num_shards()
      << " shard(s); index " << r.num_blocks() << " block(s) read, CRCs ok"
      << (r.had_snappy_block() ? ", snappy-compressed" : "") << "\n";
  int ok = 0;
  std::map<std::string, int> problems;
  for (const auto& n : r.names()) {
    const tf::TfEntry& e = r.entry(n);
    auto p = meshtf_to_t5x_path(n);
    std::string status = "crc ok";
    if (auto err = r.verify(n)) {
      const std::string first = err->substr(0, err->find('\n'));
      status = first.find(": missing") != std::string::npos ? "not checked (" + first.substr(0, first.find(" (")) + ")"
                                                            : "BAD: " + first;
      ++problems[status.rfind("BAD", 0) == 0 ? "bad" : first.substr(0, first.find(':'))];
    } else {
      ++ok;
    }
    out << n << " " << (e.dtype.empty() ? "tf_dtype_" + std::to_string(e.tf_dtype) : e.dtype) << " "
        << shape_text(e.shape) << " shard " << e.shard_id;
    if (e.slices.empty()) out << " offset " << e.offset << " size " << e.size;
    else out << " in " << e.slices.size() << " slices";
    out << " " << status << " -> " << (p ? *p : std::string("<unmapped>")) << "\n";
  }
  out << ok << " of " << r.names().size() << " tensors read with matching CRCs";
  for (const auto& [what, n] : problems)
    out << "; " << n << (what == "bad" ? " damaged" : " not checked: " + what + " missing");
  out << "\n";
  return ok == int(r.names().size()) ? 0 : 1;
}

int cmd_info(const Args& a, std::ostream& out) {
  allow_only(a, {"digest", "digest_only", "threads", "verify"}, 1);
  if (auto prefix = tf::tf_checkpoint_prefix(a.pos[0])) {
    if (!a.opt.empty()) throw Usage("--digest / --threads / --verify apply to t5x checkpoints; import-tf first");
    return cmd_info_tf(*prefix, out);
  }
  InspectOptions o;
  if (a.opt.count("verify")) {
    const std::string v = a.opt.at("verify");
    if (v == "none") o.verify.reset();
    else if (!(o.verify = parse_verify(v))) throw Usage("--verify must be checksums, sizes, decode or none, got '" + v + "'");
  }
  o.digest = a.opt.count("digest") || a.opt.count("digest_only");
  if (a.opt.count("threads")) {
    const int64_t t = to_int("threads", a.opt.at("threads"));
    if (t < 1 || t > 1024) throw Usage("--threads must be in [1, 1024], got " + std::to_string(t));
    o.num_threads = int(t);
  }
  CheckpointInventory inv = inspect_checkpoint(a.pos[0], o);
  out << (a.opt.count("digest_only") ? format_digests(inv) : format_inventory(inv));
  return 0;
}

// The model of --gin_file, else of CKPT's MODEL_DIR/config.gin; nullopt
// when neither is there or config.gin cannot be read (a note on `err`).
std::optional<ModelConfig> model_from_gin(const Args& a, const std::string& ckpt_dir, std::string* source,
                                          std::ostream& err,
                                          const char* fallback = "the config comes from the parameter shapes") {
  gin::GinFlags flags = a.gin;
  if (flags.files.empty()) {
    const std::string cg = (fs::path(ckpt_dir).parent_path() / "config.gin").string();
    if (!fileio::exists(cg)) return std::nullopt;
    if (!flags.bindings.empty()) throw Usage("--gin.NAME / --gin_bindings need a --gin_file");
    flags.files = {cg};
  }
  try {
    gin::Config cfg = gin::load_gin_config(flags, &gin::Registry::global(), /*skip_unknown=*/true);
    // Model gins leave DROPOUT_RATE to the run file; only config.json's
    // dropout_rate depends on it, so transformers' default fills the gap.
    for (const auto& m : cfg.missing_macros())
      if (m.name == "DROPOUT_RATE") {
        flags.bindings.push_back({"DROPOUT_RATE = 0.1", "<export-hf default>"});
        cfg = gin::load_gin_config(flags, &gin::Registry::global(), true);
        break;
      }
    ModelConfig spec = read_model_config(cfg);
    *source = flags.files.front();
    return spec;
  } catch (const std::exception& e) {
    if (!a.gin.files.empty()) throw;  // the user asked for these files
    err << "note: could not read the model from " << flags.files.front() << " (" << e.what()
        << "); " << fallback << "\n";
    return std::nullopt;
  }
}

// A Switch export's gin must describe the checkpoint's experts and route
// as transformers does (top-1 tokens-choose); copies its router settings.
void check_switch_export(const T5Config& t5, HfT5Config& c, const std::string& gin_source, const std::string& ckpt) {
  if (!c.switch_transformers && !t5.is_moe()) return;
  if (c.switch_transformers != t5.is_moe())
    throw CheckpointError(gin_source + " does not describe " + ckpt + ": " +
                          (t5.is_moe() ? "it configures MoE layers but the checkpoint has no router kernels"
                                       : "the checkpoint has MoE layers but it configures none (num_experts)") +
                          "\n  hint: pass the model's --gin_file (and --gin.network.T5Config.* overrides)");
  const nn::MoeConfig& m = t5.moe;
  if (m.num_experts != c.num_experts)
    throw CheckpointError(gin_source + " does not describe " + ckpt + ": num_experts " + std::to_string(m.num_experts) +
                          " in gin, " + std::to_string(c.num_experts) + " in the checkpoint");
  for (const bool enc : {true, false})
    for (int64_t i = 0; i < (enc ? c.num_layers : c.num_decoder_layers); ++i)
      if (t5.sparse_layer(enc, i) != c.hf_sparse_layer(enc, i))
        throw CheckpointError(gin_source + " does not describe " + ckpt + ": it makes " + (enc ? "encoder" : "decoder") +
                              " layer " + std::to_string(i) + (t5.sparse_layer(enc, i) ? " sparse" : " dense") +
                              ", the checkpoint's is not");
  if (m.router == nn::RouterType::kExpertsChooseMasked || m.num_selected_experts != 1)
    throw CheckpointError(gin_source + ": " +
                          (m.router == nn::RouterType::kExpertsChooseMasked
                               ? std::string("experts-choose routing")
                               : "top-" + std::to_string(m.num_selected_experts) + " routing") +
                          " has no Hugging Face Switch Transformers equivalent (tokens choose their top-1 expert)");
  c.router_jitter_noise = m.jitter_noise;
}

int cmd_export(const Args& a, std::ostream& out, std::ostream& err) {
  allow_only(a, {"dtype", "feed_forward_proj", "relative_attention_max_distance", "dropout_rate", "expert_capacity"}, 2, true);
  std::string note;
  const std::string ckpt = resolve_checkpoint_path(a.pos[0], &note);
  if (!note.empty()) err << note;
  const std::string out_dir = a.pos[1];
  const std::string dtype = a.opt.count("dtype") ? a.opt.at("dtype") : "float32";
  if (dtype != "float32" && dtype != "bfloat16" && dtype != "float16")
    throw Usage("--dtype must be float32, bfloat16 or float16");

  // Shapes first (cheap: msgpack + .zarray), so a bad config fails before writing.
  CheckpointReader r = CheckpointReader::open(ckpt);
  std::string gin_source;
  std::optional<T5Config> t5;
  ParamLayout layout;  // scalable_t5's stacked layers and split heads, read as the model's own
  if (auto m = model_from_gin(a, ckpt, &gin_source, err)) {
    if (m->decoder_only)
      throw CheckpointError(gin_source + ": configures a decoder-only model; Hugging Face T5 export needs an encoder-decoder");
    t5 = m->network;
    layout = trainer::checkpoint_layout(*make_model(*m), nullptr);
  }
  std::vector<ParamShape> shapes;
  for (const auto& p : layout.model_paths(r.array_paths()))
    if (p.rfind("target/", 0) == 0) {
      const auto relaid = layout.model_shape(p);
      shapes.push_back({p.substr(7), relaid ? *relaid : r.info(p).shape});
    }
  if (shapes.empty()) throw CheckpointError(ckpt + ": checkpoint has no target/ parameters");
  for (const auto& p : shapes) {  // t5x's scalable_t5 layout, which the model's gin does not read (or no gin)
    const bool stacked = p.name.starts_with("encoder/encoder/") || p.name.starts_with("decoder/decoder/");
    if (!stacked && !((p.name.ends_with("/query/kernel") || p.name.ends_with("/out/kernel")) && p.shape.size() == 3))
      continue;
    const std::string what = ckpt + ": `target/" + p.name + "` " + shape_text(p.shape) +
                             " is in t5x's scalable_t5 layout (" +
                             (stacked ? "layers stacked by scan_layers" : "heads split") + ")";
    if (!t5)
      throw CheckpointError(what + "\n  hint: pass the model's scalable_t5 --gin_file (with its scan_layers and "
                                   "param_scan_axis), which says how to read it");
    // The per-layer leaf the gin's model reads there, and what the checkpoint says of it.
    const std::string at = stacked ? p.name.substr(0, p.name.find('/')) + "/layers_0/" +
                                         p.name.substr(2 * p.name.find('/') + 2)
                                   : p.name;
    const std::string h = layout.hint(r, "target/" + at);
    throw CheckpointError(what + ", which " + gin_source + " does not read" + (h.empty() ? "" : "\n  hint: " + h));
  }
  for (const auto& p : shapes)  // grouped K/V kernels [embed, kv_heads, kv] (convert-gqa, num_kv_heads)
    if (p.shape.size() == 3 && p.name.find("/mlp/expert/") == std::string::npos)  // not [expert, ...]
      throw CheckpointError(ckpt + ": `target/" + p.name + "` has shape " + shape_text(p.shape) +
                            ": grouped-query / multi-query attention has no Hugging Face T5 equivalent");
  for (const auto& p : shapes)  // encoder_mixing = 'linear'
    if (p.name.find("/mixing/seq/kernel") != std::string::npos)
      throw CheckpointError(ckpt + ": `target/" + p.name +
                            "` belongs to a linear-mixing (Sparse Mixer) encoder, which has no Hugging Face T5 equivalent");
  for (const auto& p : shapes)  // encoder_mixing = 'fourier'
    if (p.name.find("/pre_mixing_layer_norm/") != std::string::npos)
      throw CheckpointError(ckpt + ": `target/" + p.name +
                            "` belongs to a Fourier-mixing (FNet) encoder, which has no Hugging Face T5 equivalent");
  HfT5Config c = infer_hf_t5_config(shapes);
  c.feed_forward_proj = c.is_gated_act() ? "gated-gelu" : "relu";
  c.dropout_rate = 0.1;
  std::string source = "parameter shapes (" + std::string(c.is_gated_act() ? "T5.1.1 gated-gelu" : "T5.1.0 relu") +
                       (c.relpos_per_layer ? ", a relative position table in each layer: umT5" : "") + ")";

  if (t5) {
    std::string bad;
    auto check = [&](const char* what, int64_t from_gin, int64_t from_ckpt) {
      if (from_gin != from_ckpt)
        bad += std::string("\n  ") + what + ": " + std::to_string(from_gin) + " in gin, " + std::to_string(from_ckpt) + " in the checkpoint";
    };
    check("vocab_size", t5->vocab_size, c.vocab_size);
    check("emb_dim", t5->emb_dim, c.d_model);
    check("num_heads", t5->num_heads, c.num_heads);
    check("head_dim", t5->head_dim, c.d_kv);
    check("mlp_dim", t5->mlp_dim, c.d_ff);
    check("num_encoder_layers", t5->num_encoder_layers, c.num_layers);
    check("num_decoder_layers", t5->num_decoder_layers, c.num_decoder_layers);
    auto check_bool = [&](const char* what, bool from_gin, bool from_ckpt) {
      if (from_gin != from_ckpt)
        bad += std::string("\n  ") + what + ": " + (from_gin ? "True" : "False") + " in gin, " +
               (from_ckpt ? "True" : "False") + " in the checkpoint";
    };
    check_bool("logits_via_embedding", t5->logits_via_embedding, c.tie_word_embeddings);
    check_bool("relpos_per_layer", t5->relpos_per_layer, c.relpos_per_layer);
    if (!bad.empty())
      throw CheckpointError(gin_source + " does not describe " + ckpt + ":" + bad +
                            "\n  hint: pass the model's --gin_file (and --gin.network.T5Config.* overrides)");
    if (t5->attention().grouped() || t5->encoder_attention().grouped())
      throw CheckpointError(gin_source + ": multi-query / grouped-query attention has no Hugging Face T5 equivalent");
    if (t5->scale_attn_logits)
      throw CheckpointError(gin_source + ": scale_attn_logits = True (t5x/contrib/gpu's 1/sqrt(head_dim) on the "
                            "attention logits) has no Hugging Face T5 equivalent");
    check_switch_export(*t5, c, gin_source, ckpt);
    c.feed_forward_proj = feed_forward_proj_from_activations(t5->mlp_activations);
    c.dropout_rate = t5->dropout_rate;
    c.relative_attention_max_distance = t5->relpos.max_distance;
    source = gin_source;
  }
  if (a.opt.count("feed_forward_proj")) {
    c.feed_forward_proj = a.opt.at("feed_forward_proj");
    source += ", --feed_forward_proj";
  }
  if (a.opt.count("relative_attention_max_distance"))
    c.relative_attention_max_distance = to_int("relative_attention_max_distance", a.opt.at("relative_attention_max_distance"));
  if (a.opt.count("dropout_rate")) c.dropout_rate = to_double("dropout_rate", a.opt.at("dropout_rate"));
  if (a.opt.count("expert_capacity")) {
    if (!c.switch_transformers) throw Usage("--expert_capacity applies to MoE (Switch Transformers) checkpoints only");
    c.expert_capacity = to_int("expert_capacity", a.opt.at("expert_capacity"));
  }
  const bool gated_params = infer_hf_t5_config(shapes).is_gated_act();
  if (c.is_gated_act() != gated_params)
    throw CheckpointError("feed_forward_proj '" + c.feed_forward_proj + "' is " + (c.is_gated_act() ? "" : "not ") +
                          "gated but the checkpoint's MLP has " + (gated_params ? "wi_0/wi_1" : "a single wi") +
                          "\n  hint: use a " + (gated_params ? "'gated-*'" : "non-gated") + " --feed_forward_proj");
  (void)dense_act_fn(c.feed_forward_proj);  // validates the name
  // Values transformers (and import-hf) take: nan was written as null.
  if (!(c.dropout_rate >= 0 && c.dropout_rate < 1))
    throw Usage("--dropout_rate must be in [0, 1), got " + std::to_string(c.dropout_rate));
  if (c.relative_attention_max_distance < 1)
    throw Usage("--relative_attention_max_distance must be >= 1, got " +
                std::to_string(c.relative_attention_max_distance));
  {
    std::error_code ec;
    if (fs::equivalent(ckpt, out_dir, ec))
      throw Usage("the output directory is the checkpoint itself (" + out_dir +
                  "); give the Hugging Face model its own directory");
  }

  HfExportResult res = export_hf_t5(ckpt, out_dir, dtype, layout);
  nlohmann::json j = nlohmann::json::parse(c.to_json());
  j["dense_act_fn"] = dense_act_fn(c.feed_forward_proj);
  j["torch_dtype"] = dtype;
  fileio::write_text(fileio::join(out_dir, "config.json"), j.dump(2) + "\n", true);
  out << "exported " << ckpt << " (step " << (r.step() ? std::to_string(*r.step()) : "?") << ") to " << out_dir
      << ": model.safetensors (" << res.num_tensors << " tensors, " << res.num_params << " parameters, " << dtype
      << "), config.json (" << (c.switch_transformers ? "Switch Transformers, dense_act_fn '"
                                : c.relpos_per_layer ? "umT5, feed_forward_proj '"
                                                     : "feed_forward_proj '")
      << c.feed_forward_proj << "', tie_word_embeddings " << (c.tie_word_embeddings ? "true" : "false");
  if (c.switch_transformers)
    out << ", " << c.num_experts << " experts, num_sparse_encoder_layers " << c.num_sparse_encoder_layers
        << ", num_sparse_decoder_layers " << c.num_sparse_decoder_layers << ", expert_capacity " << c.expert_capacity;
  out << "; from " << source << ")\n";
  for (const auto& f : res.removed) out << "removed " << fileio::join(out_dir, f) << " (an older export's weights)\n";
  return 0;
}

// --step, --dtype and --compressor of import-hf and import-tf.
template <typename Options>
void read_import_flags(const Args& a, Options& o) {
  if (a.opt.count("step")) o.step = to_int("step", a.opt.at("step"));
  if (a.opt.count("dtype")) o.dtype = a.opt.at("dtype") == "keep" ? "" : a.opt.at("dtype");
  if (!o.dtype.empty() && o.dtype != "float32" && o.dtype != "bfloat16" && o.dtype != "float16")
    throw Usage("--dtype must be float32, bfloat16, float16 or keep");
  if (a.opt.count("compressor")) {
    const std::string& z = a.opt.at("compressor");
    if (z == "raw") o.compressor = {"", 1};
    else if (z == "gzip" || z == "zstd") o.compressor = {z, 1};
    else throw Usage("--compressor must be gzip, zstd or raw");
  }
}

int cmd_import(const Args& a, std::ostream& out) {
  allow_only(a, {"step", "dtype", "compressor"}, 2);
  const std::string hf_dir = a.pos[0], model_dir = a.pos[1];
  HfImportOptions o;
  read_import_flags(a, o);
  if (!fileio::is_dir(hf_dir))
    throw CheckpointError(hf_dir + ": no such directory\n  hint: give a Hugging Face model directory with config.json and model.safetensors");
  const std::string cfg_path = fileio::join(hf_dir, "config.json");
  fileio::require_regular_file(cfg_path, "a Hugging Face T5 directory holds config.json and model.safetensors (save_pretrained)");
  if (!fileio::exists(fileio::join(hf_dir, "model.safetensors")) &&
      !fileio::exists(fileio::join(hf_dir, "model.safetensors.index.json"))) {
    std::string hint = fileio::exists(fileio::join(hf_dir, "pytorch_model.bin"))
                           ? "only pytorch_model.bin is there; re-save with save_pretrained(dir, safe_serialization=True)"
                           : "save the model with save_pretrained(dir, safe_serialization=True)";
    throw CheckpointError(fileio::join(hf_dir, "model.safetensors") + ": missing\n  hint: " + hint);
  }
  HfT5Config c = HfT5Config::from_json(fileio::read_text(cfg_path), cfg_path);
  bool approx = false;
  (void)activations_from_feed_forward_proj(c.feed_forward_proj, &approx);
  if (c.relative_attention_max_distance != 128 || c.relative_attention_num_buckets != 32)
    throw CheckpointError(cfg_path + ": relative attention with " + std::to_string(c.relative_attention_num_buckets) +
                          " buckets / max distance " + std::to_string(c.relative_attention_max_distance) +
                          " is not what t5x's T5 uses (32 / 128)");
  if (c.switch_transformers) {  // refuse placements t5x can't express before writing anything
    (void)sparse_layout_for_hf_config(c, true, cfg_path);
    (void)sparse_layout_for_hf_config(c, false, cfg_path);
  }
  HfT5Config resolved;  // c with the logits transformers computes
  const std::string dir = import_hf_t5(hf_dir, model_dir, o, &resolved);
  const std::string gin_path = fileio::join(model_dir, "model.gin");
  fileio::write_text(gin_path, model_gin_for_hf_config(resolved, cfg_path), true);
  out << "imported " << hf_dir << " into " << dir << " (step " << o.step << ")\n"
      << "model gin: " << gin_path << " (use --gin_file=" << gin_path << " --gin_search_paths=configs/models)\n";
  if (approx)
    out << "note: feed_forward_proj 'gelu' is the exact (erf) GELU; t5x's gelu is the tanh form, so outputs differ slightly\n";
  return 0;
}

int cmd_import_tf(const Args& a, std::ostream& out) {
  allow_only(a, {"step", "dtype", "compressor"}, 2);
  const std::string model_dir = a.pos[1];
  const std::string prefix = tf::tf_checkpoint_prefix(a.pos[0]).value_or(a.pos[0]);
  TfImportOptions o;
  read_import_flags(a, o);
  if (!tf::is_tf_checkpoint(prefix))
    throw CheckpointError(prefix + ".index: missing\n  hint: give the checkpoint prefix, e.g. .../model.ckpt-1000000 "
                          "(the files are PREFIX.index and PREFIX.data-*-of-*)");
  TfImportResult res = import_tf_checkpoint(prefix, model_dir, o);
  // The model gin, from the parameter shapes (T5.1.1 when wi_0/wi_1, untied logits).
  CheckpointReader ck = CheckpointReader::open(res.dir);
  std::vector<ParamShape> shapes;
  for (const auto& p : ck.array_paths())
    if (p.rfind("target/", 0) == 0) shapes.push_back({p.substr(7), ck.info(p).shape});
  HfT5Config c = infer_hf_t5_config(shapes);
  c.feed_forward_proj = c.is_gated_act() ? "gated-gelu" : "relu";
  const std::string gin_path = fileio::join(model_dir, "model.gin");
  fileio::write_text(gin_path, model_gin_for_hf_config(c, prefix), true);
  out << "imported " << prefix << " into " << res.dir << " (step " << res.step << "): " << res.num_params
      << " parameters, " << res.num_slots << " Adafactor slots, " << res.num_placeholders << " placeholders\n"
      << "model gin: " << gin_path << " (from the shapes: " << (c.is_gated_act() ? "T5.1.1 gated-gelu, untied" : "T5.1.0 relu")
      << (c.tie_word_embeddings ? ", tied logits" : "") << (c.relpos_per_layer ? ", a relative position table in each layer" : "")
      << "; use --gin_file=" << gin_path
      << " --gin_search_paths=configs/models)\n";
  return 0;
}

int cmd_convert_gqa(const Args& a, std::ostream& out, std::ostream& err) {
  allow_only(a, {"num_kv_heads", "encoder_num_kv_heads", "num_heads", "step", "compressor"}, 2, true);
  std::string note;
  const std::string ckpt = resolve_checkpoint_path(a.pos[0], &note);
  if (!note.empty()) err << note;
  if (!a.opt.count("num_kv_heads")) throw Usage("--num_kv_heads=G is required");
  GqaConvertOptions o;
  o.num_kv_heads = to_int("num_kv_heads", a.opt.at("num_kv_heads"));
  if (a.opt.count("encoder_num_kv_heads")) {  // 0 is the library's "not given"; a given 0 is refused like num_kv_heads
    o.encoder_num_kv_heads = to_int("encoder_num_kv_heads", a.opt.at("encoder_num_kv_heads"));
    if (o.encoder_num_kv_heads < 1)
      throw Usage("--encoder_num_kv_heads must be >= 1, got " + a.opt.at("encoder_num_kv_heads") +
                  " (omit it to keep the encoder's attention multi-head)");
  }
  std::string source = "--num_heads";
  if (a.opt.count("num_heads")) {
    o.num_heads = to_int("num_heads", a.opt.at("num_heads"));
  } else if (auto m = model_from_gin(a, ckpt, &source, err, "give the model's --num_heads=H")) {
    if (m->network.attention().grouped() || m->network.encoder_attention().grouped())
      throw CheckpointError(source + ": already configures grouped-query attention (num_kv_heads); "
                            "convert-gqa reads a multi-head checkpoint");
    o.num_heads = m->network.num_heads;
  } else {
    throw Usage("give --num_heads=H or the model's --gin_file (CKPT's MODEL_DIR has no readable config.gin)");
  }
  if (a.opt.count("step")) o.step = to_int("step", a.opt.at("step"));
  HfImportOptions z;  // --compressor, as the importers read it
  read_import_flags(a, z);
  o.compressor = z.compressor;
  GqaConvertResult r = convert_gqa_checkpoint(ckpt, a.pos[1], o);
  out << "converted " << ckpt << " (num_heads " << o.num_heads << " from " << source << ") into " << r.dir
      << " (step " << r.step << "): " << r.pooled << " key/value kernels mean-pooled to num_kv_heads "
      << o.num_kv_heads << " (decoder)";
  if (o.encoder_num_kv_heads) out << " and " << o.encoder_num_kv_heads << " (encoder)";
  out << ", " << r.copied << " arrays copied, " << r.dropped_optimizer
      << " optimizer arrays dropped (the optimizer state starts fresh)\n"
      << "train it with --gin.network.T5Config.num_kv_heads=" << o.num_kv_heads;
  if (o.encoder_num_kv_heads) out << " --gin.network.T5Config.encoder_num_kv_heads=" << o.encoder_num_kv_heads;
  out << " (network.TransformerConfig for a decoder-only model) and MODEL_DIR=" << a.pos[1]
      << " or INITIAL_CHECKPOINT_PATH=" << r.dir << "\n";
  return 0;
}

int cmd_upcycle(const Args& a, std::ostream& out, std::ostream& err) {
  allow_only(a, {"checkpoint_dir", "output_dir", "num_experts", "seed", "step", "compressor"}, 0, true);
  for (const char* f : {"checkpoint_dir", "output_dir"})
    if (!a.opt.count(f)) throw Usage(std::string("--") + f + " is required");
  if (a.gin.files.empty()) throw Usage("--gin_file=MOE_MODEL_GIN is required (e.g. configs/models/moe/mini.gin)");
  std::string note;
  const std::string ckpt = resolve_checkpoint_path(a.opt.at("checkpoint_dir"), &note);
  if (!note.empty()) err << note;
  std::string source;
  const ModelConfig m = *model_from_gin(a, ckpt, &source, err);
  const T5Config& net = m.network;
  if (!net.is_moe())
    throw CheckpointError(source + ": the model has no sparse layers (num_experts = " +
                          std::to_string(net.moe.num_experts) + ")\n  hint: give an MoE model gin, e.g. "
                          "configs/models/moe/mini.gin (NUM_EXPERTS, NUM_*_SPARSE_LAYERS)");
  if (a.opt.count("num_experts") && to_int("num_experts", a.opt.at("num_experts")) != net.moe.num_experts)
    throw CheckpointError("--num_experts=" + a.opt.at("num_experts") + " but " + source + " has num_experts = " +
                          std::to_string(net.moe.num_experts) + "\n  hint: drop --num_experts or set NUM_EXPERTS");
  const auto specs = make_model(m)->param_specs();
  {  // the upcycled arrays are held in memory: refuse a size that cannot be, naming the binding
    double bytes = 0;
    for (const auto& s : specs) bytes += 4.0 * double(s.shape.numel());
    const double mem = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
    if (mem > 0 && bytes > mem)
      throw CheckpointError(source + ": num_experts = " + std::to_string(net.moe.num_experts) + " (NUM_EXPERTS) makes a " +
                            std::to_string(int64_t(bytes / double(1 << 30))) + " GiB float32 model, more than this "
                            "machine's " + std::to_string(int64_t(mem / double(1 << 30))) + " GiB of memory"
                            "\n  hint: check NUM_EXPERTS (--gin.NUM_EXPERTS=E) and the model's sizes");
  }
  nn::ParamSpecs routers;
  for (const auto& s : specs)
    if (s.name.find("/mlp/router/") != std::string::npos) routers.push_back(s);
  const uint64_t seed = a.opt.count("seed") ? uint64_t(to_int("seed", a.opt.at("seed"))) : 0;
  const ParamTree fresh = nn::init_params(routers, prng_key(seed));
  std::vector<UpcycleParam> params;
  for (const auto& s : specs) {
    UpcycleParam p{s.name, s.shape.sizes(), std::nullopt};
    if (auto it = fresh.find(s.name); it != fresh.end()) {
      HostTensor t = HostTensor::zeros("float32", s.shape.sizes());
      const auto v = it->second.to_floats();
      std::memcpy(t.data.data(), v.data(), t.data.size());
      p.fresh = std::move(t);
    }
    params.push_back(std::move(p));
  }
  UpcycleOptions o;
  if (a.opt.count("step")) o.step = to_int("step", a.opt.at("step"));
  HfImportOptions z;  // --compressor, as the importers read it
  read_import_flags(a, z);
  o.compressor = z.compressor;
  UpcycleResult r = upcycle_checkpoint(ckpt, a.opt.at("output_dir"), params, net.moe.num_experts, o);
  out << "upcycled " << ckpt << " into " << r.dir << " (step " << r.step << ") for " << source << ": "
      << r.stacked << " expert kernels of " << net.moe.num_experts << " dense copies, " << r.fresh
      << " fresh routers, " << r.copied << " arrays copied, " << r.dropped_optimizer
      << " optimizer arrays dropped (the optimizer state starts fresh)\n";
  return 0;
}

}  // namespace

std::string feed_forward_proj_from_activations(const std::vector<std::string>& acts) {
  auto hf = [](const std::string& x) -> std::string {
    if (x == "relu" || x == "silu") return x;
    if (x == "gelu") return "gelu_new";  // flax nn.gelu is the tanh approximation
    throw std::invalid_argument("[export-hf] activation '" + x + "' has no transformers T5 equivalent");
  };
  if (acts.size() == 1) return hf(acts[0]);
  if (acts.size() == 2 && acts[1] == "linear") return "gated-" + (acts[0] == "gelu" ? std::string("gelu") : hf(acts[0]));
  std::string s;
  for (const auto& x : acts) s += (s.empty() ? "" : ", ") + x;
  throw std::invalid_argument("[export-hf] mlp_activations (" + s + ") have no transformers T5 equivalent (one activation, or (act, 'linear'))");
}

std::string dense_act_fn(const std::string& p) {
  if (p == "gated-gelu") return "gelu_new";  // as transformers' T5Config
  std::string act = p.rfind("gated-", 0) == 0 ? p.substr(6) : p;
  if (act == "relu" || act == "silu" || act == "gelu" || act == "gelu_new") return act;
  throw std::invalid_argument("[export-hf] feed_forward_proj '" + p + "' is not supported (relu, gelu_new, silu, gated-gelu, gated-silu, gated-relu)");
}

std::vector<std::string> activations_from_feed_forward_proj(const std::string& p, bool* approx) {
  std::string act = dense_act_fn(p);
  if (approx) *approx = act == "gelu" && p != "gated-gelu";
  if (act == "gelu_new") act = "gelu";
  if (p.rfind("gated-", 0) == 0) return {act, "linear"};
  return {act};
}

std::pair<int64_t, T5Config::SparseLayout> sparse_layout_for_hf_config(const HfT5Config& c, bool encoder,
                                                                        const std::string& where) {
  const int64_t L = encoder ? c.num_layers : c.num_decoder_layers;
  int64_t n = 0;
  std::string hf;
  for (int64_t i = 0; i < L; ++i)
    if (c.hf_sparse_layer(encoder, i)) {
      ++n;
      hf += (hf.empty() ? "" : ", ") + std::to_string(i);
    }
  using SL = T5Config::SparseLayout;
  for (SL layout : {SL::kMixed, SL::kBottom, SL::kMiddle, SL::kTop}) {
    bool same = true;
    try {
      for (int64_t i = 0; i < L; ++i) same &= is_sparse_layer(i, L, n, layout) == c.hf_sparse_layer(encoder, i);
    } catch (const std::invalid_argument&) {  // MIXED with L % n != 0
      same = false;
    }
    if (same) return {n, layout};
  }
  const std::string stack = encoder ? "encoder" : "decoder";
  throw CheckpointError(where + ": transformers makes " + stack + " layers {" + hf + "} of " + std::to_string(L) +
                        " sparse (i % (num_layers / num_sparse_" + stack + "_layers) == 1), which no t5x sparse "
                        "layout (flaxformer MIXED: i % step == step - 1; BOTTOM, MIDDLE, TOP) gives"
                        "\n  hint: Switch models with a sparse layer every other layer (step 2) or every layer convert");
}

std::string model_gin_for_hf_config(const HfT5Config& c, const std::string& source) {
  auto acts = activations_from_feed_forward_proj(c.feed_forward_proj);
  std::ostringstream o;
  o << "# Model of the checkpoint imported by `t5x ckpt import-hf` from " << source << ".\n"
    << "# Use with --gin_search_paths=configs/models (for the include below).\n"
    << "include '" << (c.tie_word_embeddings ? "t5_1_0/base.gin" : "t5_1_1/base.gin") << "'\n\n"
    << "network.T5Config:\n"
    << "  vocab_size = " << c.vocab_size << "\n"
    << "  emb_dim = " << c.d_model << "\n"
    << "  num_heads = " << c.num_heads << "\n"
    << "  num_encoder_layers = " << c.num_layers << "\n"
    << "  num_decoder_layers = " << c.num_decoder_layers << "\n"
    << "  head_dim = " << c.d_kv << "\n"
    << "  mlp_dim = " << c.d_ff << "\n"
    << "  mlp_activations = (";
  for (size_t i = 0; i < acts.size(); ++i) o << (i ? ", " : "") << "'" << acts[i] << "'";
  o << (acts.size() == 1 ? ",)\n" : ")\n")
    << "  logits_via_embedding = " << (c.tie_word_embeddings ? "True" : "False") << "\n";
  if (c.relpos_per_layer) o << "  relpos_per_layer = True  # umT5: a relative position table in each layer\n";
  if (c.switch_transformers) {
    auto layout_name = [](T5Config::SparseLayout l) {
      using SL = T5Config::SparseLayout;
      return l == SL::kMixed ? "MIXED" : l == SL::kBottom ? "BOTTOM" : l == SL::kMiddle ? "MIDDLE" : "TOP";
    };
    const auto enc = sparse_layout_for_hf_config(c, true, source), dec = sparse_layout_for_hf_config(c, false, source);
    // transformers' expert_capacity is per sequence; t5x's per group (docs/checkpoints.md).
    o << "\n# Switch Transformers: top-1 tokens-choose routing, float32 experts. transformers' expert_capacity ("
      << c.expert_capacity << " per sequence) has no t5x counterpart: the capacity factors below apply per group.\n"
      << "include 'moe/moe.gin'\n"
      << "NUM_EXPERTS = " << c.num_experts << "\n"
      << "NUM_ENCODER_SPARSE_LAYERS = " << enc.first << "\n"
      << "NUM_DECODER_SPARSE_LAYERS = " << dec.first << "\n"
      << "ENCODER_SPARSE_LAYOUT = '" << layout_name(enc.second) << "'\n"
      << "DECODER_SPARSE_LAYOUT = '" << layout_name(dec.second) << "'\n"
      << "NUM_SELECTED_EXPERTS = 1\n"
      << "MOE_TRUNCATED_DTYPE = 'float32'\n"
      << "JITTER_NOISE = " << c.router_jitter_noise << "\n"
      << "AUX_LOSS_FACTOR = " << c.router_aux_loss_coef << "\n"
      << "ROUTER_Z_LOSS_FACTOR = " << c.router_z_loss_coef << "\n";
  }
  return o.str();
}

int run_ckpt_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    (args.empty() ? err : out) << kCkptUsage;
    return args.empty() ? 64 : 0;
  }
  const std::string sub = args[0];
  try {
    Args a = parse({args.begin() + 1, args.end()});
    if (sub == "info") return cmd_info(a, out);
    if (sub == "export-hf") return cmd_export(a, out, err);
    if (sub == "import-hf") return cmd_import(a, out);
    if (sub == "import-tf") return cmd_import_tf(a, out);
    if (sub == "convert-gqa") return cmd_convert_gqa(a, out, err);
    if (sub == "upcycle") return cmd_upcycle(a, out, err);
    err << "t5x ckpt: unknown tool '" << sub << "'\n" << kCkptUsage;
    return 64;
  } catch (const Usage& e) {
    err << "t5x ckpt " << sub << ": " << e.what() << "\n" << kCkptUsage;
    return 64;
  } catch (const std::exception& e) {
    err << "t5x ckpt " << sub << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace t5x::cli
