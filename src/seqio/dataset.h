// Deterministic, resumable, host-sharded example streams.
//
// Task::get_dataset and Mixture::get_dataset return a Dataset: a pull
// iterator whose output is a pure function of (source data, preprocessors,
// DatasetOptions without num_threads). This is the pipeline the t5x/seqio
// paper describes (arXiv 2203.17189 §3.2) and OSS seqio never shipped
// (seqio#243). Reproduced seqio behaviours and the deliberate differences:
//
//  * Sharding (seqio Task.get_dataset step 3): with #files >= num_shards,
//    file i goes to shard i % num_shards; otherwise every shard reads all
//    files and keeps records r with r % num_shards == index. Every record is
//    in exactly one shard, in every epoch.
//  * Blocks: a shard's records are cut, per epoch, into consecutive blocks of
//    `block_size` records. A block is the unit of shuffling, of block
//    preprocessors (preprocessor.h) and of parallel work.
//  * Shuffle (differs from seqio): each epoch permutes the shard's file list,
//    and each block is permuted, by seeds derived from (seed, epoch, block).
//    seqio shuffles after preprocessing with a 1000-example tf.data buffer;
//    here shuffling happens before preprocessing so that any position can be
//    restored from a few integers. Outputs of one block transform stay
//    adjacent.
//  * Seeds: a preprocessor's per-example seed is derived from (seed,
//    preprocessor position, the example's key, and — after the cache
//    placeholder — the epoch). Keys come from (file index, record index), so
//    they do not depend on sharding or threads. Pre-cache steps see the same
//    seed every epoch (seqio repeats after them); post-cache steps resample.
//  * Epochs: repeat happens before post-cache preprocessing, as in seqio.
//  * After preprocessing: output features are validated (present unless
//    required=false, dtype) and int32 features are trimmed to
//    sequence_lengths (seqio trim_output_features); trims are counted in
//    stats(). No padding here.
//  * Threads: blocks are preprocessed on num_threads threads and emitted in
//    order; the output does not depend on num_threads.
//  * Positions: position() after k outputs is {emitted k, epoch, block,
//    offset}; DatasetOptions::resume restarts there reading only one block
//    ahead; DatasetOptions::start = k gives the same tail by skipping k
//    outputs (preprocessing them). A position is only meaningful under the
//    same data and options (num_threads excepted): block_size and the seed
//    define the order.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "seqio/example.h"
#include "seqio/feature.h"

namespace seqio {

struct ShardInfo {
  int index = 0;
  int num_shards = 1;
};
// "i/n" -> ShardInfo; throws std::invalid_argument.
ShardInfo parse_shard_info(const std::string& s);

struct StreamPosition {
  int64_t emitted = 0;  // outputs yielded so far
  int64_t epoch = 0;
  int64_t block = 0;    // block within the epoch
  int64_t offset = 0;   // outputs of that block already yielded
  bool operator==(const StreamPosition&) const = default;
};

// Checkpointable pipeline state. Task: `stream`. Mixture: stream.emitted =
// sampling steps taken, `tasks` = each task's position, `exhausted` = tasks
// that ran out (continue mode).
struct Position {
  StreamPosition stream;
  std::map<std::string, StreamPosition> tasks;
  std::vector<std::string> exhausted;
  bool operator==(const Position&) const = default;
};
std::string position_to_json(const Position& p);
// Throws DataError "<origin>: ..." naming the field on malformed JSON, a
// missing field, or a count that is not an integer in [0, 2^62].
Position position_from_json(const std::string& json, const std::string& origin = "pipeline position");

struct DatasetOptions {
  SequenceLengths sequence_lengths;       // empty: no trimming
  std::string split = "train";
  bool shuffle = true;                    // seqio Task default
  std::optional<uint64_t> seed;           // unset: a random seed (not reproducible)
  ShardInfo shard;
  std::optional<int64_t> num_epochs = 1;  // nullopt: repeat forever
  int64_t start = 0;                      // skip this many outputs
  std::optional<Position> resume;         // restart at a saved position (exclusive with start)
  int num_threads = 1;
  int block_size = 1000;
  bool trim_output_features = true;
  // Offline cache (cache.h): read `<dir>/<task>/` from the first directory
  // holding a COMPLETED cache of the task.
  bool use_cached = false;
  std::vector<std::string> cache_dirs;
  // Mixtures: stop at the first exhausted task (seqio's default sampler) or
  // continue sampling from the others (seqio#513).
  bool stop_on_empty = true;
};

struct PipelineStats {
  int64_t records_read = 0;      // source records read (skipping included)
  int64_t examples_emitted = 0;
  int64_t examples_dropped = 0;  // by filters (map preprocessors returning nullopt)
  std::map<std::string, int64_t> trimmed_examples;  // per feature: examples cut to length
  std::map<std::string, int64_t> trimmed_tokens;    // per feature: tokens removed
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  // Next example; false at the end. Throws DataError on bad data.
  virtual bool next(Example& out) = 0;
  virtual Position position() const = 0;
  virtual PipelineStats stats() const = 0;
};

// Reads everything that remains (tests, small data).
std::vector<Example> take_all(Dataset& ds, int64_t limit = -1);

}  // namespace seqio
