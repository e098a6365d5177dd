// seqio Evaluator (seqio/evaluation.py), synchronous.
//
// Construction: the tasks of a task or mixture that have `split` and at least
// one metric (mixing rates ignored) are read once (one epoch, unshuffled,
// optionally the first num_examples) and kept in memory; each example is
// numbered 0..n-1 within its task. Without sequence_lengths, the lengths are
// the measured per-feature maxima (seqio's sequence_length=None).
// evaluate(): the model functions receive numbered batches and return
// numbered outputs in any order (they are re-sorted by number; a missing or
// duplicate number is a DataError). Targets = "<target>_pretokenized" when
// present, else the vocabulary's decode of "<target>"; predictions = decode
// of the returned tokens; both then go through the task's postprocess_fn
// (is_target true/false). Each of the task's metric names is computed by the
// MetricComputer (e.g. seqio::metrics::compute); results of one task are
// merged and a key produced by two metrics is a DataError. Packing is not
// involved: predict functions see task features and apply their own
// (unpacked) feature converter.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "seqio/task.h"

namespace seqio {

using MetricComputer = std::function<std::map<std::string, double>(
    const std::string& metric_name, const std::vector<std::string>& targets,
    const std::vector<std::string>& predictions)>;
using ScoreMetricFn = std::function<std::map<std::string, double>(const std::vector<std::string>& targets,
                                                                  const std::vector<double>& scores)>;

using IndexedBatch = std::vector<std::pair<int64_t, Example>>;
using PredictFn = std::function<std::vector<std::pair<int64_t, Tokens>>(const IndexedBatch& batch)>;
using ScoreFn = std::function<std::vector<std::pair<int64_t, double>>(const IndexedBatch& batch)>;

struct EvaluatorOptions {
  std::string split = "validation";
  std::optional<SequenceLengths> sequence_lengths;  // nullopt: measured maxima
  int64_t num_examples = -1;                         // -1: all
  int batch_size = 8;
  uint64_t seed = 42;
  std::string target_field_name = "targets";
  bool use_cached = false;
  std::vector<std::string> cache_dirs;
  // Score metrics by name, applied to every task when a ScoreFn is given.
  std::map<std::string, ScoreMetricFn> score_metrics;
};

struct TaskEvalResult {
  std::map<std::string, double> metrics;
  std::vector<std::string> targets;      // postprocessed, by example number
  std::vector<std::string> predictions;  // postprocessed (predict_fn given)
  std::vector<double> scores;            // (score_fn given)
};

class Evaluator {
 public:
  Evaluator(const std::string& mixture_or_task_name, EvaluatorOptions options, MetricComputer metrics);

  // Tasks evaluated, sorted by name (empty when none qualifies).
  std::vector<std::string> task_names() const;
  const std::vector<Example>& examples(const std::string& task) const;
  const SequenceLengths& sequence_lengths(const std::string& task) const;

  std::map<std::string, TaskEvalResult> evaluate(const PredictFn& predict_fn, const ScoreFn& score_fn = nullptr) const;

 private:
  struct Cached {
    std::shared_ptr<const Task> task;
    std::vector<Example> examples;
    SequenceLengths lengths;
    std::vector<std::string> targets;
  };
  EvaluatorOptions opt_;
  MetricComputer metrics_;
  std::map<std::string, Cached> tasks_;
};

}  // namespace seqio
