// `mpirun -np N t5x train` with (data, model) meshes (2,1), (1,2), (2,2)
// gives the single-process losses (issue 6 acceptance), running the real
// binary as separate processes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace t5x::trainer {
namespace {

namespace fs = std::filesystem;

std::map<int64_t, double> run(const std::string& name, int np, int num_partitions) {
  std::string dir = testing::temp_dir("mpi_" + name);
  std::string cmd;
  if (np > 1) cmd = std::string(T5X_MPIEXEC) + " " + T5X_MPIEXEC_FLAGS + " -np " + std::to_string(np) + " ";
  cmd += std::string(T5X_BINARY_DIR) + "/bin/t5x train --gin_file=configs/models/t5_1_1/tiny.gin "
         "--gin_file=configs/runs/pretrain.gin";
  auto b = testing::tiny_bindings(dir, 6);
  b.push_back("partitioning.PjitPartitioner.num_partitions = " + std::to_string(num_partitions));
  b.push_back("utils.SaveCheckpointConfig.period = 6");
  for (const auto& x : b) cmd += " \"--gin_bindings=" + x + "\"";
  cmd += " > " + dir + ".log 2>&1";
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\n" << std::ifstream(dir + ".log").rdbuf();
  std::map<int64_t, double> loss;
  std::ifstream f(dir + "/train/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) loss[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  EXPECT_TRUE(fs::exists(dir + "/checkpoint_6/checkpoint"));
  for (int r = 0; r < np; ++r)
    EXPECT_TRUE(fs::exists(dir + "/checkpoint_6/train_ds-00" + std::to_string(r) + "-of-00" + std::to_string(np) + ".json"));
  return loss;
}

TEST(TrainerMpi, MeshesGiveTheSingleProcessLosses) {
  auto ref = run("np1", 1, 1);
  ASSERT_EQ(ref.size(), 6u);
  struct Case { const char* name; int np, parts; };
  for (Case c : {Case{"data2", 2, 1}, Case{"model2", 2, 2}, Case{"data2_model2", 4, 2}}) {
    auto got = run(c.name, c.np, c.parts);
    ASSERT_EQ(got.size(), ref.size()) << c.name;
    for (const auto& [step, l] : ref)
      EXPECT_NEAR(got[step], l, 1e-4 * std::abs(l)) << c.name << " step " << step;
  }
}

}  // namespace
}  // namespace t5x::trainer
