// SGD's elementwise update (kernels::cpu::sgd_update, backend/kernels.h has
// the contract), written once in Google Highway and compiled per target.
// Every value is a chain of IEEE multiplies and adds in the order of the
// chain's clips / optax's trace (optax/transforms/_accumulation.py: t = g + decay * t, Nesterov
// g + decay * t) / scale_by_learning_rate / apply_updates, with no fused
// multiply-add: the same bits on every target and for every thread split.
#include "backend/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/sgd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

void SgdRange(int64_t i0, int64_t i1, const kernels::SgdScalars& s, float* param, const float* grad, float* trace) {
  const DF d;
  const VF m = hn::Set(d, s.momentum), step = hn::Set(d, s.step_size);
  float* p = param + i0;
  const float* g = grad + i0;
  float* t = trace ? trace + i0 : nullptr;
  ForVectors(i1 - i0, [&](int64_t i, size_t valid) {
    VF gv = LoadPart(d, g + i, valid);
    if (s.clip.any()) gv = ClipGrad(d, gv, s.clip);
    VF u = gv;
    if (t) {
      const VF tv = hn::Add(gv, hn::Mul(m, LoadPart(d, t + i, valid)));
      StorePart(d, tv, t + i, valid);
      u = s.nesterov ? hn::Add(gv, hn::Mul(m, tv)) : tv;
    }
    StorePart(d, hn::Add(LoadPart(d, p + i, valid), hn::Mul(u, step)), p + i, valid);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {
HWY_EXPORT(SgdRange);

// Elementwise, so any split gives the same bits; ranges of at least 2^17
// keep small params on one thread.
void sgd(int64_t n, const kernels::SgdScalars& s, float* param, const float* grad, float* trace) {
  const auto range = T5X_DISPATCH(SgdRange);
  parallel_for(n, int64_t(1) << 17, [&](int64_t i0, int64_t i1) { range(i0, i1, s, param, grad, trace); });
}
}  // namespace
}  // namespace t5x::cpu

namespace t5x::kernels::cpu {

void sgd_update(int64_t n, const SgdScalars& s, float* param, const float* grad, float* trace) {
  if (n > 0) t5x::cpu::sgd(n, s, param, grad, trace);
}

}  // namespace t5x::kernels::cpu
#endif  // HWY_ONCE
