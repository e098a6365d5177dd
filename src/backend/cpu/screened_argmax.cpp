// kernels::cpu::logits_screen and screened_argmax (backend/kernels.h): the
// first maximum of a few-row product x · Wᵀ, found from W rounded to bf16
// (half the bytes of the product it stands for) and exact sums for the
// columns that could still be the maximum.
//
// The bound. For a row x and a column w (W's row j), let y = the exact-kernel
// output (skinny_gemm_bt: f32 fused multiply-adds, k blocks of 256 added in
// order) and ỹ = x · w' with w' = bf16(w), summed in f32 in any order (the
// screen's own dot kernel below: vectors along k, lanes summed at the end).
// Any f32 sum of K products, fused or rounded, in any order, errs by at most
// γ_K Σ|terms|, γ_K = K u / (1 - K u), u = 2^-24 (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., §3.1; γ_{K+2} is used), plus
// up to K + 2 half-ulps of the smallest subnormal where products underflow.
// With Cauchy-Schwarz on each term (|·| the 2-norm):
//   |y - ỹ| <= |x|·|w - w'| + γ (|x|·|w| + |x|·|w'|) + (K + 2)·2^-148.
// logits_screen stores, per column, a = |w - w'| + γ |w| and b = |w'|,
// rounded up to f32; a row's bound for column j is then |x| (a_j + γ b_j).
// Every column whose upper end ỹ_j + B_j reaches the largest lower end
// max_i (ỹ_i - B_i) is a candidate; the first maximum of the exact outputs
// is among them (it and every column equal to it are), and the candidates'
// exact outputs are the same kernel's on the same row and column, so the
// same bits. For the top `keep` columns (screened_candidates) the threshold
// is the keep-th largest lower end instead: the keep columns with the
// largest lower ends all reach it exactly, so every column at or above the
// keep-th largest exact output does too. The screen's sums may differ between SIMD targets; the tokens
// do not. Norms and bounds are computed in double and widened by 2^-20
// relative (far above double's rounding); the screen gives up (the whole row
// exact, as the full product) when a value is not finite or more than a
// quarter of the columns are kept or stay candidates.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/screened_argmax.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

// Rows of s prefetched ahead, into the outer caches (as skinny_gemm_bt's
// kAhead). [1x512] against a cold [32128x512] screen, AVX2, 2 threads, AMD
// Zen 4: 2.15 ms without, 1.14-1.21 ms 32 rows ahead (16 and 64 alike, 8
// 1.31); the f32 product it stands for took 2.07-2.34 ms in the same runs.
// Rows beyond the screen's end are only prefetched (a hint, never read).
constexpr int64_t kAhead = 32;

// y[r, j + c] = x[r, :] · widen(s[j + c, :]) for R rows of x and C rows of s:
// each widened vector of s serves the R rows, U vectors of k per step, so
// U x R x C independent sums. Unfused multiply-adds where the target has no
// FMA (the bound allows any rounding of the products), lanes summed last.
template <int R, int C, int U>
HWY_INLINE void DotBlock(int64_t j, int64_t k, const float* x, const bfloat16* s, float* y, int64_t ldy,
                         bool prefetch) {
  const DF d;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF())), kLine = 64 / int64_t(sizeof(bfloat16));
  VF acc[U][R][C];
  for (int u = 0; u < U; ++u)
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[u][r][c] = hn::Zero(d);
  const int64_t ku = k / (U * N) * (U * N);
  for (int64_t p = 0; p < ku; p += U * N) {
    if (prefetch && p % kLine == 0)
      for (int c = 0; c < C; ++c) PrefetchLine<PrefetchTo::kOuter>(s + (j + kAhead + c) * k + p);
    for (int u = 0; u < U; ++u) {
      VF w[C];
      for (int c = 0; c < C; ++c) w[c] = LoadF(d, s + (j + c) * k + p + u * N);
      for (int r = 0; r < R; ++r) {
        const VF xv = hn::LoadU(d, x + r * k + p + u * N);
        for (int c = 0; c < C; ++c) acc[u][r][c] = hn::MulAdd(xv, w[c], acc[u][r][c]);
      }
    }
  }
  for (int64_t p = ku; p < k; p += N) {
    const size_t valid = size_t(std::min(N, k - p));
    VF w[C];
    for (int c = 0; c < C; ++c) w[c] = LoadPart(d, s + (j + c) * k + p, valid);
    for (int r = 0; r < R; ++r) {
      const VF xv = LoadPart(d, x + r * k + p, valid);
      for (int c = 0; c < C; ++c) acc[0][r][c] = hn::MulAdd(xv, w[c], acc[0][r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      VF sum = acc[0][r][c];
      for (int u = 1; u < U; ++u) sum = hn::Add(sum, acc[u][r][c]);
      y[r * ldy + j + c] = hn::GetLane(hn::SumOfLanes(d, sum));
    }
}

// y[r, j] = x[r, :] · widen(s[j, :]) for j in [j0, j1), r < m (x [m, k], s
// [n, k] row-major). One row: four rows of s at a time (one contiguous
// stretch), two vectors of k per step. More rows: two rows of s for up to
// four rows of x, so that a widened vector serves four products.
void ScreenDots(int64_t j0, int64_t j1, int64_t m, int64_t k, const float* x, const bfloat16* s, float* y,
                int64_t ldy) {
  int64_t j = j0;
  if (m == 1) {
    for (; j + 4 <= j1; j += 4) DotBlock<1, 4, 2>(j, k, x, s, y, ldy, true);
    for (; j < j1; ++j) DotBlock<1, 1, 2>(j, k, x, s, y, ldy, true);
    return;
  }
  auto cols = [&](auto c_tag) {
    constexpr int C = decltype(c_tag)::value;
    for (int64_t g = 0; g < m; g += 4) {
      const float* xg = x + g * k;
      float* yg = y + g * ldy;
      switch (std::min<int64_t>(4, m - g)) {
        case 4: DotBlock<4, C, 1>(j, k, xg, s, yg, ldy, g == 0); break;
        case 3: DotBlock<3, C, 1>(j, k, xg, s, yg, ldy, g == 0); break;
        case 2: DotBlock<2, C, 1>(j, k, xg, s, yg, ldy, g == 0); break;
        default: DotBlock<1, C, 1>(j, k, xg, s, yg, ldy, g == 0); break;
      }
    }
  };
  for (; j + 2 <= j1; j += 2) cols(std::integral_constant<int, 2>());
  for (; j < j1; ++j) cols(std::integral_constant<int, 1>());
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/skinny_gemm.h"
#include "backend/kernels.h"
#include "core/dtype_bf16.h"

namespace t5x::cpu {
namespace {
HWY_EXPORT(ScreenDots);

// ScreenDots on this CPU's target: columns [j0, j1) of y [m, n].
void screen_dots(int64_t j0, int64_t j1, int64_t m, int64_t n, int64_t k, const float* x, const bfloat16* s,
                 float* y) {
  T5X_DISPATCH(ScreenDots)(j0, j1, m, k, x, s, y, n);
}
}  // namespace
}  // namespace t5x::cpu

namespace t5x::kernels::cpu {
static_assert(kScreenedArgmaxMaxRows == t5x::cpu::kSkinnyMaxRows, "the rows gemm gives the skinny kernel");

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// γ_K for f32 sums of K terms.
double gamma_k(int64_t k) {
  const double ku = double(k) * 0x1p-24;
  return ku / (1.0 - ku);
}

// v widened by far more than double's rounding of the norms and sums here.
double widen(double v) { return v * (1.0 + 0x1p-20); }

// The smallest f32 >= v (+inf for a non-finite or huge v).
float f32_at_least(double v) {
  if (!(v < double(std::numeric_limits<float>::max()))) return std::numeric_limits<float>::infinity();
  float f = float(v);
  if (double(f) < v) f = std::nextafter(f, std::numeric_limits<float>::infinity());
  return f;
}

}  // namespace

void logits_screen(int64_t n, int64_t k, const float* wt, void* screen, float* bounds) {
  auto* s = static_cast<bfloat16*>(screen);
  const double g = gamma_k(k + 2);
  t5x::cpu::parallel_for(n, 64, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      double d2 = 0, w2 = 0, s2 = 0;  // squares of floats are exact in double
      for (int64_t i = 0; i < k; ++i) {
        const float w = wt[j * k + i];
        const bfloat16 b(w);
        const double wb = double(float(b));
        s[j * k + i] = b;
        d2 += (double(w) - wb) * (double(w) - wb);
        w2 += double(w) * double(w);
        s2 += wb * wb;
      }
      bounds[2 * j] = f32_at_least(widen(std::sqrt(d2) + g * widen(std::sqrt(w2))));
      bounds[2 * j + 1] = f32_at_least(widen(std::sqrt(s2)));
    }
  });
}

void screened_candidates(int64_t m, int64_t n, int64_t k, const float* x, const float* wt, const void* screen,
                         const float* bounds, int64_t keep, ScreenedCandidates* out) {
  if (m <= 0 || n <= 0) return;
  if (keep < 1) throw std::invalid_argument("[screened_candidates] keep must be >= 1, got " + std::to_string(keep));
  const auto* s = static_cast<const bfloat16*>(screen);
  const double g = gamma_k(k + 2), tiny = double(k + 2) * 0x1p-148;
  // Per row of x: |x| and γ |x|, widened (the bound's row factors).
  std::vector<double> X(static_cast<size_t>(m)), E(static_cast<size_t>(m));
  std::vector<char> screened(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r) {
    double x2 = 0;
    for (int64_t i = 0; i < k; ++i) x2 += double(x[r * k + i]) * double(x[r * k + i]);
    X[size_t(r)] = widen(std::sqrt(x2));
    E[size_t(r)] = g * X[size_t(r)];
    // More than a quarter of the columns kept: not worth screening.
    screened[size_t(r)] = std::isfinite(X[size_t(r)]) && std::isfinite(E[size_t(r)]) && keep <= n / 4;
  }
  std::vector<float> approx(static_cast<size_t>(m * n));
  auto bound = [&](int64_t r, int64_t j, double yj) {
    return widen(X[size_t(r)] * double(bounds[2 * j]) + E[size_t(r)] * double(bounds[2 * j + 1])) +
           0x1p-40 * std::fabs(yj) + tiny;
  };
  // Each thread's part: its columns' screened sums, then per row the `keep`
  // largest lower ends over them (ascending; -inf where fewer); then (second
  // pass) its candidates. parallel_for's ranges follow the thread number, so
  // the candidates, concatenated in that order, are in column order.
  const int T = t5x::cpu::num_threads();
  auto thread = [T] { return T > 1 ? omp_get_thread_num() : 0; };
  const size_t K = size_t(keep);
  std::vector<double> lo(size_t(T * m) * K, -kInf);
  std::vector<char> bad(size_t(T * m), 0);
  t5x::cpu::parallel_for(n, 256, [&](int64_t j0, int64_t j1) {
    const int t = thread();
    t5x::cpu::screen_dots(j0, j1, m, n, k, x, s, approx.data());
    for (int64_t r = 0; r < m; ++r) {
      if (!screened[size_t(r)]) continue;
      double* top = lo.data() + size_t(t * m + r) * K;  // a min-heap of the largest lower ends
      char b = 0;
      for (int64_t j = j0; j < j1; ++j) {
        const double yj = approx[size_t(r * n + j)], bj = bound(r, j, yj);
        b |= char(!std::isfinite(yj) || std::isnan(bj));
        const double l = yj - bj;
        if (l > top[0]) {
          std::pop_heap(top, top + K, std::greater<double>());
          top[K - 1] = l;
          std::push_heap(top, top + K, std::greater<double>());
        }
      }
      bad[size_t(t * m + r)] = b;
    }
  });
  // The threshold: the keep-th largest lower end over all columns. The keep
  // columns with the largest lower ends have exact outputs at least that, so
  // the keep-th largest exact output (and every column reaching it) is at
  // least that too.
  std::vector<double> cut(static_cast<size_t>(m), -kInf);
  for (int64_t r = 0; r < m; ++r) {
    std::vector<double> all(lo.begin() + ptrdiff_t(size_t(r) * K), lo.begin() + ptrdiff_t(size_t(r + 1) * K));
    for (int t = 1; t < T; ++t)
      all.insert(all.end(), lo.begin() + ptrdiff_t(size_t(t * m + r) * K),
                 lo.begin() + ptrdiff_t(size_t(t * m + r + 1) * K));
    std::nth_element(all.begin(), all.begin() + ptrdiff_t(K - 1), all.end(), std::greater<double>());
    cut[size_t(r)] = all[K - 1];
    for (int t = 0; t < T; ++t)
      if (bad[size_t(t * m + r)]) screened[size_t(r)] = 0;
  }
  std::vector<std::vector<int32_t>> part(size_t(T * m));
  t5x::cpu::parallel_for(n, 256, [&](int64_t j0, int64_t j1) {
    const int t = thread();
    for (int64_t r = 0; r < m; ++r) {
      if (!screened[size_t(r)]) continue;
      std::vector<int32_t>& c = part[size_t(t * m + r)];
      for (int64_t j = j0; j < j1; ++j) {
        const double yj = approx[size_t(r * n + j)];
        if (yj + bound(r, j, yj) >= cut[size_t(r)]) c.push_back(int32_t(j));
      }
    }
  });

  std::vector<float> rows;
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * k;
    std::vector<int32_t>& cand = out[r].index;
    std::vector<float>& exact = out[r].value;
    cand.clear();
    for (int t = 0; t < T; ++t) cand.insert(cand.end(), part[size_t(t * m + r)].begin(), part[size_t(t * m + r)].end());
    if (screened[size_t(r)] && int64_t(cand.size()) <= n / 4) {
      const int64_t nc = int64_t(cand.size());
      rows.resize(size_t(nc * k));
      for (int64_t c = 0; c < nc; ++c)
        std::copy(wt + cand[size_t(c)] * k, wt + (cand[size_t(c)] + 1) * k, rows.begin() + c * k);
      exact.resize(size_t(nc));
      t5x::cpu::skinny_gemm_bt(1, nc, k, 1.0f, xr, k, rows.data(), k, 0.0f, exact.data(), nc);
      bool finite = true;
      for (float v : exact) finite = finite && std::isfinite(v);
      if (finite) continue;
    }
    // The whole row, as the full product gives it.
    cand.resize(size_t(n));
    for (int64_t j = 0; j < n; ++j) cand[size_t(j)] = int32_t(j);
    exact.resize(size_t(n));
    t5x::cpu::skinny_gemm_bt(1, n, k, 1.0f, xr, k, wt, k, 0.0f, exact.data(), n);
  }
}

void screened_argmax(int64_t m, int64_t n, int64_t k, const float* x, const float* wt, const void* screen,
                     const float* bounds, int32_t* out) {
  if (m <= 0 || n <= 0) return;
  std::vector<ScreenedCandidates> c(static_cast<size_t>(m));
  screened_candidates(m, n, k, x, wt, screen, bounds, 1, c.data());
  for (int64_t r = 0; r < m; ++r) {
    int32_t best = 0;
    argmax_rows(DType::f32, c[size_t(r)].value.data(), &best, 1, int64_t(c[size_t(r)].value.size()));
    out[r] = c[size_t(r)].index[size_t(best)];
  }
}

}  // namespace t5x::kernels::cpu
#endif  // HWY_ONCE
