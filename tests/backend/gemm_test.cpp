// gemm_f32 / gemm_batched_f32 / gemm_batched_bf16 against naive loops.
#include "backend/cpu/gemm.h"
#include "backend/cpu/cpu_info.h"

#include <gtest/gtest.h>
#include <cstdlib>
#include <cstring>
#include <omp.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace t5x::cpu {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// Naive C = alpha * op(A) op(B) + beta * C for one problem, in double.
template <typename T>
void naive(const GemmShape& s, float alpha, const T* a, const T* b, float beta, float* c) {
  int64_t lda = s.lda ? s.lda : (s.trans_a ? s.m : s.k);
  int64_t ldb = s.ldb ? s.ldb : (s.trans_b ? s.k : s.n);
  int64_t ldc = s.ldc ? s.ldc : s.n;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = 0; j < s.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        double av = float(s.trans_a ? a[p * lda + i] : a[i * lda + p]);
        double bv = float(s.trans_b ? b[j * ldb + p] : b[p * ldb + j]);
        acc += av * bv;
      }
      float& out = c[i * ldc + j];
      out = float(alpha * acc + (beta == 0 ? 0.0 : beta * double(out)));
    }
}

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad;  // extra leading-dim padding on every operand
  float alpha, beta;
};
// gtest prints a parameter this way in a failure (otherwise: the raw bytes).
void PrintTo(const Case& c, std::ostream* os) {
  *os << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta << " tb=" << c.tb
      << " pad=" << c.pad << " alpha=" << c.alpha << " beta=" << c.beta;
}

class GemmF32 : public ::testing::TestWithParam<Case> {};

TEST_P(GemmF32, MatchesNaive) {
  Case t = GetParam();
  GemmShape s{t.m, t.n, t.k, t.ta, t.tb, 0, 0, 0};
  int64_t a_rows = t.ta ? t.k : t.m, a_cols = t.ta ? t.m : t.k;
  int64_t b_rows = t.tb ? t.n : t.k, b_cols = t.tb ? t.k : t.n;
  if (t.pad) {
    s.lda = a_cols + t.pad;
    s.ldb = b_cols + t.pad;
    s.ldc = t.n + t.pad;
  }
  int64_t lda = s.lda ? s.lda : a_cols, ldb = s.ldb ? s.ldb : b_cols,
          ldc = s.ldc ? s.ldc : t.n;
  auto a = random_vec(a_rows * lda, 1);
  auto b = random_vec(b_rows * ldb, 2);
  auto c = random_vec(t.m * ldc, 3);
  auto ref = c;
  gemm_f32(s, t.alpha, a.data(), b.data(), t.beta, c.data());
  naive(s, t.alpha, a.data(), b.data(), t.beta, ref.data());
  for (size_t i = 0; i < c.size(); ++i)
    ASSERT_NEAR(c[i], ref[i], 1e-4f * (1 + std::sqrt(float(t.k)))) << "at " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmF32,
    ::testing::Values(Case{1, 1, 1, false, false, 0, 1.f, 0.f},
                      Case{7, 5, 3, false, false, 0, 1.f, 0.f},
                      Case{33, 17, 65, true, false, 0, 1.f, 0.f},
                      Case{33, 17, 65, false, true, 0, 1.f, 0.f},
                      Case{31, 29, 47, true, true, 0, 0.5f, 0.f},
                      Case{64, 48, 80, false, false, 0, 1.f, 1.f},   // accumulate
                      Case{19, 23, 11, true, false, 3, 2.f, -0.5f},  // padded lds
                      Case{1, 1024, 512, false, false, 0, 1.f, 0.f},  // decode-shaped
                      Case{5, 9, 0, false, false, 0, 1.f, 0.5f}),    // empty reduction
    [](const ::testing::TestParamInfo<Case>& i) {
      const Case& c = i.param;
      return "m" + std::to_string(c.m) + "n" + std::to_string(c.n) + "k" + std::to_string(c.k) +
             (c.ta ? "Ta" : "") + (c.tb ? "Tb" : "") + (c.pad ? "Pad" : "") +
             (c.beta != 0.f ? "Beta" : "");
    });

TEST(GemmF32, BetaZeroIgnoresNaNInC) {
  GemmShape s{2, 2, 2};
  std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8}, c(4, std::nanf(""));
  gemm_f32(s, 1.f, a.data(), b.data(), 0.f, c.data());
  EXPECT_EQ(c, (std::vector<float>{19, 22, 43, 50}));
}

TEST(GemmBatched, StridesAndBroadcast) {
  // batch 3; B broadcast (stride 0); A with a gap between batches.
  int64_t batch = 3, m = 9, n = 13, k = 21;
  for (int which = 0; which < 3; ++which) {
    GemmShape s{m, n, k, which == 1, which == 2};
    int64_t sa = which == 1 ? 0 : m * k + 5;   // which==1: A broadcast
    int64_t sb = which == 1 ? k * n : 0;       // else B broadcast
    int64_t sc = m * n + 2;
    auto a = random_vec(std::max<int64_t>(sa * batch, m * k), 10 + which);
    auto b = random_vec(std::max<int64_t>(sb * batch, k * n), 20 + which);
    auto c = random_vec(sc * batch, 30);
    auto ref = c;
    gemm_batched_f32(s, batch, sa, sb, sc, 1.f, a.data(), b.data(), 1.f, c.data());
    for (int64_t i = 0; i < batch; ++i)
      naive(s, 1.f, a.data() + i * sa, b.data() + i * sb, 1.f, ref.data() + i * sc);
    for (int64_t i = 0; i < batch; ++i)
      for (int64_t j = 0; j < m * n; ++j)
        ASSERT_NEAR(c[i * sc + j], ref[i * sc + j], 1e-4f) << which << " " << i << " " << j;
  }
}

TEST(GemmBatched, Bf16MatchesF32Reference) {
  int64_t batch = 4, m = 37, n = 70, k = 129;
  for (bool tb : {false, true}) {
    GemmShape s{m, n, k, false, tb};
    auto af = random_vec(batch * m * k, 5), bf = random_vec(batch * k * n, 6);
    std::vector<bfloat16> a(af.size()), b(bf.size());
    for (size_t i = 0; i < af.size(); ++i) a[i] = bfloat16(af[i]);
    for (size_t i = 0; i < bf.size(); ++i) b[i] = bfloat16(bf[i]);
    std::vector<float> c(batch * m * n, 0.f), ref_exact(c), ref_f32(c);
    gemm_batched_bf16(s, batch, m * k, k * n, m * n, 1.f, a.data(), b.data(), 0.f, c.data());
    for (int64_t i = 0; i < batch; ++i) {
      // Exact on bf16-rounded inputs (f32 accumulation differs only by order).
      naive(s, 1.f, a.data() + i * m * k, b.data() + i * k * n, 0.f,
            ref_exact.data() + i * m * n);
      naive(s, 1.f, af.data() + i * m * k, bf.data() + i * k * n, 0.f,
            ref_f32.data() + i * m * n);
    }
    double max_rounding = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_NEAR(c[i], ref_exact[i], 1e-3f);
      // Against unrounded f32: bf16 has 8 mantissa bits, so ~2^-8 relative
      // per term; with |terms| <= 1 over k=129 the error stays well below 0.5.
      ASSERT_NEAR(c[i], ref_f32[i], 0.25f);
      max_rounding = std::max(max_rounding, double(std::fabs(c[i] - ref_f32[i])));
    }
    EXPECT_GT(max_rounding, 0.0);  // the inputs really were rounded
  }
}

TEST(GemmBatched, Bf16BroadcastAndAccumulate) {
  // A broadcast over the batch (stride 0), beta = 1, alpha = 0.5.
  int64_t batch = 3, m = 5, n = 33, k = 40;
  GemmShape s{m, n, k, false, false};
  auto af = random_vec(m * k, 41), bf = random_vec(batch * k * n, 42);
  std::vector<bfloat16> a(af.size()), b(bf.size());
  for (size_t i = 0; i < af.size(); ++i) a[i] = bfloat16(af[i]);
  for (size_t i = 0; i < bf.size(); ++i) b[i] = bfloat16(bf[i]);
  auto c = random_vec(batch * m * n, 43);
  auto ref = c;
  gemm_batched_bf16(s, batch, 0, k * n, m * n, 0.5f, a.data(), b.data(), 1.f, c.data());
  for (int64_t i = 0; i < batch; ++i)
    naive(s, 0.5f, a.data(), b.data() + i * k * n, 1.f, ref.data() + i * m * n);
  for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], ref[i], 1e-4f);
}

TEST(GemmBatched, Bf16OutputIsRoundedF32Result) {
  int64_t batch = 2, m = 17, n = 40, k = 64;
  GemmShape s{m, n, k, true, false};  // A stored [k, m]
  auto af = random_vec(batch * k * m, 51), bf = random_vec(batch * k * n, 52);
  std::vector<bfloat16> a(af.size()), b(bf.size());
  for (size_t i = 0; i < af.size(); ++i) a[i] = bfloat16(af[i]);
  for (size_t i = 0; i < bf.size(); ++i) b[i] = bfloat16(bf[i]);
  std::vector<float> ref(batch * m * n, 0.f);
  std::vector<bfloat16> c(ref.size());
  gemm_batched_bf16_out_bf16(s, batch, k * m, k * n, m * n, 1.f, a.data(), b.data(), 0.f, c.data());
  gemm_batched_bf16(s, batch, k * m, k * n, m * n, 1.f, a.data(), b.data(), 0.f, ref.data());
  int exact = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    // One rounding of the f32 result: within half a bf16 ulp (2^-9 relative).
    ASSERT_NEAR(float(c[i]), ref[i], std::fabs(ref[i]) * (1.f / 256) + 1e-6f) << i;
    exact += bfloat16(ref[i]).bits == c[i].bits;
  }
  EXPECT_GT(exact, int(c.size()) * 9 / 10);  // same rounding almost everywhere
  // k == 0 with beta: C = beta * C in bf16.
  std::vector<bfloat16> c2(4, bfloat16(3.f));
  gemm_batched_bf16_out_bf16(GemmShape{2, 2, 0}, 1, 0, 0, 0, 1.f, a.data(), b.data(), 0.5f, c2.data());
  EXPECT_EQ(float(c2[0]), 1.5f);
}

// Where bf16 and f32 products take the same implementation (AVX2: both the
// packed GEMM; SSE4: oneDNN, bf16 widened first), a bf16 product is the f32
// product of the widened operands, bit for bit: strides, padding, transposes,
// broadcast, alpha, beta. Elsewhere (natively; ctest also runs this binary
// with T5X_BF16_GEMM=f32, bf16 on the packed GEMM and f32 on oneDNN) they
// agree within f32 summation-order differences.
TEST(GemmBatched, Bf16IsTheF32ProductOfTheWidenedOperands) {
  const int64_t batch = 3, m = 33, n = 300, k = 70, lda = 40;  // A stored [k, m] with padded rows
  GemmShape s{m, n, k, true, false};
  s.lda = lda;
  auto af = random_vec(size_t(batch * k * lda), 61), bf = random_vec(size_t(k * n), 62);
  std::vector<bfloat16> a(af.begin(), af.end()), b(bf.begin(), bf.end());
  std::vector<float> wa(a.begin(), a.end()), wb(b.begin(), b.end());  // exact widening
  const auto c0 = random_vec(size_t(batch * m * n), 63);
  std::vector<float> c(c0), ref(c0);
  // B broadcast over the batch (stride 0).
  gemm_batched_bf16(s, batch, k * lda, 0, m * n, 0.75f, a.data(), b.data(), 0.5f, c.data());
  gemm_batched_f32(s, batch, k * lda, 0, m * n, 0.75f, wa.data(), wb.data(), 0.5f, ref.data());
  std::vector<bfloat16> cb(c0.begin(), c0.end()), refb(cb);
  gemm_batched_bf16_out_bf16(s, batch, k * lda, 0, m * n, 0.75f, a.data(), b.data(), 0.5f, cb.data());
  {  // bf16 output: alpha * A.B in f32, plus beta * C, rounded once.
    std::vector<float> t(c0.size());
    gemm_batched_f32(s, batch, k * lda, 0, m * n, 0.75f, wa.data(), wb.data(), 0.f, t.data());
    for (size_t i = 0; i < t.size(); ++i) refb[i] = bfloat16(t[i] + 0.5f * float(refb[i]));
  }
  const std::string kf32 = gemm_kernel(false), kbf16 = gemm_kernel(true);
  if ((kf32 == "packed" && kbf16 == "packed") || (kf32 == "oneDNN" && kbf16 == "oneDNN via f32")) {
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_EQ(c[i], ref[i]) << i;
      ASSERT_EQ(cb[i].bits, refb[i].bits) << i;
    }
  } else {
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_NEAR(c[i], ref[i], 1e-4f) << i;
      ASSERT_NEAR(float(cb[i]), float(refb[i]), std::fabs(float(refb[i])) / 128 + 1e-4f) << i;
    }
  }
}

// The AVX2 leg of CI (scripts/avx2.sh) caps oneDNN with ONEDNN_MAX_CPU_ISA
// and our kernels with T5X_CPU_ISA; this checks that the caps took hold and
// that f32 and bf16 products then run on the packed GEMM (oneDNN 2.6 has no
// bf16 matmul below AVX-512), as the CPU line says.
TEST(GemmBatched, Avx2CapTakesThePackedGemm) {
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const char* simd = std::getenv("T5X_CPU_ISA");
  if (!cap || std::strcmp(cap, "AVX2") != 0 || !simd || std::strcmp(simd, "avx2") != 0) {
    // Without the caps: bf16 leaves oneDNN only when it has no bf16 matmul
    // or when told so.
    const char* e = std::getenv("T5X_BF16_GEMM");
    if (e && std::strcmp(e, "f32") == 0) { EXPECT_FALSE(gemm_bf16_native()); }
    if (gemm_bf16_native() && !std::getenv("T5X_GEMM_KERNEL")) { EXPECT_STREQ(gemm_kernel(true), "oneDNN"); }
    return;
  }
  EXPECT_FALSE(gemm_bf16_native());
  EXPECT_EQ(cpu_info().onednn_isa, "avx2");
  EXPECT_EQ(cpu_info().gemm_vector, "avx2");
  EXPECT_STREQ(gemm_kernel(false), "packed");
  EXPECT_STREQ(gemm_kernel(true), "packed");
  EXPECT_TRUE(gemm_block_invariant());
  EXPECT_NE(describe_cpu().find("products f32 packed, bf16 packed"), std::string::npos) << describe_cpu();
  EXPECT_EQ(describe_cpu().find("not block-invariant"), std::string::npos) << describe_cpu();
}

TEST(Gemm, RepeatedCallsReuseAndAgree) {
  GemmShape s{40, 30, 20};
  auto a = random_vec(800, 1), b = random_vec(600, 2);
  std::vector<float> c1(1200), c2(1200);
  gemm_f32(s, 1.f, a.data(), b.data(), 0.f, c1.data());
  gemm_f32(s, 1.f, a.data(), b.data(), 0.f, c2.data());
  EXPECT_EQ(c1, c2);
}

TEST(Gemm, ConcurrentCallersFromThreads) {
  GemmShape s{64, 64, 64};
  auto a = random_vec(64 * 64, 1), b = random_vec(64 * 64, 2);
  std::vector<float> ref(64 * 64);
  gemm_f32(s, 1.f, a.data(), b.data(), 0.f, ref.data());
  std::vector<std::vector<float>> out(4, std::vector<float>(64 * 64));
#pragma omp parallel for num_threads(4)
  for (int t = 0; t < 4; ++t) gemm_f32(s, 1.f, a.data(), b.data(), 0.f, out[t].data());
  for (auto& o : out)
    for (size_t i = 0; i < o.size(); ++i) ASSERT_NEAR(o[i], ref[i], 1e-4f);
}

// Mesh-invariant products (spmd/context.h) give one process's bits when an
// output element's value does not depend on how many rows or columns are
// computed with it, nor on the thread count. oneDNN 2.6 keeps that on these
// shapes (T5.1.1 tiny's training products at batch 8 x 64 tokens), not on all:
// with k >= 1024 (A transposed) or k >= 2048 its order over k changes with the
// row count and the threads (gemm.h).
struct BlockCase {
  int64_t m, n, k;
  bool ta, tb;
};
std::string name_of(const BlockCase& c) {
  return "m" + std::to_string(c.m) + "n" + std::to_string(c.n) + "k" + std::to_string(c.k) +
         (c.ta ? "Ta" : "") + (c.tb ? "Tb" : "");
}
void PrintTo(const BlockCase& c, std::ostream* os) { *os << name_of(c); }
class GemmBlocks : public ::testing::TestWithParam<BlockCase> {};

TEST_P(GemmBlocks, RowAndColumnBlocksMatchTheWholeProductBitwise) {
  const BlockCase t = GetParam();
  auto fa = random_vec(size_t(t.m * t.k), 11), fb = random_vec(size_t(t.k * t.n), 12);
  std::vector<bfloat16> a(fa.begin(), fa.end()), b(fb.begin(), fb.end());
  // op(A) element (i, p) and op(B) element (p, j) in their stored layouts.
  auto a_at = [&](int64_t i, int64_t p) { return t.ta ? a[size_t(p * t.m + i)] : a[size_t(i * t.k + p)]; };
  auto b_at = [&](int64_t p, int64_t j) { return t.tb ? b[size_t(j * t.k + p)] : b[size_t(p * t.n + j)]; };
  auto run = [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols, int threads, bool bf16_out) {
    // The block's operands, packed densely as a device would hold them.
    std::vector<bfloat16> ba(size_t(rows * t.k)), bb(size_t(t.k * cols));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t p = 0; p < t.k; ++p) (t.ta ? ba[size_t(p * rows + i)] : ba[size_t(i * t.k + p)]) = a_at(r0 + i, p);
    for (int64_t p = 0; p < t.k; ++p)
      for (int64_t j = 0; j < cols; ++j) (t.tb ? bb[size_t(j * t.k + p)] : bb[size_t(p * cols + j)]) = b_at(p, c0 + j);
    GemmShape s{rows, cols, t.k, t.ta, t.tb};
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> c(size_t(rows * cols));
    if (bf16_out) {
      std::vector<bfloat16> cb(c.size());
      gemm_batched_bf16_out_bf16(s, 1, 0, 0, 0, 1.f, ba.data(), bb.data(), 0.f, cb.data());
      for (size_t i = 0; i < c.size(); ++i) c[i] = float(cb[i]);
    } else {
      gemm_batched_bf16(s, 1, 0, 0, 0, 1.f, ba.data(), bb.data(), 0.f, c.data());
    }
    omp_set_num_threads(saved);
    return c;
  };
  // Where gemm_block_invariant() says no (oneDNN's AVX2 products), the
  // blocks agree to rounding and the CPU line says that runs are not bitwise.
  const bool exact = gemm_block_invariant();
  if (!exact) {
    EXPECT_NE(describe_cpu().find("not block-invariant"), std::string::npos) << describe_cpu();
  }
  // Otherwise: a summation order's rounding (about 1e-7 per term of these
  // [-1, 1] operands), plus one bf16 ulp (2^-8 relative) for a bf16 output.
  float rel = 0;
  auto same = [&](float got, float want) {
    return exact ? got == want : std::fabs(got - want) <= rel * std::fabs(want) + 1e-7f * float(t.k);
  };
  for (bool bf16_out : {false, true}) {
    rel = bf16_out ? 1.0f / 128 : 0.0f;
    const auto whole = run(0, t.m, 0, t.n, 2, bf16_out);
    for (int threads : {1, 2}) {
      for (int half = 0; half < 2; ++half) {
        const auto rows = run(half * t.m / 2, t.m / 2, 0, t.n, threads, bf16_out);
        for (int64_t i = 0; i < t.m / 2; ++i)
          for (int64_t j = 0; j < t.n; ++j)
            ASSERT_PRED2(same, rows[size_t(i * t.n + j)], whole[size_t((half * t.m / 2 + i) * t.n + j)])
                << "row block " << half << " threads " << threads << " at (" << i << ", " << j << ")";
        const auto cols = run(0, t.m, half * t.n / 2, t.n / 2, threads, bf16_out);
        for (int64_t i = 0; i < t.m; ++i)
          for (int64_t j = 0; j < t.n / 2; ++j)
            ASSERT_PRED2(same, cols[size_t(i * t.n / 2 + j)], whole[size_t(i * t.n + half * t.n / 2 + j)])
                << "column block " << half << " threads " << threads << " at (" << i << ", " << j << ")";
      }
    }
  }
}

// Activations x kernels, their input gradients (transposed kernels) and
// weight gradients (sums over batch x length, k <= 512).
INSTANTIATE_TEST_SUITE_P(Shapes, GemmBlocks,
                         ::testing::Values(BlockCase{512, 1024, 256, false, false},
                                           BlockCase{512, 256, 1024, false, true},
                                           BlockCase{256, 1024, 512, true, false},
                                           BlockCase{512, 8192, 256, false, false},
                                           BlockCase{512, 256, 8192, false, true},
                                           BlockCase{64, 64, 64, false, true},
                                           BlockCase{48, 40, 200, true, true}),
                         [](const ::testing::TestParamInfo<BlockCase>& i) { return name_of(i.param); });

// ctest runs this with T5X_GEMM_KERNEL=bogus (backend_gemm_kernel_bogus): the
// first product says what is wrong and what would be right; with a valid
// value (or none) it checks that gemm_kernel names a real implementation.
TEST(Gemm, UnknownKernelVariableIsAnError) {
  const char* e = std::getenv("T5X_GEMM_KERNEL");
  std::vector<float> x(4, 1.0f), c(4);
  if (e && std::strcmp(e, "bogus") == 0) {
    try {
      gemm_f32(GemmShape{2, 2, 1}, 1, x.data(), x.data(), 0, c.data());
      FAIL() << "expected a throw";
    } catch (const std::invalid_argument& err) {
      EXPECT_NE(std::string(err.what()).find("T5X_GEMM_KERNEL='bogus'"), std::string::npos) << err.what();
      EXPECT_NE(std::string(err.what()).find("auto, packed or onednn"), std::string::npos) << err.what();
    }
    return;
  }
  gemm_f32(GemmShape{2, 2, 1}, 1, x.data(), x.data(), 0, c.data());
  EXPECT_EQ(c, std::vector<float>(4, 1.0f));
  const std::string k = gemm_kernel(false);
  EXPECT_TRUE(k == "packed" || k == "oneDNN") << k;
  if (e && std::strcmp(e, "packed") == 0) { EXPECT_EQ(k, "packed"); }
}

TEST(Gemm, RejectsMisuse) {
  std::vector<float> x(16);
  EXPECT_THROW(gemm_f32(GemmShape{-1, 2, 2}, 1, x.data(), x.data(), 0, x.data()),
               std::invalid_argument);
  GemmShape bad{2, 4, 4};
  bad.lda = 3;  // rows of A have 4 elements
  try {
    gemm_f32(bad, 1, x.data(), x.data(), 0, x.data());
    FAIL() << "expected a throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[gemm]"), std::string::npos);
  }
}

}  // namespace
}  // namespace t5x::cpu
