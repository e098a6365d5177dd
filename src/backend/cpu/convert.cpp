#include "backend/cpu/convert.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/convert.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

void F32ToBf16(const float* x, bfloat16* y, int64_t n) {
  const DF d;
  ForVectors(n, [&](int64_t i, size_t m) { StorePart(d, LoadPart(d, x + i, m), y + i, m); });
}

void Bf16ToF32(const bfloat16* x, float* y, int64_t n) {
  const DF d;
  ForVectors(n, [&](int64_t i, size_t m) { StorePart(d, LoadPart(d, x + i, m), y + i, m); });
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {
constexpr int64_t kGrain = 1 << 16;  // elements per thread at least
}  // namespace

HWY_EXPORT(F32ToBf16);
HWY_EXPORT(Bf16ToF32);

void convert_f32_to_bf16(const float* x, bfloat16* y, int64_t n) {
  simd_init();
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(F32ToBf16)(x + b, y + b, e - b); });
}

void convert_bf16_to_f32(const bfloat16* x, float* y, int64_t n) {
  simd_init();
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(Bf16ToF32)(x + b, y + b, e - b); });
}

}  // namespace t5x::cpu
#endif
