// Internal: walks the flat indices of a row-major shape and keeps, for up to
// four "reduced layouts" (the shape with some dims removed, row-major over
// the kept dims), the flat offset of the current element in each. This turns
// Adafactor's means over dim subsets (keepdims broadcasting included) into
// single fused loops over the parameter buffer.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace t5x::optim_detail {

class ReduceWalker {
 public:
  static constexpr int kTargets = 4;
  // keep[t][d]: whether layout t keeps dim d.
  ReduceWalker(std::vector<int64_t> sizes, const std::array<std::vector<bool>, kTargets>& keep)
      : sizes_(std::move(sizes)), stride_(sizes_.size()) {
    for (int t = 0; t < kTargets; ++t) {
      int64_t s = 1;
      reduced_[size_t(t)] = 1;
      for (int d = int(sizes_.size()) - 1; d >= 0; --d) {
        bool k = keep[size_t(t)].empty() ? true : bool(keep[size_t(t)][size_t(d)]);
        stride_[size_t(d)][size_t(t)] = k ? s : 0;
        if (k) s *= sizes_[size_t(d)];
      }
      reduced_[size_t(t)] = s;
    }
    n_ = 1;
    for (int64_t s : sizes_) n_ *= s;
  }
  int64_t size() const { return n_; }
  // Number of elements of reduced layout t.
  int64_t reduced_size(int t) const { return reduced_[size_t(t)]; }

  // Row-wise walk: f(i0, len, offs, steps) for every run of the last dim,
  // where element i0 + j sits at offs[t] + j * steps[t] in layout t. Lets the
  // inner loops run without per-element carry logic.
  template <typename F>
  void run_rows(F&& f) const {
    const int rank = int(sizes_.size());
    if (rank == 0) {
      std::array<int64_t, kTargets> off{}, step{};
      f(int64_t(0), int64_t(1), off, step);
      return;
    }
    const int64_t len = sizes_.back();
    if (len == 0) return;
    const auto& step = stride_.back();
    std::vector<int64_t> c(size_t(rank), 0);
    std::array<int64_t, kTargets> off{};
    for (int64_t i0 = 0; i0 < n_; i0 += len) {
      f(i0, len, off, step);
      for (int d = rank - 2; d >= 0; --d) {
        const auto& st = stride_[size_t(d)];
        if (++c[size_t(d)] < sizes_[size_t(d)]) {
          for (int t = 0; t < kTargets; ++t) off[size_t(t)] += st[size_t(t)];
          break;
        }
        for (int t = 0; t < kTargets; ++t) off[size_t(t)] -= (sizes_[size_t(d)] - 1) * st[size_t(t)];
        c[size_t(d)] = 0;
      }
    }
  }

  // f(i, offs) for every flat index i, offs[t] = offset in layout t.
  template <typename F>
  void run(F&& f) const {
    const int rank = int(sizes_.size());
    std::vector<int64_t> c(size_t(rank), 0);
    std::array<int64_t, kTargets> off{};
    for (int64_t i = 0; i < n_; ++i) {
      f(i, off);
      for (int d = rank - 1; d >= 0; --d) {
        const auto& st = stride_[size_t(d)];
        if (++c[size_t(d)] < sizes_[size_t(d)]) {
          for (int t = 0; t < kTargets; ++t) off[size_t(t)] += st[size_t(t)];
          break;
        }
        for (int t = 0; t < kTargets; ++t) off[size_t(t)] -= (sizes_[size_t(d)] - 1) * st[size_t(t)];
        c[size_t(d)] = 0;
      }
    }
  }

 private:
  std::vector<int64_t> sizes_;
  std::vector<std::array<int64_t, kTargets>> stride_;
  std::array<int64_t, kTargets> reduced_{};
  int64_t n_ = 1;
};

}  // namespace t5x::optim_detail
