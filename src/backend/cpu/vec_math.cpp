#include "backend/cpu/vec_math.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/vec_math.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"
#include "backend/cpu/vec_math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

float ExpOne(float x) {
  return OneLane(x, [](auto d, auto v) { return Exp(d, v); });
}
float TanhOne(float x) {
  return OneLane(x, [](auto d, auto v) { return Tanh(d, v); });
}

float ExpShiftSum(const float* x, float* y, int64_t n, float shift) { return RowExpShiftSum(x, y, n, shift); }

float ExpSum(const float* x, int64_t n, float shift) {
  const DF d;
  const VF s = hn::Set(d, shift);
  LaneSums<DF> sums(d);
  ForBlocks16(n, [&](size_t k, int64_t i, size_t valid) {
    sums.add(k, Exp(d, hn::Sub(LoadPart(d, x + i, valid, -INFINITY), s)));
  });
  return sums.total(d);
}

void ExpAffine(const float* x, float* y, int64_t n, float shift, float a, float b) {
  const DF d;
  const VF s = hn::Set(d, shift), av = hn::Set(d, a), bv = hn::Set(d, b);
  ForVectors(n, [&](int64_t i, size_t valid) {
    StorePart(d, Fma(d, av, Exp(d, hn::Sub(LoadPart(d, x + i, valid), s)), bv), y + i, valid);
  });
}

float MaxOf(const float* x, int64_t n) { return RowMax(x, n); }

float SumOf(const float* x, int64_t n) {
  const DF d;
  LaneSums<DF> sums(d);
  ForBlocks16(n, [&](size_t k, int64_t i, size_t valid) { sums.add(k, LoadPart(d, x + i, valid)); });
  return sums.total(d);
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/simd.h"

namespace t5x::cpu {

HWY_EXPORT(ExpOne);
HWY_EXPORT(TanhOne);
HWY_EXPORT(ExpShiftSum);
HWY_EXPORT(ExpSum);
HWY_EXPORT(ExpAffine);
HWY_EXPORT(MaxOf);
HWY_EXPORT(SumOf);

float fast_exp(float x) { return T5X_DISPATCH(ExpOne)(x); }
float fast_tanh(float x) { return T5X_DISPATCH(TanhOne)(x); }
float exp_shift_sum(const float* x, float* y, int64_t n, float shift) {
  return T5X_DISPATCH(ExpShiftSum)(x, y, n, shift);
}
float exp_sum(const float* x, int64_t n, float shift) { return T5X_DISPATCH(ExpSum)(x, n, shift); }
void exp_affine(const float* x, float* y, int64_t n, float shift, float a, float b) {
  T5X_DISPATCH(ExpAffine)(x, y, n, shift, a, b);
}
float max_of(const float* x, int64_t n) { return T5X_DISPATCH(MaxOf)(x, n); }
float sum_of(const float* x, int64_t n) { return T5X_DISPATCH(SumOf)(x, n); }

}  // namespace t5x::cpu
#endif
