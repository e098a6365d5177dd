#include "backend/cpu/vec_math.h"

#include "test_util.h"

namespace t5x::cpu {
namespace {

TEST(VecMath, ExpRelativeErrorAndLimits) {
  std::vector<float> x;
  for (float v = -87.f; v < 88.f; v += 0.0137f) x.push_back(v);
  x.push_back(-INFINITY);
  x.push_back(INFINITY);
  x.push_back(-100.f);
  std::vector<float> y(x.size());
  exp_shift_sum(x.data(), y.data(), int64_t(x.size()) - 3, 0.f);  // finite part
  for (size_t i = 0; i + 3 < x.size(); ++i) {
    double r = std::exp(double(x[i]));
    ASSERT_NEAR(y[i], r, 4e-7 * r) << "x=" << x[i];
    ASSERT_NEAR(fast_exp(x[i]), r, 4e-7 * r) << "x=" << x[i];
  }
  exp_affine(x.data(), y.data(), int64_t(x.size()), 0.f, 1.f, 0.f);
  EXPECT_EQ(y[y.size() - 3], 0.f);         // exp(-inf)
  EXPECT_EQ(y[y.size() - 2], INFINITY);    // exp(+inf)
  EXPECT_EQ(y[y.size() - 1], 0.f);         // underflow
  EXPECT_EQ(fast_exp(-INFINITY), 0.f);
}

TEST(VecMath, ExpShiftSumTailAndAffine) {
  for (int64_t n : {1, 15, 16, 17, 40}) {
    auto x = testing::random_vec(size_t(n), uint32_t(n), -5, 5);
    std::vector<float> y(x.size()), z(x.size());
    float s = exp_shift_sum(x.data(), y.data(), n, 1.5f);
    EXPECT_NEAR(exp_sum(x.data(), n, 1.5f), s, 1e-5f * s);
    exp_affine(x.data(), z.data(), n, 1.5f, 2.f, -1.f);
    double ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += std::exp(x[i] - 1.5);
      EXPECT_NEAR(z[i], 2 * std::exp(x[i] - 1.5) - 1, 1e-5);
    }
    EXPECT_NEAR(s, ref, 1e-5 * ref);
    EXPECT_FLOAT_EQ(max_of(x.data(), n), *std::max_element(x.begin(), x.end()));
  }
}

TEST(VecMath, TanhMatchesStd) {
  for (float z = -12.f; z < 12.f; z += 0.01f) ASSERT_NEAR(fast_tanh(z), std::tanh(z), 3e-7);
}

}  // namespace
}  // namespace t5x::cpu
