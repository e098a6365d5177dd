#include "mesh/logical_axis_rules.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "mesh/partition_spec.h"

namespace t5x {
namespace {

PartitionSpec P(std::vector<std::vector<std::string>> d) { return PartitionSpec(std::move(d)); }
const std::vector<std::string> kData{"data"}, kModel{"model"}, kNone{};

TEST(LogicalAxisRules, PriorityFirstFreeMeshAxisWins) {
  // sharding.md T4.1 / T4.2.
  LogicalAxisRules rules{{"head", kModel}, {"embed", kModel}, {"embed", kData}, {"vocab", kModel}};
  EXPECT_EQ(logical_to_mesh_axes({"embed", "head"}, rules), P({kData, kModel}));
  EXPECT_EQ(logical_to_mesh_axes({"vocab", "embed"}, rules), P({kNone, kModel}));
}

TEST(LogicalAxisRules, UnmatchedAfterConflictIsUnsharded) {
  // sharding.md T4.3: batch's second rule Z is never reached (batch already has X);
  // features loses X to batch and has no other rule.
  LogicalAxisRules rules{{"batch", {"X"}}, {"features", {"X"}}, {"heads", {"Y"}}, {"batch", {"Z"}}};
  EXPECT_EQ(logical_to_mesh_axes({"batch", "length", "heads", "features"}, rules),
            P({{"X"}, kNone, {"Y"}, kNone}));
}

TEST(LogicalAxisRules, NoneRuleBlocksLaterRules) {
  LogicalAxisRules rules{{"embed", kNone}, {"embed", kData}};
  EXPECT_EQ(logical_to_mesh_axes({"embed"}, rules), P({kNone}));
  LogicalAxisRules reversed{{"embed", kData}, {"embed", kNone}};
  EXPECT_EQ(logical_to_mesh_axes({"embed"}, reversed), P({kData}));
}

TEST(LogicalAxisRules, TupleOfMeshAxes) {
  LogicalAxisRules rules{{"batch", {"replica", "data"}}, {"embed", kData}, {"embed", kModel}};
  EXPECT_EQ(logical_to_mesh_axes({"batch", "embed"}, rules), P({{"replica", "data"}, kModel}));
  // A tuple rule is blocked if ANY of its axes is taken.
  LogicalAxisRules r2{{"embed", kData}, {"batch", {"replica", "data"}}, {"batch", {"replica"}}};
  EXPECT_EQ(logical_to_mesh_axes({"batch", "embed"}, r2), P({{"replica"}, kData}));
}

TEST(LogicalAxisRules, UnknownNamesAndEmptyNames) {
  auto rules = standard_logical_axis_rules();
  // Default fallback: names without a rule are unsharded, not an error (flax).
  EXPECT_EQ(logical_to_mesh_axes({"batch", "my_dim", ""}, rules), P({kData, kNone, kNone}));
  try {
    logical_to_mesh_axes({"batch", "my_dim"}, rules, RulesFallback::kRaiseError);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("did not match a rule: 'my_dim'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(logical_to_mesh_axes({"batch", "my_dim"}, rules, RulesFallback::kNoConstraint).has_value());
  // All names matched: every fallback gives the same spec.
  for (auto fb : {RulesFallback::kAxisIsUnsharded, RulesFallback::kRaiseError, RulesFallback::kNoConstraint})
    EXPECT_EQ(*logical_to_mesh_axes({"batch", "length", "mlp"}, rules, fb), P({kData, kNone, kModel}));
}

TEST(LogicalAxisRules, DuplicateNamesAreAnError) {
  try {
    logical_to_mesh_axes({"embed", "embed"}, standard_logical_axis_rules());
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'embed' occur more than once"), std::string::npos) << e.what();
  }
  // Empty (None) names may repeat.
  EXPECT_EQ(logical_to_mesh_axes({"", ""}, standard_logical_axis_rules()), P({kNone, kNone}));
}

struct PresetCase {
  int act, param;
  PartitionSpec weight_embed_mlp, activation, embedding_vocab_embed, attn_out_joined_kv_embed;
};

TEST(LogicalAxisRules, StandardPresetsMatchT5x) {
  // sharding.md 4.3 table, plus the T5 embedding (vocab, embed) and attention
  // out kernel (joined_kv, embed).
  std::vector<PresetCase> cases = {
      {1, 1, P({kNone, kModel}), P({kData, kNone, kNone}), P({kModel, kNone}), P({kModel, kNone})},
      {2, 1, P({kNone, kModel}), P({kData, kNone, kModel}), P({kModel, kNone}), P({kModel, kNone})},
      {1, 2, P({kData, kModel}), P({kData, kNone, kNone}), P({kModel, kData}), P({kModel, kData})},
      {2, 2, P({kData, kModel}), P({kData, kNone, kModel}), P({kModel, kData}), P({kModel, kData})},
  };
  for (const auto& c : cases) {
    auto rules = standard_logical_axis_rules(c.act, c.param);
    SCOPED_TRACE(rules_to_string(rules));
    EXPECT_EQ(logical_to_mesh_axes({"embed", "mlp"}, rules), c.weight_embed_mlp);
    EXPECT_EQ(logical_to_mesh_axes({"batch", "length", "embed"}, rules), c.activation);
    EXPECT_EQ(logical_to_mesh_axes({"vocab", "embed"}, rules), c.embedding_vocab_embed);
    EXPECT_EQ(logical_to_mesh_axes({"joined_kv", "embed"}, rules), c.attn_out_joined_kv_embed);
    EXPECT_EQ(logical_to_mesh_axes({"batch", "length", "heads", "kv"}, rules), P({kData, kNone, kModel, kNone}));
    EXPECT_EQ(logical_to_mesh_axes({"heads", "relpos_buckets"}, rules), P({kModel, kNone}));
    // Every rule of a preset resolves to nothing but data / model / None.
    for (const auto& r : rules)
      for (const auto& a : r.mesh_axes) EXPECT_TRUE(a == "data" || a == "model");
  }
}

TEST(LogicalAxisRules, PresetListsAreExact) {
  auto r11 = standard_logical_axis_rules(1, 1);
  EXPECT_EQ(rules_to_string(r11),
            "[(batch, data), (vocab, model), (embed, None), (mlp, model), (heads, model), (kv, None), "
            "(joined_kv, model), (relpos_buckets, None), (abspos_buckets, None), (length, None), (layers, None), "
            "(stack, None), (mlp_activations, None), (kv_heads, model)]");
  auto r22 = standard_logical_axis_rules(2, 2);
  ASSERT_EQ(r22.size(), 15u);
  EXPECT_EQ(r22[6], (AxisRule{"embed", kModel}));
  EXPECT_EQ(r22[7], (AxisRule{"embed", kData}));
  auto r12 = standard_logical_axis_rules(1, 2);
  EXPECT_EQ(r12[6], (AxisRule{"embed", kData}));
  auto r21 = standard_logical_axis_rules(2, 1);
  EXPECT_EQ(r21[6], (AxisRule{"embed", kModel}));
  EXPECT_EQ(r21[7], (AxisRule{"relpos_buckets", kNone}));
  // additional_rules come last.
  auto extra = standard_logical_axis_rules(1, 1, {{"expert", kData}});
  EXPECT_EQ(extra.back(), (AxisRule{"expert", kData}));
  EXPECT_EQ(extra.size(), r11.size() + 1);
  EXPECT_THROW(standard_logical_axis_rules(3, 1), std::invalid_argument);
  EXPECT_THROW(standard_logical_axis_rules(1, 0), std::invalid_argument);
}

TEST(LogicalAxisRules, LogicalShardingBindsMeshAndSpec) {
  auto mesh = std::make_shared<const MeshDesc>(MeshDesc{{"data", "model"}, {2, 4}, 3});
  Sharding s = logical_sharding(mesh, {{"batch", 8}, {"length", 16}, {"embed", 512}},
                                standard_logical_axis_rules(2, 2));
  EXPECT_EQ(s.spec, P({kData, kNone, kModel}));
  EXPECT_EQ(s.mesh, mesh);
  EXPECT_FALSE(s.is_single_device());
  try {
    logical_sharding(mesh, {{"batch", 8}, {"mlp", 6}}, standard_logical_axis_rules());
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("dim 1 'mlp' of size 6 is not divisible by 4"), std::string::npos) << m;
    EXPECT_NE(m.find("spec P('data', 'model') from the logical-axis rules"), std::string::npos) << m;
  }
}

// Grouped-query K/V kernels [embed, kv_heads, kv]: split over 'model' when
// it divides kv_heads, replicated when it does not (MQA, G < |model|); any
// other indivisible dim is still an error.
TEST(LogicalAxisRules, KvHeadsSplitWhenDivisibleElseReplicated) {
  const auto rules = standard_logical_axis_rules(1, 2);
  for (int64_t model : {2, 4}) {
    auto mesh = std::make_shared<const MeshDesc>(MeshDesc{{"data", "model"}, {2, model}, 0});
    for (int64_t g : {1, 2, 4, 8}) {
      SCOPED_TRACE("model " + std::to_string(model) + ", kv_heads " + std::to_string(g));
      Sharding s = logical_sharding(mesh, {{"embed", 8}, {"kv_heads", g}, {"kv", 3}}, rules);
      EXPECT_EQ(s.spec, P({kData, g % model == 0 ? kModel : kNone, kNone}));
    }
  }
  auto mesh = std::make_shared<const MeshDesc>(MeshDesc{{"data", "model"}, {2, 2}, 0});
  EXPECT_THROW(logical_sharding(mesh, {{"heads", 3}, {"kv", 4}}, rules), std::invalid_argument);
}

TEST(LogicalAxisRules, MoeRules) {
  auto rules = moe_logical_axis_rules(1, 1, {{"additional", kModel}, {"batch", kData}});
  const auto base = standard_logical_axis_rules(1, 1);
  ASSERT_EQ(rules.size(), base.size() + 4 + 2);
  EXPECT_EQ(rules[0], (AxisRule{"batch", {"expert", "data"}}));
  EXPECT_EQ(rules[base.size()], (AxisRule{"expert", {"expert"}}));
  EXPECT_EQ(rules[base.size() + 2], (AxisRule{"expert_replicas", kData}));
  EXPECT_EQ(rules.back(), (AxisRule{"batch", {"expert", "data"}}));  // additional rules are rewritten too
  const std::vector<std::string> ed{"expert", "data"}, ex{"expert"};
  EXPECT_EQ(logical_to_mesh_axes({"batch", "length", "embed"}, rules), P({ed, kNone, kNone}));
  // Expert kernels: experts over 'expert', hidden over 'model'.
  EXPECT_EQ(logical_to_mesh_axes({"expert", "embed", "expert_mlp"}, rules), P({ex, kNone, kModel}));
  // Dispatched activations: groups keep 'data' once 'expert' is taken by the expert dim.
  EXPECT_EQ(logical_to_mesh_axes({"expert", "expert_replicas", "unmodeled"}, rules), P({ex, kData, kNone}));
}

TEST(LogicalAxisRules, ResolvedSpecsValidateOnMesh) {
  // ZeRO-3 (1,2): weights sharded over data x model -> 1/(|data||model|) per device (T4.4).
  MeshDesc mesh{{"data", "model"}, {2, 2}, 0};
  auto rules = standard_logical_axis_rules(1, 2);
  NamedShape w{{"embed", 512}, {"mlp", 2048}};
  PartitionSpec spec = logical_to_mesh_axes({"embed", "mlp"}, rules);
  auto loc = local_shape(mesh, w, spec);
  EXPECT_EQ(loc[0] * loc[1] * 4, 512 * 2048);
}

}  // namespace
}  // namespace t5x
