// Offline cache (seqio/scripts/cache_tasks_main.py + _CachedDataSource).
//
// write_cache runs a task's pre-cache preprocessors (those before its
// CacheDatasetPlaceholder; a task without one is refused, as seqio skips it)
// over each split,
// one cache shard per source shard (as seqio's one Beam element per source
// shard), and writes under `<output_dir>/<task name, ':' -> '/'>/`:
//   <split>.tfrecord-SSSSS-of-NNNNN   tf.train.Example records
//   info.<split>.json                 {"features": {name: {"dtype", "shape"}},
//                                      "num_shards": N, "seqio_version": ...}
//   stats.<split>.json                {"examples": n, "<f>_tokens": tokens other
//                                      than PAD/EOS, "<f>_max_tokens": max}
//   COMPLETED                         written last; marks the cache valid.
// Differences from seqio: examples keep source order (no global Beam
// reshuffle), so reading a cache unshuffled yields the on-the-fly order; each
// record carries its pipeline key "_seqio_key" (seqio's optional provenance
// fields play that role), so post-cache preprocessors draw the same seeds as
// on the fly and produce identical examples.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "seqio/sources.h"

namespace seqio {

class Task;

struct CacheWriteOptions {
  std::vector<std::string> splits;  // empty: all splits of the source
  uint64_t seed = 0;                // seed of the pre-cache preprocessors
  int num_threads = 1;
  bool overwrite = false;           // replace an existing cache of the task
};

struct CacheWriteResult {
  std::string dir;                             // the task's cache directory
  std::map<std::string, int64_t> examples;     // per split
};

// Throws DataError when the task has no cache placeholder, when the
// directory holds a completed cache and overwrite is false, or on I/O failure.
CacheWriteResult write_cache(const Task& task, const std::string& output_dir, const CacheWriteOptions& opt);

// seqio.add_global_cache_dirs / set_global_cache_dirs / get_global_cache_dirs:
// directories searched for every task's cache after the DatasetOptions'
// cache_dirs (t5x's --seqio_additional_cache_dirs adds to them). Empty at
// start, as in seqio. Thread-safe.
void add_global_cache_dirs(const std::vector<std::string>& dirs);
void set_global_cache_dirs(const std::vector<std::string>& dirs);
std::vector<std::string> get_global_cache_dirs();

// The tasks behind a task or mixture name without a cache step
// (CacheDatasetPlaceholder): use_cached reads them from their source, with
// the warning seqio logs ("does not support caching").
std::vector<std::string> tasks_without_cache_step(const std::string& mixture_or_task);

// `cache_dirs`, then the global cache directories.
std::vector<std::string> cache_search_dirs(const std::vector<std::string>& cache_dirs);

// First `<dir>/<task subdir>` holding COMPLETED over cache_search_dirs(), or nullopt.
std::optional<std::string> find_cache_dir(const Task& task, const std::vector<std::string>& cache_dirs);

// A DataSource over a completed cache directory. Throws DataError naming the
// directory when COMPLETED is missing (an incomplete or interrupted cache).
std::shared_ptr<const DataSource> open_cache_source(const std::string& task_cache_dir);

}  // namespace seqio
