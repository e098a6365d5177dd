// Restore on a different mesh: a checkpoint written by one process (mesh
// data=1, model=1), minus its data position (see below), is resumed for one
// more step by `mpirun -np 2` on a (data=1, model=2) mesh and by
// `mpirun -np 4` on (data=2, model=2). The loss of that step must equal the
// single-process continuation's (1e-6 relative); the saved parameters agree
// to 1e-4 (the gradient all-reduce sums in another order). Written against
// the `t5x train` CLI only, so it holds whether parameters are replicated or
// sharded over the model axis.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "cli_util.h"
#include "t5x/checkpoints/checkpoint_dir.h"

namespace t5x::ckpt_testing {
namespace {

namespace fs = std::filesystem;

RunResult resume(const std::string& dir, int np, int parts, int steps) {
  std::string cmd;
  if (np > 1) cmd = std::string(T5X_MPIEXEC) + " " + T5X_MPIEXEC_FLAGS + " -np " + std::to_string(np) + " ";
  cmd += join_cmd(train_argv(dir, steps, 1, {"partitioning.PjitPartitioner.num_partitions = " + std::to_string(parts)}));
  return sh(cmd);
}

double max_rel_diff(const HostTensor& a, const HostTensor& b) {
  auto x = a.values<float>(), y = b.values<float>();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i)
    m = std::max(m, std::abs(double(x[i]) - double(y[i])) / std::max(1e-3, std::abs(double(x[i]))));
  return m;
}

TEST(MeshRestore, OneByOneCheckpointResumesOnOtherMeshesWithTheSameLoss) {
  const int kSteps = 3;
  const std::string root = temp_dir("mesh");
  RunResult base = sh(join_cmd(train_argv(root + "/base", kSteps, kSteps)));
  ASSERT_EQ(base.rc, 0) << base.out;
  struct Case { const char* name; int np, parts; };
  const Case cases[] = {{"np1_1x1", 1, 1}, {"np2_1x2", 2, 2}, {"np4_2x2", 4, 2}};
  std::map<std::string, double> loss;
  for (const Case& c : cases) {
    const std::string dir = root + "/" + c.name;
    fs::copy(root + "/base", dir, fs::copy_options::recursive);
    // The trainer keeps a data position per process count (train_ds-P-of-N)
    // and restarts the stream when N changes. Dropping it for every case makes
    // all continuations read the same batch, so the test isolates the restore
    // of parameters and optimizer state onto the new mesh.
    for (const auto& e : fs::directory_iterator(dir + "/checkpoint_" + std::to_string(kSteps)))
      if (e.path().filename().string().rfind("train_ds-", 0) == 0) fs::remove(e.path());
    RunResult r = resume(dir, c.np, c.parts, kSteps + 1);
    ASSERT_EQ(r.rc, 0) << c.name << "\n" << r.out;
    EXPECT_NE(r.out.find("resumed from " + dir + "/checkpoint_" + std::to_string(kSteps)), std::string::npos) << r.out;
    auto l = losses(dir);
    ASSERT_TRUE(l.count(kSteps + 1)) << c.name;
    loss[c.name] = l[kSteps + 1];
  }
  const double ref = loss["np1_1x1"];
  for (const Case& c : cases)
    EXPECT_NEAR(loss[c.name], ref, 1e-6 * std::abs(ref)) << c.name << " step " << kSteps + 1;
  auto r1 = CheckpointReader::open(root + "/np1_1x1/checkpoint_" + std::to_string(kSteps + 1));
  for (const Case& c : cases) {
    auto rc = CheckpointReader::open(root + "/" + c.name + "/checkpoint_" + std::to_string(kSteps + 1));
    for (const auto& p : r1.array_paths())
      if (p.rfind("target/", 0) == 0) {
        EXPECT_LE(max_rel_diff(r1.read(p), rc.read(p)), 1e-4) << c.name << " " << p;
      }
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace t5x::ckpt_testing
