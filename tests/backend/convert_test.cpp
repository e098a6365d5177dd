// Vectorised f32 <-> bf16 conversions and same-shape binary ops must give the
// scalar conversions' bits exactly (ties to even, NaN, inf, denormals, tails).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/binary.h"
#include "backend/cpu/convert.h"
#include "test_util.h"

namespace t5x::cpu {
namespace {

std::vector<float> special_values() {
  std::vector<float> v = testing::random_vec(1000, 7, -1e4f, 1e4f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                  -1e-40f, 1.17549435e-38f, 3.4028235e38f, -3.4028235e38f, 1.0f, -2.5f})
    v.push_back(x);
  // Exact ties: the low 16 bits are 0x8000 (round to even both ways).
  for (uint32_t hi : {0x3f800000u, 0x3f810000u, 0xbf810000u, 0x7f7f0000u}) v.push_back(std::bit_cast<float>(hi | 0x8000u));
  v.push_back(std::bit_cast<float>(0x7fc00001u));  // NaN with payload
  v.push_back(std::bit_cast<float>(0xff800001u));  // signalling NaN, negative
  return v;  // odd length: exercises the scalar tail
}

TEST(Convert, F32ToBf16MatchesScalarBits) {
  std::vector<float> x = special_values();
  std::vector<bfloat16> y(x.size());
  convert_f32_to_bf16(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i].bits, bfloat16(x[i]).bits) << "x=" << x[i] << " at " << i;
  // Tie cases round to even.
  EXPECT_EQ(bfloat16(std::bit_cast<float>(0x3f808000u)).bits, 0x3f80);
  EXPECT_EQ(bfloat16(std::bit_cast<float>(0x3f818000u)).bits, 0x3f82);
}

TEST(Convert, Bf16ToF32IsExactAndRoundTrips) {
  std::vector<float> x = special_values();
  std::vector<bfloat16> y(x.size());
  std::vector<float> z(x.size());
  convert_f32_to_bf16(x.data(), y.data(), int64_t(x.size()));
  convert_bf16_to_f32(y.data(), z.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(z[i]), uint32_t(y[i].bits) << 16) << i;
}

TEST(Convert, LongArraysSplitOverThreadsGiveTheSameBits) {
  std::vector<float> x = testing::random_vec((1 << 18) + 5, 3, -3.f, 3.f);
  std::vector<bfloat16> y(x.size());
  convert_f32_to_bf16(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); i += 977) EXPECT_EQ(y[i].bits, bfloat16(x[i]).bits);
  EXPECT_EQ(y.back().bits, bfloat16(x.back()).bits);
}

TEST(Convert, BinaryOpsMatchScalar) {
  std::vector<float> a = special_values(), b = testing::random_vec(a.size(), 11, -5.f, 5.f);
  std::vector<bfloat16> ab(a.size()), bb(a.size()), zb(a.size());
  convert_f32_to_bf16(a.data(), ab.data(), int64_t(a.size()));
  convert_f32_to_bf16(b.data(), bb.data(), int64_t(a.size()));
  std::vector<float> z(a.size());
  for (int op = 0; op < 3; ++op) {
    binary_f32(BinaryKernel(op), a.data(), b.data(), z.data(), int64_t(a.size()));
    binary_bf16(BinaryKernel(op), ab.data(), bb.data(), zb.data(), int64_t(a.size()));
    for (size_t i = 0; i < a.size(); ++i) {
      float ref = op == 0 ? a[i] + b[i] : op == 1 ? a[i] - b[i] : a[i] * b[i];
      float fa = float(ab[i]), fb = float(bb[i]);
      float refb = op == 0 ? fa + fb : op == 1 ? fa - fb : fa * fb;
      if (std::isnan(ref)) EXPECT_TRUE(std::isnan(z[i]));
      else EXPECT_EQ(z[i], ref) << "op " << op << " at " << i;
      EXPECT_EQ(zb[i].bits, bfloat16(refb).bits) << "op " << op << " at " << i;
    }
  }
  // In place (z aliases x).
  std::vector<float> c = b;
  binary_f32(BinaryKernel::Add, c.data(), b.data(), c.data(), int64_t(c.size()));
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], b[i] + b[i]);
}

}  // namespace
}  // namespace t5x::cpu
