// A full disk during a save, with the real binary: MODEL_DIR lies on a small
// tmpfs mounted in a private mount namespace (`unshare -m`, as root), so the
// mount is invisible outside the test and goes away with it. The run trains
// to step 2; the free space is then cut to half a checkpoint and the run
// continues to step 4. The save of checkpoint_4 must fail with an error that
// names ENOSPC and the file, name checkpoint_2 as the newest complete one,
// leave no half-written directory, and leave checkpoint_2 bitwise unchanged.
// Without root or unshare the test fails (it never skips) and says why.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_util.h"

namespace t5x::ckpt_testing {
namespace {

namespace fs = std::filesystem;

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Runs `script` (which mounts its tmpfs first) in a private mount namespace;
// asserts that it got through its own steps, `codes` saying what each exit
// code names, `log` the file to show when it did not.
void run_scenario(const std::string& root, const std::string& script, const std::string& codes,
                  const std::string& log) {
  std::ofstream(root + "/scenario.sh") << script;
  RunResult r = sh("unshare -m --propagation private sh " + quote(root + "/scenario.sh"));
  ASSERT_EQ(r.rc, 0) << "the scenario needs a private tmpfs: run as root (CAP_SYS_ADMIN) with unshare and mount "
                        "(util-linux); exit 90 = mount failed, " << codes << "\n"
                     << r.out << slurp(log);
  std::cout << r.out;
}

TEST(DiskFull, SaveFailsWithENOSPCAndKeepsThePreviousCheckpoint) {
  const std::string root = temp_dir("disk_full");
  const std::string mnt = root + "/mnt", run = mnt + "/run";
  fs::create_directories(mnt);
  const std::string t5x = quote(t5x_bin());
  // Free space left for checkpoint_4: half of checkpoint_2's blocks.
  const std::string script =
      "set -u\n"
      "mount -t tmpfs -o size=64m tmpfs " + quote(mnt) + " || { echo 'cannot mount tmpfs'; exit 90; }\n" +
      join_cmd(train_argv(run, 2, 2)) + " > " + quote(root + "/phase1.log") + " 2>&1 || exit 91\n" +
      t5x + " ckpt info --digest_only " + quote(run + "/checkpoint_2") + " > " + quote(root + "/before.txt") +
      " || exit 92\n"
      "free=$(df --output=avail -k " + quote(mnt) + " | tail -1)\n"
      "ckpt=$(du -sk " + quote(run + "/checkpoint_2") + " | cut -f1)\n"
      "echo \"free ${free}k, checkpoint ${ckpt}k\"\n"
      "fallocate -l $(( (free - ckpt / 2) * 1024 )) " + quote(mnt + "/filler") + " || exit 93\n" +
      join_cmd(train_argv(run, 4, 2)) + " > " + quote(root + "/phase2.log") + " 2>&1\n"
      "echo $? > " + quote(root + "/phase2.rc") + "\n" +
      t5x + " ckpt info --digest_only " + quote(run + "/checkpoint_2") + " > " + quote(root + "/after.txt") +
      " 2>&1\n"
      "ls -a " + quote(run) + " > " + quote(root + "/ls.txt") + "\n";
  run_scenario(root, script, "91 = first run, 92 = ckpt info, 93 = fallocate", root + "/phase1.log");
  if (HasFatalFailure()) return;

  const std::string log = slurp(root + "/phase2.log");
  std::cout << log;
  EXPECT_NE(std::stoi(slurp(root + "/phase2.rc")), 0) << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  // The named error: ENOSPC, the file being written, the checkpoint kept.
  EXPECT_NE(log.find("saving the checkpoint of step 4 failed"), std::string::npos) << log;
  EXPECT_NE(log.find("No space left on device (ENOSPC)"), std::string::npos) << log;
  EXPECT_NE(log.find("'" + run + "/checkpoint_4.tmp-"), std::string::npos) << log;
  EXPECT_NE(log.find("the newest complete checkpoint is " + run + "/checkpoint_2 (intact)"), std::string::npos) << log;
  EXPECT_NE(log.find("hint: or keep fewer checkpoints (utils.SaveCheckpointConfig.keep)"), std::string::npos) << log;
  // Nothing half-written is left; checkpoint_2 is bitwise what it was.
  const std::string ls = slurp(root + "/ls.txt");
  EXPECT_NE(ls.find("checkpoint_2\n"), std::string::npos) << ls;
  EXPECT_EQ(ls.find("checkpoint_4"), std::string::npos) << ls;
  const std::string before = slurp(root + "/before.txt"), after = slurp(root + "/after.txt");
  EXPECT_GT(before.size(), 1000u) << before;
  EXPECT_EQ(before, after);
  fs::remove_all(root);
}

// `t5x ckpt export-hf` into a directory whose filesystem fills up during the
// write: the error names ENOSPC, the safetensors file already there is left
// as it was, and no part of the new one stays behind.
TEST(DiskFull, ExportHfFailsWithENOSPCAndLeavesNoPartialFile) {
  const std::string root = temp_dir("disk_full_export");
  const std::string mnt = root + "/mnt", run = root + "/run", hf = mnt + "/hf";
  fs::create_directories(mnt);
  const std::string t5x = quote(t5x_bin());
  RunResult tr = sh(join_cmd(train_argv(run, 2, 2)));
  ASSERT_EQ(tr.rc, 0) << tr.out;
  const std::string ckpt = quote(run + "/checkpoint_2");
  const std::string script =
      "set -u\n"
      "mount -t tmpfs -o size=64m tmpfs " + quote(mnt) + " || { echo 'cannot mount tmpfs'; exit 90; }\n" +
      t5x + " ckpt export-hf " + ckpt + " " + quote(hf) + " > " + quote(root + "/first.log") + " 2>&1 || exit 91\n"
      "cp " + quote(hf + "/model.safetensors") + " " + quote(root + "/first.safetensors") + " || exit 92\n"
      "free=$(df --output=avail -k " + quote(mnt) + " | tail -1)\n"
      "size=$(du -k " + quote(hf + "/model.safetensors") + " | cut -f1)\n"
      "fallocate -l $(( (free - size / 2) * 1024 )) " + quote(mnt + "/filler") + " || exit 93\n" +
      t5x + " ckpt export-hf " + ckpt + " " + quote(hf) + " > " + quote(root + "/second.log") + " 2>&1\n"
      "echo $? > " + quote(root + "/second.rc") + "\n"
      "cmp " + quote(hf + "/model.safetensors") + " " + quote(root + "/first.safetensors") + " > " +
      quote(root + "/cmp.txt") + " 2>&1; echo $? >> " + quote(root + "/cmp.txt") + "\n"
      "ls -a " + quote(hf) + " > " + quote(root + "/ls.txt") + "\n";
  run_scenario(root, script, "91 = first export, 92 = copy, 93 = fallocate", root + "/first.log");
  if (HasFatalFailure()) return;
  const std::string log = slurp(root + "/second.log");
  EXPECT_NE(std::stoi(slurp(root + "/second.rc")), 0) << log;
  EXPECT_NE(log.find("No space left on device (ENOSPC)"), std::string::npos) << log;
  EXPECT_NE(log.find("hint: free space on that filesystem"), std::string::npos) << log;
  EXPECT_EQ(log.find("SaveCheckpointConfig"), std::string::npos) << log;  // not a training run's save
  EXPECT_EQ(slurp(root + "/cmp.txt"), "0\n");  // the earlier export's file, unchanged
  const std::string ls = slurp(root + "/ls.txt");
  EXPECT_NE(ls.find("model.safetensors\n"), std::string::npos) << ls;
  EXPECT_EQ(ls.find(".tmp-"), std::string::npos) << ls;
  fs::remove_all(root);
}

}  // namespace
}  // namespace t5x::ckpt_testing
