#include "mesh/partition_spec.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

#include "mesh/mesh.h"
#include "mesh/reshard.h"

namespace t5x {
namespace {

PartitionSpec P(std::vector<std::vector<std::string>> d) { return PartitionSpec(std::move(d)); }
const MeshDesc kMesh{{"data", "model"}, {2, 4}, 0};

std::string error_of(const NamedShape& s, const PartitionSpec& p, const MeshDesc& m = kMesh) {
  try {
    validate_partition_spec(m, s, p);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(PartitionSpec, ValidationErrorsNameDimAndAxis) {
  NamedShape s{{"batch", 8}, {"embed", 12}};
  EXPECT_EQ(error_of(s, P({{"data"}, {"model"}})), "");
  std::string e = error_of(s, P({{"data"}, {"modle"}}));
  EXPECT_NE(e.find("dim 1 'embed'"), std::string::npos) << e;
  EXPECT_NE(e.find("mesh axis 'modle'"), std::string::npos) << e;
  e = error_of(s, P({{"model"}, {"model"}}));
  EXPECT_NE(e.find("mesh axis 'model' splits both dim 0 'batch' and dim 1 'embed'"), std::string::npos) << e;
  e = error_of(s, P({{"data", "data"}, {}}));
  EXPECT_NE(e.find("'data' appears twice in the spec of dim 0 'batch'"), std::string::npos) << e;
  e = error_of({{"batch", 8}, {"embed", 10}}, P({{}, {"model"}}));
  EXPECT_NE(e.find("dim 1 'embed' of size 10 is not divisible by 4, the size of mesh axis 'model'"),
            std::string::npos)
      << e;
  e = error_of({{"batch", 12}, {"embed", 8}}, P({{"data", "model"}, {}}));
  EXPECT_NE(e.find("not divisible by 8, the size of mesh axis ('data', 'model')"), std::string::npos) << e;
  e = error_of(s, P({{"data"}}));
  EXPECT_NE(e.find("has 1 entries but the array [batch=8, embed=12] has rank 2"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("[sharding] ", 0), 0u);
}

TEST(PartitionSpec, LocalShapeAndOffsets) {
  NamedShape s{{"batch", 8}, {"embed", 12}};
  EXPECT_EQ(local_shape(kMesh, s, P({{"data"}, {"model"}})), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(local_shape(kMesh, s, P({{}, {}})), (std::vector<int64_t>{8, 12}));
  // device 6 = (data=1, model=2)
  EXPECT_EQ(shard_offset(kMesh, s, P({{"data"}, {"model"}}), 6), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(shard_offset(kMesh, s, P({{"model"}, {}}), 6), (std::vector<int64_t>{4, 0}));
}

TEST(PartitionSpec, MultiAxisDimIsMajorToMinor) {
  NamedShape s{{"batch", 16}};
  // (data, model): index = data*4 + model; (model, data): index = model*2 + data.
  for (int64_t dev = 0; dev < 8; ++dev) {
    int64_t d = dev / 4, m = dev % 4;
    EXPECT_EQ(shard_offset(kMesh, s, P({{"data", "model"}}), dev)[0], (d * 4 + m) * 2);
    EXPECT_EQ(shard_offset(kMesh, s, P({{"model", "data"}}), dev)[0], (m * 2 + d) * 2);
  }
  EXPECT_EQ(num_shards(kMesh, P({{"data", "model"}})), (std::vector<int64_t>{8}));
}

TEST(PartitionSpec, ReplicasHoldIdenticalSlices) {
  // sharding.md T1.3: devices differing only on unused axes hold the same slice;
  // replica_id numbers the copies 0..k-1.
  NamedShape s{{"batch", 8}, {"embed", 12}};
  PartitionSpec p = P({{"data"}, {}});
  EXPECT_EQ(replicated_axes(kMesh, p), (std::vector<std::string>{"model"}));
  Mesh mesh(kMesh);
  for (const auto& group : mesh.groups({"model"})) {
    for (size_t i = 0; i < group.size(); ++i) {
      EXPECT_EQ(shard_offset(kMesh, s, p, group[i]), shard_offset(kMesh, s, p, group[0]));
      EXPECT_EQ(replica_id(kMesh, p, group[i]), int64_t(i));
    }
  }
  EXPECT_EQ(replica_id(kMesh, P({{"data"}, {"model"}}), 7), 0);
}

TEST(PartitionSpec, ExtractedShardsTileTheArray) {
  // sharding.md T1.2: slicing then combining round-trips exactly. Every global
  // element appears in exactly |replicated axes| shards, at its own offset.
  NamedShape s{{"a", 4}, {"b", 6}, {"c", 8}};
  std::vector<float> global(4 * 6 * 8);
  std::iota(global.begin(), global.end(), 0.f);
  for (const PartitionSpec& p : {P({{"data"}, {}, {"model"}}), P({{}, {"data"}, {}}), P({{"model"}, {}, {"data"}}),
                                 P({{}, {}, {"data", "model"}})}) {
    std::vector<int> hits(global.size(), 0);
    auto loc = local_shape(kMesh, s, p);
    std::vector<float> shard(loc[0] * loc[1] * loc[2]);
    for (int64_t dev = 0; dev < 8; ++dev) {
      extract_shard(kMesh, s, p, dev, global.data(), shard.data(), sizeof(float));
      auto off = shard_offset(kMesh, s, p, dev);
      for (int64_t i = 0; i < loc[0]; ++i)
        for (int64_t j = 0; j < loc[1]; ++j)
          for (int64_t k = 0; k < loc[2]; ++k) {
            int64_t g = ((off[0] + i) * 6 + off[1] + j) * 8 + off[2] + k;
            ASSERT_EQ(shard[(i * loc[1] + j) * loc[2] + k], global[g]) << spec_to_string(p);
            ++hits[g];
          }
    }
    int64_t copies = 1;
    for (const auto& a : replicated_axes(kMesh, p)) copies *= kMesh.axis_sizes[kMesh.axis_index(a)];
    for (int h : hits) ASSERT_EQ(h, copies) << spec_to_string(p);
  }
}

TEST(PartitionSpec, ToString) {
  EXPECT_EQ(spec_to_string(P({{"data"}, {}, {"data", "model"}})), "P('data', None, ('data', 'model'))");
  EXPECT_EQ(spec_to_string(PartitionSpec()), "P()");
  EXPECT_EQ(shape_to_string({{"batch", 8}, {"", 3}}), "[batch=8, _=3]");
}

}  // namespace
}  // namespace t5x
