// The packed GEMM (backend/cpu/packed_gemm.h): its summation contract bit for
// bit against a scalar model of it, the same bits on every SIMD target, for
// every thread count and for row and column blocks of a product, and the
// accuracy of its results against a double-precision product.
#include "backend/cpu/packed_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/dtype_bf16.h"
#include "cross_target.h"
#include "test_util.h"

namespace t5x::cpu {
namespace {

using testing::random_vec;

struct Problem {
  int64_t batch, m, n, k;
  bool ta, tb;
  int64_t pad;    // extra elements per stored row of A, B and C
  bool bcast_a;   // A broadcast over the batch (stride 0)
  float alpha, beta;
  std::string name() const {
    return "batch=" + std::to_string(batch) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
           " k=" + std::to_string(k) + (ta ? " tA" : "") + (tb ? " tB" : "") + " pad=" + std::to_string(pad) +
           (bcast_a ? " bcastA" : "") + " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta);
  }
  GemmShape shape() const {
    GemmShape s{m, n, k, ta, tb};
    s.lda = (ta ? m : k) + pad;
    s.ldb = (tb ? k : n) + pad;
    s.ldc = n + pad;
    return s;
  }
  int64_t a_size() const { return (ta ? k : m) * shape().lda; }
  int64_t b_size() const { return (tb ? n : k) * shape().ldb; }
  int64_t c_size() const { return m * shape().ldc; }
  int64_t sa() const { return bcast_a ? 0 : a_size(); }
};

// Ragged edges (rows not a multiple of 6, columns not of 16 or 32), k over
// one, two and three k blocks, every transpose, padding, a broadcast A, and
// several row, column and k blocks at once.
const Problem kProblems[] = {
    {1, 13, 37, 600, false, false, 0, false, 1.0f, 0.0f},
    {1, 13, 37, 600, true, false, 3, false, 0.5f, 0.75f},
    {1, 29, 70, 257, false, true, 1, false, 1.0f, 0.75f},
    {1, 7, 33, 256, true, true, 0, false, 1.25f, 0.0f},
    {2, 50, 100, 70, false, false, 2, true, 1.0f, 0.5f},
    {3, 6, 32, 513, false, true, 0, false, 1.0f, 0.0f},
    {1, 61, 530, 40, false, false, 0, false, 1.0f, 0.0f},  // n over one 512-column B block
    // Several 48-row, 512-column and k blocks (the last of each ragged),
    // the columns split over the threads.
    {1, 150, 600, 700, false, true, 1, false, 1.0f, 0.5f},
    {1, 100, 1100, 300, true, false, 0, false, 1.0f, 0.0f},
    {1, 1, 1, 1, false, false, 0, false, 2.0f, 0.0f},
};

// The contract of packed_gemm.h written as scalar code: per k block of
// kPackedGemmKc, acc = fma(a, b, acc) over p in order from 0; the first block
// writes alpha * acc (+ beta * C), later blocks add alpha * acc.
template <typename T>
std::vector<float> model_f32(const Problem& pr, const std::vector<T>& a, const std::vector<T>& b,
                             std::vector<float> c) {
  const GemmShape s = pr.shape();
  for (int64_t bi = 0; bi < pr.batch; ++bi)
    for (int64_t i = 0; i < pr.m; ++i)
      for (int64_t j = 0; j < pr.n; ++j) {
        float& out = c[size_t(bi * pr.c_size() + i * s.ldc + j)];
        for (int64_t p0 = 0; p0 < pr.k; p0 += kPackedGemmKc) {
          float acc = 0.0f;
          for (int64_t p = p0; p < std::min(pr.k, p0 + kPackedGemmKc); ++p) {
            const float av = float(pr.ta ? a[size_t(bi * pr.sa() + p * s.lda + i)] : a[size_t(bi * pr.sa() + i * s.lda + p)]);
            const float bv = float(pr.tb ? b[size_t(bi * pr.b_size() + j * s.ldb + p)]
                                         : b[size_t(bi * pr.b_size() + p * s.ldb + j)]);
            acc = std::fma(av, bv, acc);
          }
          const float v = pr.alpha == 1.0f ? acc : pr.alpha * acc;
          if (p0 > 0) out = out + v;
          else out = pr.beta != 0.0f ? v + pr.beta * out : v;
        }
      }
  return c;
}

struct Operands {
  std::vector<float> a, b, c;
};
Operands operands(const Problem& pr, uint32_t seed) {
  // bf16-representable values, so that f32 and bf16 runs share their inputs.
  auto round = [](std::vector<float> v) {
    for (float& x : v) x = float(bfloat16(x));
    return v;
  };
  return {round(random_vec(size_t(pr.sa() == 0 ? pr.a_size() : pr.batch * pr.a_size()), seed)),
          round(random_vec(size_t(pr.batch * pr.b_size()), seed + 1)),
          random_vec(size_t(pr.batch * pr.c_size()), seed + 2)};
}

std::vector<float> run_f32(const Problem& pr, const Operands& o, int threads) {
  std::vector<float> c = o.c;
  packed_gemm(pr.shape(), pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha, o.a.data(), o.b.data(), pr.beta,
              c.data(), threads);
  return c;
}
std::vector<float> run_bf16(const Problem& pr, const Operands& o, int threads) {
  std::vector<bfloat16> a(o.a.begin(), o.a.end()), b(o.b.begin(), o.b.end());
  std::vector<float> c = o.c;
  packed_gemm(pr.shape(), pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha, a.data(), b.data(), pr.beta,
              c.data(), threads);
  return c;
}
std::vector<bfloat16> run_bf16_out(const Problem& pr, const Operands& o, int threads) {
  std::vector<bfloat16> a(o.a.begin(), o.a.end()), b(o.b.begin(), o.b.end()), c(o.c.begin(), o.c.end());
  packed_gemm(pr.shape(), pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha, a.data(), b.data(), pr.beta,
              c.data(), threads);
  return c;
}

void expect_bitwise(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0) << what << " at " << i << ": " << got[i] << " vs " << want[i];
}

TEST(PackedGemm, FollowsItsSummationContractBitwise) {
  for (const Problem& pr : kProblems) {
    const Operands o = operands(pr, 7);
    const auto want = model_f32(pr, o.a, o.b, o.c);
    for (int threads : {1, 2, 3}) {
      expect_bitwise(run_f32(pr, o, threads), want, "f32 " + pr.name() + " threads " + std::to_string(threads));
      // bf16 operands widen exactly: the same bits as the f32 product.
      expect_bitwise(run_bf16(pr, o, threads), want, "bf16 " + pr.name() + " threads " + std::to_string(threads));
    }
    // bf16 output: the f32 sums (beta 0) plus beta * C, rounded once.
    Problem p0 = pr;
    p0.beta = 0.0f;
    const std::vector<bfloat16> c16(o.c.begin(), o.c.end());
    std::vector<float> c16f(c16.begin(), c16.end());
    const auto sums = model_f32(p0, o.a, o.b, c16f);
    for (int threads : {1, 2}) {
      const auto got = run_bf16_out(pr, o, threads);
      for (size_t i = 0; i < got.size(); ++i) {
        const int64_t col = int64_t(i) % pr.shape().ldc;
        const bool inside = col < pr.n;
        const bfloat16 want16 = inside ? bfloat16(pr.beta != 0.0f ? sums[i] + pr.beta * float(c16[i]) : sums[i])
                                       : c16[i];  // padding untouched
        ASSERT_EQ(got[i].bits, want16.bits) << "bf16 out " << pr.name() << " at " << i;
      }
    }
  }
}

TEST(PackedGemm, KnownAnswer) {
  // [[1, 2, 3], [4, 5, 6]] x [[1, 0], [0, 1], [1, 1]] = [[4, 5], [10, 11]].
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {1, 0, 0, 1, 1, 1};
  std::vector<float> c(4, 100.0f);
  GemmShape s{2, 2, 3};
  s.lda = 3; s.ldb = 2; s.ldc = 2;
  packed_gemm(s, 1, 0, 0, 0, 1.0f, a.data(), b.data(), 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{54, 55, 60, 61}));
}

TEST(PackedGemm, CloseToTheDoubleProduct) {
  // Larger than the caches' blocks in every dimension: 2 x 2 A blocks, 2 B
  // blocks, 3 k blocks.
  const Problem pr{1, 100, 1100, 700, false, true, 0, false, 1.0f, 0.0f};
  const Operands o = operands(pr, 3);
  const auto got = run_f32(pr, o, 2);
  const GemmShape s = pr.shape();
  for (int64_t i = 0; i < pr.m; i += 7)
    for (int64_t j = 0; j < pr.n; j += 5) {
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < pr.k; ++p) {
        const double t = double(o.a[size_t(i * s.lda + p)]) * double(o.b[size_t(j * s.ldb + p)]);
        ref += t;
        mag += std::fabs(t);
      }
      ASSERT_NEAR(got[size_t(i * s.ldc + j)], ref, mag * 1e-6) << i << ", " << j;
    }
}

// Columns [c0, c0 + count) of a dense [rows, width] matrix.
std::vector<float> columns(const std::vector<float>& x, int64_t rows, int64_t width, int64_t c0, int64_t count) {
  std::vector<float> out(size_t(rows * count));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < count; ++j) out[size_t(r * count + j)] = x[size_t(r * width + c0 + j)];
  return out;
}

TEST(PackedGemm, RowAndColumnBlocksGiveTheWholeProductsBits) {
  // What mesh-invariant lowering needs (gemm.h: gemm_block_invariant).
  const Problem pr{1, 96, 200, 700, true, false, 0, false, 1.0f, 0.0f};
  const Operands o = operands(pr, 11);
  const auto whole = run_f32(pr, o, 2);
  for (int half = 0; half < 2; ++half) {
    // Rows [48 half, 48 half + 48): A stored [k, m], so the block is a column range.
    Problem rows = pr;
    rows.m = 48;
    Operands ro = o;
    ro.a = columns(o.a, pr.k, pr.m, half * 48, 48);
    ro.c.assign(size_t(48 * pr.n), 0.0f);
    const auto got = run_f32(rows, ro, 1);
    for (int64_t i = 0; i < 48; ++i)
      for (int64_t j = 0; j < pr.n; ++j)
        ASSERT_EQ(got[size_t(i * pr.n + j)], whole[size_t((half * 48 + i) * pr.n + j)]) << "rows " << half;
    Problem cols = pr;
    cols.n = 100;
    Operands co = o;
    co.b = columns(o.b, pr.k, pr.n, half * 100, 100);
    co.c.assign(size_t(pr.m * 100), 0.0f);
    const auto gotc = run_f32(cols, co, 3);
    for (int64_t i = 0; i < pr.m; ++i)
      for (int64_t j = 0; j < 100; ++j)
        ASSERT_EQ(gotc[size_t(i * 100 + j)], whole[size_t(i * pr.n + half * 100 + j)]) << "cols " << half;
  }
}

TEST(PackedGemm, SameBitsOnEveryTarget) {
  for (const Problem& pr : kProblems) {
    const Operands o = operands(pr, 5);
    testing::expect_same_on_every_target("packed f32 " + pr.name(), [&] { return run_f32(pr, o, 2); });
    testing::expect_same_on_every_target("packed bf16 out " + pr.name(), [&] {
      const auto c = run_bf16_out(pr, o, 2);
      return std::vector<float>(c.begin(), c.end());
    });
  }
}

// gemm.h routes to the packed GEMM where it says so; either way the public
// entry points agree with it to rounding, and bitwise when it is the route.
TEST(PackedGemm, GemmEntryPointsUseItWhereTheyReportIt) {
  const Problem pr{1, 40, 300, 520, false, true, 0, false, 1.0f, 0.0f};
  const Operands o = operands(pr, 13);
  const auto packed = run_f32(pr, o, 2);
  std::vector<float> c = o.c;
  gemm_batched_f32(pr.shape(), 1, 0, 0, 0, 1.0f, o.a.data(), o.b.data(), 0.0f, c.data());
  std::vector<bfloat16> a16(o.a.begin(), o.a.end()), b16(o.b.begin(), o.b.end());
  std::vector<float> c16 = o.c;
  gemm_batched_bf16(pr.shape(), 1, 0, 0, 0, 1.0f, a16.data(), b16.data(), 0.0f, c16.data());
  const bool f32_packed = std::string(gemm_kernel(false)) == "packed";
  const bool bf16_packed = std::string(gemm_kernel(true)) == "packed";
  for (size_t i = 0; i < c.size(); ++i) {
    if (f32_packed) ASSERT_EQ(c[i], packed[i]) << i;
    else ASSERT_NEAR(c[i], packed[i], 1e-4f) << i;
    if (bf16_packed) ASSERT_EQ(c16[i], packed[i]) << i;
    else ASSERT_NEAR(c16[i], packed[i], 1e-4f) << i;
  }
}

// An f32 operand taken as bf16 (F32AsBf16): rounded as it is packed, the
// product is bitwise the one of the cast operand, on every target, for A or
// B rounded, f32 or bf16 C, every problem shape, and values that test the
// rounding: ties (to even, both ways), bf16 overflow to infinity, subnormals,
// -0, infinities and NaN.
// The finite specials spread over the operand; the others only in its last
// four values (a row of A or a few columns of B), so that most of C stays
// finite.
std::vector<float> unrounded(size_t n, uint32_t seed) {
  std::vector<float> v = random_vec(n, seed);
  const float finite[] = {1.00390625f,   // 1 + 2^-8: a tie, rounds down to even
                          1.01171875f,   // 1 + 3 * 2^-8: a tie, rounds up to even
                          -0.0f, 1e-40f, -3e-39f};
  for (size_t i = 0, j = 0; i < n; i += 37, ++j) v[i] = finite[j % std::size(finite)];
  const float other[] = {3.4e38f,  // rounds to bf16 infinity
                         std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN()};
  for (size_t j = 0; j < std::size(other) && j < n; ++j) v[n - 1 - j] = other[j];
  return v;
}

template <typename TC>
testing::Bytes run_rounded(const Problem& pr, bool round_a, int threads, bool cast_first) {
  const auto af = unrounded(size_t(pr.sa() == 0 ? pr.a_size() : pr.batch * pr.a_size()), 31);
  const auto bf = unrounded(size_t(pr.batch * pr.b_size()), 32);
  const auto c0 = random_vec(size_t(pr.batch * pr.c_size()), 33);
  std::vector<bfloat16> a16(af.begin(), af.end()), b16(bf.begin(), bf.end());
  std::vector<TC> c(c0.begin(), c0.end());
  const GemmShape s = pr.shape();
  if (cast_first)
    packed_gemm(s, pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha, a16.data(), b16.data(), pr.beta, c.data(),
                threads);
  else if (round_a)
    packed_gemm(s, pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha, reinterpret_cast<const F32AsBf16*>(af.data()),
                b16.data(), pr.beta, c.data(), threads);
  else
    packed_gemm(s, pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha, a16.data(),
                reinterpret_cast<const F32AsBf16*>(bf.data()), pr.beta, c.data(), threads);
  testing::Bytes out;
  testing::append(out, c);
  return out;
}

TEST(PackedGemm, F32OperandRoundedAsItPacksEqualsTheCastOperand) {
  size_t checked = 0;
  for (const Problem& pr : kProblems)
    for (bool round_a : {false, true})
      for (bool bf16_c : {false, true}) {
        const std::string what = pr.name() + (round_a ? " A" : " B") + " rounded, C " + (bf16_c ? "bf16" : "f32");
        auto run = [&](int threads, bool cast_first) {
          return bf16_c ? run_rounded<bfloat16>(pr, round_a, threads, cast_first)
                        : run_rounded<float>(pr, round_a, threads, cast_first);
        };
        testing::expect_same_on_every_target(what, [&] {
          const auto want = run(2, true), got = run(2, false);
          EXPECT_EQ(testing::first_diff(want, got), -1) << what;
          EXPECT_EQ(testing::first_diff(want, run(1, false)), -1) << what << " (1 thread)";
          ++checked;
          return got;
        });
      }
  EXPECT_GT(checked, 0u);
}

// The gemm.h entry point: the packed route where it serves bf16 products,
// the cast-first fallback elsewhere (few rows: the skinny kernel; both
// operands f32), bitwise the bf16 product of the cast operands either way.
TEST(PackedGemm, AsBf16EntryPointEqualsTheCastOperandsProduct) {
  const Problem problems[] = {
      {1, 40, 300, 520, false, true, 0, false, 1.0f, 0.0f},   // packed route where bf16 runs there
      {1, 4, 512, 64, false, false, 0, false, 1.0f, 0.0f},    // few rows: the skinny kernel
      {1, 4, 512, 64, false, true, 1, false, 1.0f, 0.0f},
      {3, 20, 40, 70, true, false, 2, true, 1.0f, 0.5f},      // batched, broadcast A, padding
  };
  for (const Problem& pr : problems)
    for (int rounded : {1, 2, 3})  // A, B, both
      for (bool bf16_c : {false, true}) {
        const bool ra = rounded & 1, rb = rounded & 2;
        SCOPED_TRACE(pr.name() + " rounded " + std::to_string(rounded) + (bf16_c ? " C bf16" : " C f32"));
        const auto af = unrounded(size_t(pr.sa() == 0 ? pr.a_size() : pr.batch * pr.a_size()), 41);
        const auto bf = unrounded(size_t(pr.batch * pr.b_size()), 42);
        const auto c0 = random_vec(size_t(pr.batch * pr.c_size()), 43);
        std::vector<bfloat16> a16(af.begin(), af.end()), b16(bf.begin(), bf.end());
        testing::Bytes want, got;
        if (bf16_c) {
          std::vector<bfloat16> cw(c0.begin(), c0.end()), cg = cw;
          gemm_batched_bf16_out_bf16(pr.shape(), pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha, a16.data(),
                                     b16.data(), pr.beta, cw.data());
          gemm_batched_as_bf16(pr.shape(), pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha,
                               ra ? static_cast<const void*>(af.data()) : a16.data(), ra,
                               rb ? static_cast<const void*>(bf.data()) : b16.data(), rb, pr.beta, cg.data(), true);
          testing::append(want, cw);
          testing::append(got, cg);
        } else {
          std::vector<float> cw = c0, cg = c0;
          gemm_batched_bf16(pr.shape(), pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha, a16.data(), b16.data(),
                            pr.beta, cw.data());
          gemm_batched_as_bf16(pr.shape(), pr.batch, pr.sa(), pr.b_size(), pr.c_size(), pr.alpha,
                               ra ? static_cast<const void*>(af.data()) : a16.data(), ra,
                               rb ? static_cast<const void*>(bf.data()) : b16.data(), rb, pr.beta, cg.data(), false);
          want = cw;
          got = cg;
        }
        EXPECT_EQ(testing::first_diff(want, got), -1);
      }
}

}  // namespace
}  // namespace t5x::cpu
