#include "t5x/trainer/infer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "seqio/mixture.h"
#include "spmd/spmd.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/trainer/data.h"
#include "t5x/trainer/evaluation.h"
#include "t5x/trainer/train_state.h"

namespace t5x::trainer {

namespace fs = std::filesystem;

namespace {

// Parameters of `mcfg` restored from the configured checkpoint.
struct LoadedModel {
  std::unique_ptr<BaseTransformerModel> model;
  TrainState state;
  std::string dir;
  std::string warning;  // the checkpoint's parameters dropped (strict = False), or empty
};

// On several processes the parameters take training's layout on the mesh
// (logical_axis_rules, parameter_partitioning_dims) and each process reads
// only its shards of the checkpoint.
LoadedModel load_model(const ModelConfig& mcfg, const RestoreCheckpointConfig& rc, const Distributed& dist,
                       const LogicalAxisRules& rules) {
  LoadedModel m;
  m.model = make_model(mcfg);
  check_param_memory(m.model->param_specs(), dist.size());
  auto path = resolve_restore_path(rc);
  if (!path)
    throw CheckpointError("[checkpoint] no checkpoint to restore\n  hint: set CHECKPOINT_PATH to a checkpoint_<step> directory");
  MeshScope on_mesh(dist, rules);
  // Shapes and layouts only (t5x restores into jax.eval_shape's tree): the
  // restore below overwrites every parameter, so nothing is drawn at random.
  for (const auto& spec : m.model->param_specs()) {
    Array zeros = Array::zeros(spec.shape, spec.dtype);
    m.state.params[spec.name] =
        dist.one_mesh ? spmd::shard(zeros, spmd::param_spec(spec.name, zeros.shape(), rules)) : zeros;
  }
  auto r = restore_train_state(*path, m.state, false, rc.dtype, dist.rank(), dist.size(),
                               checkpoint_layout(*m.model, nullptr));
  m.dir = r.dir;
  m.warning = check_unused_params(r, rc.strict, "checkpoint",
                                  "give the model gin the checkpoint was trained with (its config.gin); to "
                                  "read part of it on purpose, set utils.RestoreCheckpointConfig.strict = False");
  return m;
}

std::string fmt(const char* f, long long a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, a);
  return buf;
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

std::string crc_hex(uint32_t crc) {
  char s[16];
  std::snprintf(s, sizeof s, "%08x", unsigned(crc));
  return s;
}

// A chunk's .COMPLETED marker records its examples, size and CRC-32C, so that
// a resume reuses only chunks that are as they were written.
std::string chunk_marker(int64_t examples, const std::string& chunk) {
  const FileDigest d = digest_file(chunk);
  return dump({{"examples", examples}, {"bytes", d.bytes}, {"crc32c", crc_hex(d.crc32c)}}) + "\n";
}

// Empty when `chunk` is as its marker records; else what is wrong. A marker
// with no record (an older t5x.cpp's) is taken as it is.
std::string chunk_problem(const std::string& chunk) {
  const std::string marker = fileio::read_text(chunk + ".COMPLETED");  // it exists (the caller checks)
  if (marker.find_first_not_of(" \n") == std::string::npos) return "";
  try {
    const nlohmann::json m = nlohmann::json::parse(marker);
    if (!fs::exists(chunk)) return "missing (its .COMPLETED marker is there)";
    const FileDigest d = digest_file(chunk);
    const std::string crc = crc_hex(d.crc32c);
    if (d.bytes != m.at("bytes").get<uint64_t>())
      return std::to_string(d.bytes) + " bytes; its marker records " + std::to_string(m.at("bytes").get<uint64_t>());
    if (crc != m.at("crc32c").get<std::string>())
      return "crc32c " + crc + " differs from its marker's " + m.at("crc32c").get<std::string>();
  } catch (const std::exception& e) {
    return std::string("unreadable (") + e.what() + ")";
  }
  return "";
}

// The decoding a predict run does, as the model runs it (t5x's default
// decode_fn: beam search for the encoder-decoder, sampling for decoder-only).
nlohmann::json decode_settings(const ModelConfig& m) {
  using Method = DecodeOptions::Method;
  const DecodeOptions& d = m.decode;
  const bool beam = d.method == Method::beam_search || (d.method == Method::default_for_model && !m.decoder_only);
  if (beam)
    return {{"method", "beam_search"}, {"num_decodes", d.beam.num_decodes}, {"alpha", d.beam.alpha},
            {"eos_id", d.beam.eos_id}};
  const SamplingOptions& s = d.sampling;
  return {{"method", "temperature_sample"}, {"num_decodes", s.num_decodes}, {"temperature", s.temperature},
          {"topk", s.topk}, {"topp", s.topp}, {"eos_id", s.eos_id}, {"max_decode_steps", s.max_decode_steps}};
}

}  // namespace

InferStats run_infer(const InferRunConfig& cfg, const Distributed& dist, std::ostream* log,
                     const std::function<void()>& on_checked) {
  InferStats stats;
  // Every task must have the split (t5x infer.py reads each task's split);
  // checked before the restore, naming the setting to change.
  for (const auto& task : seqio::get_subtasks(cfg.dataset.mixture_or_task_name)) {
    const auto splits = task->splits();
    if (splits.empty() || std::find(splits.begin(), splits.end(), cfg.dataset.split) != splits.end()) continue;
    std::string names;
    for (const auto& sp : splits) names += (names.empty() ? "" : ", ") + sp;
    throw std::invalid_argument("[infer] task '" + task->name() + "'" +
                                (task->name() == cfg.dataset.mixture_or_task_name
                                     ? std::string()
                                     : " of '" + cfg.dataset.mixture_or_task_name + "'") +
                                " has no split '" + cfg.dataset.split + "' (its splits: " + names +
                                ")\n  hint: set MIXTURE_OR_TASK_SPLIT (utils.DatasetConfig.split) to one of them");
  }
  const LogicalAxisRules rules = logical_axis_rules(cfg.partitioner);
  LoadedModel lm = load_model(cfg.model, cfg.restore, dist, rules);
  if (log && dist.is_chief() && !lm.warning.empty()) *log << lm.warning << "\n";
  for (const auto& [k, p] : lm.state.params) {
    stats.param_bytes += double(p.nbytes());
    stats.model_param_bytes += double(p.size()) * double(dtype_size(p.dtype()));
  }
  if (log && dist.is_chief())
    *log << "restored parameters from " << lm.dir << " (" << std::fixed << std::setprecision(1)
         << 100 * stats.param_bytes / std::max(1.0, stats.model_param_bytes) << "% of their bytes on process 0)\n"
         << std::defaultfloat;
  // Under mpirun the processes form one mesh: every process reads the same
  // batches of shard shard_id, each split over 'data', and process 0 writes
  // the file one process writes (t5x infer.py writes on process 0).
  MeshScope on_mesh(dist, rules);
  // The decode layout once for the whole run (predict mode), not per batch.
  const ParamTree decode_params = cfg.mode == "score" ? ParamTree{} : lm.model->decode_params(lm.state.params);
  const bool writer = dist.is_chief();
  const int64_t num_shards = cfg.num_shards, shard = cfg.shard_id;
  const int64_t chunk_examples = std::max<int64_t>(1, cfg.checkpoint_period) * cfg.dataset.batch_size;
  // The settings the output depends on: chunks of a run with others are not
  // mixed into this one's output (a resume with another BATCH_SIZE,
  // checkpoint_period or CHECKPOINT_PATH lost or mixed examples), and a
  // finished file of another run is not taken for this one's.
  nlohmann::json run = {{"mode", cfg.mode},           {"checkpoint", lm.dir},   {"chunk_examples", chunk_examples},
                        {"batch_size", cfg.dataset.batch_size}, {"shard", shard}, {"num_shards", num_shards}};
  if (cfg.dataset.task_feature_lengths)
    for (const auto& [k, v] : *cfg.dataset.task_feature_lengths) run["task_feature_lengths"][k] = v;
  // The split is not in the file's name, and the decoding changes the
  // predictions: a resume with another temperature reused the old chunks.
  run["split"] = cfg.dataset.split;
  run["activation_dtype"] = dtype_name(cfg.model.network.dtype);
  if (cfg.mode == "predict") run["decode"] = decode_settings(cfg.model);
  const std::string want = dump(run) + "\n";
  const auto tasks = seqio::get_subtasks(cfg.dataset.mixture_or_task_name);
  auto base_of = [&](const seqio::Task& task) {
    return task.name() + "-" + cfg.mode + ".jsonl" + fmt("-%05lld", shard) + fmt("-of-%05lld", num_shards);
  };
  // The settings of a finished file, beside it as a hidden file: not in
  // <file>.COMPLETED, which a `cat TASK-predict.jsonl-*` takes in (t5x
  // writes it empty), nor matched by that glob.
  auto settings_path_of = [&](const std::string& base) { return cfg.output_dir + "/." + base + ".settings.json"; };
  // Process 0 checks every task's output before anything is written
  // (on_checked's config.gin included), so that a refused run leaves
  // INFER_OUTPUT_DIR as it was; the others follow its answer.
  std::string refusal;
  if (writer)
    for (const auto& task : tasks) {
      const std::string base = base_of(*task), final_path = cfg.output_dir + "/" + base;
      const std::string settings_path = settings_path_of(base), tmp = cfg.output_dir + "/tmp-" + base;
      if (fs::exists(final_path + ".COMPLETED") && fs::exists(settings_path)) {
        if (const std::string done_by = fileio::read_text(settings_path); done_by != want) {
          refusal = "[infer] " + final_path + " was written by a run with other settings\n  it:   " + done_by +
                    "  this: " + want + "  hint: write into another INFER_OUTPUT_DIR, or delete " + final_path +
                    " and its .COMPLETED to run again";
          break;
        }
      } else if (!fs::exists(final_path + ".COMPLETED") && fs::exists(tmp + "/run.json")) {
        if (const std::string it = fileio::read_text(tmp + "/run.json"); it != want) {
          refusal = "[infer] the partial output in " + tmp + " was written by a run with other settings\n  it:   " +
                    it + "  this: " + want + "  hint: resume with the same settings, or delete " + tmp +
                    " to start over";
          break;
        }
      }
    }
  if (dist.broadcast(uint64_t(!refusal.empty())))
    throw std::runtime_error(writer ? refusal : "[infer] process 0 refused the run (see its message)");
  if (writer) {
    fs::create_directories(cfg.output_dir);
    if (on_checked) on_checked();
  }
  for (const auto& task : tasks) {
    const std::string base = base_of(*task);
    const std::string final_path = cfg.output_dir + "/" + base;
    stats.outputs[task->name()] = final_path;
    const std::string settings_path = settings_path_of(base);
    // A finished file of this run's settings (or an older output without
    // them) is kept.
    const uint64_t done = dist.broadcast(uint64_t(writer && fs::exists(final_path + ".COMPLETED")));
    if (done) {
      if (log && writer) *log << final_path << " is complete; skipping\n";
      continue;
    }
    const std::string tmp = cfg.output_dir + "/tmp-" + base;
    auto chunk_path = [&](int64_t c) { return tmp + "/" + base + fmt("-chunk%05lld", c); };
    int64_t chunk = 0;
    if (writer) {
      const std::string run_file = tmp + "/run.json";  // checked above
      fs::create_directories(tmp);
      if (!fs::exists(run_file)) std::ofstream(run_file, std::ios::trunc) << want;
      // Reuse the chunks that are as they were written; recompute from the
      // first that is not (and drop those after it, which are rewritten).
      for (; fs::exists(chunk_path(chunk) + ".COMPLETED"); ++chunk)
        if (const std::string bad = chunk_problem(chunk_path(chunk)); !bad.empty()) {
          if (log) *log << "warning: " << chunk_path(chunk) << ": " << bad << "; computing it again\n";
          break;
        }
      const std::string prefix = base + "-chunk";
      for (const auto& e : fs::directory_iterator(tmp)) {
        const std::string name = e.path().filename().string();
        if (name.rfind(prefix, 0) == 0 && std::atoll(name.c_str() + prefix.size()) >= chunk) fs::remove(e.path());
      }
    }
    chunk = int64_t(dist.broadcast(uint64_t(chunk)));
    stats.chunks_skipped += chunk;
    FiniteData data(task->name(), cfg.dataset, cfg.model, cfg.dataset.batch_size, shard, num_shards,
                    chunk * chunk_examples, false);
    auto vocab = task->output_features().at("targets").vocabulary;
    const int64_t reused_chunks = chunk, examples_before = stats.examples;
    bool more = true;
    while (more) {
      std::ofstream out;
      if (writer) out.open(chunk_path(chunk), std::ios::trunc);
      int64_t in_chunk = 0;
      Batch b;
      std::vector<seqio::Example> raw;
      while (in_chunk < chunk_examples && (more = data.next(b, &raw))) {
        std::vector<double> scores;
        std::vector<std::string> preds;
        if (cfg.mode == "score") {
          scores = score_rows(*lm.model, lm.state.params, b, dist);
        } else {
          for (const auto& t : predict_rows(*lm.model, cfg.model, decode_params, b, dist))
            preds.push_back(vocab->decode(t));
        }
        for (size_t r = 0; writer && r < raw.size(); ++r) {
          nlohmann::json j;
          nlohmann::json inputs = nlohmann::json::object();
          for (const auto& [k, v] : raw[r])
            if (const auto* s = std::get_if<std::string>(&v)) inputs[k] = *s;
          j["inputs"] = inputs;
          if (cfg.mode == "score") j["score"] = scores[r];
          else j["prediction"] = preds[r];
          out << dump(j) << "\n";
        }
        in_chunk += static_cast<int64_t>(raw.size());
        stats.examples += static_cast<int64_t>(raw.size());
      }
      if (!writer) {
        if (in_chunk > 0 || chunk == 0) ++chunk;
        continue;
      }
      out.close();
      if (in_chunk > 0 || chunk == 0) {
        std::ofstream(chunk_path(chunk) + ".COMPLETED") << chunk_marker(in_chunk, chunk_path(chunk));
        if (log) *log << task->name() << ": chunk " << chunk << " (" << in_chunk << " examples)\n";
        ++chunk;
      } else {
        fs::remove(chunk_path(chunk));
      }
    }
    if (!writer) {
      dist.barrier();
      continue;
    }
    if (log && reused_chunks == 0 && stats.examples == examples_before)
      *log << "warning: task '" << task->name() << "' split '" << cfg.dataset.split << "' gave no examples"
           << (num_shards > 1 ? " in shard " + std::to_string(shard) + " of " + std::to_string(num_shards) : "")
           << ", so " << final_path << " is empty (hint: check its files and filters)\n";
    // Merge the chunks in order, then mark the file complete.
    {
      std::ofstream merged(final_path + ".tmp", std::ios::trunc);
      for (int64_t c = 0; fs::exists(chunk_path(c) + ".COMPLETED"); ++c) {
        std::ifstream in(chunk_path(c));
        merged << in.rdbuf();
      }
    }
    fs::rename(final_path + ".tmp", final_path);
    std::ofstream(settings_path, std::ios::trunc) << want;  // the settings it was written with
    std::ofstream(final_path + ".COMPLETED").put('\n');
    fs::remove_all(tmp);
    if (log) *log << "wrote " << final_path << "\n";
    dist.barrier();
  }
  return stats;
}

std::map<std::string, std::map<std::string, double>> run_eval(const EvalRunConfig& cfg, const Distributed& dist,
                                                               std::ostream* log) {
  std::map<std::string, std::map<std::string, double>> out;
  // t5x eval.py refuses a run with no task to evaluate rather than exiting
  // successfully with no metrics; checked before the restore.
  {
    bool any = false;
    std::string tasks;
    for (const auto& task : seqio::get_subtasks(cfg.dataset.mixture_or_task_name)) {
      std::string splits;
      bool has = false;
      for (const auto& sp : task->splits()) {
        splits += (splits.empty() ? "" : ", ") + sp;
        has |= sp == cfg.dataset.split;
      }
      any |= has && !task->metric_names().empty();
      tasks += "\n  task '" + task->name() + "': splits " + (splits.empty() ? "none" : splits) +
               (task->metric_names().empty() ? "; no metric_fns" : "");
    }
    if (!any)
      throw std::invalid_argument("[eval] no task of '" + cfg.dataset.mixture_or_task_name + "' has split '" +
                                  cfg.dataset.split + "' and metric_fns, so there is nothing to evaluate:" + tasks +
                                  "\n  hint: set MIXTURE_OR_TASK_SPLIT (utils.DatasetConfig.split) to one of them");
  }
  const LogicalAxisRules rules = logical_axis_rules(cfg.partitioner);
  LoadedModel lm = load_model(cfg.model, cfg.restore, dist, rules);
  if (log && dist.is_chief() && !lm.warning.empty()) *log << lm.warning << "\n";
  int64_t step = 0;
  if (auto s = CheckpointReader::open(lm.dir).step()) step = *s;
  {
    // Every process decodes its rows on the mesh; process 0 writes and logs.
    MeshScope on_mesh(dist, rules);
    InferenceEvaluator ev(cfg.dataset, cfg.model, cfg.evaluator);
    std::ostream* out_log = dist.is_chief() ? log : nullptr;
    auto res = ev.run(*lm.model, lm.state.params, dist, step, dist.is_chief() ? cfg.output_dir + "/inference_eval" : "",
                      [out_log](const std::string& line) { if (out_log) *out_log << line << "\n" << std::flush; });
    for (const auto& [task, r] : res) {
      out[task] = r.metrics;
      if (out_log) {
        *out_log << task << " (" << lm.dir << ", split " << cfg.dataset.split << "):";
        for (const auto& [k, v] : r.metrics) *out_log << " " << k << " " << v;
        *out_log << "\n";
      }
    }
  }
  dist.barrier();
  return out;
}

}  // namespace t5x::trainer
