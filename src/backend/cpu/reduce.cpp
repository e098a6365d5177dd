// Reductions, softmax rows, argmax and cumsum of kernels::cpu
// (backend/kernels.h): generic all-dtype loops; softmax rows use the
// Highway exp of vec_math.cpp.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/loops.h"
#include "backend/cpu/vec_math.h"
#include "backend/kernels.h"

namespace t5x::kernels::cpu {
using t5x::cpu::compute_t;
using t5x::cpu::kParallelThreshold;
using t5x::cpu::ld;
using t5x::cpu::st;

void reduce(ReduceKind op, DType dtype, const void* x, void* out, int64_t rows, int64_t cols, bool columns) {
  if (rows == 0) return;
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    using C = compute_t<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<C>, double, C>;
    T* o = static_cast<T*>(out);
    const T* a = static_cast<const T*>(x);
    const int64_t size = rows * cols;
    const Acc init = op == ReduceKind::Sum ? Acc(0)
                   : op == ReduceKind::Max ? (std::is_floating_point_v<C> ? -std::numeric_limits<Acc>::infinity()
                                                                          : std::numeric_limits<Acc>::lowest())
                                           : (std::is_floating_point_v<C> ? std::numeric_limits<Acc>::infinity()
                                                                          : std::numeric_limits<Acc>::max());
    auto combine = [op](Acc a, Acc b) -> Acc {
      if (op == ReduceKind::Sum) return a + b;
      if (a != a || b != b) return a != a ? a : b;  // NaN propagates
      return op == ReduceKind::Max ? (b > a ? b : a) : (b < a ? b : a);
    };
    if (columns) {
      const int64_t R_ = rows, K = cols;
      std::vector<Acc> acc(size_t(R_), init);
#pragma omp parallel for schedule(static) if (size > kParallelThreshold)
      for (int64_t j0 = 0; j0 < R_; j0 += 256) {
        int64_t j1 = std::min(R_, j0 + 256);
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = j0; j < j1; ++j) acc[size_t(j)] = combine(acc[size_t(j)], Acc(ld(a[k * R_ + j])));
      }
      for (int64_t j = 0; j < R_; ++j) o[j] = st<T>(C(acc[size_t(j)]));
      return;
    }
#pragma omp parallel for schedule(static) if (size > kParallelThreshold && rows > 1)
    for (int64_t r = 0; r < rows; ++r) {
      Acc acc = init;
      const T* row = a + r * cols;
      for (int64_t c = 0; c < cols; ++c) acc = combine(acc, Acc(ld(row[c])));
      o[r] = st<T>(C(acc));
    }
  });
}

namespace {

// Rows in f32 with the backend's vectorised exp (relative error < 3e-7).
void softmax_row(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  float m = t5x::cpu::max_of(x, n);
  if (m == -INFINITY) m = 0;
  float inv = 1.0f / t5x::cpu::exp_shift_sum(x, y, n, m);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

void log_softmax_row(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  float m = t5x::cpu::max_of(x, n);
  if (m == -INFINITY) m = 0;
  float lse = m + std::log(t5x::cpu::exp_sum(x, n, m));
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] - lse;
}

}  // namespace

void softmax_rows(bool log, DType dtype, const void* x, void* out, int64_t rows, int64_t n) {
  auto f = log ? log_softmax_row : softmax_row;
  const int64_t size = rows * n;
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      const float* in = static_cast<const float*>(x);
      float* o = static_cast<float*>(out);
#pragma omp parallel for schedule(static) if (size > kParallelThreshold)
      for (int64_t r = 0; r < rows; ++r) f(in + r * n, o + r * n, n);
    } else if constexpr (std::is_floating_point_v<compute_t<T>>) {
      const T* in = static_cast<const T*>(x);
      T* o = static_cast<T*>(out);
#pragma omp parallel
      {
        std::vector<float> buf(static_cast<size_t>(n)), res(static_cast<size_t>(n));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < n; ++j) buf[size_t(j)] = float(in[r * n + j]);
          f(buf.data(), res.data(), n);
          for (int64_t j = 0; j < n; ++j) o[r * n + j] = st<T>(res[size_t(j)]);
        }
      }
    }
  });
}

void argmax_rows(DType dtype, const void* x, int32_t* out, int64_t rows, int64_t n) {
  const int64_t size = rows * n;
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(x);
#pragma omp parallel for schedule(static) if (size > kParallelThreshold)
    for (int64_t r = 0; r < rows; ++r) {
      auto best = ld(p[r * n]);
      int32_t bi = 0;
      for (int64_t j = 1; j < n; ++j) {
        auto v = ld(p[r * n + j]);
        if (best != best) break;  // NaN wins
        if (v > best || v != v) { best = v; bi = int32_t(j); }
      }
      out[r] = bi;
    }
  });
}

void cumsum(DType dtype, const void* x, void* out, int64_t outer, int64_t n, int64_t inner, bool exclusive,
            bool reverse) {
  const int64_t size = outer * n * inner;
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    using C = compute_t<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<C>, double, C>;
    const T* p = static_cast<const T*>(x);
    T* o = static_cast<T*>(out);
#pragma omp parallel for collapse(2) schedule(static) if (size > kParallelThreshold)
    for (int64_t b = 0; b < outer; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        Acc acc = 0;
        for (int64_t k = 0; k < n; ++k) {
          int64_t j = reverse ? n - 1 - k : k;
          int64_t off = (b * n + j) * inner + i;
          Acc v = Acc(ld(p[off]));
          if (exclusive) { o[off] = st<T>(C(acc)); acc += v; }
          else { acc += v; o[off] = st<T>(C(acc)); }
        }
      }
  });
}

}  // namespace t5x::kernels::cpu
