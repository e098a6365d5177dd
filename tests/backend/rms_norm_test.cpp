#include "backend/cpu/rms_norm.h"

#include <omp.h>

#include <stdexcept>

#include "test_util.h"

namespace t5x::cpu {
namespace {
using testing::random_vec;

// Double-precision reference of the forward.
std::vector<double> naive_rms(int64_t rows, int64_t embed, const std::vector<float>& x,
                              const std::vector<float>& s, double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t e = 0; e < embed; ++e) ss += double(x[r * embed + e]) * x[r * embed + e];
    double rs = 1.0 / std::sqrt(ss / double(embed) + eps);
    for (int64_t e = 0; e < embed; ++e) y[r * embed + e] = x[r * embed + e] * rs * s[e];
  }
  return y;
}

TEST(RmsNorm, ForwardMatchesNaive) {
  for (auto [rows, embed] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {130, 512}}) {
    auto x = random_vec(rows * embed, 1, -2, 2), s = random_vec(embed, 2, 0.5, 1.5);
    std::vector<float> y(x.size()), rstd(rows);
    rms_norm_forward(rows, embed, x.data(), s.data(), 1e-6f, y.data(), rstd.data());
    auto ref = naive_rms(rows, embed, x, s, 1e-6);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-5 * (1 + std::fabs(ref[i])));
  }
}

TEST(RmsNorm, EpsDominatesForZeroRow) {
  std::vector<float> x(8, 0.f), s(8, 1.f), y(8, 1.f);
  x[0] = 1e-4f;  // mean(x^2) = 1.25e-9 << eps
  rms_norm_forward(1, 8, x.data(), s.data(), 1e-2f, y.data(), nullptr);
  EXPECT_NEAR(y[0], 1e-4 / std::sqrt(1e-2 + 1.25e-9), 1e-8);
  EXPECT_EQ(y[1], 0.f);
}

TEST(RmsNorm, BackwardMatchesFiniteDifferences) {
  int64_t rows = 5, embed = 12;
  auto x = random_vec(rows * embed, 3, -2, 2), s = random_vec(embed, 4, 0.5, 1.5);
  auto w = random_vec(rows * embed, 5);  // L = sum(w * y)
  std::vector<float> dx(x.size()), ds(embed), y(x.size());
  rms_norm_backward(rows, embed, x.data(), s.data(), nullptr, w.data(), 1e-6f, dx.data(), ds.data());
  auto f = [&] {
    rms_norm_forward(rows, embed, x.data(), s.data(), 1e-6f, y.data(), nullptr);
    return testing::dot(y, w);
  };
  testing::check_grad_fd(x, dx, f, 60, 1e-2, 2e-2, 2e-3, "dx");
  testing::check_grad_fd(s, ds, f, 12, 1e-2, 2e-2, 2e-3, "dscale");
}

TEST(RmsNorm, DscaleIndependentOfThreadCount) {
  int64_t rows = 1000, embed = 64;
  auto x = random_vec(rows * embed, 6), s = random_vec(embed, 7), dy = random_vec(rows * embed, 8);
  std::vector<float> dx(x.size()), ds1(embed), ds2(embed);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  rms_norm_backward(rows, embed, x.data(), s.data(), nullptr, dy.data(), 1e-6f, dx.data(), ds1.data());
  omp_set_num_threads(3);
  rms_norm_backward(rows, embed, x.data(), s.data(), nullptr, dy.data(), 1e-6f, dx.data(), ds2.data());
  omp_set_num_threads(saved);
  EXPECT_EQ(ds1, ds2);
}

TEST(RmsNorm, RejectsMisuse) {
  float v = 0;
  EXPECT_THROW(rms_norm_forward(2, 0, &v, &v, 1e-6f, &v, nullptr), std::invalid_argument);
  EXPECT_THROW(rms_norm_forward(1, 1, &v, &v, -1.f, &v, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace t5x::cpu
