#include "t5x/optim/sgd.h"

#include <cmath>

#include "backend/kernels.h"
#include "t5x/optim/buffers.h"
#include "t5x/optim/grad_utils.h"

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
  for (const auto& [path, p] : params) {
    if (!is_floating(p.dtype()))
      throw_invalid(kOp, "param '" + path + "' has non-floating dtype " + dtype_name(p.dtype()));
    if (!config_.momentum) continue;
    const std::string key = trace_prefix() + path;
    st.slots[key] = optim_detail::zeros_like_sharded(p.shape(), p, false, DType::f32);
    st.slot_axes[key] = p.names();
  }
  if (config_.lr_is_schedule) {
    st.slots[schedule_count_key()] = Array::from_ints(Shape{}, {0}, DType::i32);
    st.slot_axes[schedule_count_key()] = {};
  }
  return st;
}

void Sgd::do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads, double learning_rate,
                            const ShardComm* comm) const {
  const bool momentum = config_.momentum.has_value();
  const std::string trace = trace_prefix(), count_key = schedule_count_key();
  for (const auto& [path, p] : params) {
    auto it = grads.find(path);
    if (it == grads.end()) throw_invalid(kOp, "no gradient for param '" + path + "'");
    if (it->second.shape() != p.shape())
      throw_invalid(kOp, "gradient for '" + path + "' has shape " + it->second.shape().to_string() +
                             " but the param is " + p.shape().to_string());
    if (momentum && !state.slots.count(trace + path))
      throw_invalid(kOp, "state has no '" + trace + path + "'; was it created by this optimizer's init()?");
  }
  auto cit = state.slots.end();
  if (config_.lr_is_schedule) {
    cit = state.slots.find(count_key);
    if (cit == state.slots.end()) throw_invalid(kOp, "state has no '" + count_key + "'");
  }
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
  if (cit != state.slots.end()) cit->second.data<int32_t>()[0] += 1;
  state.step += 1;
}

}  // namespace t5x
