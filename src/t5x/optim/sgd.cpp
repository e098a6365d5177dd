#include "t5x/optim/sgd.h"

#include <cmath>

#include "backend/kernels.h"
#include "t5x/optim/buffers.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/optim/optax_state.h"

namespace t5x {

using optim_detail::ConstFloatView;
using optim_detail::FloatView;

namespace {
const char* kOp = "SGD";
}  // namespace

Sgd::Sgd(SgdConfig config) : config_(std::move(config)) {
  if (config_.momentum && !std::isfinite(*config_.momentum))
    throw_invalid(kOp, "momentum must be finite (or None), got " + std::to_string(*config_.momentum));
  check_chained_clips(config_.chain, kOp);
}

OptimizerState Sgd::init(const ParamTree& params) const {
  OptimizerState st;
  optim_detail::check_floating(params, kOp);
  if (config_.momentum) optim_detail::add_param_slots(st, params, trace_prefix(), DType::f32, kOp);
  if (config_.lr_is_schedule) optim_detail::add_count(st, schedule_count_key());
  return st;
}

void Sgd::do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads, double learning_rate,
                            const ShardComm* comm) const {
  const bool momentum = config_.momentum.has_value();
  const std::string trace = trace_prefix(), count_key = schedule_count_key();
  std::vector<std::string> counts;
  if (config_.lr_is_schedule) counts.push_back(count_key);
  optim_detail::check_update_inputs(params, grads, state, momentum ? std::vector<std::string>{trace}
                                                                   : std::vector<std::string>{}, counts, kOp);
  // The chain's clips, applied by the kernel to f32 gradients as it reads
  // them; others arrive clipped in copies (prepare_chained_clips).
  const PreparedClips clips = prepare_chained_clips(config_.chain, params, grads, comm, kOp);
  kernels::SgdScalars s;
  s.momentum = momentum ? float(*config_.momentum) : 0.0f;
  s.nesterov = momentum && config_.nesterov;
  s.step_size = -float(learning_rate);
  for (auto& [path, param] : params) {
    FloatView p(param);
    const Array& grad = clips.grads.at(path);
    s.clip = grad.dtype() == DType::f32 ? clips.fused : kernels::GradClip{};
    ConstFloatView g(grad);
    if (momentum) {
      FloatView t(state.slots.at(trace + path));
      kernels::cpu::sgd_update(param.local_size(), s, p.data(), g.data(), t.data());
      t.commit();
    } else {
      kernels::cpu::sgd_update(param.local_size(), s, p.data(), g.data(), nullptr);
    }
    p.commit();
  }
  for (const auto& k : counts) optim_detail::bump_count(state, k);
  state.step += 1;
}

}  // namespace t5x
