// Per-target row primitives of vec_math.h, shared by vec_math.cpp and the
// attention tiles (which call them inline on the target they run on).
// Toggled guard: included once per target.
#if defined(T5X_BACKEND_CPU_VEC_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef T5X_BACKEND_CPU_VEC_MATH_INL_H_
#undef T5X_BACKEND_CPU_VEC_MATH_INL_H_
#else
#define T5X_BACKEND_CPU_VEC_MATH_INL_H_
#endif

#include <cmath>
#include <cstdint>

#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

// y[i] = exp(x[i] - shift); returns the sum in the fixed 16-lane order.
HWY_INLINE float RowExpShiftSum(const float* x, float* y, int64_t n, float shift) {
  const DF d;
  const VF s = hn::Set(d, shift);
  LaneSums<DF> sums(d);
  ForBlocks16(n, [&](size_t k, int64_t i, size_t valid) {
    const VF e = Exp(d, hn::Sub(LoadPart(d, x + i, valid, -INFINITY), s));
    if (valid) StorePart(d, e, y + i, valid);
    sums.add(k, e);
  });
  return sums.total(d);
}

// Largest of x[0, n) (-inf when n = 0).
HWY_INLINE float RowMax(const float* x, int64_t n) {
  const DF d;
  VF m = hn::Set(d, -INFINITY);
  ForVectors(n, [&](int64_t i, size_t valid) { m = hn::Max(m, LoadPart(d, x + i, valid, -INFINITY)); });
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// sum_i x[i] y[i] (products rounded, then summed in the fixed 16-lane order).
HWY_INLINE float RowDot(const float* x, const float* y, int64_t n) {
  const DF d;
  LaneSums<DF> sums(d);
  ForBlocks16(n, [&](size_t k, int64_t i, size_t valid) {
    sums.add(k, hn::Mul(LoadPart(d, x + i, valid), LoadPart(d, y + i, valid)));
  });
  return sums.total(d);
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#endif  // T5X_BACKEND_CPU_VEC_MATH_INL_H_ toggle
