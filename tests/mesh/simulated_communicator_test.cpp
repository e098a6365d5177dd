// SimulatedCommunicator (t5x partition's stand-in for one rank of N): groups
// formed by split_by have the sizes and ranks of a real split, and the byte
// counters follow the ring formulas of communicator.h.
#include <gtest/gtest.h>

#include <vector>

#include "mesh/mesh.h"
#include "mesh/mesh_groups.h"
#include "mesh/simulated_communicator.h"

namespace t5x {
namespace {

TEST(SimulatedCommunicator, MeshGroupsOfOneRankOfEight) {
  // Device 6 of mesh (data=2, model=4): coordinates (1, 2).
  auto world = std::make_shared<SimulatedCommunicator>(8, 6);
  MeshGroups g(Mesh({2, 4}, {"data", "model"}), world);
  EXPECT_EQ(g.over({"data"}).size(), 2);
  EXPECT_EQ(g.over({"data"}).rank(), 1);
  EXPECT_EQ(g.over({"model"}).size(), 4);
  EXPECT_EQ(g.over({"model"}).rank(), 2);
  EXPECT_EQ(g.over({"model", "data"}).rank(), 5);  // row-major over (model, data): 2*2 + 1
  EXPECT_THROW(world->split(0, 0), std::logic_error);
}

TEST(SimulatedCommunicator, CountsTheRingBytesAndFillsOutputs) {
  SimulatedCommunicator c(4, 1);
  std::vector<float> in = {1, 2, 3, 4}, out(16, -1);
  c.all_reduce(in.data(), out.data(), 4, CommDtype::kF32);
  EXPECT_EQ(std::vector<float>(out.begin(), out.begin() + 4), in);
  c.all_gather(in.data(), out.data(), 4, CommDtype::kF32);
  EXPECT_EQ(out[12], 1);
  c.reduce_scatter(in.data(), out.data(), 1, CommDtype::kF32);
  EXPECT_EQ(out[0], 2);  // block 1 of the input
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kAllReduce), 2 * 16.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kAllGather), 16.0 * 3);
  EXPECT_DOUBLE_EQ(c.counters().bytes_of(Collective::kReduceScatter), 4.0 * 3);
  EXPECT_THROW(SimulatedCommunicator(2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace t5x
