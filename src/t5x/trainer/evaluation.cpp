#include "t5x/trainer/evaluation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ops/ops.h"
#include "seqio/metrics/metrics.h"
#include "seqio/mixture.h"
#include "spmd/reshard.h"
#include "t5x/models/decoding.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/summaries/event_writer.h"
#include "t5x/summaries/metrics_writer.h"
#include "t5x/trainer/data.h"
#include "t5x/trainer/metrics_log.h"

namespace t5x::trainer {

namespace {

bool task_has_split(const seqio::Task& t, const std::string& split) {
  auto s = t.splits();
  return std::find(s.begin(), s.end(), split) != s.end();
}

}  // namespace

MeshScope::MeshScope(const Distributed& dist, const LogicalAxisRules& rules) {
  if (!dist.one_mesh) return;
  context_.emplace(dist.spmd);
  lowering_.emplace();
  constraint_.emplace([rules](const Array& x) { return spmd::with_sharding_constraint(x, rules); });
}

MeshScope::~MeshScope() = default;

Batch mesh_batch(const Batch& b, const Distributed& dist) {
  if (!dist.one_mesh) return b;
  const int64_t d = dist.num_data_shards, rows = batch_rows(b);
  Batch out = pad_rows(b, (rows + d - 1) / d * d);
  for (auto& [k, a] : out) a = spmd::shard(a, dist.batch_spec(a.rank()));
  return out;
}

std::vector<double> score_rows(const BaseTransformerModel& model, const ParamTree& params, const Batch& features,
                               const Distributed& dist) {
  auto s = gather_if_split(model.score_batch(params, mesh_batch(features, dist))).to_floats();
  s.resize(size_t(batch_rows(features)));
  return {s.begin(), s.end()};
}

std::vector<std::vector<int32_t>> predict_rows(const BaseTransformerModel& model, const ModelConfig& mcfg,
                                               const ParamTree& params, const Batch& features,
                                               const Distributed& dist) {
  const Batch b = mesh_batch(prediction_batch(features, mcfg.decoder_only), dist);
  PredictOutput p = model.predict_batch(params, b, mcfg.decode);
  const int64_t len = p.tokens.dim("length");
  auto all = transpose(gather_if_split(p.tokens), {"batch", "length"}).to_ints();
  std::vector<std::vector<int32_t>> out;
  for (int64_t r = 0; r < batch_rows(features); ++r)
    out.push_back(trim_decoded(std::vector<int64_t>(all.begin() + r * len, all.begin() + (r + 1) * len)));
  return out;
}

std::map<std::string, std::map<std::string, double>> evaluate_teacher_forced(
    const BaseTransformerModel& model, const ModelConfig& mcfg, const ParamTree& params, const DatasetConfig& cfg,
    int64_t eval_steps, const Distributed& dist) {
  std::map<std::string, std::map<std::string, double>> out;
  // Every process reads the same global batches of batch_size rows; on
  // several processes each batch is a global array split over dist.data_axes (as
  // TrainData's), so the examples -- and the metrics -- do not depend on the
  // process count. (Reading a seqio shard per process would take eval_steps
  // batches of a different subset.)
  for (const auto& task : seqio::get_subtasks(cfg.mixture_or_task_name)) {
    if (!task_has_split(*task, cfg.split)) continue;
    FiniteData data(task->name(), cfg, mcfg, cfg.batch_size, 0, 1, 0, cfg.pack);
    MetricAccumulator acc;
    Batch b;
    int64_t n = 0;  // global batches, the same on every process
    for (; (eval_steps <= 0 || n < eval_steps) && data.next(b); ++n) {
      // A short last batch is padded with zero rows (no loss weight).
      acc.add(model.loss_fn(params, mesh_batch(b, dist)).second);
    }
    if (n == 0) continue;
    acc.end_step();
    // Per-step metrics (loss, ...) are reported per global batch, as t5x
    // averages them over the evaluation steps.
    auto v = acc.values();
    for (auto& [k, x] : v)
      if (acc.is_per_step(k)) x /= double(n);
    out[task->name()] = v;
  }
  return out;
}

std::vector<int32_t> trim_decoded(const std::vector<int64_t>& row, int32_t eos_id) {
  std::vector<int32_t> t;
  for (int64_t x : row) {
    if (x == eos_id) break;
    if (x != 0) t.push_back(static_cast<int32_t>(x));
  }
  return t;
}

Batch prediction_batch(const Batch& features, bool decoder_only) {
  Batch b;
  if (decoder_only) {
    for (const char* k : {"decoder_input_tokens", "decoder_causal_attention", "decoder_target_tokens"})
      if (features.count(k)) b[k] = features.at(k);
    return b;
  }
  b["encoder_input_tokens"] = features.at("encoder_input_tokens");
  const Array& d = features.at("decoder_input_tokens");
  b["decoder_input_tokens"] = Array::zeros(d.shape(), d.dtype());
  return b;
}

InferenceEvaluator::InferenceEvaluator(const DatasetConfig& cfg, const ModelConfig& mcfg, const EvaluatorConfig& ecfg)
    : cfg_(cfg), mcfg_(mcfg), ecfg_(ecfg) {
  seqio::EvaluatorOptions o;
  o.split = cfg.split;
  o.num_examples = ecfg.num_examples > 0 ? ecfg.num_examples : -1;
  if (cfg.task_feature_lengths) o.sequence_lengths = *cfg.task_feature_lengths;
  o.batch_size = static_cast<int>(cfg.batch_size);
  o.seed = cfg.seed.value_or(42);
  o.use_cached = cfg.use_cached;
  o.cache_dirs = cfg.cache_dirs;
  evaluator_ = std::make_unique<seqio::Evaluator>(
      cfg.mixture_or_task_name, o,
      [](const std::string& name, const std::vector<std::string>& t, const std::vector<std::string>& p) {
        return seqio::metrics::compute(name, t, p);
      });
}

std::map<std::string, seqio::TaskEvalResult> InferenceEvaluator::run(
    const BaseTransformerModel& model, const ParamTree& params, const Distributed& dist, int64_t step,
    const std::string& out_dir, const std::function<void(const std::string&)>& progress) const {
  using Clock = std::chrono::steady_clock;
  const int64_t per_batch = std::max<int64_t>(1, cfg_.batch_size);
  int64_t total_batches = 0, batches = 0, examples = 0, next_tenth = 1;
  for (const auto& t : evaluator_->task_names())
    total_batches += (int64_t(evaluator_->examples(t).size()) + per_batch - 1) / per_batch;
  const auto t0 = Clock::now();
  auto last_line = t0;
  auto report = [&](int64_t rows) {
    ++batches;
    examples += rows;
    const auto now = Clock::now();
    const bool tenth = batches * 10 >= next_tenth * total_batches;
    if (!progress || !(batches == 1 || tenth || batches == total_batches || now - last_line >= std::chrono::seconds(30)))
      return;
    while (next_tenth * total_batches <= batches * 10) ++next_tenth;
    last_line = now;
    const double secs = std::chrono::duration<double>(now - t0).count();
    char buf[160];
    std::snprintf(buf, sizeof buf, "inference_eval step %lld: batch %lld/%lld, %lld examples, %.1f examples/s, ETA %s",
                  (long long)step, (long long)batches, (long long)total_batches, (long long)examples,
                  double(examples) / std::max(secs, 1e-9),
                  format_duration(secs / double(batches) * double(total_batches - batches)).c_str());
    progress(buf);
  };
  // One set of lengths for every task: the largest per feature.
  seqio::SequenceLengths lengths;
  for (const auto& t : evaluator_->task_names())
    for (const auto& [k, v] : evaluator_->sequence_lengths(t)) lengths[k] = std::max(lengths[k], v);
  const bool has_inputs = lengths.count("inputs") != 0;
  std::shared_ptr<seqio::FeatureConverter> conv = make_feature_converter(mcfg_, false, has_inputs);
  seqio::SequenceLengths conv_lengths;
  for (const auto& f : conv->task_features()) conv_lengths[f] = std::max(1, lengths.count(f) ? lengths.at(f) : 1);

  // The decode layout once for all the batches, not per batch.
  const ParamTree decode_params = model.decode_params(params);
  auto predict = [&](const seqio::IndexedBatch& batch) {
    std::vector<seqio::Example> feats;
    for (const auto& [i, ex] : batch) {
      seqio::Example f;
      for (const auto& [k, len] : conv_lengths) {
        auto it = ex.find(k);
        if (it != ex.end()) f[k] = it->second;
        else f[k] = seqio::Tokens{};
      }
      feats.push_back(std::move(f));
    }
    auto rows = predict_rows(model, mcfg_, decode_params, examples_to_batch((*conv)(feats, conv_lengths)), dist);
    std::vector<std::pair<int64_t, seqio::Tokens>> out;
    for (size_t r = 0; r < batch.size(); ++r) out.emplace_back(batch[r].first, std::move(rows[r]));
    report(int64_t(batch.size()));
    return out;
  };
  if (progress)
    for (const auto& t : evaluator_->task_names())
      if (evaluator_->examples(t).empty())
        progress("warning: task '" + t + "' gave no examples to evaluate, so its metrics score nothing (NaN or 0) "
                 "(hint: check its split's files and filters)");
  auto results = evaluator_->evaluate(predict);
  if (out_dir.empty()) return results;
  for (const auto& [task, res] : results) {
    EventFileWriter ev(out_dir + "/" + task);
    for (const auto& [k, v] : res.metrics) ev.add_scalar("eval/" + k, static_cast<float>(v), step);
    ev.flush();
    MetricsJsonlWriter(out_dir + "/" + task + "-metrics.jsonl").write(step, res.metrics);
    if (ecfg_.write_n_results == 0) continue;  // seqio's JSONLogger writes no predictions file
    char name[64];
    std::snprintf(name, sizeof name, "-%06lld.jsonl", (long long)step);
    std::ofstream f(out_dir + "/" + task + name);
    const auto& exs = evaluator_->examples(task);
    const size_t n = ecfg_.write_n_results < 0 ? res.targets.size()
                                               : std::min(res.targets.size(), size_t(ecfg_.write_n_results));
    for (size_t i = 0; i < n; ++i) {
      nlohmann::json j;
      auto it = exs[i].find("inputs_pretokenized");
      if (it != exs[i].end() && std::holds_alternative<std::string>(it->second))
        j["input"] = std::get<std::string>(it->second);
      j["target"] = res.targets[i];
      if (i < res.predictions.size()) j["prediction"] = res.predictions[i];
      f << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    }
  }
  return results;
}

}  // namespace t5x::trainer
