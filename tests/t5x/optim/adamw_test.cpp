// optax-style AdamW: known answers, state names (OptaxWrapper layout),
// masks, sharded slots; both optimizers minimise a small least-squares loss.
#include "t5x/optim/adamw.h"

#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "half_params.h"

#include "mesh/reshard.h"
#include "ops/ops.h"
#include "shard_sim.h"
#include "t5x/optim/adafactor.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/optim/schedules.h"

namespace t5x {
namespace {

TEST(AdamW, FirstStepKnownAnswer) {
  // Step 1: mu_hat = g, nu_hat = g^2, so u = g / (|g| + eps) + wd * p.
  AdamWConfig c;
  c.weight_decay = 0.01;
  AdamW opt(c);
  std::vector<float> p0{1.f, -2.f, 0.5f}, g0{0.5f, -0.25f, 1e-3f};
  ParamTree p{{"w", Array::from_vector(Shape{{"embed", 3}}, p0)}};
  OptimizerState st = opt.init(p);
  opt.apply_gradient(p, st, {{"w", Array::from_vector(Shape{{"embed", 3}}, g0)}}, 0.1);
  auto got = p.at("w").to_floats();
  for (size_t i = 0; i < 3; ++i) {
    const double u = g0[i] / (std::abs(g0[i]) + 1e-8) + 0.01 * p0[i];
    EXPECT_NEAR(got[i], p0[i] - 0.1 * u, 1e-6) << i;
  }
  EXPECT_NEAR(st.slots.at("0/mu/w").to_floats()[0], 0.05, 1e-7);
  EXPECT_NEAR(st.slots.at("0/nu/w").to_floats()[0], 0.001 * 0.25, 1e-9);
  EXPECT_EQ(st.slots.at("0/count").item(), 1);
  EXPECT_EQ(st.slots.at("2/count").item(), 1);
  EXPECT_EQ(st.step, 1);
}

TEST(AdamW, SecondStepBiasCorrection) {
  AdamWConfig c;
  c.weight_decay = 0;
  AdamW opt(c);
  ParamTree p{{"w", Array::from_vector(Shape{{"embed", 1}}, std::vector<float>{0.f})}};
  OptimizerState st = opt.init(p);
  const double g1 = 1.0, g2 = -3.0, lr = 1.0;
  opt.apply_gradient(p, st, {{"w", Array::from_vector(Shape{{"embed", 1}}, std::vector<float>{float(g1)})}}, lr);
  opt.apply_gradient(p, st, {{"w", Array::from_vector(Shape{{"embed", 1}}, std::vector<float>{float(g2)})}}, lr);
  const double mu = 0.9 * 0.1 * g1 + 0.1 * g2, nu = 0.999 * 0.001 * g1 * g1 + 0.001 * g2 * g2;
  const double u2 = (mu / (1 - 0.81)) / (std::sqrt(nu / (1 - 0.999 * 0.999)) + 1e-8);
  EXPECT_NEAR(p.at("w").to_floats()[0], -1.0 - u2, 1e-5);
}

TEST(AdamW, StateNamesFollowOptaxWrapper) {
  ParamTree p{{"enc/ln/scale", Array::ones(Shape{{"embed", 4}})},
              {"enc/mlp/wi", Array::ones(Shape{{"embed", 4}, {"mlp", 6}})}};
  OptimizerState plain = AdamW().init(p);
  for (const char* k : {"0/count", "0/mu/enc/ln/scale", "0/nu/enc/mlp/wi", "2/count"})
    EXPECT_TRUE(plain.slots.count(k)) << k;
  EXPECT_EQ(plain.slot_axes.at("0/mu/enc/mlp/wi"), (std::vector<std::string>{"embed", "mlp"}));
  EXPECT_TRUE(plain.slot_axes.at("0/count").empty());
  AdamWConfig c;
  c.chain = {ChainedClip::global_norm(1.0)};
  c.lr_is_schedule = false;
  OptimizerState chained = AdamW(c).init(p);
  EXPECT_TRUE(chained.slots.count("1/0/mu/enc/ln/scale"));
  EXPECT_TRUE(chained.slots.count("1/0/count"));
  EXPECT_FALSE(chained.slots.count("1/2/count"));
  EXPECT_EQ(chained.slots.size(), 5u);
  auto dict = state_dict(p, chained);
  EXPECT_TRUE(dict.count("state/param_states/1/0/nu/enc/mlp/wi"));
}

// clip_by_global_norm is applied inside the update for f32 gradients and by a
// clipped copy for bf16 ones: both equal clip_by_global_norm, then AdamW
// without clipping, bit for bit; below max_norm the gradients pass as they are.
TEST(AdamW, ClipInsideTheUpdateEqualsClipThenUpdate) {
  std::vector<float> pv(300), gv(300);
  for (size_t i = 0; i < pv.size(); ++i) {
    pv[i] = float(std::sin(double(i))) * 0.3f;
    gv[i] = float(std::cos(0.7 * double(i))) * 2.f;
  }
  const Shape s{{"embed", 300}};
  for (DType gdt : {DType::f32, DType::bf16})
    for (double max_norm : {0.37, 1e6}) {
      AdamWConfig clipped_cfg, plain_cfg;
      clipped_cfg.chain = {ChainedClip::global_norm(max_norm)};
      clipped_cfg.weight_decay = plain_cfg.weight_decay = 0.01;
      AdamW clipped(clipped_cfg), plain(plain_cfg);
      const ParamTree g{{"w", Array::from_floats(s, gv, gdt)}};
      ParamTree p1{{"w", Array::from_vector(s, pv)}}, p2{{"w", Array::from_vector(s, pv)}};
      OptimizerState st1 = clipped.init(p1), st2 = plain.init(p2);
      for (int step = 0; step < 2; ++step) {
        clipped.apply_gradient(p1, st1, g, 0.1);
        plain.apply_gradient(p2, st2, clip_by_global_norm(g, max_norm), 0.1);
      }
      EXPECT_EQ(p1.at("w").to_floats(), p2.at("w").to_floats()) << dtype_name(gdt) << " max_norm " << max_norm;
      EXPECT_EQ(st1.slots.at("1/0/nu/w").to_floats(), st2.slots.at("0/nu/w").to_floats());
    }
}

// bf16 and f16 params update in float32 and round once to their dtype: one
// step equals the f32 step on the widened values, then rounded.
TEST(AdamW, HalfParamsUpdateInFloat32AndRoundOnce) {
  AdamWConfig c;
  c.weight_decay = 0.01;
  testing::expect_half_params_round_once(AdamW(c), 500, "0/mu/w");
}

TEST(AdamW, WeightDecayMaskSkipsMatchedParams) {
  AdamWConfig c;
  c.weight_decay = 0.5;
  c.weight_decay_mask = HParamMap<bool>{{{"scale$", false}}};
  AdamW opt(c);
  ParamTree p{{"ln/scale", Array::full(Shape{{"embed", 2}}, 2.0)}, {"mlp/wi", Array::full(Shape{{"embed", 2}}, 2.0)}};
  ParamTree zero{{"ln/scale", Array::zeros(Shape{{"embed", 2}})}, {"mlp/wi", Array::zeros(Shape{{"embed", 2}})}};
  OptimizerState st = opt.init(p);
  opt.apply_gradient(p, st, zero, 0.1);  // zero grads: only decay moves params
  EXPECT_FLOAT_EQ(p.at("ln/scale").to_floats()[0], 2.0f);
  EXPECT_FLOAT_EQ(p.at("mlp/wi").to_floats()[0], 2.0f - 0.1f * 0.5f * 2.0f);
}

TEST(AdamW, SlotsShardLikeParamsAndUpdateLocalShards) {
  auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data", "model"}, {1, 2}, 1});
  Sharding s{mesh, PartitionSpec({{}, {"model"}})};
  Array w(Shape{{"embed", 2}, {"mlp", 4}}, DType::f32, s);  // local [embed=2, mlp=2]
  ParamTree p{{"w", w}};
  AdamW opt;
  OptimizerState st = opt.init(p);
  EXPECT_EQ(st.slots.at("0/mu/w").local_shape(), (Shape{{"embed", 2}, {"mlp", 2}}));
  EXPECT_EQ(st.slots.at("0/nu/w").sharding().spec, s.spec);
  Array g(Shape{{"embed", 2}, {"mlp", 4}}, DType::f32, s);
  for (int i = 0; i < 4; ++i) g.data<float>()[i] = 1.0f;
  opt.apply_gradient(p, st, {{"w", g}}, 0.1);
  EXPECT_NEAR(p.at("w").data<float>()[0], -0.1f, 1e-6);  // elementwise on the local shard
}

TEST(Optimizers, BothMinimiseALeastSquaresLoss) {
  // loss = sum((x w - y)^2) over a batch; w [embed=128, mlp=128] is
  // factored by Adafactor's heuristic.
  Shape ws{{"embed", 128}, {"mlp", 128}};
  std::vector<float> x(size_t(16 * 128)), target(size_t(16 * 128));
  auto hash01 = [](double i) {  // fract(sin(i) * 43758.5453): full-rank pseudo-random data
    double v = std::sin(i) * 43758.5453;
    return v - std::floor(v);
  };
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = float(2 * hash01(double(i)) - 1);
    target[i] = float(2 * hash01(double(i) + 0.5) - 1);
  }
  Array xa = Array::from_vector(Shape{{"batch", 16}, {"embed", 128}}, x);
  Array ya = Array::from_vector(Shape{{"batch", 16}, {"mlp", 128}}, target);
  auto loss_fn = [&](const ParamTree& p) {
    Array pred = einsum(xa, p.at("w"), {"batch", "mlp"});
    return sum(square(sub(pred, ya)));
  };
  AdafactorConfig ac;
  Adafactor ada(ac);
  AdamW adamw;
  // Adafactor's step is relative to RMS(w) (0.01 here), so it takes a larger rate.
  auto ada_lr = create_learning_rate_scheduler({.factors = "constant", .base_learning_rate = 0.3});
  auto adam_lr = create_learning_rate_scheduler({.factors = "constant", .base_learning_rate = 0.01});
  for (const Optimizer* opt : std::vector<const Optimizer*>{&ada, &adamw}) {
    const auto& sched = opt == &ada ? ada_lr : adam_lr;
    ParamTree p{{"w", Array::full(ws, 0.01)}};
    OptimizerState st = opt->init(p);
    const double first = loss_fn(p).item();
    for (int t = 0; t < 40; ++t) {
      auto vg = value_and_grad(loss_fn, p);
      opt->apply_gradient(p, st, vg.grads, sched(st.step));
    }
    const double last = loss_fn(p).item();
    EXPECT_LT(last, 0.5 * first) << opt->name() << ": " << first << " -> " << last;
  }
}

}  // namespace
}  // namespace t5x

namespace t5x {
namespace {

// Simulated processes on (1,2) and (1,4): a split param and a replicated
// one, clipping active. The global norm is one float64 sum of the split
// grad's local squares (the replicated grad counts once, locally), and each
// process's shards equal one process's update.
TEST(AdamW, ShardedGradsClipWithOneScalarSumOfSquares) {
  AdamWConfig c;
  c.chain = {ChainedClip::global_norm(0.05)};  // well below the norm: clipping is active
  Shape s{{"embed", 4}, {"mlp", 8}}, r{{"embed", 4}};
  std::vector<float> pv(32), gv(32);
  for (int i = 0; i < 32; ++i) {
    pv[size_t(i)] = 0.1f * float(i % 5) - 0.2f;
    gv[size_t(i)] = 0.3f * float((i * 7) % 11) / 11.f - 0.1f;
  }
  const std::vector<float> rp = {0.1f, -0.2f, 0.3f, 0.05f}, rg = {0.2f, 0.1f, -0.4f, 0.3f};
  ParamTree ref{{"w", Array::from_vector(s, pv)}, {"r", Array::from_vector(r, rp)}};
  const ParamTree g_full{{"w", Array::from_vector(s, gv)}, {"r", Array::from_vector(r, rg)}};
  AdamW ref_opt(c);
  OptimizerState ref_st = ref_opt.init(ref);
  ref_opt.apply_gradient(ref, ref_st, g_full, 0.1);

  const PartitionSpec spec({{}, {"model"}});
  AdamW opt(c);
  for (const int n : {2, 4}) {
    testing::SimComm sim(n);
    std::vector<std::string> failures(static_cast<size_t>(n));
    testing::SimComm::run(n, [&](int d) {
      auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data", "model"}, {1, n}, d});
      ParamTree p{{"w", testing::shard_of(Array::from_vector(s, pv), mesh, spec)}, {"r", Array::from_vector(r, rp)}};
      OptimizerState st = opt.init(p);
      const ShardComm comm = sim.comm(d);
      opt.apply_gradient(p, st, {{"w", testing::shard_of(g_full.at("w"), mesh, spec)}, {"r", g_full.at("r")}}, 0.1,
                         &comm);
      if (p.at("w").to_floats() != testing::shard_of(ref.at("w"), mesh, spec).to_floats()) failures[size_t(d)] += " w";
      if (p.at("r").to_floats() != ref.at("r").to_floats()) failures[size_t(d)] += " r";
      if (st.slots.at("1/0/nu/w").to_floats() != testing::shard_of(ref_st.slots.at("1/0/nu/w"), mesh, spec).to_floats())
        failures[size_t(d)] += " nu/w";
    });
    for (int d = 0; d < n; ++d) EXPECT_EQ(failures[size_t(d)], "") << "model=" << n << " device " << d;
    EXPECT_EQ(sim.lengths(), std::vector<size_t>{1}) << "one scalar sum, model=" << n;
  }
  AdamW no_comm(c);
  auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data", "model"}, {1, 2}, 0});
  Array sharded(s, DType::f32, Sharding{mesh, spec});
  ParamTree p{{"w", sharded}};
  OptimizerState st = no_comm.init(p);
  EXPECT_THROW(no_comm.apply_gradient(p, st, {{"w", sharded}}, 0.1), std::invalid_argument);
}

}  // namespace
}  // namespace t5x
