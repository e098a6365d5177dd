// Helpers shared by the backend kernel tests.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace t5x::cpu::testing {

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Central finite difference of the scalar f(x) at `count` indices of x spread
// over the vector, compared with grad. f evaluates in f32, so h is large-ish.
inline void check_grad_fd(std::vector<float>& x, const std::vector<float>& grad,
                          const std::function<double()>& f, int count, double h,
                          double rtol, double atol, const char* what) {
  ASSERT_EQ(x.size(), grad.size());
  size_t stride = std::max<size_t>(1, x.size() / size_t(count));
  for (size_t i = 0; i < x.size(); i += stride) {
    float saved = x[i];
    x[i] = float(saved + h);
    double fp = f();
    x[i] = float(saved - h);
    double fm = f();
    x[i] = saved;
    double fd = (fp - fm) / (2 * h);
    EXPECT_NEAR(grad[i], fd, atol + rtol * std::fabs(fd)) << what << " index " << i;
  }
}

}  // namespace t5x::cpu::testing
