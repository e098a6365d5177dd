#include "seqio/evaluation.h"

#include <algorithm>

#include "seqio/errors.h"
#include "seqio/mixture.h"

namespace seqio {

Evaluator::Evaluator(const std::string& name, EvaluatorOptions options, MetricComputer metrics)
    : opt_(std::move(options)), metrics_(std::move(metrics)) {
  if (opt_.batch_size < 1) throw std::invalid_argument("[Evaluator] batch_size must be >= 1");
  for (const auto& task : get_subtasks(name)) {
    auto splits = task->splits();
    if (std::find(splits.begin(), splits.end(), opt_.split) == splits.end()) continue;
    if (task->metric_names().empty() && opt_.score_metrics.empty()) continue;
    Cached c;
    c.task = task;
    DatasetOptions d;
    d.split = opt_.split;
    d.shuffle = false;
    d.seed = opt_.seed;
    d.num_epochs = 1;
    d.use_cached = opt_.use_cached;
    d.cache_dirs = opt_.cache_dirs;
    if (opt_.sequence_lengths) d.sequence_lengths = *opt_.sequence_lengths;
    auto ds = task->get_dataset(d);
    c.examples = take_all(*ds, opt_.num_examples);
    if (opt_.sequence_lengths) {
      c.lengths = *opt_.sequence_lengths;
    } else {
      for (const auto& ex : c.examples)
        for (const auto& [k, f] : task->output_features()) {
          auto it = ex.find(k);
          if (it == ex.end()) continue;
          if (auto* t = std::get_if<Tokens>(&it->second)) c.lengths[k] = std::max<int>(c.lengths[k], static_cast<int>(t->size()));
        }
    }
    const std::string& tf = opt_.target_field_name;
    auto feat = task->output_features().find(tf);
    for (const auto& ex : c.examples) {
      std::string target;
      auto pre = ex.find(tf + "_pretokenized");
      if (pre != ex.end() && std::holds_alternative<std::string>(pre->second)) {
        target = std::get<std::string>(pre->second);
      } else {
        if (feat == task->output_features().end() || !feat->second.vocabulary)
          throw DataError("task '" + task->name() + "': no vocabulary to decode target field '" + tf + "'");
        target = feat->second.vocabulary->decode(get_tokens(ex, tf));
      }
      c.targets.push_back(task->postprocess(target, ex, true));
    }
    tasks_.emplace(task->name(), std::move(c));
  }
}

std::vector<std::string> Evaluator::task_names() const {
  std::vector<std::string> n;
  for (const auto& [k, v] : tasks_) n.push_back(k);
  return n;
}

const std::vector<Example>& Evaluator::examples(const std::string& task) const {
  auto it = tasks_.find(task);
  if (it == tasks_.end()) throw std::invalid_argument("[Evaluator::examples] task '" + task + "' is not evaluated");
  return it->second.examples;
}

const SequenceLengths& Evaluator::sequence_lengths(const std::string& task) const {
  auto it = tasks_.find(task);
  if (it == tasks_.end()) throw std::invalid_argument("[Evaluator::sequence_lengths] task '" + task + "' is not evaluated");
  return it->second.lengths;
}

namespace {
// Runs fn over numbered batches and returns outputs ordered by number.
template <typename T, typename Fn>
std::vector<T> run_numbered(const std::string& task, const std::vector<Example>& exs, int batch_size, const Fn& fn) {
  std::vector<std::optional<T>> out(exs.size());
  for (size_t b = 0; b < exs.size(); b += batch_size) {
    IndexedBatch batch;
    for (size_t i = b; i < std::min(exs.size(), b + batch_size); ++i) batch.emplace_back(static_cast<int64_t>(i), exs[i]);
    for (auto& [idx, v] : fn(batch)) {
      if (idx < static_cast<int64_t>(b) || idx >= static_cast<int64_t>(b + batch.size()))
        throw DataError("task '" + task + "': model function returned example number " + std::to_string(idx) +
                        " outside its batch");
      if (out[idx]) throw DataError("task '" + task + "': model function returned example " + std::to_string(idx) + " twice");
      out[idx] = std::move(v);
    }
  }
  std::vector<T> r;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i]) throw DataError("task '" + task + "': model function returned no output for example " + std::to_string(i));
    r.push_back(std::move(*out[i]));
  }
  return r;
}

void merge_metrics(const std::string& task, std::map<std::string, double>& into, const std::map<std::string, double>& m) {
  for (const auto& [k, v] : m)
    if (!into.emplace(k, v).second) throw DataError("task '" + task + "': two metrics produced the key '" + k + "'");
}
}  // namespace

std::map<std::string, TaskEvalResult> Evaluator::evaluate(const PredictFn& predict_fn, const ScoreFn& score_fn) const {
  std::map<std::string, TaskEvalResult> results;
  for (const auto& [name, c] : tasks_) {
    TaskEvalResult r;
    r.targets = c.targets;
    if (predict_fn) {
      auto tokens = run_numbered<Tokens>(name, c.examples, opt_.batch_size, predict_fn);
      auto feat = c.task->output_features().find(opt_.target_field_name);
      if (feat == c.task->output_features().end() || !feat->second.vocabulary)
        throw DataError("task '" + name + "': no vocabulary to decode predictions");
      for (size_t i = 0; i < tokens.size(); ++i)
        r.predictions.push_back(c.task->postprocess(feat->second.vocabulary->decode(tokens[i]), c.examples[i], false));
      if (metrics_)
        for (const auto& m : c.task->metric_names()) merge_metrics(name, r.metrics, metrics_(m, r.targets, r.predictions));
    }
    if (score_fn) {
      r.scores = run_numbered<double>(name, c.examples, opt_.batch_size, score_fn);
      for (const auto& [m, fn] : opt_.score_metrics) merge_metrics(name, r.metrics, fn(r.targets, r.scores));
    }
    results.emplace(name, std::move(r));
  }
  return results;
}

}  // namespace seqio
