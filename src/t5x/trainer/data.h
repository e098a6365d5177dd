// Model batches from seqio: task/mixture -> per-host shard -> feature
// converter (packing) -> batches of this host's rows, with a checkpointable
// position (t5x.md 2 "Data layout", 8; seqio batching.h).
//
// Data layout (t5x get_data_layout): the GLOBAL batch of B rows is split over
// the mesh's 'data' axis; the process with data coordinate i feeds rows
// [i*B/n, (i+1)*B/n) of each global batch. Processes that differ only in
// their 'model' coordinate feed the same rows. Unlike t5x (which gives each
// host its own seqio shard), every process reads the whole training stream
// and keeps its rows, so the global batches -- and the losses -- do not
// depend on the process count (the cost is redundant preprocessing).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "seqio/batching.h"
#include "seqio/example.h"
#include "t5x/models/losses.h"
#include "t5x/trainer/run_config.h"
#include "t5x/trainer/run_state.h"  // DataState

namespace t5x::trainer {

// Model-feature examples (equal-length int32 token rows) -> a Batch of int32
// [batch, length] Arrays. Non-token features are dropped. Throws
// std::invalid_argument "[trainer] ..." on ragged rows or mismatching keys.
Batch examples_to_batch(const std::vector<seqio::Example>& rows);

// Rows of a batch.
int64_t batch_rows(const Batch& b);
// Rows [begin, end) of every array (a process's part of a global batch);
// an empty Batch when end <= begin.
Batch slice_rows(const Batch& b, int64_t begin, int64_t end);
// `b` with zero rows appended up to `rows` (t5x pads a short evaluation batch
// so that it splits over 'data'): zero targets have no loss weight, so they
// add nothing to the metrics.
Batch pad_rows(const Batch& b, int64_t rows);

// An endless (repeating) training stream of this host's rows per step.
class TrainData {
 public:
  // `shard` = this host's data shard, `num_shards` the data mesh size;
  // per-host batch = cfg.batch_size / num_shards (must divide).
  TrainData(const DatasetConfig& cfg, const ModelConfig& model, uint64_t seed, int64_t shard, int64_t num_shards,
            std::optional<seqio::BatchPosition> resume = std::nullopt);
  // The next per-host batch. Throws seqio::DataError when the data run out
  // (a training stream repeats, so only an empty split ends it).
  Batch next();
  seqio::BatchPosition position() const { return ds_->position(); }
  int64_t host_batch_size() const { return host_batch_; }

 private:
  std::unique_ptr<seqio::BatchedDataset> ds_;
  int64_t host_batch_;
  int64_t shard_ = 0;
  std::string name_;
};

// A finite stream (evaluation / inference): one epoch of a task split,
// unshuffled unless cfg says otherwise, with the raw task examples of every
// row kept (inference writes their *_pretokenized fields). The last batch
// may be short. Unpacked.
class FiniteData {
 public:
  FiniteData(const std::string& task, const DatasetConfig& cfg, const ModelConfig& model, int64_t host_batch,
             int64_t shard, int64_t num_shards, int64_t start = 0, bool pack = false);
  // False at the end. `raw` receives the task examples (unpacked only).
  bool next(Batch& batch, std::vector<seqio::Example>* raw = nullptr);
  const seqio::SequenceLengths& task_lengths() const { return lengths_; }

 private:
  std::unique_ptr<seqio::Dataset> ds_;
  std::unique_ptr<seqio::FeatureConverter> conv_;
  seqio::SequenceLengths lengths_;
  int64_t host_batch_;
  bool pack_;
  bool done_ = false;
  std::vector<seqio::Example> pending_;  // converted rows not yet batched (packing)
};

// Task feature lengths for a task: the configured ones, or (None) the
// maxima measured over the split, as seqio's Evaluator does.
seqio::SequenceLengths resolve_task_lengths(const std::string& task, const DatasetConfig& cfg);

}  // namespace t5x::trainer
