#include "t5x/optim/adamw.h"

#include <cmath>

#include "backend/kernels.h"
#include "t5x/optim/buffers.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/optim/optax_state.h"

namespace t5x {

using optim_detail::ConstFloatView;
using optim_detail::FloatView;

namespace {
const char* kOp = "AdamW";
}  // namespace

AdamW::AdamW(AdamWConfig config) : config_(std::move(config)) {
  // Written so that nan fails each check.
  if (!(config_.b1 >= 0 && config_.b1 < 1 && config_.b2 >= 0 && config_.b2 < 1))
    throw_invalid(kOp, "b1 and b2 must be in [0, 1), got b1 = " + std::to_string(config_.b1) +
                           ", b2 = " + std::to_string(config_.b2));
  if (!(config_.eps >= 0 && std::isfinite(config_.eps) && config_.eps_root >= 0 && std::isfinite(config_.eps_root)))
    throw_invalid(kOp, "eps and eps_root must be finite and >= 0, got eps = " + std::to_string(config_.eps) +
                           ", eps_root = " + std::to_string(config_.eps_root));
  if (!std::isfinite(config_.weight_decay))
    throw_invalid(kOp, "weight_decay must be finite, got " + std::to_string(config_.weight_decay));
  if (!is_floating(config_.mu_dtype)) throw_invalid(kOp, "mu_dtype must be a floating dtype");
  check_chained_clips(config_.chain, kOp);
}

OptimizerState AdamW::init(const ParamTree& params) const {
  OptimizerState st;
  const std::string pre = adam_prefix();
  optim_detail::add_count(st, pre + "count");
  optim_detail::add_param_slots(st, params, pre + "mu/", config_.mu_dtype, kOp);
  optim_detail::add_param_slots(st, params, pre + "nu/", DType::f32, kOp);
  if (config_.lr_is_schedule) optim_detail::add_count(st, schedule_count_key());
  return st;
}

void AdamW::do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads,
                              double learning_rate, const ShardComm* comm) const {
  const AdamWConfig& c = config_;
  const std::string pre = adam_prefix();
  std::vector<std::string> counts = {pre + "count"};
  if (c.lr_is_schedule) counts.push_back(schedule_count_key());
  optim_detail::check_update_inputs(params, grads, state, {pre + "mu/", pre + "nu/"}, counts, kOp);
  // The chain's clips: the kernel applies them to f32 gradients as it reads
  // them (the same float32 expressions, no clipped copy); others arrive
  // clipped in copies (prepare_chained_clips).
  const PreparedClips clips = prepare_chained_clips(c.chain, params, grads, comm, kOp);
  // Bias corrections as optax computes them: 1 - b^count in float32.
  optim_detail::bump_count(state, pre + "count");
  const int count = state.slots.at(pre + "count").data<int32_t>()[0];
  kernels::AdamWScalars s;
  s.b1 = float(c.b1), s.b2 = float(c.b2);
  s.bias_correction1 = 1.0f - float(std::pow(double(s.b1), count));
  s.bias_correction2 = 1.0f - float(std::pow(double(s.b2), count));
  s.one_minus_b1 = float(1.0 - c.b1), s.one_minus_b2 = float(1.0 - c.b2);
  s.eps = float(c.eps), s.eps_root = float(c.eps_root), s.step_size = -float(learning_rate);
  const float wd_all = float(c.weight_decay);

  for (auto& [path, param] : params) {
    s.weight_decay = wd_all;
    if (c.weight_decay_mask) {
      const bool* m = c.weight_decay_mask->find(path);
      if (m && !*m) s.weight_decay = 0.0f;
    }
    FloatView p(param), mu(state.slots.at(pre + "mu/" + path)), nu(state.slots.at(pre + "nu/" + path));
    const Array& grad = clips.grads.at(path);
    s.clip = grad.dtype() == DType::f32 ? clips.fused : kernels::GradClip{};
    ConstFloatView g(grad);
    kernels::cpu::adamw_update(param.local_size(), s, p.data(), g.data(), mu.data(), nu.data());
    p.commit();
    mu.commit();
    nu.commit();
  }
  if (c.lr_is_schedule) optim_detail::bump_count(state, schedule_count_key());
  state.step += 1;
}

}  // namespace t5x
