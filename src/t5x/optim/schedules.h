// Learning-rate schedules: t5x utils.create_learning_rate_scheduler and the
// optax schedules t5x gins use (linear_schedule, cosine_decay_schedule,
// warmup_cosine_decay_schedule). A schedule maps the step (t5x passes
// train_state.step, i.e. the step before the update) to a learning rate.
// Values are computed in float64; t5x / optax round them to float32, so
// results agree to float32 precision.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace t5x {

using LearningRateSchedule = std::function<double(int64_t step)>;

struct LearningRateSchedulerConfig {
  // Factors joined by '*': constant, linear_warmup, linear_decay,
  // rsqrt_decay, rsqrt_normalized_decay, decay_every, cosine_decay.
  std::string factors = "constant * linear_warmup * rsqrt_decay";
  double base_learning_rate = 0.5;
  int64_t warmup_steps = 1000;
  double decay_factor = 0.5;
  int64_t steps_per_decay = 20000;
  int64_t steps_per_cycle = 100000;
  int64_t step_offset = 0;
  double min_learning_rate = 1e-8;
};

// t5x utils.create_learning_rate_scheduler. With s = max(0, step - step_offset):
//   constant: * base;  linear_warmup: * min(1, s / warmup);
//   linear_decay: * base * min(s / warmup, 1 + decay_factor * (warmup - s));
//   rsqrt_decay: / sqrt(max(s, warmup));
//   rsqrt_normalized_decay: * sqrt(warmup) / sqrt(max(s, warmup));
//   decay_every: * decay_factor^(s / steps_per_decay) (integer division);
//   cosine_decay: * max(0, 0.5 * (1 + cos(pi * (p mod 1)))),
//                 p = max(0, (s - warmup) / steps_per_cycle);
// result = max(product, min_learning_rate).
// Examples: pretrain.gin ("constant * rsqrt_decay", 1.0, warmup 10000) gives
// 0.01 up to step 10000, then 1/sqrt(step); finetune.gin ("constant", 0.001).
// Unknown factor names throw "[create_learning_rate_scheduler] Unknown factor 'x' ...".
LearningRateSchedule create_learning_rate_scheduler(const LearningRateSchedulerConfig& config = {});

// optax.linear_schedule: init until transition_begin, then linearly to
// end_value over transition_steps, then end_value. transition_steps <= 0 ->
// constant init_value.
LearningRateSchedule linear_schedule(double init_value, double end_value, int64_t transition_steps,
                                     int64_t transition_begin = 0);

// optax.cosine_decay_schedule: init * ((1-alpha) * (0.5*(1+cos(pi*min(t,T)/T)))^exponent + alpha).
// Throws "[cosine_decay_schedule] ..." when decay_steps <= 0.
LearningRateSchedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha = 0.0,
                                           double exponent = 1.0);

// optax.warmup_cosine_decay_schedule: linear init -> peak over warmup_steps,
// then cosine decay from peak to end_value until decay_steps (which
// includes the warmup).
LearningRateSchedule warmup_cosine_decay_schedule(double init_value, double peak_value, int64_t warmup_steps,
                                                  int64_t decay_steps, double end_value = 0.0,
                                                  double exponent = 1.0);

}  // namespace t5x
