// Resharding plans as pure logic, checked against the formulas of
// sharding.md (sections 0, 1.3 and 3.6). Values are checked under MPI in
// mpi_collectives_test.cpp.
#include "mesh/reshard.h"

#include <gtest/gtest.h>

#include <numeric>

namespace t5x {
namespace {

PartitionSpec P(std::vector<std::vector<std::string>> d) { return PartitionSpec(std::move(d)); }
const std::vector<std::string> kD{"data"}, kM{"model"}, kN{};

TEST(ReshardPlan, EqualSpecsMoveNothing) {
  MeshDesc mesh{{"data", "model"}, {2, 2}, 0};
  auto plan = plan_reshard(mesh, {{"b", 8}, {"e", 4}}, P({kD, kM}), P({kD, kM}), 4);
  EXPECT_TRUE(plan.steps.empty());
  EXPECT_EQ(plan.total_bytes(), 0.0);
}

TEST(ReshardPlan, GatherAndSliceAreInverse) {
  // sharding.md T1.5: unsplitting a dim is an all-gather of S_loc*(k-1) bytes;
  // the reverse is a local slice.
  MeshDesc mesh{{"data", "model"}, {2, 4}, 0};
  NamedShape s{{"b", 8}, {"e", 16}};
  auto gather = plan_reshard(mesh, s, P({kN, kM}), P({kN, kN}), 4);
  ASSERT_EQ(gather.steps.size(), 1u);
  EXPECT_EQ(gather.steps[0].kind, ReshardKind::kAllGather);
  EXPECT_EQ(gather.steps[0].axis, "model");
  EXPECT_EQ(gather.steps[0].dim, 1);
  const double s_loc = 8 * 4 * 4;
  EXPECT_DOUBLE_EQ(gather.total_bytes(), s_loc * 3);
  auto slice = plan_reshard(mesh, s, P({kN, kN}), P({kN, kM}), 4);
  ASSERT_EQ(slice.steps.size(), 1u);
  EXPECT_EQ(slice.steps[0].kind, ReshardKind::kSlice);
  EXPECT_EQ(slice.total_bytes(), 0.0);
  EXPECT_EQ(slice.steps[0].local_after, (std::vector<int64_t>{8, 4}));
}

TEST(ReshardPlan, MovingASplitIsOneAllToAll) {
  // sharding.md T1.6 / T3.6: n shards on dim i -> n shards on dim j is one
  // all-to-all of S_loc*(k-1)/k bytes.
  MeshDesc mesh{{"data", "model"}, {2, 4}, 0};
  NamedShape s{{"b", 8}, {"l", 4}, {"e", 16}};
  auto plan = plan_reshard(mesh, s, P({kD, kN, kM}), P({kD, kM, kN}), 2);
  ASSERT_EQ(plan.steps.size(), 1u);
  const auto& st = plan.steps[0];
  EXPECT_EQ(st.kind, ReshardKind::kAllToAll);
  EXPECT_EQ(st.axis, "model");
  EXPECT_EQ(st.dim, 2);
  EXPECT_EQ(st.split_dim, 1);
  EXPECT_EQ(st.local_before, (std::vector<int64_t>{4, 4, 4}));
  EXPECT_EQ(st.local_after, (std::vector<int64_t>{4, 1, 16}));
  const double s_loc = 4 * 4 * 4 * 2;
  EXPECT_DOUBLE_EQ(plan.total_bytes(), s_loc * 3 / 4);
}

TEST(ReshardPlan, DeviceOrderChangeIsOnePermute) {
  // Same tile counts, other device order (GSPMD: collective-permute). On 2x2,
  // P(data, model) -> P(model, data): device (d, m) needs the block of (m, d).
  MeshDesc mesh{{"data", "model"}, {2, 2}, 1};
  NamedShape s{{"b", 8}, {"e", 8}};
  auto plan = plan_reshard(mesh, s, P({kD, kM}), P({kM, kD}), 4);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].kind, ReshardKind::kPermute);
  EXPECT_EQ(plan.steps[0].pairs, (std::vector<std::pair<int, int>>{{0, 0}, {2, 1}, {1, 2}, {3, 3}}));
  EXPECT_DOUBLE_EQ(plan.total_bytes(), 16 * 4);  // device 1 sends its 16-element shard to device 2
  mesh.device_id = 3;                             // device 3 keeps its block
  EXPECT_DOUBLE_EQ(plan_reshard(mesh, s, P({kD, kM}), P({kM, kD}), 4).total_bytes(), 0.0);
}

TEST(ReshardPlan, MultiAxisOrderChange) {
  // (data, model) -> (model, data) on one dim: shard index d*2+m becomes m*2+d.
  MeshDesc mesh{{"data", "model"}, {2, 2}, 0};
  auto plan = plan_reshard(mesh, {{"b", 8}}, P({{"data", "model"}}), P({{"model", "data"}}), 4);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].kind, ReshardKind::kPermute);
  EXPECT_EQ(plan.steps[0].pairs, (std::vector<std::pair<int, int>>{{0, 0}, {2, 1}, {1, 2}, {3, 3}}));
}

TEST(ReshardPlan, GatherThenMoveWhenTileCountsDiffer) {
  // P(data, model) -> P(model, None): data is peeled by an all-gather, then
  // model moves from dim 1 to dim 0 by an all-to-all.
  MeshDesc mesh{{"data", "model"}, {2, 2}, 0};
  auto plan = plan_reshard(mesh, {{"b", 8}, {"e", 8}}, P({kD, kM}), P({kM, kN}), 4);
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, ReshardKind::kAllGather);
  EXPECT_EQ(plan.steps[0].axis, "data");
  EXPECT_EQ(plan.steps[1].kind, ReshardKind::kAllToAll);
  EXPECT_EQ(plan.steps[1].axis, "model");
  // gather of 16 elements over 2 (64 B) + all-to-all of 32 elements over 2 (64 B).
  EXPECT_DOUBLE_EQ(plan.total_bytes(), 16 * 4 * 1 + 32 * 4 * 0.5);
}

TEST(ReshardPlan, EveryPairReachesTargetThroughValidSteps) {
  // sharding.md T3.12 (plan half): all (src, dst) pairs of 2-D specs on 2x2
  // and 4x2 meshes. Each step's shapes chain, every intermediate spec is
  // valid, bytes follow the formulas, and single-axis cases are minimal.
  for (MeshDesc mesh : {MeshDesc{{"data", "model"}, {2, 2}, 0}, MeshDesc{{"data", "model"}, {4, 2}, 0}}) {
    NamedShape s{{"b", 16}, {"e", 8}};
    std::vector<PartitionSpec> specs;
    const std::vector<std::vector<std::string>> options{
        {}, {"data"}, {"model"}, {"data", "model"}, {"model", "data"}};
    for (const auto& a : options)
      for (const auto& b : options) {
        PartitionSpec p = P({a, b});
        try {
          validate_partition_spec(mesh, s, p);
          specs.push_back(p);
        } catch (const std::invalid_argument&) {
        }
      }
    ASSERT_GE(specs.size(), 9u);
    for (const auto& src : specs)
      for (const auto& dst : specs) {
        auto plan = plan_reshard(mesh, s, src, dst, 4);
        SCOPED_TRACE(plan.to_string());
        auto loc = local_shape(mesh, s, src);
        PartitionSpec cur = src;
        for (const auto& st : plan.steps) {
          EXPECT_EQ(st.local_before, loc);
          EXPECT_NO_THROW(validate_partition_spec(mesh, s, st.spec_after));
          const double s_loc = double(loc[0] * loc[1] * 4), k = double(st.group_size);
          const double want = st.kind == ReshardKind::kAllGather  ? s_loc * (k - 1)
                              : st.kind == ReshardKind::kAllToAll ? s_loc * (k - 1) / k
                                                                  : 0.0;
          if (st.kind == ReshardKind::kPermute) {
            EXPECT_EQ(plan.steps.size(), 1u);
            EXPECT_TRUE(st.bytes == 0.0 || st.bytes == s_loc);
            EXPECT_EQ(st.pairs.size(), size_t(mesh.num_devices()));
          } else {
            EXPECT_DOUBLE_EQ(st.bytes, want);
          }
          loc = st.local_after;
          cur = st.spec_after;
        }
        EXPECT_EQ(cur, dst);
        EXPECT_EQ(loc, local_shape(mesh, s, dst));
        EXPECT_LE(plan.steps.size(), 8u);
        // Pure additions are free slices.
        bool only_adds = true;
        for (size_t d = 0; d < 2; ++d)
          for (size_t i = 0; i < src.dims[d].size(); ++i)
            only_adds &= i < dst.dims[d].size() && dst.dims[d][i] == src.dims[d][i];
        if (only_adds) {
          EXPECT_EQ(plan.total_bytes(), 0.0);
        }
      }
  }
}

TEST(ReshardPlan, ErrorsFromValidation) {
  MeshDesc mesh{{"data", "model"}, {2, 2}, 0};
  EXPECT_THROW(plan_reshard(mesh, {{"b", 3}}, P({kN}), P({kD}), 4), std::invalid_argument);
  EXPECT_THROW(plan_reshard(mesh, {{"b", 4}}, P({{"expert"}}), P({kD}), 4), std::invalid_argument);
}

TEST(ReshardPlan, SingleDeviceExecutionIsACopy) {
  Mesh mesh({1, 1});
  MeshGroups groups(mesh, make_single_communicator());
  NamedShape s{{"b", 2}, {"e", 3}};
  auto plan = plan_reshard(mesh.desc(), s, P({kD, kN}), P({kN, kM}), 4);
  EXPECT_EQ(plan.total_bytes(), 0.0);  // groups of one move nothing
  std::vector<float> in(6), out(6);
  std::iota(in.begin(), in.end(), 1.f);
  execute_reshard(plan, groups, in.data(), out.data(), CommDtype::kF32);
  EXPECT_EQ(out, in);
  EXPECT_EQ(groups.total_counters().total_bytes(), 0.0);
}

}  // namespace
}  // namespace t5x
