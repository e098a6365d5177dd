// Two differently-meshed runs in one process (mpiexec -np 2): the Trainer
// installs its spmd context, lowering and activation sharding constraints for
// its lifetime only. A
// model-parallel run on mesh (data=1, model=2) between two data-parallel runs
// on mesh (data=2, model=1) (each with its own context while it lives) leaves
// the process as it found it, and the second data-parallel run gives the
// first one's losses bit for bit.
#include <gtest/gtest.h>

#include "../../common/mpi_gtest_main.h"
#include "nn/constraint.h"
#include "spmd/context.h"
#include "spmd/spmd.h"
#include "spmd/dispatch.h"
#include "t5x/trainer/trainer.h"
#include "test_util.h"

namespace t5x {
std::shared_ptr<Communicator> g_world;
}

namespace t5x::trainer {
namespace {

std::string shared_dir(const std::string& name) { return testing::shared_temp_dir(*g_world, name); }

struct Seen {
  bool installed = false;
  std::vector<int64_t> context_mesh;
  std::vector<double> losses;
  // Model-parallel run: an activation [batch=2, length=4, mlp=8] split over
  // 'model' on length, and what nn::constrain made of it.
  Array activation, constrained;
};

Seen run(const std::string& name, int64_t num_partitions) {
  auto b = testing::tiny_bindings(shared_dir(name), 2);
  b.push_back("partitioning.PjitPartitioner.num_partitions = " + std::to_string(num_partitions));
  b.push_back("BATCH_SIZE = 4");
  TrainRunConfig c = read_train_config(testing::tiny_config(b));
  TrainerOptions o;
  o.durable_checkpoints = false;
  Trainer t(c, Distributed::create(c.partitioner, g_world), o);
  Seen s;
  s.installed = spmd::installed();
  s.context_mesh = spmd::context().mesh().axis_sizes();
  if (num_partitions > 1) {
    std::vector<float> v(64);
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
    const Array full = Array::from_floats(Shape{{"batch", 2}, {"length", 4}, {"mlp", 8}}, v);
    s.activation = spmd::shard(full, PartitionSpec({{}, {"model"}, {}}));
    s.constrained = nn::constrain(s.activation);
    EXPECT_EQ(spmd::gather(s.constrained).to_floats(), v);
  }
  s.losses = t.train().losses;
  return s;
}

TEST(TrainerScopes, TwoDifferentlyMeshedRunsInOneProcessDoNotLeak) {
  ASSERT_EQ(g_world->size(), 2) << "run under mpiexec -np 2";
  const std::shared_ptr<spmd::Context> initial = spmd::context_ptr();
  ASSERT_FALSE(spmd::installed());
  const std::vector<int64_t> one{1, 1};
  ASSERT_EQ(initial->mesh().axis_sizes(), one);

  const std::vector<int64_t> data2{2, 1};
  Seen data = run("data_a", 1);  // mesh (data=2, model=1): its context while it lives
  EXPECT_TRUE(data.installed);
  EXPECT_EQ(data.context_mesh, data2);
  EXPECT_FALSE(spmd::installed()) << "the data-parallel run left its lowering installed";
  EXPECT_EQ(spmd::context_ptr(), initial);

  Seen model = run("model", 2);  // mesh (data=1, model=2): context and lowering while it lives
  EXPECT_TRUE(model.installed);
  EXPECT_EQ(model.context_mesh, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(spmd::installed()) << "the model-parallel run left its lowering installed";
  EXPECT_EQ(spmd::context_ptr(), initial) << "the model-parallel run left its context";
  // The run's activation constraints (standard rules: mlp -> model) while it
  // lived; none after it.
  EXPECT_EQ(model.activation.local_shape(), (Shape{{"batch", 2}, {"length", 2}, {"mlp", 8}}));
  EXPECT_EQ(model.constrained.local_shape(), (Shape{{"batch", 2}, {"length", 4}, {"mlp", 4}}));
  EXPECT_EQ(nn::constrain(model.activation).local_shape(), model.activation.local_shape());

  Seen again = run("data_b", 1);
  EXPECT_TRUE(again.installed);
  EXPECT_EQ(again.context_mesh, data2);
  EXPECT_FALSE(spmd::installed());
  EXPECT_EQ(spmd::context_ptr(), initial);
  ASSERT_EQ(again.losses.size(), 2u);
  EXPECT_EQ(again.losses, data.losses);  // bitwise
  // The same global batches: the model-parallel run agrees to float rounding.
  ASSERT_EQ(model.losses.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(model.losses[i], data.losses[i], 1e-4 * std::abs(data.losses[i]));
}

}  // namespace
}  // namespace t5x::trainer

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  t5x::g_world = t5x::init_communicator(t5x::CommBackend::kAny);
  return t5x::testing_mpi::run_all_tests_on_every_rank(*t5x::g_world);
}
