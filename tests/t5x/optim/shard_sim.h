// Simulated processes for the optimizers' sharded paths: N threads, each
// holding one device's shards of a (data=1, model=N) mesh, with a ShardComm
// whose sum adds the callers' vectors in rank order and hands every caller
// the total, and whose gather concatenates them in rank order. Records the
// length of every sum and gather (the values that cross shards).
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/array.h"
#include "mesh/reshard.h"
#include "t5x/optim/optimizer.h"

namespace t5x::testing {

class SimComm {
 public:
  explicit SimComm(int n) : n_(n), in_(size_t(n)) {}

  ShardComm comm(int rank) {
    ShardComm c;
    c.sum = [this, rank](const std::vector<std::string>& axes, double* v, size_t len) {
      exchange(rank, axes, v, len, /*gather=*/false, v);
    };
    c.gather = [this, rank](const std::vector<std::string>& axes, const double* v, size_t len, double* out) {
      exchange(rank, axes, v, len, /*gather=*/true, out);
    };
    return c;
  }
  // Lengths (float64 values per process) of the sums / gathers so far, in call order.
  const std::vector<size_t>& lengths() const { return lengths_; }
  const std::vector<size_t>& gather_lengths() const { return gather_lengths_; }
  const std::vector<std::string>& last_axes() const { return axes_; }

  // Runs f(rank) on n threads, one per simulated process.
  static void run(int n, const std::function<void(int)>& f) {
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r) ts.emplace_back(f, r);
    for (auto& t : ts) t.join();
  }

 private:
  void exchange(int rank, const std::vector<std::string>& axes, const double* v, size_t len, bool gather, double* out) {
    std::unique_lock<std::mutex> lock(mu_);
    if (rank == 0) (gather ? gather_lengths_ : lengths_).push_back(len);
    axes_ = axes;
    in_[size_t(rank)].assign(v, v + len);
    const int64_t gen = gen_;
    if (++arrived_ == n_) {
      out_.assign(gather ? len * size_t(n_) : len, 0.0);
      for (size_t r = 0; r < in_.size(); ++r)
        for (size_t i = 0; i < len; ++i) (gather ? out_[r * len + i] : out_[i]) += in_[r][i];
      arrived_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen; });
    }
    std::copy(out_.begin(), out_.end(), out);
  }

  int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t gen_ = 0;
  std::vector<std::vector<double>> in_;
  std::vector<double> out_;
  std::vector<size_t> lengths_, gather_lengths_;
  std::vector<std::string> axes_;
};

// Device `mesh->device_id`'s shard of `full` under `spec`.
inline Array shard_of(const Array& full, const std::shared_ptr<const MeshDesc>& mesh, const PartitionSpec& spec) {
  Array a(full.shape(), full.dtype(), Sharding{mesh, spec});
  NamedShape ns;
  for (const auto& d : full.shape().dims()) ns.emplace_back(d.name, d.size);
  extract_shard(*mesh, ns, spec, mesh->device_id, full.raw_data(), a.raw_data(), dtype_size(full.dtype()));
  return a;
}

}  // namespace t5x::testing
