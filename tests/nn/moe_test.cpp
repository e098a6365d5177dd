// Mixture-of-Experts: capacity and groups, the routers (moe.md R1-R5) and the
// layer against JAX goldens (scripts/golden/moe_routing.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nn/moe.h"
#include "ops/ops.h"

namespace t5x::nn {
namespace {

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
  MoeConfig cfg;
  cfg.num_experts = 4;
  cfg.expert_mlp_dim = 5;
  cfg.activations = {"gelu", "linear"};
  cfg.num_selected_experts = 2;
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

}  // namespace
}  // namespace t5x::nn
