// optax-style SGD (t5x optimizers.sgd): known answers for plain, momentum
// and Nesterov steps, the OptaxWrapper state names, a state-dict round trip
// and strict restore, sharded slots, half-precision params.
#include "t5x/optim/sgd.h"

#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "half_params.h"

#include "ops/ops.h"

namespace t5x {
namespace {

Array vec(std::vector<float> v) { return Array::from_vector(Shape{{"embed", int64_t(v.size())}}, std::move(v)); }

TEST(Sgd, PlainStepIsMinusLrTimesGrad) {
  SgdConfig c;
  c.lr_is_schedule = false;
  Sgd opt(c);
  ParamTree p{{"w", vec({1.f, -2.f, 0.5f})}};
  OptimizerState st = opt.init(p);
  EXPECT_TRUE(st.slots.empty());  // identity + scale(-lr): no optax state
  opt.apply_gradient(p, st, {{"w", vec({0.5f, -0.25f, 3.f})}}, 0.1);
  EXPECT_EQ(p.at("w").to_floats(), (std::vector<float>{1.f + 0.5f * -0.1f, -2.f + -0.25f * -0.1f, 0.5f + 3.f * -0.1f}));
  EXPECT_EQ(st.step, 1);
}

// Two steps by hand, in float32 as optax: t = g + m t, u = t (or g + m t).
TEST(Sgd, MomentumAndNesterovKnownAnswers) {
  const float m = 0.9f, lr = 0.5f, g1 = 1.0f, g2 = -3.0f, p0 = 2.0f;
  for (bool nesterov : {false, true}) {
    SgdConfig c;
    c.momentum = 0.9;
    c.nesterov = nesterov;
    c.lr_is_schedule = false;
    Sgd opt(c);
    ParamTree p{{"w", vec({p0})}};
    OptimizerState st = opt.init(p);
    opt.apply_gradient(p, st, {{"w", vec({g1})}}, lr);
    opt.apply_gradient(p, st, {{"w", vec({g2})}}, lr);
    const float t1 = g1, t2 = g2 + m * t1;
    const float u1 = nesterov ? g1 + m * t1 : t1, u2 = nesterov ? g2 + m * t2 : t2;
    EXPECT_FLOAT_EQ(st.slots.at("0/trace/w").to_floats()[0], t2) << nesterov;
    EXPECT_FLOAT_EQ(p.at("w").to_floats()[0], (p0 + u1 * -lr) + u2 * -lr) << nesterov;
  }
  // nesterov without momentum is plain SGD (optax ignores it with identity()).
  SgdConfig c;
  c.nesterov = true;
  c.lr_is_schedule = false;
  ParamTree p{{"w", vec({p0})}};
  OptimizerState st = Sgd(c).init(p);
  Sgd(c).apply_gradient(p, st, {{"w", vec({g1})}}, lr);
  EXPECT_FLOAT_EQ(p.at("w").to_floats()[0], p0 - lr * g1);
}

TEST(Sgd, StateNamesFollowOptaxWrapper) {
  ParamTree p{{"enc/ln/scale", Array::ones(Shape{{"embed", 4}})},
              {"enc/mlp/wi", Array::ones(Shape{{"embed", 4}, {"mlp", 6}})}};
  SgdConfig c;
  c.momentum = 0.9;
  OptimizerState st = Sgd(c).init(p);
  EXPECT_EQ(st.slots.size(), 3u);
  for (const char* k : {"0/trace/enc/ln/scale", "0/trace/enc/mlp/wi", "1/count"}) EXPECT_TRUE(st.slots.count(k)) << k;
  EXPECT_EQ(st.slot_axes.at("0/trace/enc/mlp/wi"), (std::vector<std::string>{"embed", "mlp"}));
  EXPECT_EQ(st.slots.at("0/trace/enc/mlp/wi").dtype(), DType::f32);
  EXPECT_TRUE(st.slot_axes.at("1/count").empty());
  EXPECT_EQ(st.slots.at("1/count").dtype(), DType::i32);
  auto dict = state_dict(p, st);
  EXPECT_TRUE(dict.count("state/param_states/0/trace/enc/ln/scale"));
  EXPECT_TRUE(dict.count("state/param_states/1/count"));
  EXPECT_EQ(state_dict_logical_axes(p, st).at("state/param_states/0/trace/enc/mlp/wi"),
            (std::vector<std::string>{"embed", "mlp"}));
  // momentum None, constant rate: only target/ and state/step.
  SgdConfig plain;
  plain.lr_is_schedule = false;
  EXPECT_EQ(state_dict(p, Sgd(plain).init(p)).size(), 3u);
}

TEST(Sgd, StateDictRoundTripAndStrictRestore) {
  SgdConfig c;
  c.momentum = 0.8;
  c.nesterov = true;
  Sgd opt(c);
  auto fresh = [] {
    return ParamTree{{"k", Array::full(Shape{{"embed", 5}, {"mlp", 3}}, 0.25)}, {"s", Array::ones(Shape{{"embed", 5}})}};
  };
  auto grads = [](int t) {
    std::vector<float> k(15), s(5);
    for (size_t i = 0; i < k.size(); ++i) k[i] = 0.01f * float(int(i) - 7) * float(t + 1);
    for (size_t i = 0; i < s.size(); ++i) s[i] = 0.1f * float(t) - 0.05f * float(i);
    return ParamTree{{"k", Array::from_vector(Shape{{"embed", 5}, {"mlp", 3}}, k)}, {"s", vec(s)}};
  };
  ParamTree a = fresh();
  OptimizerState sa = opt.init(a);
  for (int t = 0; t < 2; ++t) opt.apply_gradient(a, sa, grads(t), 0.1);
  std::map<std::string, Array> saved;
  for (const auto& [k, v] : state_dict(a, sa)) saved[k] = v.copy();
  ParamTree b = fresh();
  OptimizerState sb = opt.init(b);
  ASSERT_TRUE(load_state_dict(saved, b, sb).ok());
  EXPECT_EQ(sb.step, 2);
  EXPECT_EQ(sb.slots.at("1/count").item(), 2);
  opt.apply_gradient(a, sa, grads(2), 0.1);
  opt.apply_gradient(b, sb, grads(2), 0.1);
  for (const auto& [k, v] : a) EXPECT_TRUE(array_equal(v, b.at(k))) << k;
  for (const auto& [k, v] : sa.slots) EXPECT_TRUE(array_equal(v, sb.slots.at(k))) << k;

  auto missing = saved;
  missing.erase("state/param_states/0/trace/k");
  Status s1 = load_state_dict(missing, b, sb);
  EXPECT_EQ(s1.code(), StatusCode::kNotFound);
  EXPECT_NE(s1.message().find("0/trace/k"), std::string::npos) << s1.message();
  auto no_count = saved;
  no_count.erase("state/param_states/1/count");
  EXPECT_EQ(load_state_dict(no_count, b, sb).code(), StatusCode::kNotFound);
  auto bad = saved;
  bad["state/param_states/0/trace/s"] = Array::zeros(Shape{{"embed", 3}});
  EXPECT_EQ(load_state_dict(bad, b, sb).code(), StatusCode::kInvalidArgument);
  // AdamW's slots (or a trace under another index) are not this optimizer's.
  auto extra = saved;
  extra["state/param_states/0/mu/s"] = Array::zeros(Shape{{"embed", 5}});
  Status s2 = load_state_dict(extra, b, sb);
  EXPECT_EQ(s2.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s2.message().find("0/mu/s"), std::string::npos) << s2.message();
  // A momentum-free SGD refuses a checkpoint with a trace, and vice versa.
  SgdConfig plain;
  ParamTree pp = fresh();
  OptimizerState sp = Sgd(plain).init(pp);
  EXPECT_EQ(load_state_dict(saved, pp, sp).code(), StatusCode::kInvalidArgument);
  std::map<std::string, Array> plain_saved;
  for (const auto& [k, v] : state_dict(pp, sp)) plain_saved[k] = v.copy();
  EXPECT_EQ(load_state_dict(plain_saved, b, sb).code(), StatusCode::kNotFound);
}

TEST(Sgd, MisuseErrors) {
  SgdConfig c;
  c.momentum = 0.9;
  Sgd opt(c);
  ParamTree p{{"w", vec({1.f, 2.f})}};
  OptimizerState st = opt.init(p);
  EXPECT_THROW(opt.apply_gradient(p, st, {}, 0.1), std::invalid_argument);
  EXPECT_THROW(opt.apply_gradient(p, st, {{"w", vec({1.f})}}, 0.1), std::invalid_argument);
  OptimizerState empty;
  EXPECT_THROW(opt.apply_gradient(p, empty, {{"w", vec({1.f, 1.f})}}, 0.1), std::invalid_argument);
  c.momentum = std::nan("");
  EXPECT_THROW(Sgd{c}, std::invalid_argument);
  ParamTree ints{{"i", Array::from_ints(Shape{{"embed", 2}}, {1, 2}, DType::i32)}};
  EXPECT_THROW(opt.init(ints), std::invalid_argument);
}

TEST(Sgd, TraceShardsLikeItsParamAndUpdatesLocalShards) {
  auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data", "model"}, {1, 2}, 1});
  Sharding s{mesh, PartitionSpec({{}, {"model"}})};
  Array w(Shape{{"embed", 2}, {"mlp", 4}}, DType::f32, s);  // local [embed=2, mlp=2]
  ParamTree p{{"w", w}};
  SgdConfig c;
  c.momentum = 0.5;
  Sgd opt(c);
  OptimizerState st = opt.init(p);
  EXPECT_EQ(st.slots.at("0/trace/w").local_shape(), (Shape{{"embed", 2}, {"mlp", 2}}));
  EXPECT_EQ(st.slots.at("0/trace/w").sharding().spec, s.spec);
  EXPECT_TRUE(st.slot_axes.at("1/count").empty());  // a replicated scalar
  Array g(Shape{{"embed", 2}, {"mlp", 4}}, DType::f32, s);
  for (int i = 0; i < 4; ++i) g.data<float>()[i] = 1.0f;
  opt.apply_gradient(p, st, {{"w", g}}, 0.1);  // no ShardComm: nothing crosses shards
  opt.apply_gradient(p, st, {{"w", g}}, 0.1);
  EXPECT_FLOAT_EQ(st.slots.at("0/trace/w").data<float>()[0], 1.5f);
  EXPECT_FLOAT_EQ(p.at("w").data<float>()[0], (0.0f + 1.0f * -0.1f) + 1.5f * -0.1f);
}

// bf16 and f16 params update in float32 and round once to their dtype, as
// optax.apply_updates' astype(param.dtype); the trace stays float32.
TEST(Sgd, HalfParamsUpdateInFloat32AndRoundOnce) {
  SgdConfig c;
  c.momentum = 0.9;
  testing::expect_half_params_round_once(Sgd(c), 300, "0/trace/w");
}

}  // namespace
}  // namespace t5x
