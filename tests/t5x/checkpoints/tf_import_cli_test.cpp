// `t5x ckpt import-tf` / `info PREFIX` and fine-tuning from a TensorFlow prefix,
// on the committed fixture tests/data/tf_mtf_tiny/: `t5x/checkpoint_2` is a
// tiny T5.1.1 trained two steps by `t5x train` (saved as bfloat16) and
// `model.ckpt-2` the same weights and Adafactor slots written by TensorFlow
// under Mesh-TF names (scripts/golden/tf_meshtf_checkpoint.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_util.h"

namespace t5x::ckpt_testing {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(T5X_SOURCE_DIR) + "/tests/data/tf_mtf_tiny";
const std::string kPrefix = kData + "/model.ckpt-2";
const std::string kOriginal = kData + "/t5x/checkpoint_2";
const std::string kGoogle = std::string(T5X_SOURCE_DIR) + "/../shared/fixtures/mtf_tiny_t5/model.ckpt-0";

std::string slurp(const std::string& f) {
  std::ifstream in(f);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string score(const std::string& ckpt, const std::string& model_gin, const std::string& out) {
  std::vector<std::string> argv = {t5x_bin(), "infer", "--gin_file=" + model_gin, "--gin_search_paths=configs/models",
                                   "--gin_file=configs/runs/infer.gin"};
  for (const std::string& b : {"CHECKPOINT_PATH = '" + ckpt + "'", "INFER_OUTPUT_DIR = '" + out + "'",
                               std::string("MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'"),
                               std::string("MIXTURE_OR_TASK_SPLIT = 'validation'"),
                               std::string("TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}"),
                               std::string("BATCH_SIZE = 8"), std::string("infer_script.infer.mode = 'score'")})
    argv.push_back("--gin_bindings=" + b);
  RunResult r = sh(join_cmd(argv));
  EXPECT_EQ(r.rc, 0) << join_cmd(argv) << "\n" << r.out;
  return slurp(out + "/gpl3_lines_copy-score.jsonl-00000-of-00001");
}

// TensorFlow's bytes of the original arrays come back bitwise, and the
// imported checkpoint scores exactly as the original.
TEST(TfImport, RoundTripIsBitwiseAndScoresMatch) {
  const std::string root = temp_dir("tf_rt");
  RunResult im = sh(quote(t5x_bin()) + " ckpt import-tf " + quote(kPrefix) + " " + quote(root + "/model") + " --dtype=keep");
  ASSERT_EQ(im.rc, 0) << im.out;
  EXPECT_NE(im.out.find("(step 2)"), std::string::npos) << im.out;
  std::string err;
  auto a = digests(kOriginal, &err);
  ASSERT_FALSE(a.empty()) << err;
  auto b = digests(root + "/model/checkpoint_2", &err);
  EXPECT_EQ(a, b) << err;
  EXPECT_EQ(a.at("target/token_embedder/embedding").substr(0, 18), "bfloat16 (1152,8) ");
  const std::string s0 = score(kOriginal, root + "/model/model.gin", root + "/score_a");
  const std::string s1 = score(root + "/model/checkpoint_2", root + "/model/model.gin", root + "/score_b");
  EXPECT_NE(s0.find("\"score\":"), std::string::npos) << s0;
  EXPECT_EQ(s0, s1);
  // Importing into the run again (any step) refuses, keeping its model.gin.
  const std::string gin = fileio_read(root + "/model/model.gin");
  RunResult again = sh(quote(t5x_bin()) + " ckpt import-tf " + quote(kPrefix) + " " + quote(root + "/model") + " --step=9");
  EXPECT_EQ(again.rc, 1);
  EXPECT_NE(again.out.find(root + "/model already holds checkpoint_2, model.gin"), std::string::npos) << again.out;
  EXPECT_FALSE(fs::exists(root + "/model/checkpoint_9"));
  EXPECT_EQ(fileio_read(root + "/model/model.gin"), gin);
  fs::remove_all(root);
}

TEST(TfImport, InfoListsTensorFlowCheckpoints) {
  RunResult r = sh(quote(t5x_bin()) + " ckpt info " + quote(kPrefix));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("TensorFlow checkpoint " + kPrefix + ": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nshared/embedding bfloat16 (1152, 8) shard 0 in 2 slices crc ok -> "
                       "target/token_embedder/embedding\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nglobal_step int64 () shard 0 offset 5296 size 8 crc ok -> state/step\n"), std::string::npos)
      << r.out;
  // Adafactor's factored slots of a 2-D kernel: vr drops the larger dim, vc the smaller one.
  EXPECT_NE(r.out.find("\nshared/embedding_slot_vc float32 (1152,) shard 1 offset 39856 size 4608 crc ok -> "
                       "state/param_states/token_embedder/embedding/v_col\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nshared/embedding_slot_vr float32 (8,) shard 1 offset 44464 size 32 crc ok -> "
                       "state/param_states/token_embedder/embedding/v_row\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n143 of 143 tensors read with matching CRCs\n"), std::string::npos) << r.out;
  // The Google-written index: everything listed, shard 0 checked, shard 1 absent.
  RunResult g = sh(quote(t5x_bin()) + " ckpt info " + quote(kGoogle));
  EXPECT_EQ(g.rc, 1) << g.out;
  EXPECT_NE(g.out.find(": 105 tensors in 2 shard(s); index 2 block(s) read, CRCs ok, snappy-compressed\n"),
            std::string::npos) << g.out;
  EXPECT_NE(g.out.find("\nglobal_step int64 () shard 0 offset 0 size 8 crc ok -> state/step\n"), std::string::npos)
      << g.out;
  EXPECT_NE(g.out.find("\nencoder/block_000/layer_000/SelfAttention/q bfloat16 (32, 128) shard 1 offset "),
            std::string::npos) << g.out;
  EXPECT_NE(g.out.find("1 of 105 tensors read with matching CRCs; 104 not checked: " + kGoogle +
                       ".data-00001-of-00002 missing\n"), std::string::npos) << g.out;
}

TEST(TfImport, BadInputsNameTheFile) {
  const std::string root = temp_dir("tf_bad");
  RunResult r = sh(quote(t5x_bin()) + " ckpt import-tf " + quote(root + "/nope") + " " + quote(root + "/m"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "t5x ckpt import-tf: " + root + "/nope.index: missing\n  hint: give the checkpoint prefix, e.g. "
                   ".../model.ckpt-1000000 (the files are PREFIX.index and PREFIX.data-*-of-*)\n");
  // A damaged copy: one flipped byte in the second data shard.
  for (const auto& e : fs::directory_iterator(kData))
    if (e.is_regular_file()) fs::copy_file(e.path(), root + "/" + e.path().filename().string());
  const std::string shard = root + "/model.ckpt-2.data-00001-of-00002";
  fs::permissions(shard, fs::perms::owner_write, fs::perm_options::add);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    char c;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(100);
    f.write(&c, 1);
  }
  r = sh(quote(t5x_bin()) + " ckpt import-tf " + quote(root + "/model.ckpt-2") + " " + quote(root + "/m"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("t5x ckpt import-tf: " + shard + ": tensor '"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("' at offset 0 ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bytes): crc32c mismatch (stored 0x"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(root + "/m/checkpoint_2")) << "nothing is written from a damaged checkpoint";
  RunResult info = sh(quote(t5x_bin()) + " ckpt info " + quote(root + "/model.ckpt-2"));
  EXPECT_EQ(info.rc, 1);
  EXPECT_NE(info.out.find(" BAD: " + shard + ": tensor '"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("; 1 damaged\n"), std::string::npos) << info.out;
  fs::remove_all(root);
}

// A copy of the fixture in a directory with TensorFlow's `checkpoint` state
// file, as tf.train.Saver leaves it.
std::string state_file_dir(const std::string& root) {
  const std::string d = root + "/tf_dir";
  fs::create_directories(d);
  for (const auto& e : fs::directory_iterator(kData))
    if (e.is_regular_file() && e.path().filename().string().starts_with("model.ckpt-2."))
      fs::copy_file(e.path(), d + "/" + e.path().filename().string());
  std::ofstream(d + "/checkpoint") << "model_checkpoint_path: \"model.ckpt-2\"\n"
                                      "all_model_checkpoint_paths: \"model.ckpt-2\"\n";
  return d;
}

std::vector<std::string> finetune_argv(const std::string& dir, int steps, const std::vector<std::string>& extra,
                                       const std::string& initial = kPrefix) {
  std::vector<std::string> a = {t5x_bin(), "train", "--gin_file=configs/models/t5_1_1/tiny.gin",
                                "--gin_file=configs/runs/finetune.gin"};
  std::vector<std::string> b = {"MODEL_DIR = '" + dir + "'", "INITIAL_CHECKPOINT_PATH = '" + initial + "'",
                                "MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'",
                                "TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}",
                                "TRAIN_STEPS = " + std::to_string(steps), "BATCH_SIZE = 4", "USE_CACHED_TASKS = False",
                                "RANDOM_SEED = 3", "DROPOUT_RATE = 0.0", "network.T5Config.vocab_size = 1152",
                                // As the fixture was trained: every 2-D kernel factored.
                                "adafactor.Adafactor.min_dim_size_to_factor = 8",
                                "utils.SaveCheckpointConfig.period = 100", "train_script.train.stats_period = 1",
                                "train_script.train.eval_period = 1000",
                                "utils.create_learning_rate_scheduler.factors = 'constant'",
                                "utils.create_learning_rate_scheduler.base_learning_rate = 0.05"};
  b.insert(b.end(), extra.begin(), extra.end());
  for (const auto& x : b) a.push_back("--gin_bindings=" + x);
  return a;
}

void expect_loss_falls(const std::string& dir, int64_t first) {
  auto l = losses(dir);
  ASSERT_GE(l.size(), 6u);
  const double head = (l.begin()->second + std::next(l.begin())->second) / 2;
  const double tail = (l.rbegin()->second + std::next(l.rbegin())->second) / 2;
  EXPECT_EQ(l.begin()->first, first);
  EXPECT_LT(tail, head * 0.95) << "first steps " << head << ", last steps " << tail;
}

// INITIAL_CHECKPOINT_PATH names the TF prefix: parameters, Adafactor slots and
// step come from it (t5x's RestoreCheckpointConfig with a TF checkpoint); with
// an assignment_map that skips the optimizer and step, only the parameters.
TEST(TfImport, FineTuneFromTfPrefixLossFalls) {
  const std::string root = temp_dir("tf_ft");
  RunResult r = sh(join_cmd(finetune_argv(root + "/ft", 10, {})));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("restored parameters and optimizer state from " + kPrefix + " (step 2)"), std::string::npos)
      << r.out;
  expect_loss_falls(root + "/ft", 3);
  r = sh(join_cmd(finetune_argv(root + "/ft_params", 8,
                                {"utils.RestoreCheckpointConfig.assignment_map = "
                                 "((r'state/param_states/.*', None), (r'state/step', None))",
                                 "utils.RestoreCheckpointConfig.strict = False"})));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("restored parameters from " + kPrefix + " (step 0)"), std::string::npos) << r.out;
  expect_loss_falls(root + "/ft_params", 1);
  fs::remove_all(root);
}

// A directory holding TensorFlow's `checkpoint` state file stands for its
// newest prefix in `ckpt info`, `import-tf` and INITIAL_CHECKPOINT_PATH.
TEST(TfImport, StateFileDirectoryWhereverAPrefixGoes) {
  const std::string google_dir = fs::path(kGoogle).parent_path().string();
  RunResult g = sh(quote(t5x_bin()) + " ckpt info " + quote(google_dir));
  EXPECT_EQ(g.rc, 1) << g.out;  // its second shard is not here
  EXPECT_EQ(g.out.rfind("TensorFlow checkpoint " + kGoogle + ": 105 tensors in 2 shard(s)", 0), 0u) << g.out;
  const std::string root = temp_dir("tf_state");
  const std::string d = state_file_dir(root);
  RunResult info = sh(quote(t5x_bin()) + " ckpt info " + quote(d));
  EXPECT_EQ(info.rc, 0) << info.out;
  EXPECT_NE(info.out.find("\n143 of 143 tensors read with matching CRCs\n"), std::string::npos) << info.out;
  RunResult im = sh(quote(t5x_bin()) + " ckpt import-tf " + quote(d) + " " + quote(root + "/model") + " --dtype=keep");
  ASSERT_EQ(im.rc, 0) << im.out;
  EXPECT_EQ(im.out.rfind("imported " + d + "/model.ckpt-2 into " + root + "/model/checkpoint_2 (step 2)", 0), 0u)
      << im.out;
  std::string err;
  EXPECT_EQ(digests(kOriginal, &err), digests(root + "/model/checkpoint_2", &err)) << err;
  RunResult ft = sh(join_cmd(finetune_argv(root + "/ft", 3, {}, d)));
  ASSERT_EQ(ft.rc, 0) << ft.out;
  EXPECT_NE(ft.out.find("restored parameters and optimizer state from " + d + "/model.ckpt-2 (step 2)"),
            std::string::npos) << ft.out;
  fs::remove_all(root);
}

}  // namespace
}  // namespace t5x::ckpt_testing
