// threefry2x32 keys against jax.random golden values.
#include <gtest/gtest.h>
#include <omp.h>

#include "core/random.h"
#include "golden.h"

namespace t5x {
namespace {
using testing::key_of;

TEST(CoreRandom, KnownThreefryVector) {
  // Random123 known-answer test for threefry2x32_20: key 0, counter 0.
  auto y = threefry2x32(PRNGKey{{0, 0}}, 0, 0);
  EXPECT_EQ(y[0], 0x6b200159u);
  EXPECT_EQ(y[1], 0x99ba4efeu);
}

TEST(CoreRandom, PrngKeyMatchesJax) {
  auto g = testing::load_random_golden();
  ASSERT_GE(g["keys"].size(), 5u);
  for (const auto& c : g["keys"]) EXPECT_EQ(prng_key(c["seed"].get<int64_t>()), key_of(c["key"])) << c["seed"];
}

TEST(CoreRandom, SplitMatchesJax) {
  auto g = testing::load_random_golden();
  for (const auto& c : g["split"]) {
    auto keys = split(key_of(c["key"]), c["n"].get<int64_t>());
    ASSERT_EQ(keys.size(), c["keys"].size());
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(keys[i], key_of(c["keys"][i])) << "n=" << c["n"] << " i=" << i;
  }
}

TEST(CoreRandom, FoldInMatchesJax) {
  auto g = testing::load_random_golden();
  for (const auto& c : g["fold_in"])
    EXPECT_EQ(fold_in(key_of(c["key"]), uint32_t(c["data"].get<uint64_t>())), key_of(c["key_out"])) << c["data"];
}

TEST(CoreRandom, BitsMatchJaxIncludingOddCounts) {
  auto g = testing::load_random_golden();
  for (const auto& c : g["bits"]) {
    auto bits = random_bits(key_of(c["key"]), c["n"].get<int64_t>());
    ASSERT_EQ(bits.size(), c["bits"].size());
    for (size_t i = 0; i < bits.size(); ++i) EXPECT_EQ(bits[i], c["bits"][i].get<uint32_t>()) << "n=" << c["n"];
  }
}

TEST(CoreRandom, SameBitsOnAnyThreadCount) {
  PRNGKey k = prng_key(5);
  int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  auto one = random_bits(k, 200001);
  omp_set_num_threads(4);
  auto four = random_bits(k, 200001);
  omp_set_num_threads(prev);
  EXPECT_EQ(one, four);
}

// random_bits_at gives the words of random_bits at the indices asked for,
// even and odd counts alike (odd: the last pair's zero padding), any order.
TEST(CoreRandom, BitsAtAreTheBitsAtThoseIndices) {
  const PRNGKey k = fold_in(prng_key(3), 11);
  for (int64_t n : {1, 2, 3, 7, 8, 1001, 32128 * 3}) {
    SCOPED_TRACE(n);
    const std::vector<uint32_t> all = random_bits(k, n);
    std::vector<int64_t> at{n - 1, 0, n / 2, (n + 1) / 2 - 1, n / 3};
    for (int64_t i = 0; i < n; i += 97) at.push_back(i);
    std::vector<uint32_t> got(at.size());
    random_bits_at(k, n, at.data(), int64_t(at.size()), got.data());
    for (size_t i = 0; i < at.size(); ++i) EXPECT_EQ(got[i], all[size_t(at[i])]) << at[i];
  }
  const int64_t bad = 5;
  uint32_t out = 0;
  EXPECT_THROW(random_bits_at(k, 5, &bad, 1, &out), std::invalid_argument);
}

TEST(CoreRandom, ErfInvInvertsErf) {
  for (float x : {-0.999f, -0.5f, -0.1f, 0.f, 0.3f, 0.9f, 0.99999f})
    EXPECT_NEAR(std::erf(double(erf_inv_f32(x))), x, 2e-6) << x;
  EXPECT_EQ(erf_inv_f32(1.0f), INFINITY);
}

}  // namespace
}  // namespace t5x
