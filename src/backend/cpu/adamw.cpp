// AdamW's elementwise update (kernels::cpu::adamw_update, backend/kernels.h
// has the contract), written once in Google Highway and compiled per target.
// Every value is a chain of IEEE multiplies, adds, divisions and one square
// root, in the order of the chain's clips (optax.clip_by_global_norm, optax.clip) /
// scale_by_adam / add_decayed_weights / scale_by_learning_rate, with no fused
// multiply-add: the same bits on every target and for every thread split.
#include "backend/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/adamw.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

void AdamWRange(int64_t i0, int64_t i1, const kernels::AdamWScalars& s, float* param, const float* grad, float* mu,
                float* nu) {
  const DF d;
  const VF b1 = hn::Set(d, s.b1), b2 = hn::Set(d, s.b2), omb1 = hn::Set(d, s.one_minus_b1),
           omb2 = hn::Set(d, s.one_minus_b2), bc1 = hn::Set(d, s.bias_correction1),
           bc2 = hn::Set(d, s.bias_correction2), eps = hn::Set(d, s.eps), eps_root = hn::Set(d, s.eps_root),
           wd = hn::Set(d, s.weight_decay), step = hn::Set(d, s.step_size);
  float* p = param + i0;
  const float* g = grad + i0;
  float* m = mu + i0;
  float* v = nu + i0;
  ForVectors(i1 - i0, [&](int64_t i, size_t valid) {
    VF gv = LoadPart(d, g + i, valid);
    if (s.clip.any()) gv = ClipGrad(d, gv, s.clip);
    const VF mv = hn::Add(hn::Mul(omb1, gv), hn::Mul(b1, LoadPart(d, m + i, valid)));
    const VF vv = hn::Add(hn::Mul(omb2, hn::Mul(gv, gv)), hn::Mul(b2, LoadPart(d, v + i, valid)));
    StorePart(d, mv, m + i, valid);
    StorePart(d, vv, v + i, valid);
    const VF mu_hat = hn::Div(mv, bc1), nu_hat = hn::Div(vv, bc2);
    VF u = hn::Div(mu_hat, hn::Add(hn::Sqrt(hn::Add(nu_hat, eps_root)), eps));
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
HWY_EXPORT(AdamWRange);

// Elementwise, so any split gives the same bits; ranges of at least 2^17
// keep small params on one thread.
void adamw(int64_t n, const kernels::AdamWScalars& s, float* param, const float* grad, float* mu, float* nu) {
  const auto range = T5X_DISPATCH(AdamWRange);
  parallel_for(n, int64_t(1) << 17, [&](int64_t i0, int64_t i1) { range(i0, i1, s, param, grad, mu, nu); });
}
}  // namespace
}  // namespace t5x::cpu

namespace t5x::kernels::cpu {

void adamw_update(int64_t n, const AdamWScalars& s, float* param, const float* grad, float* mu, float* nu) {
  if (n > 0) t5x::cpu::adamw(n, s, param, grad, mu, nu);
}

}  // namespace t5x::kernels::cpu
#endif  // HWY_ONCE
