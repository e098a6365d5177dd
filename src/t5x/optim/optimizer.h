// Common optimizer interface and t5x's optimizer state-dict layout.
//
// t5x keeps the train state as a nested dict (t5x/optimizers.py
// OptimizerDef.state_dict):
//   target/<param path>                     the parameters
//   state/step                              int32 step counter
//   state/param_states/<...>                the optimizer's slots
// Adafactor (t5x/adafactor.py) keys slots as "<param path>/{v_row,v_col,v,m}"
// (unused ones are zeros of shape [1]); optax optimizers behind OptaxWrapper
// key them as the flax state dict of the optax state, e.g. "0/count",
// "0/mu/<param path>", "0/nu/<param path>" for optax.adamw, "0/trace/<param
// path>" for optax.sgd with momentum.
//
// Each slot carries its logical axis names for partitioning
// (Optimizer.derive_logical_axes in t5x): slots shaped like their parameter
// (v, m, mu, nu) get the parameter's dim names, so they shard like it;
// factored statistics (v_row, v_col), placeholders and counters are
// replicated: every entry of their axes is "" (= None). Feed them to
// mesh/logical_axis_rules.h `logical_to_mesh_axes`.
//
// Updates run in place on the local buffers of params and state, as t5x
// donates the train state to the step; copy them first to keep old values.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/error.h"
#include "ops/autodiff.h"

namespace t5x {

struct OptimizerState {
  int64_t step = 0;                     // "state/step"
  std::map<std::string, Array> slots;   // keys below "state/param_states/"
  // Logical axes per slot key (same keys as `slots`): one name per dim,
  // "" = replicated dim. Scalars have an empty list.
  std::map<std::string, std::vector<std::string>> slot_axes;
};

// The collectives an optimizer needs for params split across processes
// (t5x runs the optimizer on the shards under pjit), on small float64
// vectors (statistics, sums of squares) over the mesh axes a param is split
// on. Every process holding a shard of the param calls them with the same
// axes and length, in the same order. The spmd layer provides them over its
// context (spmd::shard_comm()); tests may provide their own.
struct ShardComm {
  // values[0..n) <- their sum over the processes that differ only on `mesh_axes`.
  std::function<void(const std::vector<std::string>& mesh_axes, double* values, size_t n)> sum;
  // out[0..k*n) <- the n `local` values of each of those k processes, in
  // group rank order (row-major over the axes' coordinates, axes as given).
  std::function<void(const std::vector<std::string>& mesh_axes, const double* local, size_t n, double* out)> gather;
};

// The mesh axes `a`'s dims are split over, in dim order (none = on one device
// or replicated); and the offset of this process's shard along each dim
// (or, with `device_id`, of that device's shard).
std::vector<std::string> split_axes(const Array& a);
std::vector<int64_t> shard_offsets(const Array& a, int64_t device_id = -1);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // t5x / gin name, e.g. "adafactor.Adafactor", "optimizers.adamw".
  virtual std::string name() const = 0;
  // Fresh state for `params` (slots zero, step 0). Slots shaped like a param
  // take its sharding; replicated slots take a replicated spec on its mesh.
  virtual OptimizerState init(const ParamTree& params) const = 0;
  // One update with the given learning rate (t5x passes
  // learning_rate_fn(state.step)). `grads` must hold every key of `params`
  // with the same shape. Writes params and state in place; step += 1.
  // Params split across processes (not fully local) are updated on their
  // local shards; the few sums that cross shards go through `comm`, which
  // every such process must pass (nullptr: a split param is an error).
  // Errors: "[<optimizer>] ..." std::invalid_argument on missing grads,
  // shape mismatches, or a state that does not belong to these params.
  void apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads, double learning_rate,
                      const ShardComm* comm = nullptr) const {
    do_apply_gradient(params, state, grads, learning_rate, comm);
  }
  // The dims of a param of `shape` (named dims) that each of its slots keeps,
  // in order, by slot name (the suffix after "<path>/"); nullopt for a
  // placeholder. A checkpoint layout that stacks layers
  // (checkpoints/param_layout.h) maps a layer's slots to the stacked param's
  // with it. The default reads them off init() of one such param: a slot of
  // the param's shape keeps every dim, a one-element slot none. Throws
  // std::invalid_argument when the optimizer cannot hold such a param.
  virtual std::map<std::string, std::optional<std::vector<int>>> slot_dims(const std::string& path,
                                                                           const Shape& shape) const;

 protected:
  virtual void do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads,
                                 double learning_rate, const ShardComm* comm) const = 0;
};

// The flat t5x state dict: "target/<path>" -> param, "state/step" -> int32
// scalar, "state/param_states/<key>" -> slot. Arrays are shared, not copied.
std::map<std::string, Array> state_dict(const ParamTree& params, const OptimizerState& state);

// Logical axes for every key of state_dict(params, state): params keep
// their dim names, slots use state.slot_axes, "state/step" is a scalar ({}).
std::map<std::string, std::vector<std::string>> state_dict_logical_axes(const ParamTree& params,
                                                                       const OptimizerState& state);

// Inverse of state_dict for a restore: copies the values of `dict` into
// `params` and `state` (both from init(), so shapes are known). Every param
// and slot key must be present with the same local shape (the dict holds
// what this process keeps: whole arrays, or its shards as state_dict
// returns them); dtypes are converted (e.g. a bfloat16 checkpoint).
// Extra keys are an error too (strict restore). Errors name the key and hint
// at the optimizer that wrote the checkpoint.
Status load_state_dict(const std::map<std::string, Array>& dict, ParamTree& params, OptimizerState& state);

}  // namespace t5x
