#include "backend/cpu/unary.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/unary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

template <class F>
HWY_INLINE void Map(const float* x, float* y, int64_t n, F f) {
  const DF d;
  ForVectors(n, [&](int64_t i, size_t valid) { StorePart(d, f(d, LoadPart(d, x + i, valid)), y + i, valid); });
}

void UnaryF32(int op, const float* x, float* y, int64_t n) {
  switch (UnaryKernel(op)) {
    case UnaryKernel::Exp: return Map(x, y, n, [](DF d, VF v) { return Exp(d, v); });
    case UnaryKernel::Tanh: return Map(x, y, n, [](DF d, VF v) { return Tanh(d, v); });
    case UnaryKernel::Sigmoid: return Map(x, y, n, [](DF d, VF v) { return Sigmoid(d, v); });
    case UnaryKernel::Gelu: return Map(x, y, n, [](DF d, VF v) { return Gelu(d, v); });
    case UnaryKernel::GeluGrad: return Map(x, y, n, [](DF d, VF v) { return GeluAndGrad(d, v).grad; });
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {

HWY_EXPORT(UnaryF32);

void unary_f32(UnaryKernel op, const float* x, float* y, int64_t n) {
  simd_init();
  // Elementwise, so the split over threads cannot change a bit.
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(UnaryF32)(int(op), x + b, y + b, e - b); });
}

}  // namespace t5x::cpu
#endif
