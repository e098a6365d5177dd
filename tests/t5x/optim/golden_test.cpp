// Optimizers and schedules against the JAX / optax golden files
// (tests/golden/optim, written by scripts/golden/optim_jax.py).
#include <cmath>

#include <gtest/gtest.h>

#include "t5x/optim/adafactor.h"
#include "t5x/optim/adamw.h"
#include "t5x/optim/lion.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/optim/schedules.h"
#include "t5x/optim/sgd.h"
#include "golden.h"

namespace t5x {
namespace {

using optim_test::compare;
using optim_test::Diff;
using optim_test::Golden;

// fp32 agreement: relative 1e-6, with an absolute floor for values near 0
// of 1e-6 times the array's magnitude scale (a few float32 ulps).
constexpr double kRel = 1e-6;

struct RunResult {
  double max_rel_params = 0, max_rel_state = 0;
};

void expect_close(const nlohmann::json& e, const Array& a, const std::string& what, double& worst) {
  Diff d = compare(e, a, what);
  // Floor: 1e-6 of the largest reference magnitude in this array.
  const auto& bin = Golden::get().bin;
  double scale = 0;
  for (int64_t i = 0; i < e["count"].get<int64_t>(); ++i)
    scale = std::max(scale, double(std::abs(bin[size_t(e["offset"].get<int64_t>() + i)])));
  const double tol_abs = kRel * scale;
  EXPECT_TRUE(d.max_abs <= tol_abs || d.max_rel <= kRel)
      << what << ": max abs diff " << d.max_abs << " (allowed " << tol_abs << "), max rel " << d.max_rel;
  worst = std::max(worst, std::min(d.max_rel, d.max_abs / std::max(scale, 1e-30)));
}

RunResult run_golden(const Optimizer& opt, const std::string& run, const std::vector<size_t>& leaves,
                     int64_t initial_step = 0, const std::vector<double>& lrs = {}) {
  const Golden& g = Golden::get();
  const auto& r = g.man["runs"][run];
  const double mult = r["grad_mult"].get<double>();
  ParamTree params = g.params(leaves);
  OptimizerState st = opt.init(params);
  st.step = initial_step;
  RunResult res;
  const auto& steps = r["steps"];
  EXPECT_EQ(steps.size(), 5u);
  for (size_t t = 0; t < steps.size(); ++t) {
    const double lr = lrs.empty() ? steps[t]["lr"].get<double>() : lrs[t];
    opt.apply_gradient(params, st, g.grads(leaves, int(t), mult), lr);
    const std::string at = run + " step " + std::to_string(t + 1) + " ";
    for (const auto& [path, e] : steps[t]["params"].items()) {
      if (!params.count(path)) {
        ADD_FAILURE() << at << "missing param " << path;
        continue;
      }
      expect_close(e, params.at(path), at + "param " + path, res.max_rel_params);
    }
    for (const auto& [key, e] : steps[t]["state"].items()) {
      if (!st.slots.count(key)) {
        ADD_FAILURE() << at << "missing slot " << key;
        continue;
      }
      if (e.contains("int")) {
        EXPECT_EQ(int64_t(st.slots.at(key).item()), e["int"].get<int64_t>()) << at << key;
        continue;
      }
      expect_close(e, st.slots.at(key), at + "slot " + key, res.max_rel_state);
    }
    if (steps[t].contains("step")) { EXPECT_EQ(st.step, steps[t]["step"].get<int64_t>()) << at; }
  }
  std::cout << run << ": worst relative error params " << res.max_rel_params << ", state " << res.max_rel_state
            << "\n";
  return res;
}

TEST(OptimGolden, AdafactorDefaultsWithStandardFactorRules) {
  AdafactorConfig c;
  c.logical_factor_rules = standard_logical_factor_rules();
  Adafactor opt(c);
  // The learning rates in the file come from t5x's schedule; check ours too.
  auto lr = create_learning_rate_scheduler({.factors = "constant * rsqrt_decay", .base_learning_rate = 0.1,
                                            .warmup_steps = 2});
  std::vector<double> lrs;
  for (int t = 0; t < 5; ++t) lrs.push_back(lr(t));
  run_golden(opt, "adafactor_default", Golden::get().all_leaves(), 0, lrs);
}

TEST(OptimGolden, AdafactorMomentumWeightDecayClippingOffset) {
  AdafactorConfig c;
  c.logical_factor_rules = standard_logical_factor_rules();
  c.beta1 = 0.9;
  c.weight_decay_rate = 1e-3;
  c.global_norm_clip_threshold = 1.0;
  c.step_offset = 10;
  c.max_parameter_scale = 0.3;
  c.decay_rate = 0.7;
  c.clipping_threshold = 1.5;
  c.multiply_by_parameter_scale_map = HParamMap<bool>{{{"scale$", false}, {".*", true}}};
  Adafactor opt(c);
  run_golden(opt, "adafactor_options", Golden::get().all_leaves(), /*initial_step=*/10);
}

TEST(OptimGolden, AdafactorHeuristicFactoringWithoutRules) {
  AdafactorConfig c;
  c.min_dim_size_to_factor = 32;
  Adafactor opt(c);
  std::vector<size_t> leaves;
  for (const auto& k : Golden::get().man["runs"]["adafactor_no_rules"]["leaves"]) leaves.push_back(k.get<size_t>());
  run_golden(opt, "adafactor_no_rules", leaves);
}

TEST(OptimGolden, AdamWDefaults) {
  AdamWConfig c;
  c.lr_is_schedule = false;  // optax.adamw(1e-3): constant rate, no schedule state
  AdamW opt(c);
  std::vector<double> lrs(5, 1e-3);
  run_golden(opt, "adamw_default", Golden::get().all_leaves(), 0, lrs);
}

TEST(OptimGolden, AdamWChainedWithGlobalNormClipAndSchedule) {
  AdamWConfig c;
  c.b1 = 0.8;
  c.b2 = 0.95;
  c.eps = 1e-6;
  c.weight_decay = 1e-2;
  c.chain = {ChainedClip::global_norm(1.0)};
  AdamW opt(c);
  auto sched = warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10);
  const auto& want = Golden::get().man["runs"]["adamw_clip_schedule"]["lr"];
  std::vector<double> lrs;
  for (int t = 0; t < 5; ++t) {
    lrs.push_back(sched(t));
    EXPECT_NEAR(lrs.back(), want[size_t(t)].get<double>(), 1e-6 * 1e-2) << "step " << t;
  }
  run_golden(opt, "adamw_clip_schedule", Golden::get().all_leaves(), 0, lrs);
}

// optax.sgd (t5x optimizers.sgd): the stored states are optax's own pytree,
// flattened ("0/trace/<path>", "1/count"); run_golden fails on a stored key
// we lack, and the slot counts below catch keys optax does not have.
RunResult run_sgd(const std::string& run, SgdConfig c, const std::vector<double>& lrs) {
  Sgd opt(c);
  const RunResult r = run_golden(opt, run, Golden::get().all_leaves(), 0, lrs);
  const auto& want = Golden::get().man["runs"][run]["steps"][0]["state"];
  EXPECT_EQ(opt.init(Golden::get().params(Golden::get().all_leaves())).slots.size(), want.size()) << run;
  return r;
}

TEST(OptimGolden, SgdWithoutMomentumHasNoState) {
  SgdConfig c;
  c.lr_is_schedule = false;  // optax.sgd(0.1): identity + scale, no state at all
  run_sgd("sgd_plain", c, std::vector<double>(5, 0.1));
}

TEST(OptimGolden, SgdMomentumTrace) {
  SgdConfig c;
  c.momentum = 0.9;
  c.lr_is_schedule = false;
  run_sgd("sgd_momentum", c, std::vector<double>(5, 0.05));
}

TEST(OptimGolden, SgdNesterovMomentum) {
  SgdConfig c;
  c.momentum = 0.9;
  c.nesterov = true;
  c.lr_is_schedule = false;
  run_sgd("sgd_nesterov", c, std::vector<double>(5, 0.05));
}

TEST(OptimGolden, SgdMomentumWithScheduleCountsSteps) {
  SgdConfig c;
  c.momentum = 0.5;
  Sgd opt(c);
  auto sched = linear_schedule(0.1, 0.01, 4, 1);
  const auto& want = Golden::get().man["runs"]["sgd_schedule"]["lr"];
  std::vector<double> lrs;
  for (int t = 0; t < 5; ++t) {
    lrs.push_back(sched(t));
    EXPECT_NEAR(lrs.back(), want[size_t(t)].get<double>(), 1e-6 * 0.1) << "step " << t;
  }
  // "1/count" is checked against optax's ScaleByScheduleState after every step.
  run_sgd("sgd_schedule", c, lrs);
}

// t5x optimizers.chain([optax.clip_by_global_norm(31.2), optax.sgd(...)]):
// the grads' global norms straddle 31.2, so steps 0 and 2 clip and the
// others pass unchanged; the state moves under "1/" ("1/0/trace/<path>",
// "1/1/count").
TEST(OptimGolden, SgdAfterClipByGlobalNorm) {
  const auto& run = Golden::get().man["runs"]["sgd_clip_schedule"];
  int clipped = 0;
  for (const auto& n : run["global_norm"]) clipped += n.get<double>() >= 31.2;
  ASSERT_EQ(clipped, 2) << "the golden should clip some steps and not others";
  SgdConfig c;
  c.momentum = 0.9;
  c.chain = {ChainedClip::global_norm(31.2)};
  const Sgd opt(c);
  EXPECT_EQ(opt.trace_prefix(), "1/0/trace/");
  EXPECT_EQ(opt.schedule_count_key(), "1/1/count");
  auto sched = linear_schedule(0.1, 0.01, 4, 1);
  std::vector<double> lrs;
  for (int t = 0; t < 5; ++t) lrs.push_back(sched(t));
  run_sgd("sgd_clip_schedule", c, lrs);
}

// optax.lion (t5x optimizers.lion): its state pytree flattened ("0/count",
// "0/mu/<path>", "2/count" with a schedule); the slot count catches keys
// optax does not have.
void run_lion(const std::string& run, const LionConfig& c, const std::vector<double>& lrs) {
  const Lion opt(c);
  run_golden(opt, run, Golden::get().all_leaves(), 0, lrs);
  const auto& want = Golden::get().man["runs"][run]["steps"][0]["state"];
  EXPECT_EQ(opt.init(Golden::get().params(Golden::get().all_leaves())).slots.size(), want.size()) << run;
}

TEST(OptimGolden, LionDefaults) {
  LionConfig c;
  c.lr_is_schedule = false;  // optax.lion(1e-3): no schedule state
  run_lion("lion_default", c, std::vector<double>(5, 1e-3));
}

// t5x's base_wmt_from_scratch_lion.gin recipe: chain([optax.clip(x),
// optax.lion(schedule)]), the clip fused into the update; the state moves
// under "1/".
TEST(OptimGolden, LionAfterClipWithSchedule) {
  LionConfig c;
  c.b1 = 0.8;
  c.b2 = 0.95;
  c.weight_decay = 0.0;
  c.chain = {ChainedClip::value(0.7)};
  EXPECT_EQ(Lion(c).lion_prefix(), "1/0/");
  EXPECT_EQ(Lion(c).schedule_count_key(), "1/2/count");
  auto sched = warmup_cosine_decay_schedule(0.0, 1e-3, 2, 10);
  const auto& want = Golden::get().man["runs"]["lion_clip_schedule"]["lr"];
  std::vector<double> lrs;
  for (int t = 0; t < 5; ++t) {
    lrs.push_back(sched(t));
    EXPECT_NEAR(lrs.back(), want[size_t(t)].get<double>(), 1e-6 * 1e-3) << "step " << t;
  }
  run_lion("lion_clip_schedule", c, lrs);
}

// Two clips before the optimizer: [clip_by_global_norm, clip] is fused into
// AdamW's update; [clip, clip_by_global_norm] runs the clamp into a copy,
// then the norm of the clamped grads fused into SGD's update.
TEST(OptimGolden, TwoChainedClipsInEitherOrder) {
  AdamWConfig a;
  a.lr_is_schedule = false;
  a.chain = {ChainedClip::global_norm(20.0), ChainedClip::value(0.05)};
  EXPECT_EQ(AdamW(a).adam_prefix(), "2/0/");
  run_golden(AdamW(a), "adamw_two_clips", Golden::get().all_leaves(), 0, std::vector<double>(5, 1e-3));
  SgdConfig sg;
  sg.momentum = 0.9;
  sg.lr_is_schedule = false;
  sg.chain = {ChainedClip::value(0.5), ChainedClip::global_norm(5.0)};
  run_sgd("sgd_clip_then_norm", sg, std::vector<double>(5, 0.1));
}

TEST(OptimGolden, Schedules) {
  for (const auto& s : Golden::get().man["schedules"]) {
    const std::string kind = s["kind"];
    const auto& a = s["args"];
    LearningRateSchedule fn;
    if (kind == "t5x") {
      LearningRateSchedulerConfig c;
      c.factors = a["factors"];
      if (a.contains("base_learning_rate")) c.base_learning_rate = a["base_learning_rate"];
      if (a.contains("warmup_steps")) c.warmup_steps = a["warmup_steps"];
      if (a.contains("decay_factor")) c.decay_factor = a["decay_factor"];
      if (a.contains("steps_per_decay")) c.steps_per_decay = a["steps_per_decay"];
      if (a.contains("steps_per_cycle")) c.steps_per_cycle = a["steps_per_cycle"];
      if (a.contains("step_offset")) c.step_offset = a["step_offset"];
      fn = create_learning_rate_scheduler(c);
    } else if (kind == "linear") {
      fn = linear_schedule(a["init_value"], a["end_value"], a["transition_steps"], a["transition_begin"]);
    } else if (kind == "cosine_decay") {
      fn = cosine_decay_schedule(a["init_value"], a["decay_steps"], a["alpha"]);
    } else if (kind == "warmup_cosine_decay") {
      fn = warmup_cosine_decay_schedule(a["init_value"], a["peak_value"], a["warmup_steps"], a["decay_steps"],
                                        a["end_value"]);
    } else {
      FAIL() << "unknown schedule kind " << kind;
    }
    // The references are computed in float32 (t5x / optax arithmetic), ours in
    // float64: allow 1e-6 relative plus 1e-7 of the schedule's peak, the float32
    // rounding of terms like 1 + cos(pi * x) that cancel near the end of a cycle.
    double peak = 0;
    for (const auto& v : s["values"]) peak = std::max(peak, std::abs(v.get<double>()));
    for (size_t i = 0; i < s["steps"].size(); ++i) {
      const int64_t step = s["steps"][i];
      const double want = s["values"][i];
      EXPECT_NEAR(fn(step), want, 1e-6 * std::abs(want) + 1e-7 * peak) << kind << " " << a.dump() << " step " << step;
    }
  }
}

TEST(OptimGolden, ClipByGlobalNormMatchesOptax) {
  const Golden& g = Golden::get();
  for (const auto& c : g.man["clip_by_global_norm"]) {
    ParamTree grads = g.grads(g.all_leaves(), 0, c["grad_mult"].get<double>());
    EXPECT_NEAR(global_norm(grads), c["global_norm"].get<double>(), 1e-6 * c["global_norm"].get<double>());
    ParamTree out = clip_by_global_norm(grads, c["max_norm"].get<double>());
    double worst = 0;
    for (const auto& [path, e] : c["grads"].items()) expect_close(e, out.at(path), "clip " + path, worst);
  }
}

}  // namespace
}  // namespace t5x
