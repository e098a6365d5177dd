// fourier_mix (ops/fourier.h): known answers, the FFTW kernel against a naive
// double-precision DFT and against its plain-op decomposition, the vjp against
// finite differences, and the adjoint identity <M x, g> = <x, M g>.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "harness.h"
#include "ops/ops.h"

namespace t5x {
namespace {
using namespace t5x::testing;

// Re(sum_{l,e} x[l,e] exp(-2 pi i (j l / L + k e / d))) for x in [batch, length, embed] order.
std::vector<double> naive_mix(const std::vector<float>& x, int64_t B, int64_t L, int64_t d) {
  std::vector<double> y(size_t(B * L * d), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < L; ++j)
      for (int64_t k = 0; k < d; ++k) {
        double s = 0;
        for (int64_t l = 0; l < L; ++l)
          for (int64_t e = 0; e < d; ++e)
            s += x[size_t((b * L + l) * d + e)] *
                 std::cos(2 * std::numbers::pi * (double((j * l) % L) / L + double((k * e) % d) / d));
        y[size_t((b * L + j) * d + k)] = s;
      }
  return y;
}

TEST(FourierMix, KnownAnswers) {
  // A constant block has all its energy at frequency (0, 0): L * d there.
  Array ones = Array::ones(Shape{{"length", 3}, {"embed", 4}});
  std::vector<float> want(12, 0.f);
  want[0] = 12.f;
  EXPECT_EQ(fourier_mix(ones).to_floats(), want);
  // A unit impulse at (l, e) = (1, 2): y[j, k] = cos(2 pi (j / 3 + 2 k / 4)).
  std::vector<float> v(12, 0.f);
  v[1 * 4 + 2] = 1.f;
  auto y = fourier_mix(Array::from_floats(Shape{{"length", 3}, {"embed", 4}}, v)).to_floats();
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k)
      EXPECT_NEAR(y[size_t(j * 4 + k)], std::cos(2 * std::numbers::pi * (j / 3.0 + 2.0 * k / 4.0)), 1e-6)
          << j << "," << k;
}

TEST(FourierMix, MatchesNaiveDftOddAndEvenSizesAnyDimOrder) {
  for (auto [L, d] : {std::pair<int64_t, int64_t>{5, 6}, {4, 7}, {8, 8}, {1, 3}}) {
    const int64_t B = 3;
    Array x = rand_array(Shape{{"batch", B}, {"length", L}, {"embed", d}}, uint32_t(L * 10 + d));
    auto want = naive_mix(x.to_floats(), B, L, d);
    auto got = fourier_mix(x).to_floats();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * (L * d)) << L << "x" << d << " " << i;
    // Dims in another order, with custom names: same values, x's order kept.
    Array xt = rename(transpose(x, {"embed", "batch", "length"}), {{"embed", "hidden"}, {"length", "seq"}});
    Array yt = fourier_mix(xt, "seq", "hidden");
    EXPECT_EQ(yt.names(), (std::vector<std::string>{"hidden", "batch", "seq"}));
    EXPECT_TRUE(array_equal(transpose(yt, {"batch", "seq", "hidden"}),
                            rename(fourier_mix(x), {{"embed", "hidden"}, {"length", "seq"}})));
  }
}

TEST(FourierMix, KernelMatchesDecompositionAndIsDeterministic) {
  Array x = rand_array(Shape{{"batch", 2}, {"length", 16}, {"embed", 12}}, 7);
  Array y = fourier_mix(x);
  expect_close(y, fourier_mix_reference(x), 2e-5);
  EXPECT_TRUE(array_equal(y, fourier_mix(x)));
  set_fused_kernels_enabled(false);
  Array plain = fourier_mix(x);
  set_fused_kernels_enabled(true);
  EXPECT_TRUE(array_equal(plain, fourier_mix_reference(x)));
  // bf16 in, bf16 out (mixed in f32, rounded once).
  Array yb = fourier_mix(cast(x, DType::bf16));
  EXPECT_EQ(yb.dtype(), DType::bf16);
  expect_close(cast(yb, DType::f32), fourier_mix(cast(cast(x, DType::bf16), DType::f32)), 1e-2);
}

TEST(FourierMix, VjpMatchesFiniteDifferencesAndIsTheSameMap) {
  Array x = rand_array(Shape{{"batch", 2}, {"length", 3}, {"embed", 4}}, 11);
  check_grad([](const std::vector<Array>& a) { return fourier_mix(a[0]); }, {x}, 1e-2, 1e-3, 1e-3);
  // <M x, g> = <x, M g> (M = C X C - S X S with symmetric C, S).
  Array a = rand_array(Shape{{"batch", 2}, {"length", 6}, {"embed", 5}}, 12);
  Array g = rand_array(a.shape(), 13);
  EXPECT_NEAR(sum(mul(fourier_mix(a), g)).item(), sum(mul(a, fourier_mix(g))).item(), 1e-4);
  auto [outs, grads] = vjp([](const std::vector<Array>& xs) { return std::vector<Array>{fourier_mix(xs[0])}; }, {a}, {g});
  EXPECT_TRUE(array_equal(grads[0], fourier_mix(g)));
}

TEST(FourierMix, Errors) {
  Array x = rand_array(Shape{{"batch", 2}, {"length", 3}, {"embed", 4}}, 1);
  expect_invalid([&] { fourier_mix(x, "seq"); }, {"[fourier_mix]", "'seq'"});
  expect_invalid([&] { fourier_mix(x, "embed", "embed"); }, {"[fourier_mix]", "different"});
  expect_invalid([&] { fourier_mix(Array::zeros(x.shape(), DType::i32)); }, {"[fourier_mix]", "int32"});
}

}  // namespace
}  // namespace t5x
