// seqio Mixture and MixtureRegistry (seqio/dataset_providers.py).
//
// Rates are relative weights. `tasks()` is the union of direct tasks and
// sub-mixture tasks, de-duplicated and sorted by name. get_rate(task) = own
// direct rate + Σ over sub-mixtures m containing it of
// rate(m) * m.get_rate(task) / m.total_rate(). Names resolve against
// TaskRegistry first, then MixtureRegistry, at construction.
//
// Sampling (get_dataset): step s draws u from a seed derived from (seed, s)
// and picks a task with probability get_rate/Σ rates over tasks still
// running, then takes that task's next example. With stop_on_empty (seqio's
// default sampler) the mixture ends at the first exhausted task; otherwise
// the task is dropped and the step redrawn among the others (seqio#513).
// Each task stream uses seed derive(seed, task name). seqio's
// Mixture.get_dataset repeats forever by default (num_epochs=None): pass
// num_epochs = std::nullopt for that.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "seqio/task.h"

namespace seqio {

class Mixture;
using RateFn = std::function<double(const Task&)>;
using Rate = std::variant<double, RateFn>;

struct MixtureEntry {
  std::string name;  // task or mixture name
  std::optional<Rate> rate;
};

class Mixture {
 public:
  // Entries without a rate take default_rate; missing both ->
  // std::invalid_argument "need a rate for each task". Unknown names, empty
  // mixtures, callable rates on sub-mixtures and tasks whose output feature
  // name sets differ -> std::invalid_argument.
  Mixture(std::string name, std::vector<MixtureEntry> entries, std::optional<double> default_rate = std::nullopt);

  const std::string& name() const { return name_; }
  std::vector<std::shared_ptr<const Task>> tasks() const;  // sorted by name
  double get_rate(const Task& task) const;
  double total_rate() const;

  // Tasks lacking the split are skipped (all lacking -> DataError). Each
  // example keeps only the output features. Vocabulary/dtype mismatch
  // between tasks -> DataError.
  std::unique_ptr<Dataset> get_dataset(const DatasetOptions& options) const;

 private:
  std::string name_;
  std::vector<std::pair<std::shared_ptr<const Task>, Rate>> direct_;
  std::vector<std::pair<std::shared_ptr<const Mixture>, double>> sub_;
};

class MixtureRegistry {
 public:
  static std::shared_ptr<const Mixture> add(std::shared_ptr<const Mixture> mixture);
  static std::shared_ptr<const Mixture> get(const std::string& name);
  static std::shared_ptr<const Mixture> find(const std::string& name);
  static std::vector<std::string> names();
  static void remove(const std::string& name);
  static void reset();
};

// seqio.utils.mixing_rate_num_examples as a RateFn: n = the task's example
// count for `split` (the offline cache's stats when a completed cache is
// found in cache_dirs, else the source's num_input_examples, else counted by
// reading the source), then n *= scale, n = min(n, maximum) when maximum is
// set, n = n^(1/temperature) when temperature != 1.
RateFn mixing_rate_num_examples(std::optional<double> maximum = std::nullopt, double scale = 1.0,
                                double temperature = 1.0, std::string split = "train",
                                std::vector<std::string> cache_dirs = {});

// seqio.get_mixture_or_task: mixtures take precedence; unknown ->
// std::invalid_argument "No Task or Mixture found with name ..." with the
// closest names.
std::variant<std::shared_ptr<const Task>, std::shared_ptr<const Mixture>> get_mixture_or_task(const std::string& name);
// get_dataset of a task or mixture by name.
std::unique_ptr<Dataset> get_dataset(const std::string& mixture_or_task, const DatasetOptions& options);
// Leaf tasks of a task or mixture name (seqio get_subtasks).
std::vector<std::shared_ptr<const Task>> get_subtasks(const std::string& mixture_or_task);

}  // namespace seqio
