#include "t5x/trainer/data.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "ops/shape.h"
#include "seqio/errors.h"
#include "seqio/mixture.h"

namespace t5x::trainer {

Batch examples_to_batch(const std::vector<seqio::Example>& rows) {
  Batch out;
  if (rows.empty()) return out;
  const int64_t n = static_cast<int64_t>(rows.size());
  for (const auto& [key, v] : rows[0]) {
    const auto* first = std::get_if<seqio::Tokens>(&v);
    if (!first) continue;
    const int64_t len = static_cast<int64_t>(first->size());
    std::vector<int32_t> flat;
    flat.reserve(static_cast<size_t>(n * len));
    for (int64_t r = 0; r < n; ++r) {
      const auto& t = seqio::get_tokens(rows[r], key);
      if (static_cast<int64_t>(t.size()) != len)
        throw std::invalid_argument("[trainer] feature '" + key + "' has length " + std::to_string(t.size()) +
                                    " in row " + std::to_string(r) + " but " + std::to_string(len) +
                                    " in row 0 (batches need a feature converter)");
      flat.insert(flat.end(), t.begin(), t.end());
    }
    out[key] = Array::from_vector(Shape{{"batch", n}, {"length", len}}, flat);
  }
  return out;
}

int64_t batch_rows(const Batch& b) { return b.empty() ? 0 : b.begin()->second.dim("batch"); }

Batch slice_rows(const Batch& b, int64_t begin, int64_t end) {
  Batch out;
  if (end <= begin) return out;
  for (const auto& [k, a] : b) out[k] = slice(a, "batch", begin, end - begin);
  return out;
}

Batch pad_rows(const Batch& b, int64_t rows) {
  Batch out;
  for (const auto& [k, a] : b) out[k] = pad(a, "batch", 0, std::max<int64_t>(0, rows - a.dim("batch")));
  return out;
}

namespace {

bool has_inputs(const seqio::SequenceLengths& l) { return l.count("inputs") != 0; }

}  // namespace

TrainData::TrainData(const DatasetConfig& cfg, const ModelConfig& model, uint64_t seed, int64_t shard,
                     int64_t num_shards, std::optional<seqio::BatchPosition> resume)
    : name_(cfg.mixture_or_task_name) {
  if (!cfg.task_feature_lengths)
    throw std::invalid_argument("[trainer] the training DatasetConfig needs task_feature_lengths "
                                "(set TASK_FEATURE_LENGTHS)");
  if (cfg.batch_size % num_shards != 0)
    throw std::invalid_argument("[trainer] Batch size (" + std::to_string(cfg.batch_size) +
                                ") must be divisible by the data mesh size (" + std::to_string(num_shards) + ")");
  host_batch_ = cfg.batch_size / num_shards;
  shard_ = shard;
  seqio::DatasetOptions o;
  o.sequence_lengths = *cfg.task_feature_lengths;
  o.split = cfg.split;
  o.shuffle = cfg.shuffle;
  o.seed = seed;
  // Every process reads the same global stream and keeps its rows (below), so
  // the global batches do not depend on the number of processes.
  o.num_epochs = std::nullopt;  // t5x repeats the training data
  o.use_cached = cfg.use_cached;
  o.cache_dirs = cfg.cache_dirs;
  std::shared_ptr<seqio::FeatureConverter> conv =
      make_feature_converter(model, cfg.pack, has_inputs(*cfg.task_feature_lengths));
  const seqio::SequenceLengths lengths = *cfg.task_feature_lengths;
  auto convert = [conv, lengths](const std::vector<seqio::Example>& w) { return (*conv)(w, lengths); };
  const int64_t window = conv->packing_window(lengths);
  ds_ = seqio::get_batched_dataset(cfg.mixture_or_task_name, o, convert, window, static_cast<int>(cfg.batch_size),
                                   true, resume);
}

Batch TrainData::next() {
  std::vector<seqio::Example> rows;
  if (!ds_->next(rows))
    throw seqio::DataError("[trainer] the training data of '" + name_ + "' produced no batch of " +
                           std::to_string(host_batch_) +
                           " rows\n  hint: check the split and that the task has examples");
  std::vector<seqio::Example> mine(rows.begin() + shard_ * host_batch_, rows.begin() + (shard_ + 1) * host_batch_);
  return examples_to_batch(mine);
}

seqio::SequenceLengths resolve_task_lengths(const std::string& task, const DatasetConfig& cfg) {
  if (cfg.task_feature_lengths) return *cfg.task_feature_lengths;
  // seqio's sequence_length=None: the maxima over the split.
  seqio::DatasetOptions o;
  o.split = cfg.split;
  o.shuffle = false;
  o.seed = cfg.seed.value_or(0);
  o.num_epochs = 1;
  o.use_cached = cfg.use_cached;
  o.cache_dirs = cfg.cache_dirs;
  o.trim_output_features = false;
  auto ds = seqio::get_dataset(task, o);
  seqio::SequenceLengths out;
  auto features = seqio::TaskRegistry::get(task)->output_features();
  seqio::Example ex;
  while (ds->next(ex))
    for (const auto& [k, f] : features) {
      auto it = ex.find(k);
      if (it == ex.end()) continue;
      if (const auto* t = std::get_if<seqio::Tokens>(&it->second))
        out[k] = std::max(out[k], static_cast<int>(t->size()));
    }
  for (auto& [k, v] : out) v = std::max(v, 1);
  return out;
}

FiniteData::FiniteData(const std::string& task, const DatasetConfig& cfg, const ModelConfig& model,
                       int64_t host_batch, int64_t shard, int64_t num_shards, int64_t start, bool pack)
    : host_batch_(host_batch), pack_(pack) {
  lengths_ = resolve_task_lengths(task, cfg);
  seqio::DatasetOptions o;
  o.sequence_lengths = lengths_;
  o.split = cfg.split;
  o.shuffle = cfg.shuffle;
  o.seed = cfg.seed.value_or(0);
  o.shard = {static_cast<int>(shard), static_cast<int>(num_shards)};
  o.num_epochs = 1;
  o.start = start;
  o.use_cached = cfg.use_cached;
  o.cache_dirs = cfg.cache_dirs;
  ds_ = seqio::get_dataset(task, o);
  conv_ = make_feature_converter(model, pack, has_inputs(lengths_));
}

namespace {

// Only the task features the converter takes.
std::vector<seqio::Example> task_features_only(const std::vector<seqio::Example>& rows,
                                               const seqio::SequenceLengths& lengths) {
  std::vector<seqio::Example> feats;
  feats.reserve(rows.size());
  for (const auto& r : rows) {
    seqio::Example f;
    for (const auto& [k, len] : lengths) {
      auto it = r.find(k);
      if (it != r.end()) f[k] = it->second;
    }
    feats.push_back(std::move(f));
  }
  return feats;
}

}  // namespace

bool FiniteData::next(Batch& batch, std::vector<seqio::Example>* raw) {
  seqio::Example ex;
  if (pack_) {
    // Convert packing windows until a batch of rows is ready; rows carry over.
    const int64_t window = std::max<int64_t>(1, conv_->packing_window(lengths_));
    while (static_cast<int64_t>(pending_.size()) < host_batch_ && !done_) {
      std::vector<seqio::Example> rows;
      while (static_cast<int64_t>(rows.size()) < window && ds_->next(ex)) rows.push_back(ex);
      if (static_cast<int64_t>(rows.size()) < window) done_ = true;
      if (rows.empty()) break;
      auto converted = (*conv_)(task_features_only(rows, lengths_), lengths_);
      pending_.insert(pending_.end(), std::make_move_iterator(converted.begin()),
                      std::make_move_iterator(converted.end()));
    }
    if (pending_.empty()) return false;
    const size_t n = std::min<size_t>(pending_.size(), static_cast<size_t>(host_batch_));
    std::vector<seqio::Example> out(pending_.begin(), pending_.begin() + n);
    pending_.erase(pending_.begin(), pending_.begin() + n);
    batch = examples_to_batch(out);
    if (raw) raw->clear();
    return true;
  }
  if (done_) return false;
  std::vector<seqio::Example> rows;
  while (static_cast<int64_t>(rows.size()) < host_batch_ && ds_->next(ex)) rows.push_back(ex);
  if (static_cast<int64_t>(rows.size()) < host_batch_) done_ = true;
  if (rows.empty()) return false;
  batch = examples_to_batch((*conv_)(task_features_only(rows, lengths_), lengths_));
  if (raw) *raw = std::move(rows);
  return true;
}

}  // namespace t5x::trainer
