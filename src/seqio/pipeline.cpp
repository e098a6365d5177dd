#include "seqio/pipeline.h"

#include <deque>
#include <exception>
#include <future>
#include <random>

#include "seqio/errors.h"

namespace seqio::internal {

std::vector<size_t> permutation(size_t n, uint64_t seed) {
  std::vector<size_t> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = i;
  for (size_t i = n; i > 1; --i) {
    size_t j = derive_seed(seed, i) % i;  // bias ~ i / 2^64, negligible
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

namespace {

constexpr uint64_t kDerivedKeyBit = uint64_t{1} << 63;

struct Rec {
  Example ex;
  uint64_t key;
};

// The records of one shard for one epoch, in order.
class ShardStream {
 public:
  ShardStream(const DataSource& src, const std::string& split, const std::vector<std::string>& files,
              ShardInfo shard, bool shuffle, uint64_t seed, int64_t epoch)
      : src_(src), split_(split), shard_(shard) {
    const size_t n = files.size();
    by_file_ = shard.num_shards > 1 && n >= static_cast<size_t>(shard.num_shards);
    for (size_t f = 0; f < n; ++f)
      if (!by_file_ || static_cast<int>(f % shard.num_shards) == shard.index) order_.push_back(f);
    if (shuffle && order_.size() > 1) {
      auto p = permutation(order_.size(), derive_seed(derive_seed(seed, 0xF11Eull), epoch));
      std::vector<size_t> o(order_.size());
      for (size_t i = 0; i < p.size(); ++i) o[i] = order_[p[i]];
      order_ = o;
    }
  }
  bool next(Rec& r) {
    for (;;) {
      if (!reader_) {
        if (pos_ >= order_.size()) return false;
        file_ = order_[pos_++];
        reader_ = src_.open_shard(split_, file_);
        record_ = 0;
      }
      if (!reader_->next(r.ex)) {
        reader_.reset();
        continue;
      }
      const uint64_t rec = record_++;
      if (!by_file_ && shard_.num_shards > 1) {
        const uint64_t g = global_++;
        if (static_cast<int>(g % shard_.num_shards) != shard_.index) continue;
      }
      ++read_;
      auto k = r.ex.find("_seqio_key");  // provenance stored by the offline cache
      if (k != r.ex.end() && std::holds_alternative<int64_t>(k->second)) {
        r.key = static_cast<uint64_t>(std::get<int64_t>(k->second));
        r.ex.erase(k);
      } else {
        r.key = raw_key(file_, rec);
      }
      return true;
    }
  }
  int64_t records_read() const { return read_; }

 private:
  const DataSource& src_;
  std::string split_;
  ShardInfo shard_;
  bool by_file_ = false;
  std::vector<size_t> order_;
  size_t pos_ = 0, file_ = 0;
  std::unique_ptr<RecordReader> reader_;
  uint64_t record_ = 0, global_ = 0;
  int64_t read_ = 0;
};

struct Block {
  int64_t epoch = 0, index = 0;
  std::vector<Rec> in;
  std::vector<Example> out;
  size_t offset = 0;
  PipelineStats stats;
};

class TaskDataset : public Dataset {
 public:
  TaskDataset(PipelineSpec spec, const DatasetOptions& opt) : spec_(std::move(spec)), opt_(opt) {
    if (opt_.block_size < 1) throw std::invalid_argument("[get_dataset] block_size must be >= 1");
    if (opt_.num_threads < 1) throw std::invalid_argument("[get_dataset] num_threads must be >= 1");
    if (opt_.shard.num_shards < 1 || opt_.shard.index < 0 || opt_.shard.index >= opt_.shard.num_shards)
      throw std::invalid_argument("[get_dataset] shard index must be in [0, num_shards)");
    if (opt_.resume && opt_.start != 0)
      throw std::invalid_argument("[get_dataset] start and resume are exclusive");
    if (opt_.start < 0) throw std::invalid_argument("[get_dataset] start must be >= 0");
    if (opt_.num_epochs && *opt_.num_epochs < 1)
      throw std::invalid_argument("[get_dataset] num_epochs must be >= 1, or unset to repeat forever; got " +
                                  std::to_string(*opt_.num_epochs));
    seed_ = opt_.seed ? *opt_.seed : std::random_device{}() * 0x100000001ull + std::random_device{}();
    files_ = spec_.source->list_shards(opt_.split);
    if (opt_.resume) {
      const auto& p = opt_.resume->stream;
      pos_ = p;
      epoch_ = p.epoch;
      open_epoch();
      Rec r;
      // A block past the epoch's end (the product would overflow) reads to it.
      const int64_t records = p.block > INT64_MAX / opt_.block_size ? INT64_MAX : p.block * opt_.block_size;
      for (int64_t i = 0; i < records; ++i) {
        if (!stream_->next(r)) break;
        ++epoch_records_;
      }
      next_block_ = p.block;
      pending_skip_ = p.offset;
    } else {
      open_epoch();
    }
    if (opt_.start > 0) skip(opt_.start);
  }

  ~TaskDataset() override {
    for (auto& f : inflight_)
      if (f.valid()) f.wait();
  }

  bool next(Example& out) override {
    if (!ensure()) return false;
    Block& b = ready_.front();
    out = std::move(b.out[b.offset++]);
    ++pos_.emitted;
    pos_.epoch = b.epoch;
    pos_.block = b.index;
    pos_.offset = static_cast<int64_t>(b.offset);
    ++stats_.examples_emitted;
    return true;
  }

  Position position() const override {
    Position p;
    p.stream = pos_;
    return p;
  }
  PipelineStats stats() const override {
    PipelineStats s = stats_;
    s.records_read = records_read_ + (stream_ ? stream_->records_read() : 0);
    return s;
  }

 private:
  void open_epoch() {
    if (stream_) records_read_ += stream_->records_read();
    stream_ = std::make_unique<ShardStream>(*spec_.source, opt_.split, files_, opt_.shard, opt_.shuffle, seed_, epoch_);
    next_block_ = 0;
    epoch_records_ = 0;
  }

  void skip(int64_t n) {
    while (n > 0 && ensure()) {
      Block& b = ready_.front();
      const int64_t k = std::min<int64_t>(n, static_cast<int64_t>(b.out.size() - b.offset));
      b.offset += k;
      n -= k;
      pos_.emitted += k;
      pos_.epoch = b.epoch;
      pos_.block = b.index;
      pos_.offset = static_cast<int64_t>(b.offset);
    }
  }

  // Makes ready_.front() hold an unconsumed output; false at the end.
  bool ensure() {
    for (;;) {
      while (!ready_.empty() && ready_.front().offset >= ready_.front().out.size()) ready_.pop_front();
      if (!ready_.empty()) return true;
      if (opt_.num_threads == 1) {
        Block b;
        if (!read_block(b)) return false;
        process(b);
        push_ready(std::move(b));
        continue;
      }
      // Keep num_threads blocks in flight so that workers preprocess while
      // the consumer (packing, training) works; results are taken in order.
      top_up();
      if (inflight_.empty()) return false;
      Block b = inflight_.front().get();
      inflight_.pop_front();
      push_ready(std::move(b));
      top_up();
    }
  }

  void top_up() {
    while (static_cast<int>(inflight_.size()) < opt_.num_threads) {
      Block b;
      if (!read_block(b)) break;
      inflight_.push_back(std::async(std::launch::async, [this, blk = std::move(b)]() mutable {
        process(blk);
        return std::move(blk);
      }));
    }
  }

  void push_ready(Block b) {
    merge(b.stats);
    if (pending_skip_ > 0) {
      b.offset = std::min<size_t>(b.out.size(), static_cast<size_t>(pending_skip_));
      pending_skip_ = 0;
    }
    ready_.push_back(std::move(b));
  }

  // Reads the next block of records (moving to the next epoch when one
  // ends); false at the end of the stream.
  bool read_block(Block& b) {
    while (!finished_) {
      b = Block{};
      b.epoch = epoch_;
      b.index = next_block_;
      Rec r;
      while (static_cast<int64_t>(b.in.size()) < opt_.block_size && stream_->next(r)) b.in.push_back(std::move(r));
      if (!b.in.empty()) {
        epoch_records_ += static_cast<int64_t>(b.in.size());
        ++next_block_;
        return true;
      }
      // End of epoch. An epoch without records ends the stream (avoids
      // spinning forever on an empty shard with infinite epochs).
      const bool more = !opt_.num_epochs || epoch_ + 1 < *opt_.num_epochs;
      if (epoch_records_ == 0 || !more) {
        finished_ = true;
        break;
      }
      ++epoch_;
      open_epoch();
    }
    return false;
  }

  std::string origin(uint64_t key) const {
    if (key & kDerivedKeyBit) return "an example derived by a block preprocessor";
    const uint64_t f = key >> 40;
    if (f >= files_.size()) return "record key " + std::to_string(key);
    return "record " + std::to_string((key & ((uint64_t{1} << 40) - 1)) + 1) + " of " + files_[f];
  }

  // Pure function of (block records, epoch, block index, options).
  void process(Block& b) const {
    static const SequenceLengths kNoLengths;
    std::vector<Rec> recs = std::move(b.in);
    if (opt_.shuffle && recs.size() > 1) {
      auto p = permutation(recs.size(), derive_seed(derive_seed(derive_seed(seed_, 0xB10Cull), b.epoch), b.index));
      std::vector<Rec> shuffled(recs.size());
      for (size_t i = 0; i < p.size(); ++i) shuffled[i] = std::move(recs[p[i]]);
      recs = std::move(shuffled);
    }
    for (const auto& step : spec_.steps) {
      const uint64_t step_seed = derive_seed(seed_, 1000 + step.index);
      const SequenceLengths& lengths = step.post_cache ? opt_.sequence_lengths : kNoLengths;
      auto seed_of = [&](uint64_t key) {
        uint64_t s = derive_seed(step_seed, key);
        return step.post_cache ? derive_seed(s, static_cast<uint64_t>(b.epoch)) : s;
      };
      if (step.pp.kind == Preprocessor::Kind::kMap) {
        std::vector<Rec> kept;
        kept.reserve(recs.size());
        for (auto& r : recs) {
          PreprocessContext ctx{spec_.output_features, lengths, seed_of(r.key), r.key, b.epoch};
          std::optional<Example> o;
          try {
            o = step.pp.map(std::move(r.ex), ctx);
          } catch (const std::exception& e) {
            throw DataError("task '" + spec_.task_name + "', preprocessor '" + step.pp.name + "', " +
                            origin(r.key) + ": " + e.what());
          }
          if (o) {
            kept.push_back(Rec{std::move(*o), r.key});
          } else {
            ++b.stats.examples_dropped;
          }
        }
        recs = std::move(kept);
      } else if (step.pp.kind == Preprocessor::Kind::kBlock) {
        if (recs.empty()) continue;
        const uint64_t key0 = recs.front().key;
        PreprocessContext ctx{spec_.output_features, lengths, seed_of(key0), key0, b.epoch};
        std::vector<Example> in;
        in.reserve(recs.size());
        for (auto& r : recs) in.push_back(std::move(r.ex));
        std::vector<Example> out;
        try {
          out = step.pp.block(std::move(in), ctx);
        } catch (const std::exception& e) {
          throw DataError("task '" + spec_.task_name + "', block preprocessor '" + step.pp.name +
                          "' (block " + std::to_string(b.index) + " of epoch " + std::to_string(b.epoch) +
                          "): " + e.what());
        }
        recs.clear();
        const uint64_t kbase = derive_seed(key0, static_cast<uint64_t>(step.index));
        for (size_t j = 0; j < out.size(); ++j)
          recs.push_back(Rec{std::move(out[j]), derive_seed(kbase, j) | kDerivedKeyBit});
      }
    }
    b.out.reserve(recs.size());
    for (auto& r : recs) {
      if (spec_.validate) validate_and_trim(r, b.stats);
      if (spec_.emit_keys) r.ex["_seqio_key"] = static_cast<int64_t>(r.key);
      b.out.push_back(std::move(r.ex));
    }
  }

  void validate_and_trim(Rec& r, PipelineStats& st) const {
    for (const auto& [name, f] : spec_.output_features) {
      auto it = r.ex.find(name);
      if (it == r.ex.end()) {
        if (f.required)
          throw DataError("task '" + spec_.task_name + "': output feature '" + name +
                          "' is missing after preprocessing (" + origin(r.key) +
                          ") (hint: check the preprocessors or mark the feature required=false)");
        continue;
      }
      if (!value_matches(it->second, f.dtype))
        throw DataError("task '" + spec_.task_name + "': output feature '" + name + "' should be " +
                        dtype_name(f.dtype) + " (" + origin(r.key) + ") (hint: is a tokenize step missing?)");
      if (!opt_.trim_output_features) continue;
      auto len = opt_.sequence_lengths.find(name);
      if (len == opt_.sequence_lengths.end()) continue;
      if (auto* t = std::get_if<Tokens>(&it->second)) {
        if (static_cast<int64_t>(t->size()) > len->second) {
          ++st.trimmed_examples[name];
          st.trimmed_tokens[name] += static_cast<int64_t>(t->size()) - len->second;
          t->resize(len->second);
        }
      }
    }
  }

  void merge(const PipelineStats& s) {
    stats_.examples_dropped += s.examples_dropped;
    for (const auto& [k, v] : s.trimmed_examples) stats_.trimmed_examples[k] += v;
    for (const auto& [k, v] : s.trimmed_tokens) stats_.trimmed_tokens[k] += v;
  }

  PipelineSpec spec_;
  DatasetOptions opt_;
  uint64_t seed_ = 0;
  std::vector<std::string> files_;
  int64_t epoch_ = 0, next_block_ = 0, epoch_records_ = 0, pending_skip_ = 0, records_read_ = 0;
  std::unique_ptr<ShardStream> stream_;
  std::deque<Block> ready_;
  std::deque<std::future<Block>> inflight_;  // declared after what workers read
  bool finished_ = false;
  StreamPosition pos_;
  PipelineStats stats_;
};

}  // namespace

std::unique_ptr<Dataset> make_pipeline(PipelineSpec spec, const DatasetOptions& options) {
  return std::make_unique<TaskDataset>(std::move(spec), options);
}

}  // namespace seqio::internal
