// seqio Task and TaskRegistry (seqio/dataset_providers.py).
//
// A Task = name + DataSource + output features + preprocessors +
// postprocess_fn + metric names. Task names must fully match
// [\w\d.:_#]+ (a ':' becomes a directory separator in the cache). At most one
// cache placeholder. Metrics are named (e.g. "bleu", "accuracy") and computed
// by a MetricComputer (evaluation.h) such as seqio::metrics::compute.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "seqio/dataset.h"
#include "seqio/feature.h"
#include "seqio/preprocessor.h"
#include "seqio/sources.h"

namespace seqio {

// seqio postprocess_fn(decoded, example=, is_target=); identity when unset.
using PostprocessFn = std::function<std::string(const std::string& decoded, const Example& ex, bool is_target)>;

class Task {
 public:
  // Throws std::invalid_argument for a bad name or two cache placeholders,
  // or a placeholder on a source that does not permit caching.
  Task(std::string name, std::shared_ptr<const DataSource> source, OutputFeatures output_features,
       std::vector<Preprocessor> preprocessors = {}, PostprocessFn postprocess_fn = nullptr,
       std::vector<std::string> metric_names = {});

  const std::string& name() const { return name_; }
  const DataSource& source() const { return *source_; }
  std::shared_ptr<const DataSource> source_ptr() const { return source_; }
  const OutputFeatures& output_features() const { return output_features_; }
  const std::vector<Preprocessor>& preprocessors() const { return preprocessors_; }
  const std::vector<std::string>& metric_names() const { return metric_names_; }
  std::vector<std::string> splits() const { return source_->splits(); }
  // Index of the cache placeholder in preprocessors(), or -1.
  int cache_placeholder_index() const { return cache_index_; }
  bool supports_caching() const { return cache_index_ >= 0; }
  bool requires_caching() const;
  // Directory of this task inside a cache dir ("a:b" -> "a/b").
  std::string cache_subdir() const;

  std::string postprocess(const std::string& decoded, const Example& ex, bool is_target) const {
    return postprocess_fn_ ? postprocess_fn_(decoded, ex, is_target) : decoded;
  }

  // See dataset.h. Errors: DataError for data problems and for
  // use_cached without a completed cache when caching is required.
  std::unique_ptr<Dataset> get_dataset(const DatasetOptions& options) const;

  // Runs only the preprocessors before the cache placeholder (all of them
  // when there is none), unshuffled, one epoch: the input of cache writing.
  std::unique_ptr<Dataset> get_precache_dataset(const std::string& split, const ShardInfo& shard,
                                                uint64_t seed, int num_threads = 1) const;

 private:
  std::string name_;
  std::shared_ptr<const DataSource> source_;
  OutputFeatures output_features_;
  std::vector<Preprocessor> preprocessors_;
  PostprocessFn postprocess_fn_;
  std::vector<std::string> metric_names_;
  int cache_index_ = -1;
};

class TaskRegistry {
 public:
  // Registers a pre-built task (seqio add / add_provider). Duplicate name ->
  // std::invalid_argument "Attempting to register duplicate provider".
  static std::shared_ptr<const Task> add(std::shared_ptr<const Task> task);
  // Missing -> std::invalid_argument naming the closest registered names.
  static std::shared_ptr<const Task> get(const std::string& name);
  static std::shared_ptr<const Task> find(const std::string& name);  // nullptr when absent
  static std::vector<std::string> names();  // sorted
  static void remove(const std::string& name);  // silent when absent
  static void reset();
};

// Registered names ordered by edit distance to `name` (for error hints).
std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& candidates,
                                       size_t max = 3);

}  // namespace seqio
