#include "backend/cpu/gated_gelu.h"

#include <stdexcept>

#include "test_util.h"

namespace t5x::cpu {
namespace {
using testing::random_vec;

double gelu_ref(double u) {
  return 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
}

TEST(GatedGelu, KnownValues) {
  // gelu_tanh(1) = 0.8411920, gelu_tanh(-1) = -0.1588080 (tanh approximation).
  EXPECT_NEAR(gelu_tanh(1.f), 0.841192, 1e-6);
  EXPECT_NEAR(gelu_tanh(-1.f), -0.158808, 1e-6);
  EXPECT_EQ(gelu_tanh(0.f), 0.f);
  EXPECT_NEAR(gelu_tanh(30.f), 30.f, 1e-5);
  EXPECT_NEAR(gelu_tanh(-30.f), 0.f, 1e-5);
  EXPECT_NEAR(gelu_tanh_grad(0.f), 0.5, 1e-7);
}

TEST(GatedGelu, ForwardMatchesNaive) {
  int64_t n = 3 * 1000 + 7;
  auto h0 = random_vec(n, 1, -5, 5), h1 = random_vec(n, 2, -2, 2);
  std::vector<float> out(n);
  gated_gelu_forward(n, h0.data(), h1.data(), out.data());
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(out[i], gelu_ref(h0[i]) * h1[i], 2e-6 * (1 + std::fabs(out[i])));
}

TEST(GatedGelu, BackwardMatchesFiniteDifferences) {
  int64_t n = 200;
  auto h0 = random_vec(n, 3, -4, 4), h1 = random_vec(n, 4, -2, 2), w = random_vec(n, 5);
  std::vector<float> dh0(n), dh1(n), out(n);
  gated_gelu_backward(n, h0.data(), h1.data(), w.data(), dh0.data(), dh1.data());
  auto f = [&] {
    gated_gelu_forward(n, h0.data(), h1.data(), out.data());
    return testing::dot(out, w);
  };
  testing::check_grad_fd(h0, dh0, f, 50, 1e-2, 1e-2, 1e-3, "dh0");
  testing::check_grad_fd(h1, dh1, f, 50, 1e-2, 1e-2, 1e-3, "dh1");
}

TEST(GatedGelu, InPlaceBackward) {
  int64_t n = 64;
  auto h0 = random_vec(n, 6), h1 = random_vec(n, 7), g = random_vec(n, 8);
  std::vector<float> dh0(n), dh1(n);
  gated_gelu_backward(n, h0.data(), h1.data(), g.data(), dh0.data(), dh1.data());
  gated_gelu_backward(n, h0.data(), h1.data(), g.data(), g.data(), h1.data());  // aliasing
  EXPECT_EQ(g, dh0);
  EXPECT_EQ(h1, dh1);
}

TEST(GatedGelu, RejectsNegativeSize) {
  EXPECT_THROW(gated_gelu_forward(-1, nullptr, nullptr, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace t5x::cpu
