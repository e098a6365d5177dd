// Lion as optax.lion (optax/_src/alias.py) behind t5x's OptaxWrapper
// (t5x/optimizers.py, optimizers.lion): chain(scale_by_lion(b1, b2,
// mu_dtype), add_decayed_weights(weight_decay, mask),
// scale_by_learning_rate(lr)).
// Paper: Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms",
// Program 1.
//
// Per param p, grad g, float32, before the update:
//   u  = sign((1-b1)*g + b1*mu)   (jnp.sign: +-0 and NaN stay as they are)
//   mu = (1-b2)*g + b2*mu;        count' = count + 1
//   u += weight_decay * p         (params not matched by `mask` are not decayed;
//                                  nothing is added when weight_decay is 0)
//   p += -lr * u                  (lr from the caller: schedule(count), as optax)
// With `chain`, the grads first go through those clips, as t5x's
// examples/t5/t5_1_1/examples/base_wmt_from_scratch_lion.gin writes it:
// optimizers.chain([optax.clip(1.0), optax.lion(...)]).
//
// State keys (flax state dict of the optax state; EmptyStates are dropped by
// OptaxWrapper.state_dict), checked against optax 0.2.8's state pytree
// (scripts/golden/optim_jax.py):
//   plain:          "0/count", "0/mu/<path>" [+ "2/count"]
//   after n clips:  the same under "<n>/": "1/0/count", "1/0/mu/<path>", ...
// "2/count" (ScaleByScheduleState) exists when the learning rate is a
// schedule (`lr_is_schedule`), as in optax. Axes: mu shards like its param;
// counts are replicated scalars (t5x OptaxStatePartitionRules). Works on
// local shards (elementwise); with clip_by_global_norm in the chain, the
// global norm of split grads sums their local squares through the ShardComm.
//
// weight_decay as a schedule (optax's WeightDecaySchedule) is not
// implemented; the trainer refuses it.
#pragma once
#include <optional>

#include "t5x/optim/adafactor.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/optim/optimizer.h"

namespace t5x {

struct LionConfig {
  double b1 = 0.9;
  double b2 = 0.99;
  double weight_decay = 1e-3;
  // optax `mask`: regex -> decay? (first match on the path; unmatched = decay).
  std::optional<HParamMap<bool>> weight_decay_mask;
  DType mu_dtype = DType::f32;
  bool lr_is_schedule = true;
  ChainedClips chain;  // optimizers.chain's clips before lion, in order
};

class Lion : public Optimizer {
 public:
  explicit Lion(LionConfig config = {});
  std::string name() const override { return "optimizers.lion"; }
  const LionConfig& config() const { return config_; }
  OptimizerState init(const ParamTree& params) const override;
  // "0/", or "1/0/" after one clip: where scale_by_lion's state sits.
  std::string lion_prefix() const { return chain_state_prefix(config_.chain) + "0/"; }
  std::string schedule_count_key() const { return chain_state_prefix(config_.chain) + "2/count"; }

 protected:
  void do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads, double learning_rate,
                         const ShardComm* comm) const override;

 private:
  LionConfig config_;
};

}  // namespace t5x
