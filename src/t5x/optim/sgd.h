// SGD as optax.sgd (optax/_src/alias.py) behind t5x's OptaxWrapper
// (t5x/optimizers.py, optimizers.sgd): chain(trace(decay=momentum,
// nesterov) if momentum is not None else identity(),
// scale_by_learning_rate(lr)); trace is optax/transforms/_accumulation.py
// (re-exported as optax/_src/transform.py trace).
// Paper: Sutskever et al. 2013, "On the importance of initialization and
// momentum in deep learning".
//
// Per param p, grad g, float32:
//   momentum = None:  u = g
//   momentum = m:     t = g + m * t;   u = nesterov ? g + m * t : t
//   p += -lr * u      (lr from the caller: schedule(count), as optax)
// nesterov without momentum is ignored, as optax ignores it.
// With `chain`, the grads first go through those clips (optax.clip_by_global_norm,
// optax.clip), as t5x's optimizers.chain([clip_by_global_norm(x), sgd(...)])
// composes them (optax.chain).
//
// State keys (flax state dict of the optax state; EmptyStates are dropped
// by OptaxWrapper.state_dict), checked against optax 0.2.8's state pytree
// (scripts/golden/optim_jax.py):
//   momentum set:     "0/trace/<path>"  (TraceState) [+ "1/count"]
//   momentum = None:  no per-param slot               [+ "1/count"]
//   after n clips:    the same under "<n>/", e.g. "1/0/trace/<path>"
//                     [+ "1/1/count"] after one
// "1/count" (ScaleByScheduleState, int32) exists when the learning rate is
// a schedule (`lr_is_schedule`), as in optax; a constant rate has no state.
// Axes: trace shards like its param; the count is a replicated scalar
// (t5x OptaxStatePartitionRules). Works on local shards (elementwise: split
// params need no communication); with clip_by_global_norm in the chain, the global norm of
// grads split across processes sums their local squares through the
// ShardComm, as AdamW's.
//
// accumulator_dtype: only None (the trace in float32, what optax keeps for
// the float32 params t5x trains) is implemented; the trainer refuses others.
#pragma once
#include <optional>
#include <string>

#include "t5x/optim/grad_utils.h"
#include "t5x/optim/optimizer.h"

namespace t5x {

struct SgdConfig {
  std::optional<double> momentum;  // None: plain SGD, no trace
  bool nesterov = false;
  bool lr_is_schedule = true;
  ChainedClips chain;  // optimizers.chain's clips before sgd, in order
};

class Sgd : public Optimizer {
 public:
  explicit Sgd(SgdConfig config = {});
  std::string name() const override { return "optimizers.sgd"; }
  const SgdConfig& config() const { return config_; }
  OptimizerState init(const ParamTree& params) const override;
  // The state keys' prefixes; both move under "<n>/" after n clips.
  std::string trace_prefix() const { return chain_state_prefix(config_.chain) + "0/trace/"; }
  std::string schedule_count_key() const { return chain_state_prefix(config_.chain) + "1/count"; }

 protected:
  void do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads, double learning_rate,
                         const ShardComm* comm) const override;

 private:
  SgdConfig config_;
};

}  // namespace t5x
