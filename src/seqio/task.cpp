#include "seqio/task.h"

#include <algorithm>
#include <map>
#include <regex>

#include "seqio/cache.h"
#include "seqio/errors.h"
#include "seqio/pipeline.h"

namespace seqio {

Task::Task(std::string name, std::shared_ptr<const DataSource> source, OutputFeatures output_features,
           std::vector<Preprocessor> preprocessors, PostprocessFn postprocess_fn,
           std::vector<std::string> metric_names)
    : name_(std::move(name)), source_(std::move(source)), output_features_(std::move(output_features)),
      preprocessors_(std::move(preprocessors)), postprocess_fn_(std::move(postprocess_fn)),
      metric_names_(std::move(metric_names)) {
  static const std::regex kName(R"([\w\d\.\:_#]+)");
  if (!std::regex_match(name_, kName))
    throw std::invalid_argument("[Task] name '" + name_ + "' must match [\\w\\d.:_#]+");
  if (!source_) throw std::invalid_argument("[Task] '" + name_ + "' has no source");
  if (source_->splits().empty()) throw std::invalid_argument("[Task] '" + name_ + "': its source has no splits");
  for (size_t i = 0; i < preprocessors_.size(); ++i) {
    const auto& p = preprocessors_[i];
    if (p.kind == Preprocessor::Kind::kCachePlaceholder) {
      if (cache_index_ >= 0)
        throw std::invalid_argument("[Task] '" + name_ + "' has more than one cache placeholder");
      cache_index_ = static_cast<int>(i);
    } else if ((p.kind == Preprocessor::Kind::kMap && !p.map) || (p.kind == Preprocessor::Kind::kBlock && !p.block)) {
      throw std::invalid_argument("[Task] '" + name_ + "': preprocessor '" + p.name + "' has no function");
    }
  }
  if (cache_index_ >= 0 && !source_->caching_permitted())
    throw std::invalid_argument("[Task] '" + name_ + "' has a cache placeholder but its source forbids caching");
  for (const auto& [k, f] : output_features_)
    if (f.dtype == DType::kInt32 && !f.vocabulary)
      throw std::invalid_argument("[Task] '" + name_ + "': int32 feature '" + k + "' needs a vocabulary");
}

bool Task::requires_caching() const {
  return cache_index_ >= 0 && preprocessors_[cache_index_].cache_required;
}

std::string Task::cache_subdir() const {
  std::string s = name_;
  std::replace(s.begin(), s.end(), ':', '/');
  return s;
}

std::unique_ptr<Dataset> Task::get_dataset(const DatasetOptions& opt) const {
  internal::PipelineSpec spec;
  spec.task_name = name_;
  spec.output_features = output_features_;
  spec.source = source_;
  size_t first = 0;
  if (opt.use_cached && supports_caching()) {
    auto dir = find_cache_dir(*this, opt.cache_dirs);
    if (!dir) {
      std::string where;
      for (const auto& d : cache_search_dirs(opt.cache_dirs)) where += (where.empty() ? "" : ", ") + d;
      throw DataError("task '" + name_ + "': no completed cache under [" + where + "] (hint: run `seqio cache " +
                      name_ + " --output DIR` and pass DIR as a cache directory (t5x: --seqio_additional_cache_dirs=DIR))");
    }
    spec.source = open_cache_source(*dir);
    first = static_cast<size_t>(cache_index_) + 1;
  } else if (requires_caching()) {
    throw DataError("task '" + name_ + "' requires an offline cache (hint: set use_cached and cache_dirs)");
  }
  for (size_t i = first; i < preprocessors_.size(); ++i) {
    const auto& p = preprocessors_[i];
    if (p.kind == Preprocessor::Kind::kCachePlaceholder) continue;
    spec.steps.push_back({static_cast<int>(i), static_cast<int>(i) > cache_index_, p});
  }
  return internal::make_pipeline(std::move(spec), opt);
}

std::unique_ptr<Dataset> Task::get_precache_dataset(const std::string& split, const ShardInfo& shard, uint64_t seed,
                                                    int num_threads) const {
  internal::PipelineSpec spec;
  spec.task_name = name_;
  spec.output_features = output_features_;
  spec.source = source_;
  spec.validate = false;
  spec.emit_keys = true;
  const size_t end = cache_index_ >= 0 ? static_cast<size_t>(cache_index_) : preprocessors_.size();
  for (size_t i = 0; i < end; ++i) spec.steps.push_back({static_cast<int>(i), cache_index_ < 0, preprocessors_[i]});
  DatasetOptions opt;
  opt.split = split;
  opt.shuffle = false;
  opt.seed = seed;
  opt.shard = shard;
  opt.num_threads = num_threads;
  return internal::make_pipeline(std::move(spec), opt);
}

// ---------------------------------------------------------------- registry

namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Task>> tasks;
};
Registry& registry() {
  static Registry r;
  return r;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}
}  // namespace

std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& candidates, size_t max) {
  std::vector<std::pair<size_t, std::string>> d;
  for (const auto& c : candidates) d.emplace_back(edit_distance(name, c), c);
  std::sort(d.begin(), d.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < d.size() && i < max; ++i) out.push_back(d[i].second);
  return out;
}

std::shared_ptr<const Task> TaskRegistry::add(std::shared_ptr<const Task> task) {
  if (!task) throw std::invalid_argument("[TaskRegistry::add] null task");
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.tasks.emplace(task->name(), task).second)
    throw std::invalid_argument("[TaskRegistry::add] Attempting to register duplicate provider: " + task->name());
  return task;
}

std::shared_ptr<const Task> TaskRegistry::find(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.tasks.find(name);
  return it == r.tasks.end() ? nullptr : it->second;
}

std::shared_ptr<const Task> TaskRegistry::get(const std::string& name) {
  if (auto t = find(name)) return t;
  std::string hint;
  for (const auto& c : closest_names(name, names())) hint += (hint.empty() ? "" : ", ") + c;
  throw std::invalid_argument("[TaskRegistry::get] Provider name not registered: '" + name + "'" +
                              (hint.empty() ? "" : " (closest: " + hint + ")"));
}

std::vector<std::string> TaskRegistry::names() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> n;
  for (const auto& [k, v] : r.tasks) n.push_back(k);
  return n;
}

void TaskRegistry::remove(const std::string& name) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.tasks.erase(name);
}

void TaskRegistry::reset() {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.tasks.clear();
}

}  // namespace seqio
