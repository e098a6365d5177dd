#include "t5x/optim/lion.h"

#include <cmath>

#include "backend/kernels.h"
#include "t5x/optim/buffers.h"
#include "t5x/optim/optax_state.h"

namespace t5x {

using optim_detail::ConstFloatView;
using optim_detail::FloatView;

namespace {
const char* kOp = "Lion";
}  // namespace

Lion::Lion(LionConfig config) : config_(std::move(config)) {
  if (!(config_.b1 >= 0 && config_.b1 <= 1 && config_.b2 >= 0 && config_.b2 <= 1))
    throw_invalid(kOp, "b1 and b2 must be in [0, 1]");
  if (!std::isfinite(config_.weight_decay)) throw_invalid(kOp, "weight_decay must be finite");
  if (!is_floating(config_.mu_dtype)) throw_invalid(kOp, "mu_dtype must be a floating dtype");
  check_chained_clips(config_.chain, kOp);
}

OptimizerState Lion::init(const ParamTree& params) const {
  OptimizerState st;
  optim_detail::add_count(st, lion_prefix() + "count");
  optim_detail::add_param_slots(st, params, lion_prefix() + "mu/", config_.mu_dtype, kOp);
  if (config_.lr_is_schedule) optim_detail::add_count(st, schedule_count_key());
  return st;
}

void Lion::do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads,
                             double learning_rate, const ShardComm* comm) const {
  const LionConfig& c = config_;
  const std::string pre = lion_prefix();
  std::vector<std::string> counts = {pre + "count"};
  if (c.lr_is_schedule) counts.push_back(schedule_count_key());
  optim_detail::check_update_inputs(params, grads, state, {pre + "mu/"}, counts, kOp);
  // The chain's clips: applied by the kernel to f32 gradients as it reads
  // them; others arrive clipped in copies (prepare_chained_clips).
  const PreparedClips clips = prepare_chained_clips(c.chain, params, grads, comm, kOp);
  kernels::LionScalars s;
  s.b1 = float(c.b1), s.b2 = float(c.b2);
  s.one_minus_b1 = float(1.0 - c.b1), s.one_minus_b2 = float(1.0 - c.b2);
  s.step_size = -float(learning_rate);
  for (auto& [path, param] : params) {
    s.weight_decay = float(c.weight_decay);
    if (c.weight_decay_mask) {
      const bool* m = c.weight_decay_mask->find(path);
      if (m && !*m) s.weight_decay = 0.0f;
    }
    const Array& grad = clips.grads.at(path);
    s.clip = grad.dtype() == DType::f32 ? clips.fused : kernels::GradClip{};
    FloatView p(param), mu(state.slots.at(pre + "mu/" + path));
    ConstFloatView g(grad);
    kernels::cpu::lion_update(param.local_size(), s, p.data(), g.data(), mu.data());
    p.commit();
    mu.commit();
  }
  for (const auto& k : counts) optim_detail::bump_count(state, k);
  state.step += 1;
}

}  // namespace t5x
