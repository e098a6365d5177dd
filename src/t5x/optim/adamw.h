// AdamW as optax.adamw (optax/_src/alias.py) behind t5x's OptaxWrapper
// (t5x/optimizers.py): chain(scale_by_adam(b1, b2, eps, eps_root),
// add_decayed_weights(weight_decay), scale_by_learning_rate(lr)).
// Paper: Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization".
//
// Per param p, grad g, float32, count c (int32) before the update:
//   mu = (1-b1)*g + b1*mu;      nu = (1-b2)*g*g + b2*nu;     c' = c + 1
//   u  = (mu / (1 - b1^c')) / (sqrt(nu / (1 - b2^c') + eps_root) + eps)
//   u += weight_decay * p   (params not matched by `mask` are not decayed)
//   p += -lr * u            (lr from the caller: schedule(c), as optax)
// With `chain`, the grads first go through those clips, as
// optimizers.chain([optax.clip(1.0), optax.adamw(...)]) in t5x's
// base_wmt_from_scratch_adamw.gin (or clip_by_global_norm, or both).
//
// State keys (flax state dict of the optax state; EmptyStates are dropped
// by OptaxWrapper.state_dict):
//   plain:          "0/count", "0/mu/<path>", "0/nu/<path>" [+ "2/count"]
//   after n clips:  the same under "<n>/": "1/0/count", "1/0/mu/<path>", ...
// "2/count" (ScaleByScheduleState) exists when the learning rate is a
// schedule (`lr_is_schedule`, the usual t5x gin), as in optax.
// Axes: mu / nu shard like their params; counts are replicated scalars
// (t5x OptaxStatePartitionRules). Works on local shards (elementwise); with
// clip_by_global_norm in the chain, the global norm of grads split across processes sums
// their local squares through the ShardComm (one float64 scalar per set of
// mesh axes; replicated grads are counted once, locally).
#pragma once
#include <optional>

#include "t5x/optim/adafactor.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/optim/optimizer.h"

namespace t5x {

struct AdamWConfig {
  double b1 = 0.9;
  double b2 = 0.999;
  double eps = 1e-8;
  double eps_root = 0.0;
  double weight_decay = 1e-4;
  // optax `mask`: regex -> decay? (first match on the path; unmatched = decay).
  std::optional<HParamMap<bool>> weight_decay_mask;
  DType mu_dtype = DType::f32;
  bool lr_is_schedule = true;
  ChainedClips chain;  // optimizers.chain's clips before adamw, in order
};

class AdamW : public Optimizer {
 public:
  explicit AdamW(AdamWConfig config = {});
  std::string name() const override { return "optimizers.adamw"; }
  const AdamWConfig& config() const { return config_; }
  OptimizerState init(const ParamTree& params) const override;
  // "0/", or "1/0/" after one clip: where scale_by_adam's state sits.
  std::string adam_prefix() const { return chain_state_prefix(config_.chain) + "0/"; }
  std::string schedule_count_key() const { return chain_state_prefix(config_.chain) + "2/count"; }

 protected:
  void do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads, double learning_rate,
                         const ShardComm* comm) const override;

 private:
  AdamWConfig config_;
};

}  // namespace t5x
