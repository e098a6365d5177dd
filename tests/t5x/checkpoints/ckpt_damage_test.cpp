// Checkpoints that prove themselves (issue 22, findings 1, 2, 8 and 10), with
// the real `t5x` binary and the trial's damage:
//   - a truncated chunk, 16 flipped bytes in a chunk or in the middle of the
//     msgpack, a deleted .zarray in the newest checkpoint: `t5x train` falls
//     back to the previous step, names the damaged file, moves the step aside
//     (checkpoint_N.damaged-<time>) and trains and saves it again, bitwise
//     the uninterrupted run's;
//   - `t5x ckpt info checkpoint_N` verifies by default: the same damage and
//     half the arrays deleted exit 1 naming the file, as `ckpt info MODEL_DIR`
//     skips the step for the same reason;
//   - temporary directories of interrupted saves are removed at start.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cli_util.h"

namespace t5x::ckpt_testing {
namespace {

namespace fs = std::filesystem;

RunResult train(const std::string& dir, int steps) {
  RunResult r = sh(join_cmd(train_argv(dir, steps, 2)));
  EXPECT_EQ(r.rc, 0) << r.out;
  return r;
}

RunResult info(const std::string& path, const std::string& flags = "") {
  return sh(quote(t5x_bin()) + " ckpt info " + flags + (flags.empty() ? "" : " ") + quote(path));
}

// Flips 16 bytes in the middle of a file; the size stays.
void flip16(const std::string& path) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  const auto size = fs::file_size(path);
  ASSERT_GT(size, 32u) << path;
  f.seekg(std::streamoff(size / 2));
  char b[16];
  f.read(b, 16);
  for (char& c : b) c = char(c ^ 0x5a);
  f.seekp(std::streamoff(size / 2));
  f.write(b, 16);
}

// The trial's damage to `ckpt` (a checkpoint_N); returns the damaged path.
enum class Damage { truncate_chunk, flip_chunk, flip_msgpack, delete_zarray, delete_half };
std::string damage(const std::string& ckpt, Damage d) {
  const std::string array = ckpt + "/target.encoder.layers_0.mlp.wi_0.kernel";
  switch (d) {
    case Damage::truncate_chunk:  // truncate -s 100
      EXPECT_GT(fs::file_size(array + "/0.0"), 100u);
      fs::resize_file(array + "/0.0", 100);
      return array + "/0.0";
    case Damage::flip_chunk:
      flip16(array + "/0.0");
      return array + "/0.0";
    case Damage::flip_msgpack:
      flip16(ckpt + "/checkpoint");
      return ckpt + "/checkpoint";
    case Damage::delete_zarray:
      fs::remove(array + "/.zarray");
      return array + "/.zarray";
    case Damage::delete_half: {
      std::vector<fs::path> arrays;
      for (const auto& e : fs::directory_iterator(ckpt))
        if (e.is_directory()) arrays.push_back(e.path());
      std::sort(arrays.begin(), arrays.end());
      EXPECT_GT(arrays.size(), 20u);
      for (size_t i = 0; i < arrays.size(); i += 2) fs::remove_all(arrays[i]);
      return arrays[0].string();
    }
  }
  return "";
}

std::vector<std::string> damaged_dirs(const std::string& model_dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(model_dir))
    if (e.path().filename().string().find(".damaged-") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// Findings 1 and 2: before, a truncated chunk was skipped but never saved
// again ("done at step 4" with checkpoint_4 still damaged); a flipped chunk
// died with an inflate error; a flipped msgpack restored garbage.
TEST(CkptDamage, DamagedNewestCheckpointIsMovedAsideAndSavedAgain) {
  const std::string root = temp_dir("damage_resume");
  train(root + "/ref", 4);
  const auto want = digests(root + "/ref/checkpoint_4");
  ASSERT_GT(want.size(), 20u);
  const std::pair<Damage, const char*> cases[] = {
      {Damage::truncate_chunk, ": truncated or corrupt (100 bytes; the manifest records "},
      {Damage::flip_chunk, ": crc32c 0x"},
      {Damage::flip_msgpack, ": crc32c 0x"},
      {Damage::delete_zarray, " is missing (listed in manifest.t5xcpp.json)"},
  };
  int k = 0;
  for (const auto& [how, message] : cases) {
    const std::string run = root + "/run" + std::to_string(k++);
    SCOPED_TRACE(run);
    fs::copy(root + "/ref", run, fs::copy_options::recursive);
    const std::string ckpt = run + "/checkpoint_4";
    const std::string file = damage(ckpt, how);
    RunResult r = train(run, 4);
    EXPECT_NE(r.out.find("warning: checkpoints skipped"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("skipped " + ckpt + ": " + file + message), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("moved " + ckpt + " aside to " + ckpt + ".damaged-"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("resumed from " + run + "/checkpoint_2"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("non-finite"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("done at step 4"), std::string::npos) << r.out;
    // Step 4 was trained and saved again: bitwise the uninterrupted run's.
    std::string err;
    EXPECT_EQ(digests(ckpt, &err), want) << err;
    ASSERT_EQ(damaged_dirs(run).size(), 1u);
    EXPECT_EQ(info(damaged_dirs(run)[0]).rc, 1);  // kept as it was, for a look
    // The next start finds it complete.
    r = train(run, 4);
    EXPECT_NE(r.out.find("resumed from " + ckpt), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("skipped"), std::string::npos) << r.out;
  }
  fs::remove_all(root);
}

// Finding 8: `ckpt info checkpoint_N` called all of these fine.
// Every restore checks the msgpack against the manifest, not only a resume's
// scan (bad-input sweep, session 59): a fine-tune whose initial checkpoint
// has a flipped msgpack (the step and small arrays; no codec checksum guards
// them) used to start from its garbage step.
TEST(CkptDamage, InitialCheckpointWithAFlippedMsgpackIsRefused) {
  const std::string root = temp_dir("damage_initial");
  train(root + "/ref", 2);
  auto finetune = [&](const std::string& model_dir, const std::string& initial) {
    std::vector<std::string> argv = train_argv(model_dir, 4, 2, {"INITIAL_CHECKPOINT_PATH = '" + initial + "'"});
    std::replace(argv.begin(), argv.end(), std::string("--gin_file=configs/runs/pretrain.gin"),
                 std::string("--gin_file=configs/runs/finetune.gin"));
    return sh(join_cmd(argv));
  };
  // Intact, it is restored: the run fine-tunes from its step.
  RunResult r = finetune(root + "/ft_ok", root + "/ref/checkpoint_2");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("restored parameters and optimizer state from " + root + "/ref/checkpoint_2 (step 2)"),
            std::string::npos) << r.out;
  // Damaged, it is refused, naming the file.
  fs::copy(root + "/ref", root + "/bad", fs::copy_options::recursive);
  const std::string file = damage(root + "/bad/checkpoint_2", Damage::flip_msgpack);
  r = finetune(root + "/ft_bad", root + "/bad/checkpoint_2");
  EXPECT_NE(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(file + ": crc32c 0x"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("differs from the manifest's"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(root + "/ft_bad/checkpoint_4")) << r.out;
}

TEST(CkptDamage, InfoVerifiesByDefault) {
  const std::string root = temp_dir("damage_info");
  train(root + "/ref", 2);
  RunResult r = info(root + "/ref/checkpoint_2");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find(" files match manifest.t5xcpp.json (sizes and crc32c)"), std::string::npos) << r.out;
  const std::pair<Damage, const char*> cases[] = {
      {Damage::truncate_chunk, ": truncated or corrupt (100 bytes"},
      {Damage::flip_chunk, ": crc32c 0x"},
      {Damage::flip_msgpack, ": crc32c 0x"},
      {Damage::delete_zarray, " is missing (listed in manifest.t5xcpp.json)"},
      {Damage::delete_half, "/"},
  };
  int k = 0;
  for (const auto& [how, message] : cases) {
    const std::string model = root + "/m" + std::to_string(k++);
    SCOPED_TRACE(model);
    fs::copy(root + "/ref", model, fs::copy_options::recursive);
    const std::string ckpt = model + "/checkpoint_2";
    const std::string file = damage(ckpt, how);
    r = info(ckpt);
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find(ckpt + " is damaged: " + file + message), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("hint: use an earlier step"), std::string::npos) << r.out;
    EXPECT_EQ(info(ckpt, "--digest_only").rc, 1);
    // The MODEL_DIR view agrees: the step is skipped for the same reason.
    r = info(model);
    EXPECT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("skipped " + ckpt + ": " + file + message), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("checkpoint " + model + "/checkpoint_0\n"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(ckpt));  // info only looks
  }
  // Sizes alone miss a flip; --verify=none checks nothing; bad values are usage errors.
  const std::string flipped = root + "/m1/checkpoint_2";
  EXPECT_EQ(info(flipped, "--verify=sizes").rc, 0);
  EXPECT_EQ(info(root + "/m0/checkpoint_2", "--verify=none").rc, 0);
  EXPECT_EQ(info(flipped, "--verify=crc").rc, 64);
  fs::remove_all(root);
}

// Finding 10: leftover checkpoint_*.tmp-* directories piled up.
TEST(CkptDamage, TemporaryDirectoriesOfInterruptedSavesAreRemovedAtStart) {
  const std::string root = temp_dir("damage_tmp");
  const std::string run = root + "/run";
  train(run, 2);
  const std::string t1 = run + "/checkpoint_4.tmp-1700000000", t2 = run + "/checkpoint_3.tmp-1700000001";
  fs::create_directories(t1 + "/target.encoder.layers_0.mlp.wi_0.kernel");
  std::ofstream(t1 + "/target.encoder.layers_0.mlp.wi_0.kernel/0.0") << "half a chunk";
  fs::create_directories(t2);
  RunResult r = train(run, 4);
  EXPECT_NE(r.out.find("removed " + t1 + ": half-written temporary directory of an interrupted save"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("removed " + t2 + ": half-written"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(t1));
  EXPECT_FALSE(fs::exists(t2));
  EXPECT_EQ(info(run + "/checkpoint_4").rc, 0);
  r = train(run, 4);
  EXPECT_EQ(r.out.find("removed"), std::string::npos) << r.out;
  fs::remove_all(root);
}

}  // namespace
}  // namespace t5x::ckpt_testing
