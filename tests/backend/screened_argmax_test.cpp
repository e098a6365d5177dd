// kernels::cpu::screened_argmax against the product it stands for: on every
// SIMD target, each row's token is argmax_rows of the skinny kernel's whole
// product (the first maximum, a NaN above all), bitwise, on columns built to
// defeat the bf16 screen: exact ties, columns one f32 ulp apart, columns whose
// bf16 roundings are equal or in the other order, all-equal rows (every column
// a candidate), NaN and infinity in x and in the kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "backend/cpu/skinny_gemm.h"
#include "backend/kernels.h"
#include "core/dtype_bf16.h"
#include "cross_target.h"
#include "test_util.h"

namespace t5x::cpu {
namespace {

using testing::append;
using testing::Bytes;
using testing::expect_same_on_every_target;
using testing::random_vec;

struct Problem {
  int64_t m, n, k;
  std::vector<float> x, wt;  // [m, k], [n, k]
};

// Random x and kernel, then columns that only exact sums tell apart, made
// the largest of row 0 (c0 along x's row 0).
Problem make_problem(int64_t m, int64_t n, int64_t k, uint32_t seed) {
  Problem p{m, n, k, random_vec(size_t(m * k), seed), random_vec(size_t(n * k), seed + 1, -0.1f, 0.1f)};
  float* w = p.wt.data();
  const float* x0 = p.x.data();
  auto row = [&](int64_t j) { return w + j * k; };
  const int64_t c0 = 5 % n, tie = 10 % n, ulp = 20 % n, flip = 30 % n, below = 40 % n;
  for (int64_t i = 0; i < k; ++i) row(c0)[i] = 0.5f * x0[i];
  std::copy(row(c0), row(c0) + k, row(tie));  // an exact tie: c0 wins (first)
  std::copy(row(c0), row(c0) + k, row(ulp));  // one ulp up where x > 0: ulp may win
  for (int64_t i = 0; i < k; ++i)
    if (x0[i] > 0) {
      row(ulp)[i] = std::nextafter(row(ulp)[i], 1.0f);
      break;
    }
  // Below bf16's resolution, towards x: the same bf16 screen as c0, a larger
  // exact sum.
  for (int64_t i = 0; i < k; ++i) {
    const float v = row(c0)[i];
    row(flip)[i] = std::nextafter(std::nextafter(v, x0[i] > 0 ? 1e30f : -1e30f), x0[i] > 0 ? 1e30f : -1e30f);
  }
  // A larger bf16 screen and a smaller exact sum than flip: rounded up to
  // the next bf16 where that is barely away, pulled back elsewhere.
  for (int64_t i = 0; i < k; ++i) {
    const float v = row(flip)[i];
    const float b = float(bfloat16(v));
    row(below)[i] = (i % 2 == 0) ? b : v - (b - v);
  }
  return p;
}

// The reference: the whole product on the skinny kernel, then argmax_rows.
std::vector<int32_t> reference(const Problem& p) {
  std::vector<float> c(size_t(p.m * p.n));
  skinny_gemm_bt<float, float, float>(p.m, p.n, p.k, 1.0f, p.x.data(), p.k, p.wt.data(), p.k, 0.0f, c.data(), p.n);
  std::vector<int32_t> out(size_t(p.m));
  kernels::cpu::argmax_rows(DType::f32, c.data(), out.data(), p.m, p.n);
  return out;
}

std::vector<int32_t> screened(const Problem& p) {
  std::vector<bfloat16> s(size_t(p.n * p.k));
  std::vector<float> bounds(size_t(p.n * 2));
  kernels::cpu::logits_screen(p.n, p.k, p.wt.data(), s.data(), bounds.data());
  for (int64_t i = 0; i < p.n * p.k; ++i) EXPECT_EQ(s[size_t(i)].bits, bfloat16(p.wt[size_t(i)]).bits);
  std::vector<int32_t> out(size_t(p.m), -1);
  kernels::cpu::screened_argmax(p.m, p.n, p.k, p.x.data(), p.wt.data(), s.data(), bounds.data(), out.data());
  return out;
}

void expect_tokens(const std::string& what, const Problem& p) {
  expect_same_on_every_target(what, [&] {
    const std::vector<int32_t> want = reference(p), got = screened(p);
    EXPECT_EQ(got, want) << what << " on " << simd_target();
    Bytes out;
    append(out, got);
    return out;
  });
}

std::string name(int64_t m, int64_t n, int64_t k) {
  return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

TEST(ScreenedArgmax, EqualsTheWholeProductsArgmax) {
  struct S {
    int64_t m, n, k;
  };
  // k: one block, two, a short last block; n: vector tails, one column.
  for (const S& s : {S{1, 300, 64}, S{1, 4099, 512}, S{3, 1000, 384}, S{8, 2048, 512}, S{5, 701, 600}, S{2, 1, 16},
                     S{4, 64, 1000}})
    for (uint32_t seed : {1u, 7u}) {
      Problem p = make_problem(s.m, s.n, s.k, seed);
      expect_tokens(name(s.m, s.n, s.k) + " seed " + std::to_string(seed), p);
    }
}

// The constructed columns decide row 0: the exact maximum is one of them,
// which only the exact sums order.
TEST(ScreenedArgmax, ConstructedColumnsAreOrderedByExactSums) {
  Problem p = make_problem(1, 300, 512, 3);
  const std::vector<int32_t> want = reference(p);
  EXPECT_TRUE(want[0] == 5 || want[0] == 20 || want[0] == 30 || want[0] == 40) << want[0];
  EXPECT_EQ(screened(p), want);
  // c0 and its exact copy alone: the first wins.
  Problem q = p;
  for (int64_t j : {20, 30, 40})
    for (int64_t i = 0; i < q.k; ++i) q.wt[size_t(j * q.k + i)] = 0.0f;
  EXPECT_EQ(reference(q)[0], 5);
  EXPECT_EQ(screened(q)[0], 5);
}

TEST(ScreenedArgmax, EveryColumnACandidateAndSpecialValues) {
  const int64_t m = 4, n = 500, k = 128;
  Problem p = make_problem(m, n, k, 11);
  // Row 1: x = 0, every logit 0: the first column.
  for (int64_t i = 0; i < k; ++i) p.x[size_t(k + i)] = 0.0f;
  // Row 2: a NaN in x: every logit NaN, the first.
  p.x[size_t(2 * k + 7)] = std::numeric_limits<float>::quiet_NaN();
  expect_tokens("zero and NaN rows", p);
  // An infinity in the kernel: that column +-inf or NaN in every row.
  Problem q = make_problem(m, n, k, 12);
  q.wt[size_t(77 * k + 3)] = std::numeric_limits<float>::infinity();
  expect_tokens("an infinite kernel entry", q);
  // A NaN in the kernel.
  Problem r = make_problem(m, n, k, 13);
  r.wt[size_t(250 * k + 9)] = std::numeric_limits<float>::quiet_NaN();
  expect_tokens("a NaN kernel entry", r);
  // Huge values: the bounds overflow f32 (taken as infinite).
  Problem h = make_problem(m, n, k, 14);
  for (float& v : h.x) v *= 1e30f;
  expect_tokens("huge x", h);
  // Tiny values: sums in the subnormal range.
  Problem t = make_problem(m, n, k, 15);
  for (float& v : t.x) v *= 1e-30f;
  for (float& v : t.wt) v *= 1e-12f;
  expect_tokens("subnormal sums", t);
}

// screened_candidates for top-k: each row's candidates are ascending, carry
// the whole product's values bitwise, and hold every column at or above the
// row's keep-th largest value (ties included); a row the screen cannot
// narrow holds every column. The same on every target.
void expect_candidates(const std::string& what, const Problem& p, int64_t keep, bool narrowed) {
  expect_same_on_every_target(what, [&] {
    std::vector<float> c(size_t(p.m * p.n));
    skinny_gemm_bt<float, float, float>(p.m, p.n, p.k, 1.0f, p.x.data(), p.k, p.wt.data(), p.k, 0.0f, c.data(), p.n);
    std::vector<bfloat16> s(size_t(p.n * p.k));
    std::vector<float> bounds(size_t(p.n * 2));
    kernels::cpu::logits_screen(p.n, p.k, p.wt.data(), s.data(), bounds.data());
    std::vector<kernels::cpu::ScreenedCandidates> got(size_t(p.m));
    kernels::cpu::screened_candidates(p.m, p.n, p.k, p.x.data(), p.wt.data(), s.data(), bounds.data(), keep,
                                      got.data());
    Bytes out;
    for (int64_t r = 0; r < p.m; ++r) {
      const auto& g = got[size_t(r)];
      const float* row = c.data() + r * p.n;
      EXPECT_EQ(g.index.size(), g.value.size());
      if (g.index.size() != g.value.size()) continue;
      for (size_t i = 0; i < g.index.size(); ++i) {
        EXPECT_TRUE(g.index[i] >= 0 && g.index[i] < p.n);
        if (g.index[i] < 0 || g.index[i] >= p.n) continue;
        if (i > 0) {
          EXPECT_LT(g.index[i - 1], g.index[i]);
        }
        EXPECT_EQ(std::bit_cast<uint32_t>(g.value[i]), std::bit_cast<uint32_t>(row[g.index[i]]))
            << what << " row " << r << " column " << g.index[i];
      }
      std::vector<float> sorted(row, row + p.n);
      std::nth_element(sorted.begin(), sorted.begin() + (keep - 1), sorted.end(), std::greater<float>());
      const float kth = sorted[size_t(keep - 1)];
      std::vector<char> in(size_t(p.n), 0);
      for (int32_t j : g.index) in[size_t(j)] = 1;
      for (int64_t j = 0; j < p.n; ++j) {
        if (row[j] >= kth) {
          EXPECT_TRUE(in[size_t(j)]) << what << " row " << r << " misses column " << j;
        }
      }
      if (narrowed) {
        EXPECT_LE(int64_t(g.index.size()), p.n / 4) << what << " row " << r;  // not the whole row
      }
      append(out, g.index);
      append(out, g.value);
    }
    return out;
  });
}

TEST(ScreenedArgmax, CandidatesHoldTheTopKExactly) {
  struct S {
    int64_t m, n, k;
  };
  for (const S& s : {S{1, 300, 64}, S{3, 1000, 384}, S{8, 2048, 512}, S{5, 701, 600}, S{4, 64, 1000}})
    for (int64_t keep : {1, 2, 3, 5, 16, 40})
      for (uint32_t seed : {1u, 7u}) {
        if (keep > s.n / 4) continue;
        Problem p = make_problem(s.m, s.n, s.k, seed);
        // Random sums are far apart: the screen narrows each row where keep
        // leaves room (the candidates are at least keep, at most n / 4).
        expect_candidates(name(s.m, s.n, s.k) + " keep " + std::to_string(keep) + " seed " + std::to_string(seed), p,
                          keep, keep <= s.n / 16);
      }
  // keep over a quarter of the columns, every column equal, NaN, infinity:
  // whole rows.
  Problem p = make_problem(4, 500, 128, 11);
  expect_candidates("keep 200", p, 200, false);
  for (int64_t i = 0; i < 128; ++i) p.x[size_t(128 + i)] = 0.0f;
  p.x[size_t(2 * 128 + 7)] = std::numeric_limits<float>::infinity();
  expect_candidates("zero and infinite rows", p, 3, false);
  std::vector<kernels::cpu::ScreenedCandidates> c(1);
  std::vector<bfloat16> s(size_t(500 * 128));
  std::vector<float> bounds(1000);
  EXPECT_THROW(kernels::cpu::screened_candidates(1, 500, 128, p.x.data(), p.wt.data(), s.data(), bounds.data(), 0,
                                                 c.data()),
               std::invalid_argument);
}

}  // namespace
}  // namespace t5x::cpu
