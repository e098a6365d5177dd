#include "backend/cpu/parallel.h"

#include <atomic>

#include "test_util.h"

namespace t5x::cpu {
namespace {

TEST(Parallel, ForCoversRangeOnce) {
  for (int64_t n : {0, 1, 7, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    parallel_for(n, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(Parallel, NestedCallsRunOnTheCallingThread) {
  // Inside a parallel region the body gets the whole range in one call.
  std::vector<int> calls(4, 0);
#pragma omp parallel for num_threads(2)
  for (int t = 0; t < 4; ++t) {
    parallel_for(100, 1, [&](int64_t b, int64_t e) {
      if (b == 0 && e == 100) calls[size_t(t)]++;
      else calls[size_t(t)] += 100;
    });
  }
  for (int n : calls) EXPECT_EQ(n, 1);
  EXPECT_EQ(num_threads(), omp_get_max_threads());
}

TEST(Parallel, ChunksHaveFixedBoundaries) {
  EXPECT_EQ(num_chunks(10, 4), 3);
  EXPECT_EQ(num_chunks(0, 4), 0);
  std::vector<std::pair<int64_t, int64_t>> seen(3);
  parallel_for_chunks(10, 4, [&](int64_t c, int64_t b, int64_t e) { seen[size_t(c)] = {b, e}; });
  EXPECT_EQ(seen[0], std::make_pair(int64_t(0), int64_t(4)));
  EXPECT_EQ(seen[2], std::make_pair(int64_t(8), int64_t(10)));
}

TEST(Parallel, DeterministicReductionAcrossThreadCounts) {
  auto v = testing::random_vec(100003, 1, -1e4f, 1e4f);
  auto sum = [&] {
    return parallel_reduce_deterministic(int64_t(v.size()), 1000, 0.0f, [&](int64_t b, int64_t e) {
      float s = 0;
      for (int64_t i = b; i < e; ++i) s += v[size_t(i)];
      return s;
    });
  };
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  float s1 = sum();
  omp_set_num_threads(4);
  float s4 = sum();
  omp_set_num_threads(saved);
  EXPECT_EQ(s1, s4);
  double ref = 0;
  for (float x : v) ref += x;
  EXPECT_NEAR(s1, ref, 1e-3 * std::fabs(ref) + 1.0);
}

}  // namespace
}  // namespace t5x::cpu
