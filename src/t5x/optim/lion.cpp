#include "t5x/optim/lion.h"

#include <cmath>

#include "backend/kernels.h"
#include "t5x/optim/buffers.h"

namespace t5x {

using optim_detail::ConstFloatView;
using optim_detail::FloatView;

namespace {
const char* kOp = "Lion";

Array count_scalar() { return Array::from_ints(Shape{}, {0}, DType::i32); }

void bump(Array& count) { count.data<int32_t>()[0] += 1; }
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
  const std::string pre = lion_prefix();
  st.slots[pre + "count"] = count_scalar();
  st.slot_axes[pre + "count"] = {};
  for (const auto& [path, p] : params) {
    if (!is_floating(p.dtype()))
      throw_invalid(kOp, "param '" + path + "' has non-floating dtype " + dtype_name(p.dtype()));
    st.slots[pre + "mu/" + path] = optim_detail::zeros_like_sharded(p.shape(), p, false, config_.mu_dtype);
    st.slot_axes[pre + "mu/" + path] = p.names();
  }
  if (config_.lr_is_schedule) {
    st.slots[schedule_count_key()] = count_scalar();
    st.slot_axes[schedule_count_key()] = {};
  }
  return st;
}

void Lion::do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads,
                             double learning_rate, const ShardComm* comm) const {
  const LionConfig& c = config_;
  const std::string pre = lion_prefix();
  for (const auto& [path, p] : params) {
    auto it = grads.find(path);
    if (it == grads.end()) throw_invalid(kOp, "no gradient for param '" + path + "'");
    if (it->second.shape() != p.shape())
      throw_invalid(kOp, "gradient for '" + path + "' has shape " + it->second.shape().to_string() +
                             " but the param is " + p.shape().to_string());
    if (!state.slots.count(pre + "mu/" + path))
      throw_invalid(kOp, "state has no mu for '" + path + "' under '" + pre +
                             "'; was it created by this optimizer's init()?");
  }
  auto cit = state.slots.find(pre + "count");
  if (cit == state.slots.end()) throw_invalid(kOp, "state has no '" + pre + "count'");
  auto sit = state.slots.end();
  if (c.lr_is_schedule) {
    sit = state.slots.find(schedule_count_key());
    if (sit == state.slots.end()) throw_invalid(kOp, "state has no '" + schedule_count_key() + "'");
  }
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
  bump(cit->second);
  if (sit != state.slots.end()) bump(sit->second);
  state.step += 1;
}

}  // namespace t5x
