// The whole training step on one spmd mesh (issue 17 item 1), under
// mpiexec -np 4. With mesh_invariant = False: every t5x partitioning mode,
// {parameter_partitioning_dims 1, 2} x {activation_partitioning_dims 1, 2}, on
// meshes (data, model) = (4,1), (2,2) and (1,4), trains the tiny T5.1.1 with
// the single-process float32 losses (1e-5 relative) at every step. With 2-D
// parameter partitioning each process holds at most 27% of one process's
// parameter + optimizer-state bytes (from the arrays' local sizes), and with
// 1-D on (4,1) it holds all of them (replicated over 'data'); process 0's
// communication bytes per step (a train metric) equal `t5x partition`'s. Activations
// take their layout from activation_partitioning_dims (embed -> model for 2).
// The checkpoint of the (2,2) ZeRO-3 run, written shard by shard, resumes on
// (4,1) with replicated parameters and continues the single-process curve;
// its teacher-forced evaluation on the mesh gives the single-process metrics.
// With mesh_invariant = True (the default) 2-D parameters are split over
// 'data' too and the losses equal one process with |data| microbatches; in
// both modes dropout draws the keys of that microbatched run.
#include <gtest/gtest.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../../common/mpi_gtest_main.h"
#include "nn/constraint.h"
#include "spmd/spmd.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/trainer/partition_report.h"
#include "t5x/trainer/trainer.h"
#include "test_util.h"

namespace t5x {
std::shared_ptr<Communicator> g_world;
}

namespace t5x::trainer {
namespace {

constexpr int kSteps = 4;       // steps of each mode
constexpr int kResumed = 2;     // steps after the restore onto another mesh

std::string shared_dir(const std::string& name) { return testing::shared_temp_dir(*g_world, name); }

struct MeshRun {
  std::vector<double> losses;
  double state_bytes = 0;  // this process's parameter + optimizer-state bytes
  std::string layout;
  Shape activation;  // local shape of a constrained [batch=8, length=4, embed=32] activation
  std::map<std::string, double> eval;  // teacher-forced evaluation at the last step
  // Process 0's bytes sent per step: the train metric of the last step, and
  // `t5x partition --rank=0` of the same config (mesh_invariant = False only).
  double sent_per_step = -1, report_sent = -1;
};

// Extra bindings of a run: the mesh-invariant mode (default False here) and
// gradient accumulation.
struct Mode {
  bool mesh_invariant = false;
  int num_microbatches = 0;  // 0: None
  double dropout_rate = 0;
  std::string model_file = "configs/models/t5_1_1/tiny.gin";
};

MeshRun train(const std::string& dir, std::shared_ptr<Communicator> world, int64_t num_partitions, int param_dims,
              int act_dims, int steps = kSteps, Mode mode = {}) {
  auto b = testing::tiny_bindings(dir, steps);
  b.push_back("partitioning.PjitPartitioner.num_partitions = " + std::to_string(num_partitions));
  b.push_back(std::string("partitioning.PjitPartitioner.mesh_invariant = ") + (mode.mesh_invariant ? "True" : "False"));
  if (mode.dropout_rate > 0) b.push_back("DROPOUT_RATE = " + std::to_string(mode.dropout_rate));
  if (mode.num_microbatches > 0)
    b.push_back("trainer.Trainer.num_microbatches = " + std::to_string(mode.num_microbatches));
  b.push_back("partitioning.standard_logical_axis_rules.parameter_partitioning_dims = " + std::to_string(param_dims));
  b.push_back("partitioning.standard_logical_axis_rules.activation_partitioning_dims = " + std::to_string(act_dims));
  b.push_back("utils.SaveCheckpointConfig.period = " + std::to_string(kSteps));
  TrainRunConfig c = read_train_config(testing::tiny_config(b, "configs/runs/pretrain.gin", mode.model_file));
  EXPECT_EQ(c.partitioner.parameter_partitioning_dims, param_dims);
  EXPECT_EQ(c.partitioner.activation_partitioning_dims, act_dims);
  MeshRun r;
  if (!mode.mesh_invariant && world->size() > 1 && world->rank() == 0) {
    PartitionOptions po;
    po.mesh = {world->size() / num_partitions, num_partitions};
    r.report_sent = partition_report(c, po).step.total_bytes();
  }
  TrainerOptions o;
  o.durable_checkpoints = false;
  Trainer t(c, Distributed::create(c.partitioner, std::move(world)), o);
  if (spmd::installed()) {
    const Array x = Array::from_floats(Shape{{"batch", 8}, {"length", 4}, {"embed", 32}}, std::vector<float>(1024, 1));
    r.activation = nn::constrain(spmd::shard(x, PartitionSpec::replicated(3))).local_shape();
  }
  r.losses = t.train().losses;
  for (const auto& [k, p] : t.state().params) r.state_bytes += double(p.nbytes());
  for (const auto& [k, s] : t.state().opt.slots) r.state_bytes += double(s.nbytes());
  r.layout = t.layout();
  std::ifstream train_metrics(dir + "/train/metrics.jsonl");
  for (std::string line; std::getline(train_metrics, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("communication/bytes_sent_per_step")) r.sent_per_step = j["communication/bytes_sent_per_step"];
  }
  std::ifstream f(dir + "/training_eval/gpl3_lines_copy/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "step") r.eval[it.key()] = it.value().get<double>();
  }
  return r;
}

TEST(TrainerOneMesh, EveryPartitioningModeGivesTheSingleProcessLosses) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  // The single-process run, on each rank alone.
  const std::string own = testing::temp_dir("one_mesh_ref");
  const MeshRun ref = train(own, g_world->split(g_world->rank(), 0), 1, 1, 1, kSteps + kResumed);
  std::filesystem::remove_all(own);
  ASSERT_EQ(ref.losses.size(), size_t(kSteps + kResumed));
  std::string zero3;  // the (2,2) run with 2-D parameters
  for (int64_t model : {1, 2, 4})
    for (int param_dims : {1, 2})
      for (int act_dims : {1, 2}) {
        const std::string what = "mesh (" + std::to_string(4 / model) + "," + std::to_string(model) +
                                 "), parameter dims " + std::to_string(param_dims) + ", activation dims " +
                                 std::to_string(act_dims);
        SCOPED_TRACE(what);
        const std::string dir = shared_dir("m" + std::to_string(model) + "p" + std::to_string(param_dims) + "a" +
                                           std::to_string(act_dims));
        const MeshRun r = train(dir, g_world, model, param_dims, act_dims);
        EXPECT_NE(r.layout.find("one spmd mesh for the whole step"), std::string::npos) << r.layout;
        EXPECT_EQ(r.activation,
                  (Shape{{"batch", 8 / (4 / model)}, {"length", 4}, {"embed", act_dims == 2 ? 32 / model : 32}}));
        ASSERT_EQ(r.losses.size(), size_t(kSteps));
        for (int s = 0; s < kSteps; ++s)
          EXPECT_NEAR(r.losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << "step " << s + 1;
        const double fraction = r.state_bytes / ref.state_bytes;
        if (param_dims == 2) {
          EXPECT_LE(fraction, 0.27) << r.state_bytes << " of " << ref.state_bytes << " bytes";
        } else if (model == 1) {
          EXPECT_EQ(fraction, 1.0) << "1-D parameters are replicated over 'data'";
        }
        // The train metric of process 0's communication is `t5x partition`'s.
        if (g_world->rank() == 0) {
          EXPECT_GT(r.report_sent, 0);
          EXPECT_NEAR(r.sent_per_step, r.report_sent, 0.01 * r.report_sent);
          std::printf("[one mesh] %s: %.1f%% of one process's parameter + optimizer bytes; losses %.7f .. %.7f; "
                      "process 0 sent %.0f B per step (report %.0f)\n",
                      what.c_str(), 100 * fraction, r.losses.front(), r.losses.back(), r.sent_per_step, r.report_sent);
        }
        if (model == 2 && param_dims == 2 && act_dims == 1) zero3 = dir;
      }
  // The (2,2) ZeRO-3 checkpoint on (4,1) with replicated parameters.
  ASSERT_FALSE(zero3.empty());
  const std::string resumed_dir = shared_dir("resumed");
  const std::string ckpt = "/checkpoint_" + std::to_string(kSteps);
  if (g_world->rank() == 0)
    std::filesystem::copy(zero3 + ckpt, resumed_dir + ckpt, std::filesystem::copy_options::recursive);
  g_world->barrier();
  const MeshRun resumed = train(resumed_dir, g_world, 1, 1, 1, kSteps + kResumed);
  ASSERT_EQ(resumed.losses.size(), size_t(kResumed));
  for (int s = 0; s < kResumed; ++s)
    EXPECT_NEAR(resumed.losses[s], ref.losses[kSteps + s], 1e-5 * std::abs(ref.losses[kSteps + s]))
        << "step " << kSteps + s + 1 << " after the restore";
  // Its final teacher-forced evaluation on the mesh (a last batch of 2 rows
  // padded to split over 'data'): the single-process metrics.
  ASSERT_GT(ref.eval.size(), 5u);
  for (const auto& [k, v] : ref.eval)
    EXPECT_NEAR(resumed.eval.count(k) ? resumed.eval.at(k) : NAN, v, 1e-5 * std::max(1.0, std::abs(v))) << "eval " << k;
}

// The default (mesh-invariant) mode on the one mesh: with 2-D parameter
// partitioning the parameters and optimizer slots are split over 'data' too
// (each process holds at most 27% of the bytes), each data replica runs its
// gradient blocks on its (1, model) mesh with the parameters gathered over
// 'data', and the losses are one process's with num_microbatches = |data|.
TEST(TrainerOneMesh, MeshInvariantSplitsParametersOverDataWithOneProcessBlocks) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  for (int64_t model : {1, 2}) {
    const int64_t data = 4 / model;
    const std::string what = "mesh (" + std::to_string(data) + "," + std::to_string(model) + ")";
    SCOPED_TRACE(what);
    const std::string own = testing::temp_dir("invariant_ref");
    const MeshRun ref = train(own, g_world->split(g_world->rank(), 0), 1, 2, 1, kSteps,
                              {.mesh_invariant = true, .num_microbatches = int(data)});
    std::filesystem::remove_all(own);
    const MeshRun r = train(shared_dir("invariant_m" + std::to_string(model)), g_world, model, 2, 1, kSteps,
                            {.mesh_invariant = true});
    EXPECT_NE(r.layout.find("gradient blocks and sums of one process with num_microbatches = " +
                            std::to_string(data)), std::string::npos) << r.layout;
    EXPECT_LE(r.state_bytes / ref.state_bytes, 0.27) << r.state_bytes << " of " << ref.state_bytes << " bytes";
    ASSERT_EQ(r.losses.size(), size_t(kSteps));
    double worst = 0;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(r.losses[s], ref.losses[s], 1e-6 * std::abs(ref.losses[s])) << "step " << s + 1;
      worst = std::max(worst, std::abs(r.losses[s] - ref.losses[s]) / std::abs(ref.losses[s]));
    }
    if (g_world->rank() == 0)
      std::printf("[mesh-invariant] %s, parameter dims 2: %.1f%% of the bytes; worst relative loss difference "
                  "from one process with %lld microbatches %.2e\n",
                  what.c_str(), 100 * r.state_bytes / ref.state_bytes, (long long)data, worst);
  }
}

// Dropout keys are per gradient block in both modes: with partial sums
// (mesh_invariant = False) each data shard's rows of the global batch draw
// their masks from their block's key, as in the mesh-invariant mode and on
// one process with num_microbatches = |data|. So the two modes and that one
// process agree to float rounding; with one key for the global batch (the
// earlier behaviour) the losses differed from the second step on.
TEST(TrainerOneMesh, DropoutKeysAreTheSameInBothModes) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  for (int64_t model : {1, 2}) {
    const int64_t data = 4 / model;
    SCOPED_TRACE("mesh (" + std::to_string(data) + "," + std::to_string(model) + ")");
    const std::string own = testing::temp_dir("dropout_ref");
    const MeshRun ref = train(own, g_world->split(g_world->rank(), 0), 1, 1, 1, kSteps,
                              {.mesh_invariant = true, .num_microbatches = int(data), .dropout_rate = 0.1});
    std::filesystem::remove_all(own);
    for (bool invariant : {false, true}) {
      const MeshRun r = train(shared_dir("dropout_m" + std::to_string(model) + (invariant ? "i" : "p")), g_world,
                              model, 1, 1, kSteps, {.mesh_invariant = invariant, .dropout_rate = 0.1});
      ASSERT_EQ(r.losses.size(), size_t(kSteps));
      for (int s = 0; s < kSteps; ++s)
        EXPECT_NEAR(r.losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s]))
            << "step " << s + 1 << (invariant ? ", mesh-invariant" : ", partial sums");
    }
  }
}

// scalable_t5 with scan_layers (checkpoints/param_layout.h): on (2,2) with
// 2-D parameters every process holds a quarter of each layer's kernel, and
// the checkpoint's stacked leaves are written shard by shard (each layer's
// shard into its place in the stack, heads whole). It resumes on (4,1) and
// continues the single-process curve.
TEST(TrainerOneMesh, ScalableT5StackedCheckpointIsWrittenShardByShard) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  const Mode scalable{.model_file = testing::scalable_model_file()};
  const std::string own = testing::temp_dir("scalable_ref");
  const MeshRun ref = train(own, g_world->split(g_world->rank(), 0), 1, 1, 1, kSteps + kResumed, scalable);
  std::filesystem::remove_all(own);
  ASSERT_EQ(ref.losses.size(), size_t(kSteps + kResumed));
  const std::string dir = shared_dir("scalable_m2p2");
  const MeshRun r = train(dir, g_world, 2, 2, 1, kSteps, scalable);
  ASSERT_EQ(r.losses.size(), size_t(kSteps));
  for (int s = 0; s < kSteps; ++s)
    EXPECT_NEAR(r.losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << "step " << s + 1;
  const std::string ckpt = dir + "/checkpoint_" + std::to_string(kSteps);
  EXPECT_EQ(CheckpointReader::open(ckpt).info("target/encoder/encoder/attention/query/kernel").shape,
            (std::vector<int64_t>{32, 2, 4, 8}));
  const std::string resumed_dir = shared_dir("scalable_resumed");
  if (g_world->rank() == 0)
    std::filesystem::copy(ckpt, resumed_dir + "/checkpoint_" + std::to_string(kSteps),
                          std::filesystem::copy_options::recursive);
  g_world->barrier();
  const MeshRun resumed = train(resumed_dir, g_world, 1, 1, 1, kSteps + kResumed, scalable);
  ASSERT_EQ(resumed.losses.size(), size_t(kResumed));
  for (int s = 0; s < kResumed; ++s)
    EXPECT_NEAR(resumed.losses[s], ref.losses[kSteps + s], 1e-5 * std::abs(ref.losses[kSteps + s]))
        << "step " << kSteps + s + 1 << " after the restore";
}

}  // namespace
}  // namespace t5x::trainer

int main(int argc, char** argv) { return t5x::testing_mpi::main_on_every_rank(argc, argv, t5x::g_world, [] {}); }
