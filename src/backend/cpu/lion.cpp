// Lion's elementwise update (kernels::cpu::lion_update, backend/kernels.h has
// the contract), written once in Google Highway and compiled per target.
// Every value is a chain of IEEE multiplies, adds and comparisons in the order
// of the chain's clips / optax's scale_by_lion / add_decayed_weights /
// scale_by_learning_rate / apply_updates, with no fused multiply-add: the
// same bits on every target and for every thread split.
#include "backend/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/lion.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

void LionRange(int64_t i0, int64_t i1, const kernels::LionScalars& s, float* param, const float* grad, float* mu) {
  const DF d;
  const VF b1 = hn::Set(d, s.b1), b2 = hn::Set(d, s.b2), omb1 = hn::Set(d, s.one_minus_b1),
           omb2 = hn::Set(d, s.one_minus_b2), wd = hn::Set(d, s.weight_decay), step = hn::Set(d, s.step_size);
  float* p = param + i0;
  const float* g = grad + i0;
  float* m = mu + i0;
  ForVectors(i1 - i0, [&](int64_t i, size_t valid) {
    VF gv = LoadPart(d, g + i, valid);
    if (s.clip.any()) gv = ClipGrad(d, gv, s.clip);
    const VF mv = LoadPart(d, m + i, valid);
    VF u = SignOf(d, hn::Add(hn::Mul(omb1, gv), hn::Mul(b1, mv)));
    StorePart(d, hn::Add(hn::Mul(omb2, gv), hn::Mul(b2, mv)), m + i, valid);
    const VF pv = LoadPart(d, p + i, valid);
    StorePart(d, DecayedStep(d, u, pv, wd, step, s.weight_decay != 0.0f), p + i, valid);
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
HWY_EXPORT(LionRange);

// Elementwise, so any split gives the same bits; ranges of at least 2^17
// keep small params on one thread.
void lion(int64_t n, const kernels::LionScalars& s, float* param, const float* grad, float* mu) {
  const auto range = T5X_DISPATCH(LionRange);
  parallel_for(n, int64_t(1) << 17, [&](int64_t i0, int64_t i1) { range(i0, i1, s, param, grad, mu); });
}
}  // namespace
}  // namespace t5x::cpu

namespace t5x::kernels::cpu {

void lion_update(int64_t n, const LionScalars& s, float* param, const float* grad, float* mu) {
  if (n > 0) t5x::cpu::lion(n, s, param, grad, mu);
}

}  // namespace t5x::kernels::cpu
#endif  // HWY_ONCE
