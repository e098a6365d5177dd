// The one order in which t5x.cpp adds gradient blocks: microbatches
// (accumulate_grads_microbatched) and data-parallel processes
// (Communicator::all_reduce_pairwise) use it, so that their sums agree bit
// for bit (docs/trainer.md, "Several processes").
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace t5x {

// Sum of blocks 0..n-1 formed pairwise with a binary counter: ((b0 + b1) +
// (b2 + b3)) + ..., the left operand always the earlier blocks; a count that
// is not a power of two adds the partial sums, largest (oldest) first. The
// one order that microbatches and data-parallel processes share, so that
// their sums agree bit for bit. block(i) makes block i; add(left, right) adds
// right into left. n >= 1.
template <typename T, typename Block, typename Add>
T sum_pairwise(int64_t n, Block&& block, Add&& add) {
  std::vector<std::optional<T>> levels;  // levels[k]: sum of the last 2^k unmerged blocks
  for (int64_t i = 0; i < n; ++i) {
    T carry = block(i);
    size_t k = 0;
    for (; k < levels.size() && levels[k]; ++k) {
      T merged = std::move(*levels[k]);
      add(merged, carry);
      carry = std::move(merged);
      levels[k].reset();
    }
    if (k == levels.size()) levels.emplace_back();
    levels[k] = std::move(carry);
  }
  std::optional<T> total;
  for (size_t k = levels.size(); k-- > 0;) {
    if (!levels[k]) continue;
    if (!total) total = std::move(levels[k]);
    else add(*total, *levels[k]);
  }
  return std::move(*total);
}

}  // namespace t5x
