// Internal: n-gram counting over interned token ids with fixed-size keys
// (no heap allocation per n-gram), as sorted (key, count) lists. Orders up to
// kMaxNgramOrder.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace seqio::metrics::detail {

constexpr int kMaxNgramOrder = 9;

struct NgramKey {
  std::array<std::uint32_t, kMaxNgramOrder> ids{};
  std::uint8_t n = 0;
  bool operator==(const NgramKey& o) const { return n == o.n && ids == o.ids; }
  bool operator<(const NgramKey& o) const { return n != o.n ? n < o.n : ids < o.ids; }
};

// Sorted (n-gram, count) pairs: cheaper than a hash map for the few hundred
// n-grams of one segment.
using SortedCounts = std::vector<std::pair<NgramKey, std::int64_t>>;

inline SortedCounts sorted_ngram_counts(const std::vector<std::uint32_t>& toks, int min_order,
                                        int max_order) {
  std::vector<NgramKey> keys;
  for (int n = min_order; n <= max_order; ++n) {
    for (std::size_t i = 0; i + n <= toks.size(); ++i) {
      NgramKey k;
      k.n = static_cast<std::uint8_t>(n);
      for (int j = 0; j < n; ++j) k.ids[j] = toks[i + j];
      keys.push_back(k);
    }
  }
  std::sort(keys.begin(), keys.end());
  SortedCounts out;
  for (const auto& k : keys) {
    if (!out.empty() && out.back().first == k) ++out.back().second;
    else out.emplace_back(k, 1);
  }
  return out;
}

// Element-wise max of two sorted count lists (union of keys).
inline SortedCounts max_merge(const SortedCounts& a, const SortedCounts& b) {
  SortedCounts out;
  out.reserve(a.size() + b.size());
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) out.push_back(a[i++]);
    else if (i == a.size() || b[j].first < a[i].first) out.push_back(b[j++]);
    else {
      out.emplace_back(a[i].first, std::max(a[i].second, b[j].second));
      ++i;
      ++j;
    }
  }
  return out;
}

}  // namespace seqio::metrics::detail
