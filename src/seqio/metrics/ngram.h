// Internal: n-gram counting over interned token ids with fixed-size keys
// (no heap allocation per n-gram). Orders up to kMaxNgramOrder.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace seqio::metrics::detail {

constexpr int kMaxNgramOrder = 9;

struct NgramKey {
  std::array<std::uint32_t, kMaxNgramOrder> ids{};
  std::uint8_t n = 0;
  bool operator==(const NgramKey& o) const { return n == o.n && ids == o.ids; }
};

struct NgramKeyHash {
  std::size_t operator()(const NgramKey& k) const {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ k.n;
    for (int i = 0; i < k.n; ++i) {
      h ^= k.ids[i] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
      h *= 0xBF58476D1CE4E5B9ull;
    }
    return static_cast<std::size_t>(h ^ (h >> 31));
  }
};

using NgramCounts = std::unordered_map<NgramKey, std::int64_t, NgramKeyHash>;

// Adds the counts of all n-grams of orders [min_order, max_order] in `toks`.
inline void count_ngrams(const std::vector<std::uint32_t>& toks, int min_order, int max_order,
                         NgramCounts* counts) {
  for (int n = min_order; n <= max_order; ++n) {
    for (std::size_t i = 0; i + n <= toks.size(); ++i) {
      NgramKey k;
      k.n = static_cast<std::uint8_t>(n);
      for (int j = 0; j < n; ++j) k.ids[j] = toks[i + j];
      ++(*counts)[k];
    }
  }
}

}  // namespace seqio::metrics::detail
