// Restore on a different mesh, as a chain: a checkpoint written by one
// process (mesh data=1, model=1) is resumed for one step by `mpirun -np 4` on
// (data=2, model=2), and that checkpoint for one more step by `mpirun -np 2`
// on (data=1, model=2). Both steps' losses must equal an uninterrupted
// single-process run's (1e-6 relative), and the final parameters agree to
// 1e-4 (the gradient all-reduce sums in another order). The data position
// saved by 1 process carries over to 4 and 2 (the stream is global). Written
// against the `t5x train` CLI only.
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

TEST(MeshRestore, ChainOneByOneToTwoByTwoToOneByTwoKeepsTheLosses) {
  const int kSteps = 3;
  const std::string root = temp_dir("mesh");
  RunResult base = sh(join_cmd(train_argv(root + "/base", kSteps, kSteps)));
  ASSERT_EQ(base.rc, 0) << base.out;
  // The reference: the same run continued on one process.
  fs::copy(root + "/base", root + "/ref", fs::copy_options::recursive);
  ASSERT_EQ(resume(root + "/ref", 1, 1, kSteps + 1).rc, 0);
  ASSERT_EQ(resume(root + "/ref", 1, 1, kSteps + 2).rc, 0);
  // The chain: (1x1) -> (2x2) -> (1x2).
  const std::string dir = root + "/chain";
  fs::copy(root + "/base", dir, fs::copy_options::recursive);
  struct Hop { int np, parts, step; };
  for (const Hop h : {Hop{4, 2, kSteps + 1}, Hop{2, 2, kSteps + 2}}) {
    RunResult r = resume(dir, h.np, h.parts, h.step);
    ASSERT_EQ(r.rc, 0) << "np " << h.np << "\n" << r.out;
    EXPECT_NE(r.out.find("resumed from " + dir + "/checkpoint_" + std::to_string(h.step - 1)), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("data position from the run on"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("restarts from its beginning"), std::string::npos) << r.out;
  }
  auto ref = losses(root + "/ref"), got = losses(dir);
  for (int s = kSteps + 1; s <= kSteps + 2; ++s) {
    ASSERT_TRUE(ref.count(s) && got.count(s)) << "step " << s;
    EXPECT_NEAR(got[s], ref[s], 1e-6 * std::abs(ref[s])) << "step " << s;
  }
  auto r1 = CheckpointReader::open(root + "/ref/checkpoint_" + std::to_string(kSteps + 2));
  auto rc = CheckpointReader::open(dir + "/checkpoint_" + std::to_string(kSteps + 2));
  for (const auto& p : r1.array_paths())
    if (p.rfind("target/", 0) == 0) { EXPECT_LE(max_rel_diff(r1.read(p), rc.read(p)), 1e-4) << p; }
  fs::remove_all(root);
}

}  // namespace
}  // namespace t5x::ckpt_testing
