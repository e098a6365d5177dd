#include "backend/cpu/binary.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/binary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

template <typename T, class F>
HWY_INLINE void Zip(const T* x, const T* y, T* z, int64_t n, F f) {
  const DF d;
  ForVectors(n, [&](int64_t i, size_t m) { StorePart(d, f(LoadPart(d, x + i, m), LoadPart(d, y + i, m)), z + i, m); });
}

template <typename T>
HWY_INLINE void BinaryRange(int op, const T* x, const T* y, T* z, int64_t n) {
  switch (BinaryKernel(op)) {
    case BinaryKernel::Add: return Zip(x, y, z, n, [](VF a, VF b) { return hn::Add(a, b); });
    case BinaryKernel::Sub: return Zip(x, y, z, n, [](VF a, VF b) { return hn::Sub(a, b); });
    case BinaryKernel::Mul: return Zip(x, y, z, n, [](VF a, VF b) { return hn::Mul(a, b); });
  }
}

void BinaryF32(int op, const float* x, const float* y, float* z, int64_t n) { BinaryRange(op, x, y, z, n); }
void BinaryBf16(int op, const bfloat16* x, const bfloat16* y, bfloat16* z, int64_t n) { BinaryRange(op, x, y, z, n); }

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

HWY_EXPORT(BinaryF32);
HWY_EXPORT(BinaryBf16);

void binary_f32(BinaryKernel op, const float* x, const float* y, float* z, int64_t n) {
  simd_init();
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(BinaryF32)(int(op), x + b, y + b, z + b, e - b); });
}

void binary_bf16(BinaryKernel op, const bfloat16* x, const bfloat16* y, bfloat16* z, int64_t n) {
  simd_init();
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(BinaryBf16)(int(op), x + b, y + b, z + b, e - b); });
}

}  // namespace t5x::cpu
#endif
