// Mixture-of-Experts: capacity and groups, the routers (moe.md R1-R5) and the
// layer against JAX goldens (scripts/golden/moe_routing.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "nn/moe.h"
#include "ops/ops.h"

namespace t5x::nn {
namespace {

using nlohmann::json;

const json& golden() {
  static const json g = [] {
    std::ifstream f(std::string(T5X_SOURCE_DIR) + "/tests/golden/nn/moe.json");
    if (!f) throw std::runtime_error("missing tests/golden/nn/moe.json (scripts/golden/moe_routing.py writes it)");
    return json::parse(f);
  }();
  return g;
}

// {"shape": [...], "data": [...]} with the dims named `names`.
Array from_json(const json& j, const std::vector<std::string>& names) {
  std::vector<Dim> dims;
  for (size_t i = 0; i < names.size(); ++i) dims.push_back({names[i], j["shape"][i].get<int64_t>()});
  return Array::from_floats(Shape(dims), j["data"].get<std::vector<float>>());
}

// |a - golden| <= atol + rtol |golden| elementwise.
void expect_close(const Array& a, const json& g, double atol, double rtol, const std::string& what) {
  auto v = a.to_floats();
  auto want = g["data"].get<std::vector<float>>();
  ASSERT_EQ(v.size(), want.size()) << what;
  for (size_t i = 0; i < v.size(); ++i) {
    double err = std::abs(double(v[i]) - want[i]) - (atol + rtol * std::abs(want[i]));
    EXPECT_LE(err, 0.0) << what << "[" << i << "]: " << v[i] << " vs " << want[i];
    if (err > 0) break;
  }
}

MoeConfig config_of(const json& c) {
  MoeConfig cfg;
  std::string r = c["router"];
  cfg.router = r == "masked"    ? RouterType::kTokensChooseMasked
               : r == "scatter" ? RouterType::kTokensChooseScatter
                                : RouterType::kExpertsChooseMasked;
  cfg.num_selected_experts = c.value("k", 1);
  cfg.batch_prioritized_routing = c.value("bpr", false);
  cfg.ignore_padding_tokens = c.value("ignore_padding_tokens", false);
  cfg.jitter_noise = c.value("jitter_noise", 0.0);
  if (c.contains("num_experts")) {
    cfg.num_experts = c["num_experts"];
    cfg.expert_mlp_dim = 5;
    cfg.activations = c["activations"].get<std::vector<std::string>>();
    cfg.max_group_size = c["max_group_size"];
    cfg.train_capacity_factor = cfg.eval_capacity_factor = c["capacity_factor"];
    cfg.min_expert_capacity = c["min_expert_capacity"];
  }
  return cfg;
}

const std::vector<std::string> kGTE = {"group", "token", "embed"};
const std::vector<std::string> kDispatch = {"group", "token", "expert", "expert_capacity"};

// E = 4 experts of `mlp` hidden units, gated GELU, top-2.
MoeConfig top2_config(int64_t mlp) {
  MoeConfig cfg;
  cfg.num_experts = 4;
  cfg.expert_mlp_dim = mlp;
  cfg.activations = {"gelu", "linear"};
  cfg.num_selected_experts = 2;
  return cfg;
}

TEST(MoeCapacity, RoundsHalfToEvenLikePython) {
  // R4: S = 4, E = 2, cf = 1.25 -> 2.5 -> 2 (std::round would give 3).
  EXPECT_EQ(expert_capacity(4, 2, 1.25, 0), 2);
  EXPECT_EQ(expert_capacity(12, 2, 1.25, 0), 8);   // 7.5 -> 8
  EXPECT_EQ(expert_capacity(4, 2, 1.25, 4), 4);    // the minimum applies after rounding
  EXPECT_EQ(expert_capacity(1024, 128, 1.25, 4), 10);
  EXPECT_EQ(expert_capacity(228, 128, 1.25, 4), 4);  // raw 2.23
}

TEST(MoeGroups, FlaxformerNumGroups) {
  EXPECT_EQ(num_groups(131072, 8192, 128, 1, false), 128);
  EXPECT_EQ(num_groups(131072, 4096, 64, 1, false), 64);
  EXPECT_EQ(num_groups(29184, 8192, 128, 1, false), 128);
  EXPECT_EQ(num_groups(128, 8192, 128, 1, false), 128);
  EXPECT_EQ(num_groups(16, 4096, 4, 1, false), 4);
  EXPECT_EQ(num_groups(16, 2, 4, 1, false), 8);  // 16 / 2 = 8 groups of 2
  EXPECT_EQ(num_groups(24, 4096, 4, 2, false), 8);
  EXPECT_THROW(num_groups(6, 4096, 4, 1, false), std::invalid_argument);
  EXPECT_THROW(num_groups(16, 8, 4, 1, true), std::invalid_argument);  // group size 4 != 8
  EXPECT_EQ(num_groups(32, 8, 4, 1, true), 4);
}

TEST(MoeLayer, ForwardAndGradientsRun) {
  MoeConfig cfg = top2_config(5);
  ParamTree p = init_params(moe_param_specs("mlp", 6, cfg), prng_key(0));
  Array x = normal(prng_key(1), Shape{{"batch", 2}, {"length", 7}, {"embed", 6}});
  Dropout drop;
  MoeMetrics m;
  Array y = moe_block(p, "mlp", x, cfg, false, std::nullopt, drop, &m);
  EXPECT_EQ(y.shape(), x.shape());
  auto g = value_and_grad(
      [&](const ParamTree& t) {
        MoeMetrics mm;
        Array out = moe_block(t, "mlp", x, cfg, true, std::nullopt, drop, &mm);
        return add(sum(square(out)), add(mm.auxiliary_loss, mm.router_z_loss));
      },
      p);
  for (const auto& [k, v] : g.grads) EXPECT_GT(max(abs(v)).item(), 0.0) << k;
}


TEST(MoeRouterGolden, DispatchCombineLossesAndGradientsMatchJax) {
  ASSERT_EQ(golden()["routers"].size(), 11u);
  for (const auto& c : golden()["routers"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    MoeConfig cfg = config_of(c["config"]);
    int64_t cap = c["capacity"];
    std::optional<PRNGKey> key;
    if (!c["jitter_key"].is_null()) key = PRNGKey{{c["jitter_key"][0].get<uint32_t>(), c["jitter_key"][1].get<uint32_t>()}};
    ParamTree t{{"x", from_json(c["inputs"], kGTE)}, {"w", from_json(c["kernel"], {"embed", "expert"})}};
    RouterOutput r = route(t["x"], t["w"], cfg, cap, key);
    ASSERT_EQ(r.dispatch.shape(), (Shape{{"group", 2}, {"token", 8}, {"expert", 4}, {"expert_capacity", cap}}));
    expect_close(r.dispatch, c["dispatch"], 0, 0, "dispatch");
    expect_close(r.combine, c["combine"], 1e-6, 1e-5, "combine");
    EXPECT_NEAR(r.auxiliary_loss.item(), c["auxiliary_loss"].get<double>(), 1e-5);
    EXPECT_NEAR(r.router_z_loss.item(), c["router_z_loss"].get<double>(), 1e-5 * c["router_z_loss"].get<double>());
    Array cot = from_json(c["cotangent"], kDispatch);
    auto g = value_and_grad(
        [&](const ParamTree& p) {
          RouterOutput o = route(p.at("x"), p.at("w"), cfg, cap, key);
          return add(sum(mul(o.combine, cot)), add(mul(o.auxiliary_loss, 0.5), mul(o.router_z_loss, 0.25)));
        },
        t);
    expect_close(g.grads["x"], c["grad_inputs"], 1e-5, 1e-4, "d/dinputs");
    expect_close(g.grads["w"], c["grad_kernel"], 1e-5, 1e-4, "d/dkernel");
  }
}

ParamTree layer_params(const json& c) {
  ParamTree p;
  for (const auto& [k, v] : c["params"].items()) {
    if (k == "router") p["mlp/router/router_weights/w/kernel"] = from_json(v, {"embed", "unmodeled"});
    else if (k == "wo") p["mlp/expert/wo/kernel"] = from_json(v, {"expert", "expert_mlp", "mlp_embed"});
    else p["mlp/expert/" + k + "/kernel"] = from_json(v, {"expert", "mlp_embed", "expert_mlp"});
  }
  return p;
}

TEST(MoeLayerGolden, ForwardMetricsAndGradientsMatchJax) {
  ASSERT_EQ(golden()["layers"].size(), 5u);
  for (const auto& c : golden()["layers"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    MoeConfig cfg = config_of(c["config"]);
    ParamTree p = layer_params(c);
    // The spec's shapes and names are those of the golden's parameters.
    for (const auto& s : moe_param_specs("mlp", 6, cfg)) {
      ASSERT_TRUE(p.count(s.name)) << s.name;
      EXPECT_EQ(p[s.name].shape(), s.shape) << s.name;
    }
    const std::vector<std::string> bld = {"batch", "length", "embed"};
    Array x = from_json(c["x"], bld), ycot = from_json(c["y_cotangent"], bld);
    Dropout drop;
    MoeMetrics m;
    Array y = moe_block(p, "mlp", x, cfg, false, std::nullopt, drop, &m);
    expect_close(y, c["y"], 1e-5, 1e-4, "y");
    const auto& gm = c["metrics"];
    EXPECT_NEAR(m.auxiliary_loss.item(), gm["auxiliary_loss"].get<double>(), 1e-5);
    EXPECT_NEAR(m.router_z_loss.item(), gm["router_z_loss"].get<double>(), 1e-5 * gm["router_z_loss"].get<double>());
    EXPECT_NEAR(m.fraction_tokens_left_behind.item(), gm["fraction_tokens_left_behind"].get<double>(), 1e-6);
    EXPECT_NEAR(m.router_confidence.item(), gm["router_confidence"].get<double>(), 1e-6);
    EXPECT_NEAR(m.expert_usage.item(), gm["expert_usage"].get<double>(), 1e-6);
    p["x"] = x;
    auto g = value_and_grad(
        [&](const ParamTree& t) {
          MoeMetrics mm;
          Array out = moe_block(t, "mlp", t.at("x"), cfg, false, std::nullopt, drop, &mm);
          return add(sum(mul(out, ycot)), add(mul(mm.auxiliary_loss, 0.5), mul(mm.router_z_loss, 0.25)));
        },
        p);
    expect_close(g.grads["x"], c["grad_x"], 1e-5, 1e-4, "d/dx");
    for (const auto& [k, v] : c["grad_params"].items()) {
      std::string name = k == "router" ? "mlp/router/router_weights/w/kernel" : "mlp/expert/" + k + "/kernel";
      expect_close(g.grads[name], v, 1e-5, 1e-4, "d/d" + name);
    }
  }
}

// A router on one-hot tokens: token t's logits are `scale` at expert
// expert_of(t), 0 elsewhere.
RouterOutput route_one_hot(int64_t G, int64_t S, int64_t E, double scale, const std::function<int64_t(int64_t)>& expert_of,
                           const MoeConfig& cfg, int64_t cap) {
  std::vector<float> x(size_t(G * S * E), 0.f);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t t = 0; t < S; ++t) x[size_t((g * S + t) * E + expert_of(t))] = 1.f;
  Array w = mul(Array::from_floats(Shape{{"embed", E}, {"expert", E}}, [&] {
    std::vector<float> v(size_t(E * E), 0.f);
    for (int64_t e = 0; e < E; ++e) v[size_t(e * E + e)] = 1.f;
    return v;
  }()), scale);
  return route(Array::from_floats(Shape{{"group", G}, {"token", S}, {"embed", E}}, x), w, cfg, cap, std::nullopt);
}

TEST(MoeRouter, R1BalancedRoutingGivesAuxOneAndCollapsedGivesE) {
  MoeConfig cfg;
  cfg.num_experts = 4;
  // Near-uniform probabilities, argmax spread evenly: aux = 1.
  auto r = route_one_hot(2, 8, 4, 1e-3, [](int64_t t) { return t % 4; }, cfg, 4);
  EXPECT_NEAR(r.auxiliary_loss.item(), 1.0, 1e-6);
  // Every token on expert 0 with probability ~1: aux = E.
  auto c = route_one_hot(2, 8, 4, 50.0, [](int64_t) { return 0; }, cfg, 4);
  EXPECT_NEAR(c.auxiliary_loss.item(), 4.0, 1e-5);
  // Top-2 at uniform balance: aux = k.
  cfg.num_selected_experts = 2;
  auto k2 = route_one_hot(2, 8, 4, 1e-3, [](int64_t t) { return t % 4; }, cfg, 4);
  EXPECT_NEAR(k2.auxiliary_loss.item(), 2.0, 1e-5);
}

TEST(MoeRouter, R2ScatterEqualsMaskedWithoutPadding) {
  MoeConfig cfg = top2_config(5);
  cfg.train_capacity_factor = 1.0;
  cfg.min_expert_capacity = 1;
  cfg.max_group_size = 8;
  ParamTree p = init_params(moe_param_specs("mlp", 6, cfg), prng_key(3));
  p["mlp/router/router_weights/w/kernel"] = mul(p["mlp/router/router_weights/w/kernel"], 40.0);
  Array x = normal(prng_key(4), Shape{{"batch", 4}, {"length", 8}, {"embed", 6}});
  Dropout drop;
  for (bool bpr : {false, true}) {
    cfg.batch_prioritized_routing = bpr;
    MoeMetrics mm, ms;
    cfg.router = RouterType::kTokensChooseMasked;
    Array ym = moe_block(p, "mlp", x, cfg, true, std::nullopt, drop, &mm);
    cfg.router = RouterType::kTokensChooseScatter;
    Array ys = moe_block(p, "mlp", x, cfg, true, std::nullopt, drop, &ms);
    EXPECT_TRUE(array_equal(ym, ys)) << "bpr " << bpr;
    EXPECT_EQ(mm.fraction_tokens_left_behind.item(), ms.fraction_tokens_left_behind.item());
    EXPECT_GT(mm.fraction_tokens_left_behind.item(), 0.0);  // capacity dropped tokens
    EXPECT_EQ(mm.auxiliary_loss.item(), ms.auxiliary_loss.item());
  }
}

TEST(MoeRouter, R3CapacityRespectedAndTop1ChoicesTakeTheLowestSlots) {
  MoeConfig cfg;
  cfg.num_experts = 4;
  cfg.num_selected_experts = 2;
  const int64_t G = 2, S = 32, E = 4, C = 6;
  Array x = normal(prng_key(5), Shape{{"group", G}, {"token", S}, {"embed", 6}});
  Array w = mul(normal(prng_key(6), Shape{{"embed", 6}, {"expert", E}}), 2.0);
  for (bool bpr : {false, true}) {
    cfg.batch_prioritized_routing = bpr;
    RouterOutput r = route(x, w, cfg, C, std::nullopt);
    auto d = r.dispatch.to_floats();
    auto top1 = argmax(softmax(einsum(x, w, {"group", "token", "expert"}), "expert"), "expert").to_ints();
    int dropped = 0;
    for (int64_t g = 0; g < G; ++g)
      for (int64_t e = 0; e < E; ++e) {
        int64_t max_top1_slot = -1, min_top2_slot = C;
        for (int64_t c = 0; c < C; ++c) {
          int n = 0;
          for (int64_t t = 0; t < S; ++t) {
            if (d[size_t(((g * S + t) * E + e) * C + c)] == 0.f) continue;
            ++n;
            if (top1[size_t(g * S + t)] == e) max_top1_slot = std::max(max_top1_slot, c);
            else min_top2_slot = std::min(min_top2_slot, c);
          }
          EXPECT_LE(n, 1) << "slot " << c << " of expert " << e << " holds " << n << " tokens";
        }
        EXPECT_LT(max_top1_slot, min_top2_slot) << "group " << g << " expert " << e;
      }
    for (int64_t g = 0; g < G; ++g)
      for (int64_t t = 0; t < S; ++t) {
        float routed = 0;
        for (int64_t i = 0; i < E * C; ++i) routed += d[size_t((g * S + t) * E * C + i)];
        EXPECT_LE(routed, 2.f);
        dropped += routed < 2.f;
      }
    EXPECT_GT(dropped, 0) << "the case must overflow some expert";
  }
}

TEST(MoeRouter, R5PaddingRowsAddLnESquaredToZ) {
  MoeConfig cfg;
  cfg.num_experts = 4;
  cfg.num_selected_experts = 2;
  cfg.ignore_padding_tokens = true;
  Array x = normal(prng_key(7), Shape{{"group", 1}, {"token", 4}, {"embed", 6}});
  Array w = normal(prng_key(8), Shape{{"embed", 6}, {"expert", 4}});
  Array keep = Array::from_floats(Shape{{"token", 4}}, {1, 0, 1, 0});
  x = mul(x, keep);
  RouterOutput r = route(x, w, cfg, 4, std::nullopt);
  auto lse = logsumexp(einsum(x, w, {"group", "token", "expert"}), {"expert"}).to_floats();
  double ln4 = std::log(4.0);
  double want = (double(lse[0]) * lse[0] + double(lse[2]) * lse[2] + 2 * ln4 * ln4) / 4.0;
  EXPECT_NEAR(r.router_z_loss.item(), want, 1e-5);
  // Padding is never dispatched by the masked router.
  auto d = sum(r.dispatch, {"group", "expert", "expert_capacity"}).to_floats();
  EXPECT_EQ(d, (std::vector<float>{2, 0, 2, 0}));
}

TEST(MoeLayer, ParamSpecsFollowT5xNamesAndExpertInit) {
  MoeConfig cfg;
  cfg.num_experts = 8;
  cfg.expert_mlp_dim = 64;
  cfg.activations = {"gelu", "linear"};
  cfg.expert_init_scale = 0.1;
  ParamSpecs s = moe_param_specs("encoder/layers_1/mlp", 32, cfg);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].name, "encoder/layers_1/mlp/router/router_weights/w/kernel");
  EXPECT_EQ(s[1].name, "encoder/layers_1/mlp/expert/wi_0/kernel");
  EXPECT_EQ(s[3].name, "encoder/layers_1/mlp/expert/wo/kernel");
  EXPECT_EQ(s[3].shape, (Shape{{"expert", 8}, {"expert_mlp", 64}, {"mlp_embed", 32}}));
  ParamTree p = init_params(s, prng_key(0));
  auto sd = [](const Array& a) { return std::sqrt(mean(square(a)).item()); };
  EXPECT_NEAR(sd(p[s[0].name]), 0.02, 0.002);
  EXPECT_NEAR(sd(p[s[1].name]), std::sqrt(0.1 / 32), 0.003);  // each expert's fan_in = mlp_embed
  EXPECT_NEAR(sd(p[s[3].name]), std::sqrt(0.1 / 64), 0.002);  // fan_in = expert_mlp
}


TEST(MoeLayer, Bfloat16ExpertsAndDropout) {
  MoeConfig cfg = top2_config(16);
  ParamTree p = init_params(moe_param_specs("mlp", 8, cfg), prng_key(9));
  Array x = normal(prng_key(10), Shape{{"batch", 2}, {"length", 8}, {"embed", 8}});
  Dropout none;
  Array y32 = moe_block(p, "mlp", x, cfg, false, std::nullopt, none, nullptr);
  cfg.dtype = DType::bf16;
  Array y16 = moe_block(p, "mlp", cast(x, DType::bf16), cfg, false, std::nullopt, none, nullptr);
  EXPECT_EQ(y16.dtype(), DType::bf16);
  EXPECT_LT(max_abs_diff(cast(y16, DType::f32), y32), 0.02 * max(abs(y32)).item());
  EXPECT_GT(max_abs_diff(cast(y16, DType::f32), y32), 0.0);
  // The router runs in float32 on bf16 inputs: the same as routing their f32 values.
  Array xg = reshape(cast(x, DType::bf16), Shape{{"group", 4}, {"token", 4}, {"embed", 8}});
  RouterOutput rb = route(xg, p["mlp/router/router_weights/w/kernel"], cfg, 2, std::nullopt);
  RouterOutput rf = route(cast(xg, DType::f32), p["mlp/router/router_weights/w/kernel"], cfg, 2, std::nullopt);
  EXPECT_EQ(rb.combine.dtype(), DType::f32);
  EXPECT_TRUE(array_equal(rb.combine, rf.combine));
  EXPECT_EQ(rb.router_z_loss.item(), rf.router_z_loss.item());
  // Dropout after the activations: the key decides, the same key repeats.
  cfg.dtype = DType::f32;
  Dropout d1(0.5, prng_key(11)), d2(0.5, prng_key(11));
  Array a = moe_block(p, "mlp", x, cfg, true, std::nullopt, d1, nullptr);
  Array b = moe_block(p, "mlp", x, cfg, true, std::nullopt, d2, nullptr);
  Array c = moe_block(p, "mlp", x, cfg, true, std::nullopt, none, nullptr);
  EXPECT_TRUE(array_equal(a, b));
  EXPECT_GT(max_abs_diff(a, c), 1e-3);
}


TEST(MoeLayer, BadInputsGiveClearErrors) {
  MoeConfig cfg = top2_config(5);
  ParamTree p = init_params(moe_param_specs("mlp", 6, cfg), prng_key(0));
  Array x = normal(prng_key(1), Shape{{"batch", 2}, {"length", 4}, {"embed", 6}});
  Dropout none;
  MoeConfig wrong = cfg;
  wrong.num_experts = 8;
  try {
    moe_block(p, "mlp", x, wrong, false, std::nullopt, none, nullptr);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[moe] mlp/router/router_weights/w/kernel"), std::string::npos) << e.what();
  }
  // Experts-choose with capacity above the group size (2 tokens per group here).
  cfg.router = RouterType::kExpertsChooseMasked;
  try {
    moe_block(p, "mlp", x, cfg, false, std::nullopt, none, nullptr);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("expert_capacity <= tokens per group"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace t5x::nn
