#include "mesh/mesh.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace t5x {
namespace {

using Groups = std::vector<std::vector<int64_t>>;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Mesh, RowMajorCoordinates) {
  Mesh m({2, 3}, {"data", "model"});
  EXPECT_EQ(m.num_devices(), 6);
  EXPECT_EQ(m.coords(4), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(m.coords(2), (std::vector<int64_t>{0, 2}));
  for (int64_t d = 0; d < 6; ++d) EXPECT_EQ(m.device_at(m.coords(d)), d);
  // Agrees with the header-only MeshDesc::coord used by the core Array.
  for (int64_t d = 0; d < 6; ++d)
    for (int a = 0; a < 2; ++a) EXPECT_EQ(m.desc().coord(d, a), m.coords(d)[a]);
}

TEST(Mesh, GroupsPerAxisMatchMeshTensorFlow) {
  // sharding.md C0.1: on mesh [2,3], groups over axis 1 are {0,1,2},{3,4,5},
  // groups over axis 0 are {0,3},{1,4},{2,5}.
  Mesh m({2, 3}, {"data", "model"});
  EXPECT_EQ(m.groups({"model"}), (Groups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(m.groups({"data"}), (Groups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_EQ(m.groups({"data", "model"}), (Groups{{0, 1, 2, 3, 4, 5}}));
  // Order given = order of the group: model-major numbering.
  EXPECT_EQ(m.groups({"model", "data"}), (Groups{{0, 3, 1, 4, 2, 5}}));
  EXPECT_EQ(m.groups({}), (Groups{{0}, {1}, {2}, {3}, {4}, {5}}));
  EXPECT_EQ(m.group({"data"}, 5), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(m.rank_in_group({"model"}, 5), 2);
  EXPECT_EQ(m.rank_in_group({"model", "data"}, 5), 5);
  EXPECT_EQ(m.group_index({"data"}, 5), 2);
  EXPECT_EQ(m.group_index({"model"}, 5), 1);
}

TEST(Mesh, ThreeAxisGroups) {
  Mesh m({2, 2, 2}, {"replica", "data", "model"}, 5);  // 5 = (1,0,1)
  EXPECT_EQ(m.group({"replica", "model"}), (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(m.group({"data"}), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(m.coord("replica"), 1);
  EXPECT_EQ(m.coord("data"), 0);
  EXPECT_EQ(m.axes_size({"replica", "model"}), 4);
  // Every device lies in exactly one group of each kind.
  for (const auto& axes : std::vector<std::vector<std::string>>{{"data"}, {"replica", "model"}}) {
    std::vector<int> seen(8, 0);
    for (const auto& g : m.groups(axes))
      for (int64_t d : g) ++seen[d];
    for (int s : seen) EXPECT_EQ(s, 1);
  }
}

TEST(Mesh, FromPartitionerNumPartitions) {
  Mesh m = Mesh::from_partitioner(8, 3, 2);
  EXPECT_EQ(m.axis_names(), (std::vector<std::string>{"data", "model"}));
  EXPECT_EQ(m.axis_sizes(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(m.coord("data"), 1);
  EXPECT_EQ(m.coord("model"), 1);
  EXPECT_EQ(Mesh::from_partitioner(4, 0, 1).axis_sizes(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(Mesh::from_partitioner(4, 0, 4).axis_sizes(), (std::vector<int64_t>{1, 4}));
}

TEST(Mesh, FromPartitionerSubmesh) {
  Mesh m = Mesh::from_partitioner(8, 0, 0, {2, 1, 1, 2});
  EXPECT_EQ(m.axis_sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_NE(error_of([] { Mesh::from_partitioner(8, 0, 2, {1, 1, 1, 2}); }).find("at most one"),
            std::string::npos);
  EXPECT_NE(error_of([] { Mesh::from_partitioner(8, 0, 0); }).find("at least one"), std::string::npos);
  std::string e = error_of([] { Mesh::from_partitioner(8, 0, 0, {1, 1, 1, 3}); });
  EXPECT_NE(e.find("does not divide the 8 devices"), std::string::npos) << e;
}

TEST(Mesh, ErrorsNameTheProblem) {
  std::string e = error_of([] { Mesh::for_processes({2, 2}, 3, 0); });
  EXPECT_NE(e.find("mesh (data=2, model=2) needs 4 devices but 3 processes are running"), std::string::npos) << e;
  e = error_of([] { Mesh::from_partitioner(6, 0, 4); });
  EXPECT_NE(e.find("num_partitions=4 does not divide the 6 devices"), std::string::npos) << e;
  e = error_of([] { Mesh({2, 2}, {"data", "data"}); });
  EXPECT_NE(e.find("'data' is used twice"), std::string::npos) << e;
  e = error_of([] { Mesh({2, 0}); });
  EXPECT_NE(e.find("'model' has size 0"), std::string::npos) << e;
  e = error_of([] { Mesh({2, 2}, {"data", "model"}, 4); });
  EXPECT_NE(e.find("device id 4 is outside"), std::string::npos) << e;
  e = error_of([] { Mesh({2, 2}).axis_size("modle"); });
  EXPECT_NE(e.find("unknown mesh axis 'modle'"), std::string::npos) << e;
  EXPECT_EQ(e.rfind("[mesh] ", 0), 0u);
  e = error_of([] { Mesh({2}, {"data", "model"}); });
  EXPECT_NE(e.find("2 axis names"), std::string::npos) << e;
}

TEST(Mesh, DescRoundTripAndToString) {
  Mesh m({4, 2}, {"data", "model"}, 7);
  EXPECT_EQ(m.to_string(), "(data=4, model=2)");
  Mesh copy(m.desc());
  EXPECT_EQ(copy.desc(), m.desc());
  EXPECT_EQ(m.with_device(2).device_id(), 2);
  EXPECT_EQ(m.desc_ptr()->num_devices(), 8);
}

TEST(Mesh, MoeMeshFactorsExpertOutOfData) {
  Mesh m = Mesh::for_moe(8, 5, 2, 1);
  EXPECT_EQ(m.axis_names(), (std::vector<std::string>{"data", "expert", "model"}));
  EXPECT_EQ(m.axis_sizes(), (std::vector<int64_t>{4, 2, 1}));
  EXPECT_EQ(m.coords(5), (std::vector<int64_t>{2, 1, 0}));
  // Largest divisor of |data| = 4 that is <= 3 is 2; <= 16 is 4.
  EXPECT_EQ(Mesh::for_moe(8, 0, 3, 2).axis_sizes(), (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(Mesh::for_moe(8, 0, 16, 2).axis_sizes(), (std::vector<int64_t>{1, 4, 2}));
  EXPECT_EQ(Mesh::for_moe(6, 0, 4, 1).axis_sizes(), (std::vector<int64_t>{2, 3, 1}));
  // The batch over (expert, data): t5x MoE shard_id = data + expert * |data|.
  for (int64_t dev = 0; dev < 8; ++dev) {
    Mesh d = Mesh::for_moe(8, dev, 2, 2);  // (data=2, expert=2, model=2)
    DataLayout l = data_layout(d, 16, {"expert", "data"});
    EXPECT_EQ(l.shard_id, d.coord("data") + d.coord("expert") * 2);
    EXPECT_EQ(l.num_shards, 4);
    EXPECT_EQ(l.is_first_host_in_replica_set, d.coord("model") == 0);
  }
  EXPECT_THROW(Mesh::for_moe(8, 0, 0, 1), std::invalid_argument);
}

TEST(Mesh, DataLayoutPerHost) {
  // sharding.md T4.7: 4 hosts on (replica 2, data 2) get shard ids 0..3.
  for (int64_t dev = 0; dev < 4; ++dev) {
    Mesh m({2, 2, 1}, {"replica", "data", "model"}, dev);
    DataLayout l = data_layout(m, 32, {"replica", "data"});
    EXPECT_EQ(l.shard_id, dev);
    EXPECT_EQ(l.num_shards, 4);
    EXPECT_TRUE(l.is_first_host_in_replica_set);
  }
  // (data=2, model=2): model replicas share a shard; only model coord 0 is first.
  for (int64_t dev = 0; dev < 4; ++dev) {
    DataLayout l = data_layout(Mesh({2, 2}, {"data", "model"}, dev), 0);
    EXPECT_EQ(l.batch_size, 2);
    EXPECT_EQ(l.shard_id, dev / 2);
    EXPECT_EQ(l.num_shards, 2);
    EXPECT_EQ(l.is_first_host_in_replica_set, dev % 2 == 0);
  }
  std::string e = error_of([] { data_layout(Mesh({4, 2}), 10); });
  EXPECT_NE(e.find("Batch size (10) must be divisible by corresponding data mesh size (4)"), std::string::npos) << e;
}

}  // namespace
}  // namespace t5x
