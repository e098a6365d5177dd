// t5x Adafactor: factorization plans, state layout and axes, known answers,
// options, errors. Numerical agreement with t5x's rule: golden_test.cpp.
#include "t5x/optim/adafactor.h"

#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "mesh/logical_axis_rules.h"
#include "mesh/reshard.h"
#include "ops/ops.h"
#include "shard_sim.h"

namespace t5x {
namespace {

std::vector<float> ramp(int64_t n, float scale, float shift = 0.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * (float((i * 37) % 101) / 50.f - 1.f) + shift;
  return v;
}

Array make(Shape s, float scale, float shift = 0.f) {
  auto n = s.numel();
  return Array::from_vector(std::move(s), ramp(n, scale, shift));
}

AdafactorConfig with_rules() {
  AdafactorConfig c;
  c.logical_factor_rules = standard_logical_factor_rules();
  return c;
}

TEST(Adafactor, HeuristicFactorsTheTwoLargestDimsWhenBothAreBigEnough) {
  Adafactor opt;
  FactorPlan p = opt.plan("k", Shape{{"embed", 128}, {"mlp", 136}});
  EXPECT_TRUE(p.factored);
  EXPECT_EQ(p.row_dims, std::vector<int>{0});  // smaller dim: ROW (v_row keeps it)
  EXPECT_EQ(p.col_dims, std::vector<int>{1});
  p = opt.plan("k", Shape{{"mlp", 136}, {"embed", 128}});
  EXPECT_EQ(p.row_dims, std::vector<int>{1});
  EXPECT_EQ(p.col_dims, std::vector<int>{0});
  p = opt.plan("k", Shape{{"a", 128}, {"b", 128}});  // tie: original order
  EXPECT_EQ(p.row_dims, std::vector<int>{0});
  EXPECT_EQ(p.col_dims, std::vector<int>{1});
  EXPECT_FALSE(opt.plan("k", Shape{{"a", 127}, {"b", 4000}}).factored);
  EXPECT_FALSE(opt.plan("k", Shape{{"embed", 4096}}).factored);
  EXPECT_EQ(opt.plan("k", Shape{{"a", 127}, {"b", 4000}}).averaging_dims, (std::vector<int>{0, 1}));
  AdafactorConfig c;
  c.factored = false;
  EXPECT_FALSE(Adafactor(c).plan("k", Shape{{"embed", 512}, {"mlp", 512}}).factored);
}

TEST(Adafactor, RankAboveTwoNeedsRules) {
  Adafactor opt;
  try {
    opt.plan("encoder/q", Shape{{"embed", 8}, {"heads", 2}, {"kv", 4}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[Adafactor]"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("explicit factorization rule: encoder/q"), std::string::npos);
  }
}

TEST(Adafactor, LogicalFactorRulesAsT5x) {
  Adafactor opt(with_rules());
  // Scanned layers: BATCH dims are excluded from averaging.
  FactorPlan p = opt.plan("q", Shape{{"layers", 3}, {"embed", 20}, {"joined_kv", 12}});
  EXPECT_TRUE(p.factored);
  EXPECT_EQ(p.averaging_dims, (std::vector<int>{1, 2}));
  EXPECT_EQ(p.row_dims, std::vector<int>{1});
  EXPECT_EQ(p.col_dims, std::vector<int>{2});
  // Attention kernel [embed, heads, kv]: ROW, COL, COL regardless of sizes.
  p = opt.plan("k", Shape{{"embed", 4}, {"heads", 2}, {"kv", 3}});
  EXPECT_TRUE(p.factored);
  EXPECT_EQ(p.col_dims, (std::vector<int>{1, 2}));
  // Rank <= 2 without BATCH dims: heuristic, the rule is ignored.
  EXPECT_FALSE(opt.plan("w", Shape{{"embed", 64}, {"mlp", 256}}).factored);
  EXPECT_TRUE(opt.plan("w", Shape{{"embed", 128}, {"mlp", 256}}).factored);
  // BATCH + a lone ROW: not factored, per-layer averaging kept.
  p = opt.plan("s", Shape{{"layers", 2}, {"embed", 8}});
  EXPECT_FALSE(p.factored);
  EXPECT_EQ(p.averaging_dims, std::vector<int>{1});
  // ROW + COLUMN + NONE is an incomplete spec.
  EXPECT_THROW(opt.plan("x", Shape{{"embed", 4}, {"mlp", 4}, {"relpos_buckets", 4}}), std::invalid_argument);
  try {
    opt.plan("x", Shape{{"embed", 4}, {"widget", 4}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'widget'"), std::string::npos);
  }
}

TEST(Adafactor, FactorMapRegexRules) {
  AdafactorConfig c;
  c.factor_map = HParamMap<FactorRule>{{{"attention", {FactorDim::kRow, FactorDim::kColumn, FactorDim::kColumn}},
                                        {"scale$", {FactorDim::kNone}}}};
  Adafactor opt(c);
  EXPECT_TRUE(opt.plan("encoder/attention/query", Shape{{"a", 2}, {"b", 3}, {"c", 4}}).factored);
  EXPECT_FALSE(opt.plan("encoder/ln/scale", Shape{{"a", 2}}).factored);
  EXPECT_THROW(opt.plan("encoder/mlp/wi", Shape{{"a", 2}, {"b", 3}}), std::invalid_argument);
  EXPECT_EQ(factor_dim_from_name("COLUMN"), FactorDim::kColumn);
  EXPECT_EQ(factor_dim_from_name("unfactorized"), FactorDim::kNone);
  EXPECT_THROW(factor_dim_from_name("diagonal"), std::invalid_argument);
}

TEST(Adafactor, StateLayoutNamesAndAxesFollowT5x) {
  AdafactorConfig c = with_rules();
  c.beta1 = 0.9;
  Adafactor opt(c);
  ParamTree params{{"dec/logits/kernel", make(Shape{{"embed", 128}, {"vocab", 256}}, 0.1f)},
                   {"enc/ln/scale", make(Shape{{"embed", 16}}, 1.f)}};
  OptimizerState st = opt.init(params);
  EXPECT_EQ(st.step, 0);
  EXPECT_EQ(st.slots.size(), 8u);
  EXPECT_EQ(st.slots.at("dec/logits/kernel/v_row").shape(), (Shape{{"embed", 128}}));
  EXPECT_EQ(st.slots.at("dec/logits/kernel/v_col").shape(), (Shape{{"vocab", 256}}));
  EXPECT_EQ(st.slots.at("dec/logits/kernel/v").shape(), (Shape{{"unused", 1}}));
  EXPECT_EQ(st.slots.at("dec/logits/kernel/m").shape(), params.at("dec/logits/kernel").shape());
  EXPECT_EQ(st.slots.at("enc/ln/scale/v").shape(), (Shape{{"embed", 16}}));
  EXPECT_EQ(st.slots.at("enc/ln/scale/v_row").shape(), (Shape{{"unused", 1}}));
  // Factored stats and placeholders replicated; v and m shard like the param.
  EXPECT_EQ(st.slot_axes.at("dec/logits/kernel/v_row"), std::vector<std::string>{""});
  EXPECT_EQ(st.slot_axes.at("dec/logits/kernel/m"), (std::vector<std::string>{"embed", "vocab"}));
  EXPECT_EQ(st.slot_axes.at("enc/ln/scale/v"), std::vector<std::string>{"embed"});

  auto dict = state_dict(params, st);
  EXPECT_TRUE(dict.count("target/dec/logits/kernel"));
  EXPECT_TRUE(dict.count("state/param_states/dec/logits/kernel/v_col"));
  EXPECT_EQ(dict.at("state/step").dtype(), DType::i32);
  auto axes = state_dict_logical_axes(params, st);
  EXPECT_EQ(axes.size(), dict.size());
  // Through t5x's standard rules: m shards vocab over 'model', v_row is replicated.
  auto rules = standard_logical_axis_rules();
  EXPECT_EQ(logical_to_mesh_axes(axes.at("state/param_states/dec/logits/kernel/m"), rules),
            PartitionSpec({{}, {"model"}}));
  EXPECT_EQ(logical_to_mesh_axes(axes.at("state/param_states/dec/logits/kernel/v_row"), rules),
            PartitionSpec::replicated(1));
}

TEST(Adafactor, SlotsAreCreatedShardedLikeTheirParams) {
  auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data", "model"}, {1, 2}, 0});
  Sharding s{mesh, PartitionSpec({{}, {"model"}})};
  Array w(Shape{{"embed", 128}, {"mlp", 256}}, DType::f32, s);
  Array b(Shape{{"embed", 8}, {"mlp", 4}}, DType::f32, s);
  OptimizerState st = Adafactor().init({{"w", w}, {"b", b}});
  EXPECT_EQ(st.slots.at("b/v").local_shape(), (Shape{{"embed", 8}, {"mlp", 2}}));
  EXPECT_EQ(st.slots.at("b/v").sharding().spec, s.spec);
  EXPECT_EQ(st.slots.at("w/v_col").local_shape(), (Shape{{"mlp", 256}}));  // replicated
  EXPECT_TRUE(st.slots.at("w/v_col").is_fully_local());
  ParamTree params{{"b", b}};
  OptimizerState sb = Adafactor().init(params);
  EXPECT_THROW(Adafactor().apply_gradient(params, sb, {{"b", b}}, 0.1), std::invalid_argument);
}

TEST(Adafactor, FirstUnfactoredStepIsScaledSignOfGradient) {
  // Step 0: decay 0, so v = g^2 + eps1 and y = sign(g) with RMS 1 (no clip);
  // update = lr * max(eps2, RMS(p)) * sign(g).
  Adafactor opt;
  ParamTree p{{"w", Array::from_vector(Shape{{"embed", 4}}, std::vector<float>{1, -2, 3, 0.5f})}};
  ParamTree g{{"w", Array::from_vector(Shape{{"embed", 4}}, std::vector<float>{0.1f, -0.2f, 0.3f, -0.4f})}};
  OptimizerState st = opt.init(p);
  opt.apply_gradient(p, st, g, 0.01);
  const double rms = std::sqrt((1 + 4 + 9 + 0.25) / 4.0);
  std::vector<double> want{1 - 0.01 * rms, -2 + 0.01 * rms, 3 - 0.01 * rms, 0.5 + 0.01 * rms};
  auto got = p.at("w").to_floats();
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  EXPECT_EQ(st.step, 1);
  auto v = st.slots.at("w/v").to_floats();
  EXPECT_NEAR(v[3], 0.16, 1e-7);
  // Parameter scale floors at eps2 for tiny params.
  ParamTree tiny{{"w", Array::from_vector(Shape{{"embed", 2}}, std::vector<float>{1e-6f, -1e-6f})}};
  ParamTree tg{{"w", Array::from_vector(Shape{{"embed", 2}}, std::vector<float>{1.f, 1.f})}};
  OptimizerState ts = opt.init(tiny);
  opt.apply_gradient(tiny, ts, tg, 0.5);
  EXPECT_NEAR(tiny.at("w").to_floats()[0], 1e-6 - 0.5 * 1e-3, 1e-9);
}

TEST(Adafactor, FactoredRankOneGradientGivesSignUpdate) {
  // For g = a b^T the factored estimate is exact: y = g / |g| elementwise.
  Adafactor opt;
  const int64_t r = 128, cdim = 130;
  std::vector<float> a(r), b(cdim), g(size_t(r * cdim));
  for (int64_t i = 0; i < r; ++i) a[size_t(i)] = 0.5f + float(i % 7) * 0.25f;
  for (int64_t j = 0; j < cdim; ++j) b[size_t(j)] = (j % 2 ? -1.f : 1.f) * (0.1f + float(j % 5) * 0.3f);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < cdim; ++j) g[size_t(i * cdim + j)] = a[size_t(i)] * b[size_t(j)];
  Shape s{{"embed", r}, {"mlp", cdim}};
  ParamTree p{{"w", Array::full(s, 0.5)}};
  OptimizerState st = opt.init(p);
  opt.apply_gradient(p, st, {{"w", Array::from_vector(s, g)}}, 0.1);
  auto got = p.at("w").to_floats();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], 0.5 - 0.1 * 0.5 * (g[i] > 0 ? 1 : -1), 2e-6) << i;
}

TEST(Adafactor, UpdateClippingDividesByRmsOverThreshold) {
  AdafactorConfig c;
  c.clipping_threshold = 0.5;  // RMS(y) = 1 at step 0 -> update halves
  AdafactorConfig none;
  none.clipping_threshold.reset();
  Shape s{{"embed", 6}};
  ParamTree p1{{"w", make(s, 1.f, 0.1f)}}, p2{{"w", make(s, 1.f, 0.1f)}}, p0{{"w", make(s, 1.f, 0.1f)}};
  ParamTree g{{"w", make(s, 0.3f, 0.05f)}};
  Adafactor clip(c), noclip(none);
  OptimizerState s1 = clip.init(p1), s2 = noclip.init(p2);
  clip.apply_gradient(p1, s1, g, 0.1);
  noclip.apply_gradient(p2, s2, g, 0.1);
  auto a = p1.at("w").to_floats(), b = p2.at("w").to_floats(), o = p0.at("w").to_floats();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(o[i] - a[i], 0.5 * (o[i] - b[i]), 1e-6) << i;
}

TEST(Adafactor, Bfloat16ParamsAreUpdatedInFloat32AndRounded) {
  Shape s{{"embed", 32}};
  ParamTree p32{{"w", make(s, 1.f)}};
  ParamTree p16{{"w", cast(p32.at("w"), DType::bf16)}};
  ParamTree g{{"w", make(s, 0.2f, 0.01f)}};
  Adafactor opt;
  OptimizerState a = opt.init(p32), b = opt.init(p16);
  opt.apply_gradient(p32, a, g, 0.05);
  opt.apply_gradient(p16, b, g, 0.05);
  EXPECT_EQ(p16.at("w").dtype(), DType::bf16);
  EXPECT_EQ(b.slots.at("w/v").dtype(), DType::f32);
  auto x = p32.at("w").to_floats(), y = p16.at("w").to_floats();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 2e-2 * std::abs(x[i]) + 1e-3) << i;
}

TEST(Adafactor, SkipNanUpdatesKeepsOldValues) {
  AdafactorConfig c;
  c.skip_nan_updates = true;
  c.beta1 = 0.5;
  Shape s{{"embed", 4}};
  ParamTree p{{"w", make(s, 1.f, 0.2f)}};
  auto before = p.at("w").to_floats();
  std::vector<float> gv{0.1f, std::nanf(""), 0.2f, 0.3f};
  Adafactor opt(c);
  OptimizerState st = opt.init(p);
  opt.apply_gradient(p, st, {{"w", Array::from_vector(s, gv)}}, 0.1);
  EXPECT_EQ(p.at("w").to_floats(), before);  // RMS(y) is NaN -> every entry NaN -> all kept
  EXPECT_FALSE(std::isnan(st.slots.at("w/v").to_floats()[1]));
  c.skip_nan_updates = false;
  Adafactor plain(c);
  OptimizerState st2 = plain.init(p);
  plain.apply_gradient(p, st2, {{"w", Array::from_vector(s, gv)}}, 0.1);
  EXPECT_TRUE(std::isnan(p.at("w").to_floats()[0]));
}

TEST(Adafactor, StateDictRoundTripResumesExactly) {
  AdafactorConfig c = with_rules();
  c.beta1 = 0.9;
  Adafactor opt(c);
  auto fresh = [] {
    return ParamTree{{"k", make(Shape{{"embed", 128}, {"mlp", 130}}, 0.2f)},
                     {"q", make(Shape{{"layers", 2}, {"embed", 4}, {"heads", 3}}, 0.3f)}};
  };
  auto grads = [](int t) {
    return ParamTree{{"k", make(Shape{{"embed", 128}, {"mlp", 130}}, 0.01f * float(t + 1), 0.001f)},
                     {"q", make(Shape{{"layers", 2}, {"embed", 4}, {"heads", 3}}, 0.1f, 0.01f * float(t))}};
  };
  ParamTree a = fresh();
  OptimizerState sa = opt.init(a);
  for (int t = 0; t < 2; ++t) opt.apply_gradient(a, sa, grads(t), 0.01);
  // Save (deep copies, as a checkpoint would), restore into a fresh init.
  std::map<std::string, Array> saved;
  for (const auto& [k, v] : state_dict(a, sa)) saved[k] = v.copy();
  ParamTree b = fresh();
  OptimizerState sb = opt.init(b);
  ASSERT_TRUE(load_state_dict(saved, b, sb).ok());
  EXPECT_EQ(sb.step, 2);
  opt.apply_gradient(a, sa, grads(2), 0.01);
  opt.apply_gradient(b, sb, grads(2), 0.01);
  for (const auto& [k, v] : a) EXPECT_TRUE(array_equal(v, b.at(k))) << k;
  for (const auto& [k, v] : sa.slots) EXPECT_TRUE(array_equal(v, sb.slots.at(k))) << k;

  auto missing = saved;
  missing.erase("state/param_states/k/v_row");
  Status s1 = load_state_dict(missing, b, sb);
  EXPECT_EQ(s1.code(), StatusCode::kNotFound);
  EXPECT_NE(s1.message().find("k/v_row"), std::string::npos);
  auto bad = saved;
  bad["target/k"] = Array::zeros(Shape{{"embed", 3}});
  EXPECT_EQ(load_state_dict(bad, b, sb).code(), StatusCode::kInvalidArgument);
  auto extra = saved;
  extra["state/param_states/zz/v"] = Array::zeros(Shape{{"embed", 3}});
  EXPECT_EQ(load_state_dict(extra, b, sb).code(), StatusCode::kInvalidArgument);
}

TEST(Adafactor, MisuseErrors) {
  Adafactor opt;
  ParamTree p{{"w", make(Shape{{"embed", 4}}, 1.f)}};
  OptimizerState st = opt.init(p);
  EXPECT_THROW(opt.apply_gradient(p, st, {}, 0.1), std::invalid_argument);
  EXPECT_THROW(opt.apply_gradient(p, st, {{"w", make(Shape{{"embed", 5}}, 1.f)}}, 0.1), std::invalid_argument);
  OptimizerState empty;
  try {
    opt.apply_gradient(p, empty, p, 0.1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("w/v"), std::string::npos);
  }
  AdafactorConfig bad;
  bad.factored = false;
  bad.factor_map = HParamMap<FactorRule>{};
  EXPECT_THROW(Adafactor{bad}, std::invalid_argument);
}

}  // namespace
}  // namespace t5x

namespace t5x {
namespace {

// Simulated processes (threads) on (data=1, model=N) meshes, params split
// over 'model': factored ones along their ROW and along their COLUMN dim,
// an unfactored one, and a replicated one. Each process updates its shards
// with the cross-shard statistics only; its shards must equal one process's
// run (fast path) bit for bit, and the collectives must be exactly the ones
// the split needs: per split param and step, one sum of the partial
// statistics (the RMS(p) sum, and v_row's row sums when the columns are
// split, v_col's column sums when the rows are), one gather of the whole
// ones' slices (v_col's when the columns are split, v_row's when the rows
// are), then the clipping RMS sum; one global norm.
TEST(Adafactor, ShardedParamsUpdateOnTheirShardsAsOneProcess) {
  AdafactorConfig c;
  c.beta1 = 0.9;
  c.global_norm_clip_threshold = 1.0;
  c.clipping_threshold = 0.5;  // active: the first steps' RMS(y) is about 1
  const PartitionSpec cols({{}, {"model"}}), rows({{"model"}, {}});
  struct Leaf {
    std::string path;
    Shape shape;
    PartitionSpec spec;
  };
  // Heuristic factoring: the larger dim (mlp) is COLUMN, embed is ROW.
  std::vector<Leaf> leaves = {{"w_col", Shape{{"embed", 128}, {"mlp", 256}}, cols},   // COLUMN dim split
                              {"w_row", Shape{{"embed", 128}, {"mlp", 256}}, rows},   // ROW dim split
                              {"b", Shape{{"embed", 8}, {"mlp", 12}}, cols},          // unfactored v, m split
                              {"s", Shape{{"embed", 16}}, PartitionSpec::replicated(1)}};
  for (const bool scale : {true, false}) {
    c.multiply_by_parameter_scale = scale;
    for (const int n : {2, 4}) {
      ParamTree ref;
      for (const auto& l : leaves) ref[l.path] = make(l.shape, 0.3f, 0.01f);
      auto grads_at = [&](int t) {
        ParamTree g;
        for (const auto& l : leaves) g[l.path] = make(l.shape, 0.05f * float(t + 1), 0.02f);
        return g;
      };
      Adafactor ref_opt(c), opt(c);
      ASSERT_TRUE(ref_opt.fast_path_applies("w_col", leaves[0].shape));
      OptimizerState ref_st = ref_opt.init(ref);
      const double lr = 0.05;
      const int steps = 3;
      std::vector<ParamTree> ref_params;  // after each step
      for (int t = 0; t < steps; ++t) {
        ref_opt.apply_gradient(ref, ref_st, grads_at(t), lr);
        ParamTree copy;
        for (const auto& [k, v] : ref) copy[k] = v.copy();
        for (const auto& [k, v] : ref_st.slots) copy["state/" + k] = v.copy();
        ref_params.push_back(copy);
      }
      ParamTree init;
      for (const auto& l : leaves) init[l.path] = make(l.shape, 0.3f, 0.01f);
      testing::SimComm sim(n);
      std::vector<std::string> failures(static_cast<size_t>(n));
      testing::SimComm::run(n, [&](int d) {
        auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data", "model"}, {1, n}, d});
        ParamTree p;
        for (const auto& l : leaves) p[l.path] = testing::shard_of(init.at(l.path), mesh, l.spec);
        OptimizerState st = opt.init(p);
        const ShardComm comm = sim.comm(d);
        for (int t = 0; t < steps; ++t) {
          ParamTree g, want = ref_params[size_t(t)];
          for (const auto& l : leaves) g[l.path] = testing::shard_of(grads_at(t).at(l.path), mesh, l.spec);
          opt.apply_gradient(p, st, g, lr, &comm);
          for (const auto& l : leaves) {
            if (p.at(l.path).to_floats() != testing::shard_of(want.at(l.path), mesh, l.spec).to_floats())
              failures[size_t(d)] += " step " + std::to_string(t) + " " + l.path;
            for (const char* s : {"v_row", "v_col", "v", "m"}) {
              const Array& got = st.slots.at(l.path + "/" + s);
              const Array& full = want.at("state/" + l.path + "/" + s);
              Array expect = got.is_fully_local() ? full : testing::shard_of(full, mesh, l.spec);
              if (got.to_floats() != expect.to_floats())
                failures[size_t(d)] += " step " + std::to_string(t) + " " + l.path + "/" + s;
            }
          }
        }
      });
      for (int d = 0; d < n; ++d) EXPECT_EQ(failures[size_t(d)], "") << "model=" << n << " device " << d;
      // Per step, in param order: the global norm (1); b: 1 (RMS), then 1
      // (clipping); w_col: 1 + 128 rows summed, 256 / n columns gathered,
      // 1; w_row: 1 + 256 columns summed, 128 / n rows gathered, 1.
      const std::vector<size_t> per_step = {1, 1, 1, 1 + 128, 1, 1 + 256, 1};
      const std::vector<size_t> gathers_per_step = {size_t(256 / n), size_t(128 / n)};
      std::vector<size_t> want, want_gathers;
      for (int t = 0; t < steps; ++t) {
        want.insert(want.end(), per_step.begin(), per_step.end());
        want_gathers.insert(want_gathers.end(), gathers_per_step.begin(), gathers_per_step.end());
      }
      EXPECT_EQ(sim.lengths(), want) << "model=" << n;
      EXPECT_EQ(sim.gather_lengths(), want_gathers) << "model=" << n;
      EXPECT_EQ(sim.last_axes(), std::vector<std::string>{"model"});
    }
  }
}

TEST(Adafactor, SplitParamWithoutShardCommIsAnError) {
  auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data", "model"}, {1, 2}, 0});
  const PartitionSpec spec({{}, {"model"}});
  Array w = testing::shard_of(make(Shape{{"embed", 4}, {"mlp", 6}}, 0.1f), mesh, spec);
  Adafactor opt;
  ParamTree p{{"w", w}};
  OptimizerState st = opt.init(p);
  try {
    opt.apply_gradient(p, st, {{"w", w}}, 0.1);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'w' is split across processes; pass the ShardComm"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace t5x
