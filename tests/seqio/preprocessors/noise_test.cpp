// seqio.md §4.2 and §8 T21-T22: span arithmetic, noise masks, token functions.
#include "seqio/preprocessors/noise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace seqio::preprocessors {
namespace {

int64_t count_noise(const NoiseMask& m) { return std::count(m.begin(), m.end(), 1); }
int64_t count_spans(const NoiseMask& m) {
  int64_t s = 0;
  for (size_t i = 0; i < m.size(); ++i) s += m[i] && (i == 0 || !m[i - 1]);
  return s;
}

TEST(RandomSpansHelper, T5Values) {  // T22 and §4.2 worked values
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(random_spans_helper(512, 0.15, 3.0), (P{568, 114}));
  EXPECT_EQ(random_spans_helper(1024, 0.15, 3.0), (P{1137, 229}));
  EXPECT_EQ(random_spans_helper(626, 0.15, 3.0), (P{694, 140}));
  EXPECT_EQ(random_spans_helper(256, 0.15, 3.0), (P{284, 58}));
  EXPECT_EQ(random_spans_helper(128, 0.15, 3.0), (P{141, 29}));
  EXPECT_EQ(random_spans_helper(64, 0.2, 2.0), (P{70, 22}));
  EXPECT_EQ(random_spans_helper(64, 0.2, 1.0), (P{63, 27}));
  EXPECT_THROW(random_spans_helper(0, 0.15, 3.0), std::invalid_argument);
}

TEST(RandomSpansCounts, Arithmetic) {
  // 568 tokens: noise round(85.2) = 85, spans round(28.33) = 28.
  SpanCounts c = random_spans_counts(568, 0.15, 3.0);
  EXPECT_EQ(c.num_noise_tokens, 85);
  EXPECT_EQ(c.num_noise_spans, 28);
  EXPECT_EQ(c.num_nonnoise_tokens, 483);
  // Half-to-even: 10 * 0.25 = 2.5 -> 2 noise tokens; 2 / 1.0 -> 2 spans.
  EXPECT_EQ(random_spans_counts(10, 0.25, 1.0).num_noise_tokens, 2);
  // 30 * 0.15 = 4.5 -> 4 (even), 4 / 3 -> 1 span.
  EXPECT_EQ(random_spans_counts(30, 0.15, 3.0).num_noise_tokens, 4);
  EXPECT_EQ(random_spans_counts(30, 0.15, 3.0).num_noise_spans, 1);
  // Degenerate lengths are padded to 2 and keep one noise token.
  EXPECT_EQ(random_spans_counts(1, 0.15, 3.0).padded_length, 2);
  EXPECT_EQ(random_spans_counts(1, 0.15, 3.0).num_noise_tokens, 1);
  EXPECT_EQ(random_spans_counts(3, 0.01, 3.0).num_noise_tokens, 1);
  EXPECT_EQ(random_spans_counts(3, 0.99, 3.0).num_noise_tokens, 2);
}

TEST(RandomSpansNoiseMask, T22CountsAndStructure) {
  // seqio.md T22: length 32, density 0.25, mean 2 -> 8 noise tokens in 4 spans.
  for (uint64_t seed = 0; seed < 50; ++seed) {
    NoiseMask m = random_spans_noise_mask(32, 0.25, Rng(seed), 2.0);
    ASSERT_EQ(m.size(), 32u);
    EXPECT_EQ(count_noise(m), 8);
    EXPECT_EQ(count_spans(m), 4);
    EXPECT_EQ(m.front(), 0);  // starts with non-noise
    EXPECT_EQ(m.back(), 1);   // ends with noise
  }
}

TEST(RandomSpansNoiseMask, EdgeCases) {
  EXPECT_EQ(random_spans_noise_mask(5, 0.0, Rng(1)), NoiseMask(5, 0));
  EXPECT_EQ(random_spans_noise_mask(1, 0.15, Rng(1)), NoiseMask{0});  // [F, T] cut to 1
  EXPECT_EQ(random_spans_noise_mask(0, 0.15, Rng(1)), NoiseMask{});
  EXPECT_EQ(random_spans_noise_mask(2, 0.15, Rng(1)), (NoiseMask{0, 1}));
  // 31 tokens at density 0.5, mean 1: 16 spans need 16 separators, only 15.
  EXPECT_THROW(random_spans_noise_mask(31, 0.5, Rng(1), 1.0), std::invalid_argument);
}

TEST(RandomSpansNoiseMask, DeterministicPerKey) {
  NoiseMask a = random_spans_noise_mask(568, 0.15, Rng(42), 3.0);
  EXPECT_EQ(a, random_spans_noise_mask(568, 0.15, Rng(42), 3.0));
  EXPECT_NE(a, random_spans_noise_mask(568, 0.15, Rng(43), 3.0));
  EXPECT_EQ(count_noise(a), 85);
  EXPECT_EQ(count_spans(a), 28);
}

TEST(RandomSpansNoiseMask, SpanLengthsAreUniformCompositions) {
  // length 20, density 0.25, mean 2: 5 noise tokens in round(2.5) = 2 spans;
  // the first noise span has 1..4 tokens, each with probability 1/4.
  std::map<int, int> first_len;
  const int n = 4000;
  for (int s = 0; s < n; ++s) {
    NoiseMask m = random_spans_noise_mask(20, 0.25, Rng::for_example(7, "t", s), 2.0);
    ASSERT_EQ(count_noise(m), 5);
    ASSERT_EQ(count_spans(m), 2);
    size_t i = 0;
    while (!m[i]) ++i;
    int len = 0;
    while (i < m.size() && m[i]) ++len, ++i;
    first_len[len]++;
  }
  ASSERT_EQ(first_len.size(), 4u);
  for (auto [len, c] : first_len) EXPECT_NEAR(c / double(n), 0.25, 0.03) << "length " << len;
}

TEST(RandomSpansNoiseMask, RandomRollKeepsCounts) {
  std::set<size_t> first_noise;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    NoiseMask m = random_spans_noise_mask(40, 0.15, Rng(seed), 3.0, /*random_roll=*/true);
    EXPECT_EQ(count_noise(m), 6);
    first_noise.insert(std::find(m.begin(), m.end(), 1) - m.begin());
  }
  EXPECT_GT(first_noise.size(), 5u);  // no longer always near the end
}

// T5's semantics (t5/data/preprocessors.py random_spans_noise_mask): the
// unrolled mask of max(length, 2) tokens, truncated to `length`, then
// tf.roll'ed by an offset drawn uniformly from [0, max(length, 2)):
// out[(i + offset) % length] = in[i].
TEST(RandomSpansNoiseMask, RandomRollIsT5sRollOfTheTruncatedMask) {
  std::set<int64_t> offsets_seen;
  for (int64_t len : {1, 2, 3, 7, 9, 20, 57}) {
    for (uint64_t seed = 0; seed < 60; ++seed) {
      const Rng rng(seed * 7919 + uint64_t(len));
      const NoiseMask base = random_spans_noise_mask(len, 0.15, rng, 3.0, false);
      const NoiseMask rolled = random_spans_noise_mask(len, 0.15, rng, 3.0, true);
      Rng roll = rng.split(2);  // the roll's own stream (T5: a seed of its own)
      const int64_t offset = roll.uniform_int(0, std::max<int64_t>(len, 2));
      ASSERT_GE(offset, 0);
      ASSERT_LT(offset, std::max<int64_t>(len, 2));
      if (len == 7) offsets_seen.insert(offset);
      NoiseMask expected(base.size());
      for (int64_t i = 0; i < len; ++i) expected[size_t((i + offset) % len)] = base[size_t(i)];
      ASSERT_EQ(rolled, expected) << "length " << len << " seed " << seed << " offset " << offset;
    }
  }
  EXPECT_EQ(offsets_seen.size(), 7u);  // every offset of [0, 7) occurs
}

// t5#905: on short inputs (a single noise span) the unrolled mask always
// ends with the noise; rolled, the span starts anywhere.
TEST(RandomSpansNoiseMask, RandomRollMovesTheNoiseOffTheTail) {
  std::set<int64_t> starts_plain, starts_rolled;
  int tail_plain = 0, tail_rolled = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const NoiseMask p = random_spans_noise_mask(20, 0.15, Rng(seed), 3.0, false);
    const NoiseMask r = random_spans_noise_mask(20, 0.15, Rng(seed), 3.0, true);
    ASSERT_EQ(count_noise(r), count_noise(p));
    starts_plain.insert(std::find(p.begin(), p.end(), 1) - p.begin());
    starts_rolled.insert(std::find(r.begin(), r.end(), 1) - r.begin());
    tail_plain += p.back();
    tail_rolled += r.back();
  }
  EXPECT_EQ(starts_plain, (std::set<int64_t>{17}));  // 3 noise tokens, always 17..19
  EXPECT_EQ(tail_plain, 200);
  EXPECT_GE(starts_rolled.size(), 18u);  // 20 possible starts
  EXPECT_LT(tail_rolled, 60);            // 3 of 20 positions are noise: ~30 of 200
}

TEST(IidNoiseMask, RateAndDeterminism) {
  NoiseMask m = iid_noise_mask(20000, 0.15, Rng(3));
  EXPECT_NEAR(count_noise(m) / 20000.0, 0.15, 0.01);
  EXPECT_EQ(m, iid_noise_mask(20000, 0.15, Rng(3)));
  EXPECT_EQ(count_noise(iid_noise_mask(100, 0.0, Rng(3))), 0);
}

TEST(RandomPrefixNoiseMask, PrefixRange) {
  std::set<int64_t> seen;
  for (uint64_t s = 0; s < 300; ++s) {
    NoiseMask m = random_prefix_noise_mask(10, 0.5, Rng(s));
    const int64_t n = count_noise(m);
    for (int64_t i = 0; i < 10; ++i) ASSERT_EQ(m[i], i < n ? 1 : 0);  // a prefix
    seen.insert(n);
  }
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9}));  // [1, len-1]
  // density 0.25: min = round((1 - 0.5) * 9) = round(4.5) = 4 (half to even).
  for (uint64_t s = 0; s < 100; ++s) {
    const int64_t n = count_noise(random_prefix_noise_mask(10, 0.25, Rng(s)));
    EXPECT_GE(n, 4);
    EXPECT_LE(n, 9);
  }
  EXPECT_EQ(random_prefix_noise_mask(1, 0.5, Rng(1)), NoiseMask{0});
  EXPECT_THROW(random_prefix_noise_mask(10, 0.6, Rng(1)), std::invalid_argument);
}

TEST(TokenFns, T21) {
  const Tokens t{10, 11, 12, 13, 14, 15};
  const NoiseMask m{1, 1, 0, 0, 1, 0};
  EXPECT_EQ(noise_token_to_sentinel(t, m, 1000), (Tokens{999, 999, 12, 13, 999, 15}));
  EXPECT_EQ(noise_span_to_sentinel(t, m, 1000), (Tokens{999, 12, 13, 999, 15}));
  EXPECT_EQ(nonnoise_span_to_sentinel(t, m, 1000), (Tokens{10, 11, 999, 14, 999}));
  EXPECT_EQ(noise_span_to_unique_sentinel(t, m, 1000), (Tokens{999, 12, 13, 998, 15}));
  EXPECT_EQ(nonnoise_span_to_unique_sentinel(t, m, 1000), (Tokens{10, 11, 999, 14, 998}));
  EXPECT_EQ(drop_noise_tokens(t, m), (Tokens{12, 13, 15}));
  EXPECT_EQ(drop_nonnoise_tokens(t, m), (Tokens{10, 11, 14}));
  EXPECT_THROW(noise_span_to_unique_sentinel(t, NoiseMask{1}, 1000), std::invalid_argument);
}

TEST(TokenFns, SpanCorruptionInputsAndTargetsInterleave) {
  // For mask [N1, X1, N2, X2]: inputs = N1 S0 N2 S1, targets = S0 X1 S1 X2.
  const Tokens t{3, 4, 5, 6, 7, 8, 9};
  const NoiseMask m{0, 0, 1, 1, 0, 1, 1};
  EXPECT_EQ(noise_span_to_unique_sentinel(t, m, 100), (Tokens{3, 4, 99, 7, 98}));
  EXPECT_EQ(nonnoise_span_to_unique_sentinel(t, m, 100), (Tokens{99, 5, 6, 98, 8, 9}));
}

}  // namespace
}  // namespace seqio::preprocessors
