// Few-row products (decode steps) through gemm_f32 / gemm_batched_bf16*: the
// streaming kernel must agree with a double-precision reference for every
// row count up to kSkinnyMaxRows, ragged column counts, leading dims, alpha
// and beta, and give the same bits on 1, 2 and 3 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/skinny_gemm.h"
#include "test_util.h"

namespace t5x::cpu {
namespace {

std::vector<double> reference(int64_t m, int64_t n, int64_t k, float alpha, const std::vector<float>& a, int64_t lda,
                              const std::vector<float>& b, int64_t ldb, float beta, const std::vector<float>& c0,
                              int64_t ldc) {
  std::vector<double> r(size_t(m * ldc));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(a[size_t(i * lda + p)]) * double(b[size_t(p * ldb + j)]);
      r[size_t(i * ldc + j)] = alpha * s + beta * double(c0[size_t(i * ldc + j)]);
    }
  return r;
}

TEST(SkinnyGemm, F32MatchesReferenceForEveryRowCount) {
  const int64_t k = 300, n = 1000 + 7, ldb = n + 3;
  for (int64_t m = 1; m <= kSkinnyMaxRows; ++m) {
    const int64_t lda = k + 1, ldc = n + 5;
    auto a = testing::random_vec(size_t(m * lda), uint32_t(m));
    auto b = testing::random_vec(size_t(k * ldb), 99);
    auto c = testing::random_vec(size_t(m * ldc), 5);
    for (float beta : {0.0f, 0.5f}) {
      std::vector<float> out = c;
      GemmShape s;
      s.m = m; s.n = n; s.k = k; s.lda = lda; s.ldb = ldb; s.ldc = ldc;
      gemm_f32(s, 1.5f, a.data(), b.data(), beta, out.data());
      auto ref = reference(m, n, k, 1.5f, a, lda, b, ldb, beta, c, ldc);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          ASSERT_NEAR(out[size_t(i * ldc + j)], ref[size_t(i * ldc + j)], 1e-4) << "m=" << m << " i=" << i << " j=" << j;
      // Padding between rows of C is untouched.
      if (ldc > n) { EXPECT_EQ(out[size_t(n)], c[size_t(n)]); }
    }
  }
}

TEST(SkinnyGemm, Bf16OutputsRoundOnceAndF32OutputsMatch) {
  const int64_t m = 3, k = 512, n = 2048 + 16 + 1;
  auto af = testing::random_vec(size_t(m * k), 1), bf = testing::random_vec(size_t(k * n), 2);
  std::vector<bfloat16> a(af.size()), b(bf.size());
  for (size_t i = 0; i < af.size(); ++i) af[i] = float(a[i] = bfloat16(af[i]));
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = float(b[i] = bfloat16(bf[i]));
  GemmShape s;
  s.m = m; s.n = n; s.k = k;
  std::vector<float> c32(size_t(m * n));
  std::vector<bfloat16> c16(size_t(m * n));
  gemm_batched_bf16(s, 1, 0, 0, 0, 1.0f, a.data(), b.data(), 0.0f, c32.data());
  gemm_batched_bf16_out_bf16(s, 1, 0, 0, 0, 1.0f, a.data(), b.data(), 0.0f, c16.data());
  auto ref = reference(m, n, k, 1.0f, af, k, bf, n, 0.0f, std::vector<float>(size_t(m * n)), n);
  for (size_t i = 0; i < c32.size(); ++i) {
    ASSERT_NEAR(c32[i], ref[i], 1e-4) << i;
    EXPECT_EQ(c16[i].bits, bfloat16(c32[i]).bits) << i;  // the same f32 sum, rounded once
  }
}

TEST(SkinnyGemm, SameBitsOnOneAndTwoThreads) {
  // Large enough (k x n >= 8M) that the columns are split over threads.
  const int64_t m = 2, k = 512, n = 32128;
  auto a = testing::random_vec(size_t(m * k), 3), b = testing::random_vec(size_t(k * n), 4);
  GemmShape s;
  s.m = m; s.n = n; s.k = k;
  std::vector<float> c1(size_t(m * n)), c2(size_t(m * n));
  int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  gemm_f32(s, 1.0f, a.data(), b.data(), 0.0f, c1.data());
  omp_set_num_threads(2);
  gemm_f32(s, 1.0f, a.data(), b.data(), 0.0f, c2.data());
  omp_set_num_threads(saved);
  EXPECT_EQ(c1, c2);
  auto ref = reference(1, 64, k, 1.0f, a, k, b, n, 0.0f, std::vector<float>(size_t(n)), n);
  for (int64_t j = 0; j < 64; ++j) EXPECT_NEAR(c1[size_t(j)], ref[size_t(j)], 1e-4);
}

TEST(SkinnyGemm, LayerKernelsSplitOverThreadsGiveTheSameBits) {
  // Decode-step layer products (128K-512K B elements) are split over threads
  // by k blocks, or in 64-column ranges: ragged widths (1000 = 15 x 64 + 40),
  // k blocks of unequal size (384 = 256 + 128, 1000 = 3 x 256 + 232), bf16 in
  // and out, beta != 0, and 1 to 4 threads must agree bitwise and with the
  // reference.
  for (int64_t k : {384, 512, 1000})
  for (int64_t n : {384, 1000, 1024}) {
    const int64_t m = 3, ldc = n + 8;
    auto af = testing::random_vec(size_t(m * k), 5), bf = testing::random_vec(size_t(k * n), 6);
    std::vector<bfloat16> a(af.begin(), af.end()), b(bf.begin(), bf.end());
    for (size_t i = 0; i < a.size(); ++i) af[i] = float(a[i]);
    for (size_t i = 0; i < b.size(); ++i) bf[i] = float(b[i]);
    auto c0 = testing::random_vec(size_t(m * ldc), 7);
    GemmShape s;
    s.m = m; s.n = n; s.k = k; s.ldc = ldc;
    std::vector<std::vector<bfloat16>> outs;
    std::vector<std::vector<float>> outs32;  // f32 C: the same sums, no rounding
    int saved = omp_get_max_threads();
    for (int threads : {1, 2, 3, 4}) {
      omp_set_num_threads(threads);
      std::vector<bfloat16> c(c0.begin(), c0.end());
      gemm_batched_bf16_out_bf16(s, 1, 0, 0, 0, 0.5f, a.data(), b.data(), 0.25f, c.data());
      outs.push_back(c);
      std::vector<float> c32 = c0;
      gemm_batched_bf16(s, 1, 0, 0, 0, 0.5f, a.data(), b.data(), 0.25f, c32.data());
      outs32.push_back(c32);
    }
    omp_set_num_threads(saved);
    for (size_t t = 1; t < outs32.size(); ++t)
      ASSERT_EQ(0, std::memcmp(outs32[0].data(), outs32[t].data(), outs32[0].size() * sizeof(float)))
          << "f32 C: k=" << k << " n=" << n << " threads=" << t + 1;
    std::vector<float> c0r(c0.size());
    for (size_t i = 0; i < c0.size(); ++i) c0r[i] = float(bfloat16(c0[i]));
    auto ref = reference(m, n, k, 0.5f, af, k, bf, n, 0.25f, c0r, ldc);
    for (size_t i = 0; i < outs[0].size(); ++i) {
      for (size_t t = 1; t < outs.size(); ++t)
        ASSERT_EQ(outs[0][i].bits, outs[t][i].bits) << "k=" << k << " n=" << n << " threads=" << t + 1 << " i=" << i;
      if (int64_t(i) % ldc < n)
        ASSERT_NEAR(float(outs[0][i]), ref[i], 1e-2 + 1e-2 * std::abs(ref[i])) << "k=" << k << " n=" << n << " i=" << i;
      else
        ASSERT_EQ(outs[0][i].bits, bfloat16(c0[i]).bits) << "padding past n is not written";
    }
  }
}

// One m-row call, then the calls on rows [0, 4) and [4, m), on copies of c.
template <typename T, typename TC>
void whole_and_parts(int64_t m, int64_t n, int64_t k, const std::vector<T>& a, int64_t lda, const std::vector<T>& b,
                     std::vector<TC>& whole, std::vector<TC>& parts, int64_t ldc) {
  skinny_gemm<T, T, TC>(m, n, k, 0.75f, a.data(), lda, b.data(), n, 0.5f, whole.data(), ldc);
  skinny_gemm<T, T, TC>(4, n, k, 0.75f, a.data(), lda, b.data(), n, 0.5f, parts.data(), ldc);
  skinny_gemm<T, T, TC>(m - 4, n, k, 0.75f, a.data() + 4 * lda, lda, b.data(), n, 0.5f, parts.data() + 4 * ldc, ldc);
}

TEST(SkinnyGemm, FiveToEightRowsGiveTheBitsOfRowGroupsOfAtMostFour) {
  // 5 to 8 rows read B once, in two row groups per chunk of k (a loop of its
  // own); each output must still be the in-order sum of the 1-4-row loop, so
  // one call gives the bits of separate calls on rows [0, 4) and [4, m).
  // k = 300 is not a multiple of the chunk, n = 1000 ends in a partial block.
  const int64_t k = 300, n = 1000, lda = k + 3, ldc = n + 5;
  for (int64_t m = 5; m <= kSkinnyMaxRows; ++m) {
    auto af = testing::random_vec(size_t(m * lda), uint32_t(20 + m)), bf = testing::random_vec(size_t(k * n), 21);
    auto c0 = testing::random_vec(size_t(m * ldc), 22);
    std::vector<float> whole = c0, parts = c0;
    whole_and_parts(m, n, k, af, lda, bf, whole, parts, ldc);
    ASSERT_EQ(0, std::memcmp(whole.data(), parts.data(), whole.size() * sizeof(float))) << "f32 m=" << m;
    const std::vector<bfloat16> a(af.begin(), af.end()), b(bf.begin(), bf.end()), c16(c0.begin(), c0.end());
    std::vector<bfloat16> whole16 = c16, parts16 = c16;
    whole_and_parts(m, n, k, a, lda, b, whole16, parts16, ldc);
    ASSERT_EQ(0, std::memcmp(whole16.data(), parts16.data(), whole16.size() * sizeof(bfloat16))) << "bf16 m=" << m;
    // And not trivially: the outputs moved from C's old values.
    EXPECT_NE(whole[0], c0[0]);
    EXPECT_NE(whole[size_t((m - 1) * ldc + n - 1)], c0[size_t((m - 1) * ldc + n - 1)]);
  }
}

// B stored transposed (skinny_gemm_bt: bt [n, k], a decode's weight kept
// [out, in] and read as one stream) gives the bits of skinny_gemm on B, for
// every row count, k not a multiple of the vector width, leading dims, alpha
// and beta, f32 and bf16 inputs, f32 and bf16 outputs.
template <typename T, typename TC>
void expect_bt_bits(int64_t m, int64_t n, int64_t k, float beta) {
  const int64_t lda = k + 1, ldb = n + 2, ldbt = k + 3, ldc = n + 5;
  const auto af = testing::random_vec(size_t(m * lda), uint32_t(30 + m)), bf = testing::random_vec(size_t(k * ldb), 31);
  const auto cf = testing::random_vec(size_t(m * ldc), 32);
  const std::vector<T> a(af.begin(), af.end()), b(bf.begin(), bf.end());
  std::vector<T> bt(size_t(n * ldbt));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bt[size_t(j * ldbt + p)] = b[size_t(p * ldb + j)];
  std::vector<TC> want(cf.begin(), cf.end()), got = want;
  skinny_gemm<T, T, TC>(m, n, k, 1.25f, a.data(), lda, b.data(), ldb, beta, want.data(), ldc);
  skinny_gemm_bt<T, T, TC>(m, n, k, 1.25f, a.data(), lda, bt.data(), ldbt, beta, got.data(), ldc);
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(TC)))
      << "m=" << m << " n=" << n << " k=" << k << " beta=" << beta;
  EXPECT_NE(float(got[0]), float(TC(cf[0])));  // the outputs were written
}

TEST(SkinnyGemm, TransposedBGivesTheBitsOfB) {
  for (int64_t m = 1; m <= kSkinnyMaxRows; ++m)
    for (int64_t n : {1, 37, 300, 1100})
      for (int64_t k : {1, 19, 64, 515})
        for (float beta : {0.f, 0.75f}) {
          expect_bt_bits<float, float>(m, n, k, beta);
          expect_bt_bits<bfloat16, float>(m, n, k, beta);
          expect_bt_bits<bfloat16, bfloat16>(m, n, k, beta);
        }
}

// The summation contract, bit for bit: each block of kSkinnyKBlock steps over
// k summed from zero with one FMA per step, the block sums added in k order,
// then alpha * sum (+ fma(beta, C, .)). k = 700 ends in a partial block; B as
// it is (1 and 2 threads: the kernel's own blocks, then the k split) and
// transposed. A model with one in-order sum over all of k gives other bits.
template <typename T, typename TC>
void expect_k_block_contract(int64_t m, int64_t n, int64_t k, float alpha, float beta) {
  const auto af = testing::random_vec(size_t(m * k), uint32_t(40 + m)), bf = testing::random_vec(size_t(k * n), 41);
  const std::vector<T> a(af.begin(), af.end()), b(bf.begin(), bf.end());
  const auto c0 = testing::random_vec(size_t(m * n), 42);
  std::vector<T> bt(size_t(n * k));
  for (int64_t p = 0; p < k; ++p)
    for (int64_t j = 0; j < n; ++j) bt[size_t(j * k + p)] = b[size_t(p * n + j)];
  auto model = [&](int64_t block) {
    std::vector<TC> want(c0.begin(), c0.end());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (int64_t q0 = 0; q0 < k; q0 += block) {
          float s = 0.0f;
          for (int64_t p = q0; p < std::min(k, q0 + block); ++p)
            s = std::fma(float(a[size_t(i * k + p)]), float(b[size_t(p * n + j)]), s);
          sum = q0 == 0 ? s : sum + s;
        }
        float r = alpha * sum;
        if (beta != 0.0f) r = std::fma(beta, float(want[size_t(i * n + j)]), r);
        want[size_t(i * n + j)] = TC(r);
      }
    return want;
  };
  const std::vector<TC> want = model(kSkinnyKBlock), in_order = model(k);
  if (std::is_same_v<TC, float>) {  // (rounded to bf16, the two orders' sums mostly agree)
    ASSERT_NE(0, std::memcmp(want.data(), in_order.data(), want.size() * sizeof(TC))) << "k too small to tell";
  }
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<TC> got(c0.begin(), c0.end()), got_bt = got;
    skinny_gemm<T, T, TC>(m, n, k, alpha, a.data(), k, b.data(), n, beta, got.data(), n);
    skinny_gemm_bt<T, T, TC>(m, n, k, alpha, a.data(), k, bt.data(), k, beta, got_bt.data(), n);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(TC)))
        << "B, m=" << m << " threads=" << threads;
    EXPECT_EQ(0, std::memcmp(want.data(), got_bt.data(), want.size() * sizeof(TC)))
        << "bt, m=" << m << " threads=" << threads;
  }
  omp_set_num_threads(saved);
}

TEST(SkinnyGemm, FollowsItsKBlockContractBitwise) {
  for (int64_t m : {1, 3, 4, 5, 8}) {
    expect_k_block_contract<float, float>(m, 1100, 700, 0.75f, 0.0f);
    expect_k_block_contract<float, float>(m, 300, 700, 1.25f, 0.5f);
    expect_k_block_contract<bfloat16, float>(m, 300, 700, 1.25f, 0.5f);
    expect_k_block_contract<bfloat16, bfloat16>(m, 1100, 700, 0.75f, 0.5f);
  }
}

}  // namespace
}  // namespace t5x::cpu
