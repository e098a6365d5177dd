// The gradient utilities of t5x/optim/grad_utils.cpp (global norm, optax's
// clip_by_global_norm, microbatch accumulation) as kernels
// (kernels::cpu::sum_of_squares, clip_grads, accumulate_f32, all_finite; backend/kernels.h
// has the contracts), written once in Google Highway and compiled per target.
//
// Bits: the sum of squares adds exact float64 squares over 8 logical lanes
// per chunk of kChunk values (f64_sums-inl.h), the chunks' totals in chunk
// order; clip_grads and accumulate are elementwise IEEE operations. So every
// target and thread count gives the same bits.
#include "backend/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/grad_utils.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/f64_sums-inl.h"
#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {
namespace {

template <typename T>
double SumSquares(const T* x, int64_t n) {
  f64sums::Acc acc;
  f64sums::ForLanes(n, [&](auto d, int64_t k, size_t q, auto kind) { acc.add_square(q, LoadF(d, x + k), kind); });
  return acc.total();
}

// out = (x / divisor) * multiplier, rounded to T on store.
template <typename T>
void ClipGrads(const T* x, int64_t n, const kernels::GradClip& c, T* out) {
  const DF d;
  ForVectors(n, [&](int64_t i, size_t valid) { StorePart(d, ClipGrad(d, LoadPart(d, x + i, valid), c), out + i, valid); });
}

// Whether x holds a NaN or an infinity: x * 0 is (+-)0 for every finite x
// and NaN otherwise, so one multiply-add per vector and one test at the end.
template <typename T>
bool AnyNonFinite(const T* x, int64_t n) {
  const DF d;
  const VF zero = hn::Zero(d);
  VF acc = zero;
  ForVectors(n, [&](int64_t i, size_t valid) { acc = hn::MulAdd(LoadPart(d, x + i, valid), zero, acc); });
  return !hn::AllTrue(d, hn::Eq(acc, zero));
}

template <typename T>
void Accumulate(const T* x, int64_t n, float* acc) {
  const DF d;
  ForVectors(n, [&](int64_t i, size_t valid) {
    StorePart(d, hn::Add(LoadPart(d, acc + i, valid), LoadPart(d, x + i, valid)), acc + i, valid);
  });
}

}  // namespace

double SumSquaresF32(const float* x, int64_t n) { return SumSquares(x, n); }
double SumSquaresBf16(const bfloat16* x, int64_t n) { return SumSquares(x, n); }
void ClipGradsF32(const float* x, int64_t n, const kernels::GradClip& c, float* out) { ClipGrads(x, n, c, out); }
void ClipGradsBf16(const bfloat16* x, int64_t n, const kernels::GradClip& c, bfloat16* out) {
  ClipGrads(x, n, c, out);
}
void AccumulateF32(const float* x, int64_t n, float* acc) { Accumulate(x, n, acc); }
bool AnyNonFiniteF32(const float* x, int64_t n) { return AnyNonFinite(x, n); }
bool AnyNonFiniteBf16(const bfloat16* x, int64_t n) { return AnyNonFinite(x, n); }
void AccumulateBf16(const bfloat16* x, int64_t n, float* acc) { Accumulate(x, n, acc); }

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cmath>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {
HWY_EXPORT(SumSquaresF32);
HWY_EXPORT(SumSquaresBf16);
HWY_EXPORT(ClipGradsF32);
HWY_EXPORT(ClipGradsBf16);
HWY_EXPORT(AccumulateF32);
HWY_EXPORT(AccumulateBf16);
HWY_EXPORT(AnyNonFiniteF32);
HWY_EXPORT(AnyNonFiniteBf16);

// Sum chunk: part of the bits (the chunk totals add in order); 2^16 values
// is also the grain that keeps a small param on one thread.
constexpr int64_t kChunk = int64_t(1) << 16;
// Elementwise ranges of at least this many values per thread.
constexpr int64_t kGrain = int64_t(1) << 17;

template <typename T, typename K>
double sum_squares(K kernel, const void* x, int64_t n) {
  const T* p = static_cast<const T*>(x);
  return parallel_reduce_deterministic(n, kChunk, 0.0, [&](int64_t b, int64_t e) { return kernel(p + b, e - b); });
}

// float16 (no vector widening in simd-inl.h): each chunk widened into a
// buffer, then summed by the f32 kernel, so its bits are the f32 path's on
// the widened values.
double sum_squares_f16(const float16* x, int64_t n) {
  const auto kernel = T5X_DISPATCH(SumSquaresF32);
  return parallel_reduce_deterministic(n, kChunk, 0.0, [&](int64_t b, int64_t e) {
    thread_local std::vector<float> wide;
    wide.resize(size_t(e - b));
    for (int64_t i = b; i < e; ++i) wide[size_t(i - b)] = float(x[i]);
    return kernel(wide.data(), e - b);
  });
}

double sum_of_squares_any(DType dtype, const void* x, int64_t n) {
  if (n <= 0) return 0.0;
  switch (dtype) {
    case DType::f32: return sum_squares<float>(T5X_DISPATCH(SumSquaresF32), x, n);
    case DType::bf16: return sum_squares<bfloat16>(T5X_DISPATCH(SumSquaresBf16), x, n);
    default: return sum_squares_f16(static_cast<const float16*>(x), n);
  }
}

void clip_grads_any(DType dtype, const void* x, int64_t n, const kernels::GradClip& c, void* out) {
  if (n <= 0) return;
  auto run = [&](auto kernel, auto* xp, auto* op) {
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) { kernel(xp + b, e - b, c, op + b); });
  };
  switch (dtype) {
    case DType::f32:
      return run(T5X_DISPATCH(ClipGradsF32), static_cast<const float*>(x), static_cast<float*>(out));
    case DType::bf16:
      return run(T5X_DISPATCH(ClipGradsBf16), static_cast<const bfloat16*>(x), static_cast<bfloat16*>(out));
    default: {
      // float16: each range widened, clipped by the f32 kernel, rounded back.
      const auto* xp = static_cast<const float16*>(x);
      auto* op = static_cast<float16*>(out);
      const auto kernel = T5X_DISPATCH(ClipGradsF32);
      parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
        thread_local std::vector<float> wide;
        wide.resize(size_t(e - b));
        for (int64_t i = b; i < e; ++i) wide[size_t(i - b)] = float(xp[i]);
        kernel(wide.data(), e - b, c, wide.data());
        for (int64_t i = b; i < e; ++i) op[i] = float16(wide[size_t(i - b)]);
      });
    }
  }
}

void accumulate_any(DType dtype, const void* x, int64_t n, float* acc) {
  if (n <= 0) return;
  auto run = [&](auto kernel, auto* xp) {
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) { kernel(xp + b, e - b, acc + b); });
  };
  switch (dtype) {
    case DType::f32: return run(T5X_DISPATCH(AccumulateF32), static_cast<const float*>(x));
    case DType::bf16: return run(T5X_DISPATCH(AccumulateBf16), static_cast<const bfloat16*>(x));
    default: {
      const auto* xp = static_cast<const float16*>(x);
      parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) acc[i] += float(xp[i]);
      });
    }
  }
}

bool all_finite_any(DType dtype, const void* x, int64_t n) {
  if (n <= 0) return true;
  auto run = [&](auto kernel, auto* xp) {
    return parallel_reduce_deterministic(n, kChunk, int64_t(0), [&](int64_t b, int64_t e) {
             return int64_t(kernel(xp + b, e - b));
           }) == 0;
  };
  switch (dtype) {
    case DType::f32: return run(T5X_DISPATCH(AnyNonFiniteF32), static_cast<const float*>(x));
    case DType::bf16: return run(T5X_DISPATCH(AnyNonFiniteBf16), static_cast<const bfloat16*>(x));
    default: {
      const auto* xp = static_cast<const float16*>(x);
      for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(float(xp[i]))) return false;
      return true;
    }
  }
}

}  // namespace
}  // namespace t5x::cpu

namespace t5x::kernels::cpu {

double sum_of_squares(DType dtype, const void* x, int64_t n) { return t5x::cpu::sum_of_squares_any(dtype, x, n); }
void clip_grads(DType dtype, const void* x, int64_t n, const GradClip& clip, void* out) {
  t5x::cpu::clip_grads_any(dtype, x, n, clip, out);
}
void accumulate_f32(DType dtype, const void* x, int64_t n, float* acc) { t5x::cpu::accumulate_any(dtype, x, n, acc); }
bool all_finite(DType dtype, const void* x, int64_t n) { return t5x::cpu::all_finite_any(dtype, x, n); }

}  // namespace t5x::kernels::cpu
#endif  // HWY_ONCE
