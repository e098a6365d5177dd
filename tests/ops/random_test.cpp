// Sampling ops against jax.random golden values; thread-count invariance.
#include <omp.h>

#include <numeric>

#include "../core/golden.h"
#include "harness.h"

namespace t5x {
namespace {
using namespace testing;

Shape shape2(const nlohmann::json& s) { return Shape{{"a", s[0].get<int64_t>()}, {"b", s[1].get<int64_t>()}}; }

TEST(RandomOps, UniformBitExactWithJax) {
  auto g = load_random_golden();
  for (const auto& c : g["uniform"]) {
    Array u = uniform(key_of(c["key"]), shape2(c["shape"]), c["minval"].get<double>(), c["maxval"].get<double>());
    auto v = u.to_floats();
    ASSERT_EQ(v.size(), c["values"].size());
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], c["values"][i].get<float>()) << i;
  }
}

TEST(RandomOps, NormalAndTruncatedNormalMatchJax) {
  auto g = load_random_golden();
  for (const auto& c : g["normal"]) {
    auto v = normal(key_of(c["key"]), shape2(c["shape"])).to_floats();
    for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], c["values"][i].get<float>(), 2e-6) << i;
  }
  for (const auto& c : g["truncated_normal"]) {
    auto v = truncated_normal(key_of(c["key"]), c["lower"].get<double>(), c["upper"].get<double>(), shape2(c["shape"]))
                 .to_floats();
    for (size_t i = 0; i < v.size(); ++i) {
      EXPECT_NEAR(v[i], c["values"][i].get<float>(), 2e-6) << i;
      EXPECT_GT(v[i], -2.f);
      EXPECT_LT(v[i], 2.f);
    }
  }
}

TEST(RandomOps, BernoulliAndCategoricalMatchJax) {
  auto g = load_random_golden();
  for (const auto& c : g["bernoulli"]) {
    auto v = bernoulli(key_of(c["key"]), c["p"].get<double>(), shape2(c["shape"])).to_ints();
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], c["values"][i].get<int64_t>()) << i;
  }
  for (const auto& c : g["categorical"]) {
    Shape s{{"batch", c["shape"][0].get<int64_t>()}, {"vocab", c["shape"][1].get<int64_t>()}};
    Array logits = Array::from_floats(s, c["logits"].get<std::vector<float>>());
    Array v = categorical(key_of(c["key"]), logits, "vocab");
    EXPECT_EQ(v.shape(), (Shape{{"batch", s[0].size}}));
    auto vi = v.to_ints();
    for (size_t i = 0; i < vi.size(); ++i) EXPECT_EQ(vi[i], c["values"][i].get<int64_t>()) << i;
  }
}

// categorical_noise_at is the noise categorical adds: argmax(logits + noise
// at every element) is categorical's draw, row by row; and a few elements'
// noise is those elements' noise of the whole draw.
TEST(RandomOps, CategoricalNoiseAtIsTheDrawsNoise) {
  const int64_t rows = 3, vocab = 1001;
  std::vector<float> lg(size_t(rows * vocab));
  for (size_t i = 0; i < lg.size(); ++i) lg[i] = float((i * 37) % 101) / 25.0f;
  const Array logits = Array::from_floats(Shape{{"batch", rows}, {"vocab", vocab}}, lg);
  for (uint32_t seed : {0u, 1u, 7u}) {
    const PRNGKey k = fold_in(prng_key(5), seed);
    std::vector<int64_t> all(lg.size());
    std::iota(all.begin(), all.end(), 0);
    const std::vector<float> g = categorical_noise_at(k, rows * vocab, all);
    const std::vector<int64_t> drawn = categorical(k, logits, "vocab").to_ints();
    for (int64_t r = 0; r < rows; ++r) {
      const float* gr = g.data() + r * vocab;
      const float* lr = lg.data() + r * vocab;
      int64_t best = 0;
      for (int64_t v = 1; v < vocab; ++v)
        if (gr[v] + lr[v] > gr[best] + lr[best]) best = v;
      EXPECT_EQ(best, drawn[size_t(r)]) << r;
    }
    const std::vector<int64_t> few{2500, 3, 1001};
    const std::vector<float> gf = categorical_noise_at(k, rows * vocab, few);
    for (size_t i = 0; i < few.size(); ++i) EXPECT_EQ(gf[i], g[size_t(few[i])]);
  }
}

TEST(RandomOps, StatisticsAndThreadInvariance) {
  Shape big{{"a", 300}, {"b", 1001}};
  PRNGKey k = prng_key(17);
  int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  Array n1 = normal(k, big);
  omp_set_num_threads(4);
  Array n4 = normal(k, big);
  omp_set_num_threads(prev);
  EXPECT_TRUE(array_equal(n1, n4));
  EXPECT_NEAR(mean(n1).item(), 0.0, 0.01);
  EXPECT_NEAR(mean(square(n1)).item(), 1.0, 0.01);
  Array b = bernoulli(k, 0.25, big);
  EXPECT_NEAR(mean(cast(b, DType::f32)).item(), 0.25, 0.01);
  Array u = uniform(split(k)[1], big, 2.0, 3.0);
  EXPECT_GE(min(u).item(), 2.0);
  EXPECT_LT(max(u).item(), 3.0);
  // Different keys give different samples.
  EXPECT_FALSE(array_equal(normal(split(k)[0], big), n1));
}

TEST(RandomOps, DropoutKeepsScaledValuesAndBroadcasts) {
  Array x = Array::ones(Shape{{"batch", 4}, {"length", 50}, {"embed", 64}});
  Array y = dropout(prng_key(3), x, 0.5, {"length"});
  auto v = y.to_floats();
  int64_t kept = 0;
  for (float f : v) {
    EXPECT_TRUE(f == 0.f || f == 2.f);
    kept += f != 0;
  }
  EXPECT_NEAR(double(kept) / double(v.size()), 0.5, 0.08);
  // Broadcast along length: every length position shares the mask.
  EXPECT_TRUE(array_equal(slice(y, "length", 0, 1), slice(y, "length", 7, 1)));
  EXPECT_TRUE(array_equal(dropout(prng_key(3), x, 0.0), x));
  check_grad([](const std::vector<Array>& a) { return dropout(prng_key(4), a[0], 0.3); },
             {rand_array(Shape{{"n", 10}}, 1)});
}

TEST(RandomOps, Misuse) {
  expect_invalid([] { uniform(prng_key(0), Shape{{"n", 2}}, 0, 1, DType::i32); }, {"[uniform]", "int32"});
  expect_invalid([] { categorical(prng_key(0), Array::zeros(Shape{{"n", 2}}), "vocab"); }, {"[categorical]", "'vocab'"});
}

}  // namespace
}  // namespace t5x
