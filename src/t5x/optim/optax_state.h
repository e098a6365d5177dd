// Internal helpers of the optax optimizers (AdamW, SGD, Lion): the pieces
// of their state (int32 counts, zero slots shaped and sharded like each
// param) and the checks an update makes before it writes anything.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"
#include "t5x/optim/buffers.h"
#include "t5x/optim/optimizer.h"

namespace t5x::optim_detail {

// An int32 scalar count at 0 (optax's ScaleByAdamState.count,
// ScaleByScheduleState.count, ...), replicated: no logical axes.
inline void add_count(OptimizerState& st, const std::string& key) {
  st.slots[key] = Array::from_ints(Shape{}, {0}, DType::i32);
  st.slot_axes[key] = {};
}

// Adds 1 to the count at `key` (check_update_inputs found it).
inline void bump_count(OptimizerState& st, const std::string& key) { st.slots.at(key).data<int32_t>()[0] += 1; }

// Throws "[op] param 'x' has non-floating dtype ..." for an integer param.
inline void check_floating(const ParamTree& params, const char* op) {
  for (const auto& [path, p] : params)
    if (!is_floating(p.dtype()))
      throw_invalid(op, "param '" + path + "' has non-floating dtype " + dtype_name(p.dtype()));
}

// One zero slot per param of `dtype` at "<prefix><path>", sharded and named
// like the param (mu, nu, trace), after check_floating.
inline void add_param_slots(OptimizerState& st, const ParamTree& params, const std::string& prefix, DType dtype,
                            const char* op) {
  check_floating(params, op);
  for (const auto& [path, p] : params) {
    st.slots[prefix + path] = zeros_like_sharded(p.shape(), p, false, dtype);
    st.slot_axes[prefix + path] = p.names();
  }
}

// Before an update writes anything: every param has a gradient of its shape
// and a slot under each of `slot_prefixes`, and the state holds each of
// `keys` (its counts). Throws "[op] ..." naming what is missing.
inline void check_update_inputs(const ParamTree& params, const ParamTree& grads, const OptimizerState& state,
                                const std::vector<std::string>& slot_prefixes, const std::vector<std::string>& keys,
                                const char* op) {
  for (const auto& [path, p] : params) {
    auto it = grads.find(path);
    if (it == grads.end()) throw_invalid(op, "no gradient for param '" + path + "'");
    if (it->second.shape() != p.shape())
      throw_invalid(op, "gradient for '" + path + "' has shape " + it->second.shape().to_string() +
                            " but the param is " + p.shape().to_string());
    for (const auto& pre : slot_prefixes)
      if (!state.slots.count(pre + path))
        throw_invalid(op, "state has no '" + pre + path + "'; was it created by this optimizer's init()?");
  }
  for (const auto& k : keys)
    if (!state.slots.count(k)) throw_invalid(op, "state has no '" + k + "'");
}

}  // namespace t5x::optim_detail
