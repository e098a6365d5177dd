// `t5x train` of an MoE model on the expert mesh (issue 18; t5x contrib/moe
// MoePjitPartitioner), under mpiexec -np 4. The tiny MoE T5
// (configs/models/moe/tiny.gin: 4 experts in layer 1 of each stack, top-1)
// with configs/runs/moe/pretrain.gin on meshes (data, expert) = (2,1) and
// (1,2) (each half of the processes) and (2,2) (all four) trains with one
// process's float32 losses (1e-5 relative) at every step; each process holds
// 1/|expert| of every expert kernel and of its Adafactor v_row / v_col, the
// other parameters whole. The (1,2) run's checkpoint resumes on one process
// and continues the single-process curve. A layer and a partitioner that
// disagree on num_expert_partitions, or a mesh whose 'expert' axis is not
// the layer's, are refused with the binding named.
//
// Inference (configs/runs/moe/infer.gin, eval.gin) on (1,2), (2,1), (2,2)
// and (1,4): predictions token for token and scores (1e-5) equal one
// process's, each process restoring 1/|expert| of every expert kernel.
//
// GROUP_SIZE = 8 makes the token groups the same on every mesh (24 groups of
// 8 per stack, a multiple of E * |data| = 8), so one process routes exactly
// as the mesh does; MIN_EXPERT_CAPACITY = 1 gives each expert 2 slots per
// group of 8 tokens, so the capacity rule (dropping) is in play.
#include <gtest/gtest.h>

#include <filesystem>

#include "../../common/mpi_gtest_main.h"
#include "t5x/models/network.h"
#include "t5x/trainer/infer.h"
#include "t5x/trainer/trainer.h"
#include "test_util.h"

namespace t5x {
std::shared_ptr<Communicator> g_world;
}

namespace t5x::trainer {
namespace {

constexpr int kSteps = 3;    // steps on each mesh
constexpr int kResumed = 2;  // steps after the restore on one process
constexpr int64_t kExperts = 4;

struct MoeRun {
  std::vector<double> losses;
  std::string layout;
  // Local / global elements of each expert kernel and of its v_row, v_col;
  // and of the parameters without an expert dim.
  std::map<std::string, std::pair<int64_t, int64_t>> expert_state;
  std::map<std::string, std::pair<int64_t, int64_t>> other_params;
  std::map<std::string, int64_t> local_experts;  // the local 'expert' size of each expert kernel and slot
};

TrainRunConfig moe_config(const std::string& dir, int steps, const std::vector<std::string>& extra) {
  auto b = testing::tiny_bindings(dir, steps);
  b.push_back("GROUP_SIZE = 8");
  b.push_back("MIN_EXPERT_CAPACITY = 1");
  b.push_back("utils.SaveCheckpointConfig.period = " + std::to_string(kSteps));
  b.insert(b.end(), extra.begin(), extra.end());
  return read_train_config(testing::tiny_config(b, "configs/runs/moe/pretrain.gin", "configs/models/moe/tiny.gin"));
}

MoeRun train(const std::string& dir, std::shared_ptr<Communicator> world, int64_t expert_partitions,
             int steps = kSteps) {
  const TrainRunConfig c =
      moe_config(dir, steps, {"NUM_EXPERT_PARTITIONS = " + std::to_string(expert_partitions)});
  EXPECT_EQ(c.partitioner.num_expert_partitions, expert_partitions);
  EXPECT_EQ(c.model.network.moe.num_expert_partitions, expert_partitions);
  TrainerOptions o;
  o.durable_checkpoints = false;
  Trainer t(c, Distributed::create(c.partitioner, std::move(world)), o);
  MoeRun r;
  r.losses = t.train().losses;
  r.layout = t.layout();
  const auto& st = t.state();
  for (const auto& [k, p] : st.params) {
    if (k.find("/expert/") == std::string::npos) {
      r.other_params[k] = {p.local_size(), p.size()};
      continue;
    }
    for (const std::string& key : {k, k + "/v_row", k + "/v_col"}) {
      const Array& a = key == k ? p : st.opt.slots.at(key);
      r.expert_state[key] = {a.local_size(), a.size()};
      r.local_experts[key] = a.local_shape().size("expert");
    }
  }
  return r;
}

TEST(TrainerMoe, DataExpertMeshesGiveTheSingleProcessLosses) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  const std::string own = testing::temp_dir("moe_ref");
  const MoeRun ref = train(own, g_world->split(g_world->rank(), 0), 1, kSteps + kResumed);
  std::filesystem::remove_all(own);
  ASSERT_EQ(ref.losses.size(), size_t(kSteps + kResumed));
  // Four expert kernels (wi_0, wi_1, wo in each stack's sparse layer: 6), whole on one process.
  ASSERT_EQ(ref.expert_state.size(), 18u);
  for (const auto& [k, n] : ref.expert_state) EXPECT_EQ(n.first, n.second) << k;

  const int half = g_world->rank() / 2;
  std::string ckpt_1x2;  // the (1,2) run's model dir (this half's)
  for (auto [D, X] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {1, 2}, {2, 2}}) {
    const std::string mesh = "(data=" + std::to_string(D) + ", expert=" + std::to_string(X) + ", model=1)";
    SCOPED_TRACE("mesh " + mesh);
    auto world = D * X == 4 ? g_world : g_world->split(half, g_world->rank() % 2);
    const std::string dir = testing::shared_temp_dir(
        *world, "moe_d" + std::to_string(D) + "x" + std::to_string(X) + "_h" + std::to_string(D * X == 4 ? 0 : half));
    const MoeRun r = train(dir, world, X);
    EXPECT_NE(r.layout.find("mesh " + mesh), std::string::npos) << r.layout;
    EXPECT_NE(r.layout.find("batch split over ('expert', 'data') (" + std::to_string(D * X) + " x " +
                            std::to_string(8 / (D * X)) + " rows)"),
              std::string::npos)
        << r.layout;
    ASSERT_EQ(r.losses.size(), size_t(kSteps));
    double worst = 0;
    for (int s = 0; s < kSteps; ++s) {
      EXPECT_NEAR(r.losses[s], ref.losses[s], 1e-5 * std::abs(ref.losses[s])) << "step " << s + 1;
      worst = std::max(worst, std::abs(r.losses[s] - ref.losses[s]) / std::abs(ref.losses[s]));
    }
    // 1/X of every expert kernel and of its factored second moments.
    int64_t local = 0, global = 0;
    ASSERT_EQ(r.expert_state.size(), 18u);
    for (const auto& [k, n] : r.expert_state) {
      EXPECT_EQ(n.first * X, n.second) << k << ": " << n.first << " of " << n.second << " elements";
      EXPECT_EQ(r.local_experts.at(k), kExperts / X) << k;
      local += n.first;
      global += n.second;
    }
    // Everything else (the routers included) whole on every process.
    ASSERT_FALSE(r.other_params.empty());
    for (const auto& [k, n] : r.other_params) EXPECT_EQ(n.first, n.second) << k;
    if (g_world->rank() == 0)
      std::printf("[moe] mesh %s: losses %.7f .. %.7f, worst relative difference from one process %.2e; "
                  "expert kernels + v_row/v_col: %lld of %lld elements per process\n",
                  mesh.c_str(), r.losses.front(), r.losses.back(), worst, (long long)local, (long long)global);
    if (D == 1 && X == 2) ckpt_1x2 = dir;
  }

  // The (1,2) checkpoint, expert kernels and slots written shard by shard,
  // on one process with NUM_EXPERT_PARTITIONS = 1: the single-process curve goes on.
  ASSERT_FALSE(ckpt_1x2.empty());
  const std::string resumed = testing::temp_dir("moe_resumed");
  const std::string ckpt = "/checkpoint_" + std::to_string(kSteps);
  std::filesystem::copy(ckpt_1x2 + ckpt, resumed + ckpt, std::filesystem::copy_options::recursive);
  const MoeRun r = train(resumed, g_world->split(g_world->rank(), 0), 1, kSteps + kResumed);
  ASSERT_EQ(r.losses.size(), size_t(kResumed));
  for (int s = 0; s < kResumed; ++s)
    EXPECT_NEAR(r.losses[s], ref.losses[kSteps + s], 1e-5 * std::abs(ref.losses[kSteps + s]))
        << "step " << kSteps + s + 1 << " after the restore on one process";
  g_world->barrier();  // the (1,2) directories stay until every rank has copied
}

// The tiny MoE trained 4 steps by process 0 alone, at a rate small enough
// that greedy decoding emits many tokens (collective: every rank calls it).
const std::string& trained_moe_dir() {
  static std::string dir = [] {
    std::string d = testing::shared_temp_dir(*g_world, "moe_infer_model");
    if (g_world->rank() == 0) {
      TrainerOptions o;
      o.durable_checkpoints = false;
      const TrainRunConfig c = moe_config(d, 4, {"utils.create_learning_rate_scheduler.base_learning_rate = 0.0001"});
      Trainer t(c, Distributed::create(c.partitioner, make_single_communicator()), o);
      t.train();
    }
    g_world->barrier();
    return d;
  }();
  return dir;
}

// GROUP_SIZE = 4 and BATCH_SIZE = 4 give every mesh one process's token
// groups: the encoder's and the scores' 96 tokens make 24 groups of 4
// whatever the expert replicas (1 or 2), a decode step's tokens one per
// group (the (2,2) mesh's 2 replicas pad the 4 tokens to 8 groups of 1).
std::vector<std::string> moe_infer_bindings(const std::string& out, int64_t X) {
  auto b = testing::tiny_bindings(out, 1);
  for (const std::string& x :
       {"CHECKPOINT_PATH = '" + trained_moe_dir() + "/checkpoint_4'", std::string("MIXTURE_OR_TASK_SPLIT = 'validation'"),
        std::string("BATCH_SIZE = 4"), std::string("GROUP_SIZE = 4"), "NUM_EXPERT_PARTITIONS = " + std::to_string(X)})
    b.push_back(x);
  return b;
}

InferRunConfig moe_infer_config(const std::string& out, const std::string& mode, int64_t X) {
  auto b = moe_infer_bindings(out, X);
  b.push_back("INFER_OUTPUT_DIR = '" + out + "'");
  b.push_back("infer_script.infer.mode = '" + mode + "'");
  return read_infer_config(testing::tiny_config(b, "configs/runs/moe/infer.gin", "configs/models/moe/tiny.gin"));
}

TEST(TrainerMoe, InferAndEvalOnTheExpertMeshEqualOneProcess) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  (void)trained_moe_dir();
  const std::string ref_dir = testing::shared_temp_dir(*g_world, "moe_infer_ref");
  if (g_world->rank() == 0)
    for (const char* mode : {"predict", "score"}) {
      const InferRunConfig c = moe_infer_config(ref_dir, mode, 1);
      run_infer(c, Distributed::create(c.partitioner, make_single_communicator()));
    }
  g_world->barrier();
  const testing::InferFiles ref = testing::read_infer_files(ref_dir);
  testing::expect_substantial_reference(ref);
  if (HasFatalFailure()) return;

  const int half = g_world->rank() / 2;
  std::shared_ptr<Communicator> halves = g_world->split(half, g_world->rank() % 2);
  for (auto [D, X] : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {2, 1}, {2, 2}, {1, 4}}) {
    const std::string mesh = "(data=" + std::to_string(D) + ", expert=" + std::to_string(X) + ", model=1)";
    SCOPED_TRACE("mesh " + mesh);
    const bool whole = D * X == 4;
    std::shared_ptr<Communicator> world = whole ? g_world : halves;
    const std::string dir = testing::shared_temp_dir(
        *world, "moe_infer_d" + std::to_string(D) + "x" + std::to_string(X) + "_h" + std::to_string(whole ? 0 : half));
    for (const char* mode : {"predict", "score"}) {
      const InferRunConfig c = moe_infer_config(dir, mode, X);
      const Distributed d = Distributed::create(c.partitioner, world);
      ASSERT_EQ(d.num_data_shards, D * X);  // the batch over ('expert', 'data')
      const InferStats s = run_infer(c, d);
      EXPECT_EQ(s.examples, 20);
      // Expert kernels 1/X, the rest (routers included) whole.
      double expert = 0, total = 0;
      for (const auto& p : make_model(c.model)->param_specs()) {
        total += double(p.shape.numel());
        if (p.name.find("/expert/") != std::string::npos) expert += double(p.shape.numel());
      }
      ASSERT_GT(expert, 0);
      const double want = (total - expert + expert / double(X)) / total;
      EXPECT_NEAR(s.param_bytes / s.model_param_bytes, want, 1e-12);
      if (g_world->rank() == 0 && std::string(mode) == "score")
        std::printf("[moe infer] mesh %s: %.1f%% of the parameter bytes per process\n", mesh.c_str(),
                    100 * s.param_bytes / s.model_param_bytes);
    }
    world->barrier();
    EXPECT_FALSE(std::filesystem::exists(dir + "/gpl3_lines_copy-predict.jsonl-00001-of-00002"));
    testing::expect_same_infer_files(testing::read_infer_files(dir), ref);
  }

  // `t5x eval` on (2,2): one process's metrics.
  auto eval_config = [](const std::string& out, int64_t X) {
    auto b = moe_infer_bindings(out, X);
    b.push_back("EVAL_OUTPUT_DIR = '" + out + "'");
    return read_eval_config(testing::tiny_config(b, "configs/runs/moe/eval.gin", "configs/models/moe/tiny.gin"));
  };
  std::map<std::string, double> ref_metrics;
  if (g_world->rank() == 0) {
    const EvalRunConfig one = eval_config(testing::temp_dir("moe_eval_ref"), 1);
    ref_metrics = run_eval(one, Distributed::create(one.partitioner, make_single_communicator())).at("gpl3_lines_copy");
  }
  const EvalRunConfig c = eval_config(testing::shared_temp_dir(*g_world, "moe_eval"), 2);
  const auto got = run_eval(c, Distributed::create(c.partitioner, g_world)).at("gpl3_lines_copy");
  if (g_world->rank() == 0) {
    ASSERT_FALSE(ref_metrics.empty());
    EXPECT_EQ(got, ref_metrics);
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TrainerMoe, ExpertPartitionsThatDisagreeAreNamed) {
  ASSERT_EQ(g_world->size(), 4) << "run under mpiexec -np 4";
  const std::string own = testing::temp_dir("moe_bad");
  // The layer and the partitioner bound apart.
  std::string e = error_of([&] {
    moe_config(own, 1, {"NUM_EXPERT_PARTITIONS = 2", "partitioning.MoePjitPartitioner.num_expert_partitions = 1"});
  });
  EXPECT_NE(e.find("network.T5Config.num_expert_partitions = 2 but partitioning.MoePjitPartitioner."
                   "num_expert_partitions = 1"), std::string::npos) << e;
  // NUM_EXPERT_PARTITIONS = 4 on 2 processes: the mesh's 'expert' axis is 2.
  auto pair = g_world->split(g_world->rank() / 2, g_world->rank() % 2);
  const TrainRunConfig c = moe_config(own, 1, {"NUM_EXPERT_PARTITIONS = 4"});
  e = error_of([&] { Trainer t(c, Distributed::create(c.partitioner, pair)); });
  EXPECT_NE(e.find("network.T5Config.num_expert_partitions (NUM_EXPERT_PARTITIONS) = 4 but the mesh "
                   "(data=1, expert=2, model=1) of 2 processes has an 'expert' axis of 2"), std::string::npos) << e;
  EXPECT_NE(e.find("set NUM_EXPERT_PARTITIONS = 2"), std::string::npos) << e;
  // The dense partitioner with an expert-parallel layer.
  const TrainRunConfig d = read_train_config(testing::tiny_config(
      [&] {
        auto b = testing::tiny_bindings(own, 1);
        b.push_back("NUM_EXPERT_PARTITIONS = 2");
        return b;
      }(),
      "configs/runs/pretrain.gin", "configs/models/moe/tiny.gin"));
  e = error_of([&] { Trainer t(d, Distributed::create(d.partitioner, pair)); });
  EXPECT_NE(e.find("has no 'expert' axis"), std::string::npos) << e;
  EXPECT_NE(e.find("use partitioning.MoePjitPartitioner"), std::string::npos) << e;
  // mesh_invariant = True is refused at its binding.
  e = error_of([&] { moe_config(own, 1, {"partitioning.MoePjitPartitioner.mesh_invariant = True"}); });
  EXPECT_NE(e.find("partitioning.MoePjitPartitioner.mesh_invariant = True is not supported"), std::string::npos) << e;
}

}  // namespace
}  // namespace t5x::trainer

int main(int argc, char** argv) { return t5x::testing_mpi::main_on_every_rank(argc, argv, t5x::g_world, [] {}); }
