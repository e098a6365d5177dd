// `t5x partition` against real runs (issue 17 item 5), under mpiexec -np 1, 2
// and 4 (and 8 by hand, scripts/check_partitioning.sh): on every (data, model)
// mesh of that many processes with at most 4-way 'model', with
// parameter_partitioning_dims 1 and 2, the tiny and mini T5.1.1 train real
// steps on the one mesh (mesh_invariant = False); on every rank the bytes its
// communicators sent in a step equal partition_report's for that rank (which
// simulates the rank alone, on zeros), per collective within 1%, and its
// parameter and optimizer-state bytes equal the report's. On one process the
// layer-extrapolated report of mini equals the direct one.
//
// With T5X_PARTITION_RSS=D,M (by hand, docs/sharding.md "Partition report") the binary
// instead trains mini with 2-D parameters on mesh (D, M) and prints each
// rank's peak RSS (getrusage ru_maxrss) and parameter + optimizer bytes.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>

#include "../../common/mpi_gtest_main.h"
#include "t5x/trainer/partition_report.h"
#include "t5x/trainer/trainer.h"
#include "test_util.h"

namespace t5x {
std::shared_ptr<Communicator> g_world;
}

namespace t5x::trainer {
namespace {

enum class Model { kTiny, kMini };

TrainRunConfig config(const std::string& dir, Model model, int64_t num_partitions, int param_dims) {
  auto b = testing::tiny_bindings(dir, 2);
  if (model == Model::kMini)  // mini.gin's shapes (vocabulary 32128), not tiny's
    b.erase(std::remove_if(b.begin(), b.end(), [](const std::string& s) { return s.rfind("network.", 0) == 0; }),
            b.end());
  b.push_back("partitioning.PjitPartitioner.num_partitions = " + std::to_string(num_partitions));
  b.push_back("partitioning.PjitPartitioner.mesh_invariant = False");
  b.push_back("partitioning.standard_logical_axis_rules.parameter_partitioning_dims = " + std::to_string(param_dims));
  gin::LoadOptions o;
  o.search_paths = {"configs"};
  seqio::register_builtin_tasks();
  const std::string file = model == Model::kMini ? "configs/models/t5_1_1/mini.gin" : "configs/models/t5_1_1/tiny.gin";
  return read_train_config(gin::parse_config_files_and_bindings({file, "configs/runs/pretrain.gin"}, b, o));
}

struct Measured {
  std::vector<CommCounters> steps;
  double param_bytes = 0, optimizer_bytes = 0;
};

// Real steps on the world: each step's counters of this process.
Measured run_steps(const TrainRunConfig& c, int steps) {
  Distributed d = Distributed::create(c.partitioner, g_world);
  TrainerOptions o;
  o.durable_checkpoints = false;
  Trainer t(c, d, o);
  t.initialize();
  TrainData data(c.train_ds, c.model, 3, d.data_shard, d.num_data_shards);
  Measured m;
  for (const auto& [k, p] : t.state().params) m.param_bytes += double(p.nbytes());
  for (const auto& [k, s] : t.state().opt.slots) m.optimizer_bytes += double(s.nbytes());
  for (int s = 0; s < steps; ++s) {
    const Batch b = data.next();
    reset_step_counters(d);
    EXPECT_TRUE(t.train_step(b).finite);
    m.steps.push_back(step_counters(d));
  }
  return m;
}

TEST(PartitionReport, EqualsTheBytesOfRealStepsOnEveryMesh) {
  const int n = g_world->size();
  // 'model' up to 4: tiny and mini have 4 heads (on 8 processes (1,8) is
  // refused at start-up, "dim 0 'heads' of size 4 is not divisible by 8").
  for (Model model : {Model::kTiny, Model::kMini})
    for (int64_t m = 1; m <= std::min(n, 4); m *= 2)
      for (int param_dims : {1, 2}) {
        const std::string what = std::string(model == Model::kMini ? "mini" : "tiny") + " on mesh (" +
                                 std::to_string(n / m) + "," + std::to_string(m) + "), parameter dims " +
                                 std::to_string(param_dims);
        SCOPED_TRACE(what);
        const std::string dir = testing::shared_temp_dir(*g_world, "partition_m" + std::to_string(m));
        const TrainRunConfig c = config(dir, model, m, param_dims);
        PartitionOptions po;
        po.mesh = {n / m, m};
        po.rank = g_world->rank();
        const PartitionReport r = partition_report(c, po);
        const Measured real = run_steps(c, 2);
        EXPECT_EQ(real.param_bytes, r.param_bytes);
        EXPECT_EQ(real.optimizer_bytes, r.optimizer_bytes);
        if (n == 4 && param_dims == 2) { EXPECT_LE(r.state_fraction(), 0.27); }
        if (n == 1) { EXPECT_EQ(r.step.total_bytes(), 0.0); }
        for (size_t s = 0; s < real.steps.size(); ++s)
          for (int k = 0; k < kNumCollectives; ++k) {
            const double want = r.step.bytes[k], got = real.steps[s].bytes[k];
            EXPECT_NEAR(got, want, 0.01 * want) << collective_name(Collective(k)) << ", step " << s + 1;
            EXPECT_EQ(real.steps[s].calls[k], r.step.calls[k]) << collective_name(Collective(k)) << ", step " << s + 1;
          }
        if (n > 1) { EXPECT_GT(r.step.total_bytes(), 0.0); }
        if (g_world->rank() == 0)
          std::printf("[partition] %s: %.0f bytes per step (measured %.0f), parameters + optimizer %.0f B = %.2f%% "
                      "of one process's\n",
                      what.c_str(), r.step.total_bytes(), real.steps.back().total_bytes(),
                      r.param_bytes + r.optimizer_bytes, 100 * r.state_fraction());
      }
}

// Meshes past 2^20 processes are refused by name (--processes=99999999999
// hung with growing memory; 4294967297 wrapped to one process; data x model
// overflowed int).
TEST(PartitionReport, MeshesPastTheLimitAreRefused) {
  if (g_world->size() != 1) GTEST_SKIP() << "checked on one process";
  const TrainRunConfig c = config(testing::temp_dir("partition_limit"), Model::kMini, 1, 1);
  auto message = [&](const PartitionOptions& po) {
    try {
      partition_report(c, po);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  PartitionOptions po;
  po.processes = 99999999999;
  EXPECT_NE(message(po).find("--processes=99999999999: at most 1048576 processes"), std::string::npos) << message(po);
  po.processes = 4294967297;
  EXPECT_NE(message(po).find("at most 1048576"), std::string::npos) << message(po);
  po.processes = 0;
  po.mesh = {1000000, 1000000};
  EXPECT_NE(message(po).find("--mesh=data=1000000,model=1000000: at most 1048576 processes in all"), std::string::npos)
      << message(po);
}

TEST(PartitionReport, LayerExtrapolationEqualsTheDirectReport) {
  if (g_world->size() != 1) GTEST_SKIP() << "checked on one process (the simulation runs in-process)";
  const TrainRunConfig c = config(testing::temp_dir("partition_extrapolate"), Model::kMini, 2, 2);
  ASSERT_EQ(c.model.network.num_encoder_layers, 4);
  PartitionOptions po;
  po.mesh = {4, 2};
  po.rank = 5;
  const PartitionReport direct = partition_report(c, po);
  po.extrapolate_layers = true;
  const PartitionReport ext = partition_report(c, po);
  EXPECT_DOUBLE_EQ(ext.param_bytes, direct.param_bytes);
  EXPECT_DOUBLE_EQ(ext.optimizer_bytes, direct.optimizer_bytes);
  EXPECT_DOUBLE_EQ(ext.param_bytes_one, direct.param_bytes_one);
  for (int k = 0; k < kNumCollectives; ++k) {
    EXPECT_NEAR(ext.step.bytes[k], direct.step.bytes[k], 1e-9 * direct.step.bytes[k]) << collective_name(Collective(k));
    EXPECT_EQ(ext.step.calls[k], direct.step.calls[k]) << collective_name(Collective(k));
  }
  std::printf("[partition] mini on (4,2) rank 5: step peak %.0f B direct, %.0f B extrapolated\n", direct.step_peak_bytes,
              ext.step_peak_bytes);
}

// T5X_PARTITION_RSS=D,M: mini with 2-D parameters, 3 steps on mesh (D, M).
int rss_run(const std::string& mesh) {
  const auto comma = mesh.find(',');
  const int64_t data = std::stoll(mesh.substr(0, comma)), model = std::stoll(mesh.substr(comma + 1));
  if (data * model != g_world->size()) {
    std::fprintf(stderr, "T5X_PARTITION_RSS=%s needs %lld processes\n", mesh.c_str(), (long long)(data * model));
    return 1;
  }
  const TrainRunConfig c = config(testing::shared_temp_dir(*g_world, "partition_rss"), Model::kMini, model, 2);
  const Measured m = run_steps(c, 3);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  std::printf("[rss] mini, 2-D parameters, mesh (%lld,%lld), rank %d: peak RSS %.1f MiB; parameters + optimizer "
              "%.0f B\n",
              (long long)data, (long long)model, g_world->rank(), double(u.ru_maxrss) / 1024,
              m.param_bytes + m.optimizer_bytes);
  return 0;
}

}  // namespace
}  // namespace t5x::trainer

int main(int argc, char** argv) {
  if (const char* rss = std::getenv("T5X_PARTITION_RSS")) {
    t5x::g_world = t5x::init_communicator();
    return t5x::trainer::rss_run(rss);
  }
  return t5x::testing_mpi::main_on_every_rank(argc, argv, t5x::g_world, [] {});
}
