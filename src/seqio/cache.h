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

// First `<dir>/<task subdir>` holding COMPLETED, or nullopt.
std::optional<std::string> find_cache_dir(const Task& task, const std::vector<std::string>& cache_dirs);

// A DataSource over a completed cache directory. Throws DataError naming the
// directory when COMPLETED is missing (an incomplete or interrupted cache).
std::shared_ptr<const DataSource> open_cache_source(const std::string& task_cache_dir);

}  // namespace seqio
