// bf16-storage variants of the fused kernels must equal widening to f32, the
// f32 kernel, and rounding the result (what the op layer did with casts).
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/gated_gelu.h"
#include "backend/cpu/rms_norm.h"
#include "test_util.h"

namespace t5x::cpu {
namespace {

std::vector<bfloat16> to_bf16(const std::vector<float>& x) {
  std::vector<bfloat16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = bfloat16(x[i]);
  return y;
}
std::vector<float> widen(const std::vector<bfloat16>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = float(x[i]);
  return y;
}
void expect_rounds_of(const std::vector<bfloat16>& got, const std::vector<float>& f32, const char* what) {
  ASSERT_EQ(got.size(), f32.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i].bits, bfloat16(f32[i]).bits) << what << " at " << i;
}

TEST(Bf16Kernels, GatedGeluEqualsCastF32Kernel) {
  const int64_t n = 3 * 4096 + 37;  // several thread ranges and a scalar tail
  auto h0 = to_bf16(testing::random_vec(size_t(n), 1, -4.f, 4.f));
  auto h1 = to_bf16(testing::random_vec(size_t(n), 2, -2.f, 2.f));
  auto dy = to_bf16(testing::random_vec(size_t(n), 3));
  std::vector<bfloat16> out(static_cast<size_t>(n)), d0(static_cast<size_t>(n)), d1(static_cast<size_t>(n));
  std::vector<float> out32(static_cast<size_t>(n)), d032(static_cast<size_t>(n)), d132(static_cast<size_t>(n));
  gated_gelu_forward_bf16(n, h0.data(), h1.data(), out.data());
  gated_gelu_forward(n, widen(h0).data(), widen(h1).data(), out32.data());
  expect_rounds_of(out, out32, "forward");
  gated_gelu_backward_bf16(n, h0.data(), h1.data(), dy.data(), d0.data(), d1.data());
  gated_gelu_backward(n, widen(h0).data(), widen(h1).data(), widen(dy).data(), d032.data(), d132.data());
  expect_rounds_of(d0, d032, "dh0");
  expect_rounds_of(d1, d132, "dh1");
}

TEST(Bf16Kernels, RmsNormEqualsCastF32Kernel) {
  const int64_t rows = 300, embed = 512;
  auto x = to_bf16(testing::random_vec(size_t(rows * embed), 4, -3.f, 3.f));
  auto dy = to_bf16(testing::random_vec(size_t(rows * embed), 5));
  auto scale = testing::random_vec(size_t(embed), 6, 0.5f, 1.5f);
  std::vector<bfloat16> y(x.size()), dx(x.size());
  std::vector<float> y32(x.size()), dx32(x.size()), rstd(static_cast<size_t>(rows)), rstd32(static_cast<size_t>(rows));
  std::vector<float> ds(static_cast<size_t>(embed)), ds32(static_cast<size_t>(embed));
  rms_norm_forward_bf16(rows, embed, x.data(), scale.data(), 1e-6f, y.data(), rstd.data());
  rms_norm_forward(rows, embed, widen(x).data(), scale.data(), 1e-6f, y32.data(), rstd32.data());
  expect_rounds_of(y, y32, "y");
  EXPECT_EQ(rstd, rstd32);
  rms_norm_backward_bf16(rows, embed, x.data(), scale.data(), rstd.data(), dy.data(), 1e-6f, dx.data(), ds.data());
  rms_norm_backward(rows, embed, widen(x).data(), scale.data(), rstd32.data(), widen(dy).data(), 1e-6f, dx32.data(),
                    ds32.data());
  expect_rounds_of(dx, dx32, "dx");
  EXPECT_EQ(ds, ds32);
}

}  // namespace
}  // namespace t5x::cpu
