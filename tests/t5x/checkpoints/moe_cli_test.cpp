// Mixture-of-Experts T5 through the real `t5x` binary (issue 18):
//   - `t5x ckpt upcycle` of a dense `t5x train` checkpoint: every expert
//     kernel is the dense kernel bitwise, routers fresh N(0, 0.02), the
//     optimizer state dropped, the step kept; bad input refused clearly;
//   - the upcycled checkpoint trains with configs/models/moe/tiny.gin (loss
//     falls, the experts/* metrics in metrics.jsonl) and `t5x infer` decodes;
//   - configs/runs/sparse_upcycle.gin (RestoreCheckpointConfig with
//     assignment_map and checkpoints.UpcycleCheckpointer) restores the dense
//     checkpoint into the MoE model at train start, as the upcycle command.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "t5x/checkpoints/checkpoint_dir.h"

namespace t5x::ckpt_testing {
namespace {

namespace fs = std::filesystem;

// The dense tiny model of cli_util.h's bindings, as an MoE gin's overrides.
const std::vector<std::string> kShape = {"ACTIVATION_DTYPE = 'float32'", "network.T5Config.vocab_size = 1152",
                                         "network.T5Config.emb_dim = 16", "network.T5Config.head_dim = 4",
                                         "network.T5Config.mlp_dim = 32"};

RunResult upcycle(const std::string& ckpt, const std::string& out, const std::string& gin,
                  const std::vector<std::string>& flags = {}, const std::vector<std::string>& shape = kShape) {
  std::vector<std::string> a = {t5x_bin(), "ckpt", "upcycle", "--gin_file=" + gin, "--checkpoint_dir=" + ckpt,
                                "--output_dir=" + out};
  for (const auto& s : shape) a.push_back("--gin_bindings=" + s);
  a.insert(a.end(), flags.begin(), flags.end());
  return sh(join_cmd(a));
}

// The mean logged loss over steps from .. to.
double mean_loss(std::map<int64_t, double> loss, int64_t from, int64_t to) {
  double sum = 0;
  for (int64_t s = from; s <= to; ++s) sum += loss[s];
  return sum / double(to - from + 1);
}

std::vector<float> floats(const CheckpointReader& r, const std::string& path) {
  return r.read(path, std::nullopt, "float32").values<float>();
}

// `t5x train` of the MoE tiny model, `steps` steps, with extra bindings.
std::vector<std::string> moe_train_argv(const std::string& dir, int steps, const std::vector<std::string>& extra,
                                        const char* run_gin = "configs/runs/pretrain.gin") {
  std::vector<std::string> a = train_argv(dir, steps, steps, extra);
  a[2] = "--gin_file=configs/models/moe/tiny.gin";
  a[3] = std::string("--gin_file=") + run_gin;
  return a;
}

TEST(MoeCli, UpcycleCopiesTheDenseMlpIntoEveryExpert) {
  const std::string root = temp_dir("moe_upcycle");
  RunResult tr = sh(join_cmd(train_argv(root + "/dense", 2, 2)));
  ASSERT_EQ(tr.rc, 0) << tr.out;
  const std::string dense = root + "/dense/checkpoint_2";
  RunResult u = upcycle(root + "/dense", root + "/moe", "configs/models/moe/tiny.gin", {"--num_experts=4"});
  ASSERT_EQ(u.rc, 0) << u.out;
  EXPECT_NE(u.out.find("6 expert kernels of 4 dense copies, 2 fresh routers, 46 arrays copied"), std::string::npos) << u.out;
  CheckpointReader d = CheckpointReader::open(dense), m = CheckpointReader::open(root + "/moe/checkpoint_2");
  EXPECT_EQ(m.step().value_or(-1), 2);  // kept
  int stacked = 0, routers = 0;
  for (const auto& p : m.array_paths()) {
    EXPECT_NE(p.rfind("state/param_states/", 0), 0u) << "optimizer state should be reset: " << p;
    if (p.rfind("target/", 0) != 0) continue;
    if (p.find("/router/") != std::string::npos) {
      ++routers;
      EXPECT_FALSE(d.has(p));
      const auto w = floats(m, p);
      ASSERT_EQ(w.size(), 16u * 4);
      double ss = 0;
      for (float x : w) ss += double(x) * x;
      const double sd = std::sqrt(ss / double(w.size()));
      EXPECT_GT(sd, 0.012) << p;  // N(0, 0.02) over 64 draws
      EXPECT_LT(sd, 0.03) << p;
      continue;
    }
    const auto at = p.find("/mlp/expert/");
    if (at == std::string::npos) {
      EXPECT_EQ(floats(m, p), floats(d, p)) << p << " should be copied";
      continue;
    }
    ++stacked;
    const std::string src = p.substr(0, at) + "/mlp/" + p.substr(at + 12);
    const auto e = floats(m, p), w = floats(d, src);
    ASSERT_EQ(e.size(), 4 * w.size()) << p;
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(std::memcmp(e.data() + k * w.size(), w.data(), w.size() * sizeof(float)), 0) << p << " expert " << k;
  }
  EXPECT_EQ(stacked, 2 * 3);  // wi_0, wi_1, wo of layer 1 in each stack
  EXPECT_EQ(routers, 2);

  // Bad input.
  RunResult dense_gin = upcycle(root + "/dense", root + "/x1", "configs/models/t5_1_1/tiny.gin");
  EXPECT_EQ(dense_gin.rc, 1);
  EXPECT_NE(dense_gin.out.find("the model has no sparse layers (num_experts = 0)"), std::string::npos) << dense_gin.out;
  RunResult e8 = upcycle(root + "/dense", root + "/x2", "configs/models/moe/tiny.gin", {"--num_experts=8"});
  EXPECT_EQ(e8.rc, 1);
  EXPECT_NE(e8.out.find("--num_experts=8 but configs/models/moe/tiny.gin has num_experts = 4"), std::string::npos)
      << e8.out;
  RunResult geo = upcycle(root + "/dense", root + "/x3", "configs/models/moe/tiny.gin", {},
                          {"ACTIVATION_DTYPE = 'float32'", "network.T5Config.vocab_size = 1152",
                           "network.T5Config.emb_dim = 16", "network.T5Config.head_dim = 4"});
  EXPECT_EQ(geo.rc, 1);
  EXPECT_NE(geo.out.find("`target/encoder/layers_0/mlp/wi_0/kernel` is (16, 32) in"), std::string::npos) << geo.out;
  EXPECT_NE(geo.out.find("but the model's `target/encoder/layers_0/mlp/wi_0/kernel` is (16, 16)"), std::string::npos)
      << geo.out;
  RunResult twice = upcycle(root + "/moe", root + "/x4", "configs/models/moe/tiny.gin");
  EXPECT_EQ(twice.rc, 1);
  EXPECT_NE(twice.out.find("already has expert arrays"), std::string::npos) << twice.out;
  RunResult exists = upcycle(root + "/dense", root + "/moe", "configs/models/moe/tiny.gin");
  EXPECT_EQ(exists.rc, 1);
  EXPECT_NE(exists.out.find(root + "/moe already holds checkpoint_2"), std::string::npos) << exists.out;
  // A binding too large to hold is named up front (it was a bare std::bad_alloc).
  RunResult huge = upcycle(root + "/dense", root + "/x5", "configs/models/moe/tiny.gin", {"--gin.NUM_EXPERTS=100000000"});
  EXPECT_EQ(huge.rc, 1);
  EXPECT_NE(huge.out.find("num_experts = 100000000 (NUM_EXPERTS) makes a "), std::string::npos) << huge.out;
  EXPECT_NE(huge.out.find("hint: check NUM_EXPERTS"), std::string::npos) << huge.out;
  for (const char* x : {"/x1", "/x2", "/x3", "/x4", "/x5"}) EXPECT_FALSE(fs::exists(root + x + "/checkpoint_2")) << x;

  // The upcycled model trains (steps 3..14), reports the expert metrics, and decodes.
  const std::string ft = root + "/ft";
  auto argv = moe_train_argv(ft, 14, {"utils.RestoreCheckpointConfig.path = '" + root + "/moe/checkpoint_2'",
                                      "utils.RestoreCheckpointConfig.mode = 'specific'"});
  RunResult r = sh(join_cmd(argv));
  ASSERT_EQ(r.rc, 0) << join_cmd(argv) << "\n" << r.out;
  auto loss = losses(ft);
  ASSERT_EQ(loss.size(), 12u) << r.out;
  const double first = mean_loss(loss, 3, 5), last = mean_loss(loss, 12, 14);
  EXPECT_LT(last, first) << "loss did not fall: " << first << " -> " << last;
  std::ifstream f(ft + "/train/metrics.jsonl");
  int with_experts = 0;
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("loss")) continue;
    for (const char* k : {"experts/auxiliary_loss", "experts/router_z_loss", "experts/fraction_tokens_left_behind",
                          "experts/expert_usage", "experts/router_confidence", "cross_ent_loss"})
      EXPECT_TRUE(j.contains(k)) << k << " missing in " << line;
    if (j.contains("experts/auxiliary_loss")) {
      ++with_experts;
      // AUX_LOSS_FACTOR 0.01 times a balance loss >= ~1 (1 at perfect top-1 balance).
      EXPECT_GT(j["experts/auxiliary_loss"].get<double>(), 0.005) << line;
      EXPECT_LT(j["experts/auxiliary_loss"].get<double>(), 0.04 + 1e-9) << line;
      EXPECT_NEAR(j["loss"].get<double>(), j["cross_ent_loss"].get<double>() + j["z_loss"].get<double>() +
                                               j["experts/auxiliary_loss"].get<double>() +
                                               j["experts/router_z_loss"].get<double>(), 1e-4) << line;
    }
  }
  EXPECT_EQ(with_experts, 12);

  std::vector<std::string> infer = {t5x_bin(), "infer", "--gin_file=configs/models/moe/tiny.gin",
                                    "--gin_file=configs/runs/infer.gin"};
  std::vector<std::string> ib = {"CHECKPOINT_PATH = '" + ft + "/checkpoint_14'", "INFER_OUTPUT_DIR = '" + root + "/infer'",
                                 "MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'", "MIXTURE_OR_TASK_SPLIT = 'validation'",
                                 "TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}", "BATCH_SIZE = 4"};
  ib.insert(ib.end(), kShape.begin(), kShape.end());
  for (const auto& b : ib) infer.push_back("--gin_bindings=" + b);
  RunResult in = sh(join_cmd(infer));
  ASSERT_EQ(in.rc, 0) << join_cmd(infer) << "\n" << in.out;
  EXPECT_GT(prediction_lines(root + "/infer/gpl3_lines_copy-predict.jsonl-00000-of-00001"), 0) << in.out;

  // The t5x way: sparse_upcycle.gin restores the dense checkpoint directly
  // (step 2 kept) and trains step 3; the checkpoint the run writes right
  // after restoring (checkpoint_2) has the dense kernels as experts and the
  // rest copied.
  const std::string su = root + "/su";
  auto sa = moe_train_argv(su, 3, {"INITIAL_CHECKPOINT_PATH = '" + dense + "'", "DROPOUT_RATE = 0.0"},
                           "configs/runs/sparse_upcycle.gin");
  RunResult s = sh(join_cmd(sa));
  ASSERT_EQ(s.rc, 0) << join_cmd(sa) << "\n" << s.out;
  ASSERT_EQ(losses(su).size(), 1u) << s.out;
  EXPECT_EQ(losses(su).begin()->first, 3);
  CheckpointReader c = CheckpointReader::open(su + "/checkpoint_2");
  EXPECT_TRUE(fs::exists(su + "/checkpoint_3/checkpoint"));
  int slots = 0;
  for (const auto& p : c.array_paths()) {  // the optimizer state starts fresh (zeros), not the dense run's
    if (p.rfind("state/param_states/", 0) != 0) continue;
    ++slots;
    for (float x : floats(c, p)) ASSERT_EQ(x, 0.0f) << p;
  }
  EXPECT_GT(slots, 0);
  for (const auto& p : c.array_paths()) {
    if (p.rfind("target/", 0) != 0 || p.find("/router/") != std::string::npos) continue;
    const auto at = p.find("/mlp/expert/");
    if (at == std::string::npos) {
      EXPECT_EQ(floats(c, p), floats(d, p)) << p;
      continue;
    }
    const auto e = floats(c, p), w = floats(d, p.substr(0, at) + "/mlp/" + p.substr(at + 12));
    ASSERT_EQ(e.size(), 4 * w.size()) << p;
    for (int k = 0; k < 4; ++k)
      EXPECT_EQ(std::memcmp(e.data() + k * w.size(), w.data(), w.size() * sizeof(float)), 0) << p << " expert " << k;
  }
  // Wrong num_experts in the checkpointer: refused, naming both shapes.
  auto bad = moe_train_argv(root + "/su_bad", 3,
                            {"INITIAL_CHECKPOINT_PATH = '" + dense + "'", "DROPOUT_RATE = 0.0",
                             "checkpoints.UpcycleCheckpointer.num_experts = 8"},
                            "configs/runs/sparse_upcycle.gin");
  RunResult b = sh(join_cmd(bad));
  EXPECT_EQ(b.rc, 1) << b.out;
  EXPECT_NE(b.out.find("the model has 4 experts but num_experts = 8"), std::string::npos) << b.out;
  fs::remove_all(root);
}

// Sparse Mixer (configs/models/sparse_mixer/tiny.gin) through `t5x train` on
// unpacked batches: the loss falls over 20 steps, the checkpoint has the
// linear mixing kernels [16, 16] (inputs length 16) in encoder layers 0-1,
// self-attention in layer 2, experts in layer 1 only, and a dense decoder.
TEST(MoeCli, SparseMixerTrainsAndLossFalls) {
  const std::string root = temp_dir("sparse_mixer");
  std::vector<std::string> a = train_argv(root, 20, 20, {"ENCODER_MIXING_LENGTH = 16"});
  a[2] = "--gin_file=configs/models/sparse_mixer/tiny.gin";
  for (const char* s : {"train", "train_eval"})
    a.push_back(std::string("--gin_bindings=") + s + "/utils.DatasetConfig.pack = False");
  RunResult r = sh(join_cmd(a));
  ASSERT_EQ(r.rc, 0) << join_cmd(a) << "\n" << r.out;
  auto loss = losses(root);
  ASSERT_EQ(loss.size(), 20u) << r.out;
  const double first = mean_loss(loss, 1, 3), last = mean_loss(loss, 18, 20);
  EXPECT_LT(last, 0.9 * first) << "loss did not fall: " << first << " -> " << last;

  std::string err;
  std::map<std::string, std::string> d;
  for (const auto& [k, v] : digests(root + "/checkpoint_20", &err))
    if (k.rfind("target/", 0) == 0) d[k] = v;
  ASSERT_FALSE(d.empty()) << err;
  for (const char* l : {"layers_0", "layers_1"}) {
    const std::string e = std::string("target/encoder/") + l;
    EXPECT_EQ(d.at(e + "/mixing/seq/kernel").rfind("float32 (16,16) ", 0), 0u) << d.at(e + "/mixing/seq/kernel");
    EXPECT_EQ(d.at(e + "/mixing/hidden/kernel").rfind("float32 (16,16) ", 0), 0u);
    EXPECT_EQ(d.count(e + "/attention/query/kernel"), 0u);
  }
  EXPECT_EQ(d.count("target/encoder/layers_2/attention/query/kernel"), 1u);
  EXPECT_EQ(d.count("target/encoder/relpos_bias/rel_embedding"), 1u);
  int experts = 0;
  for (const auto& [k, v] : d) experts += k.find("/mlp/expert/") != std::string::npos;
  EXPECT_GT(experts, 0);
  for (const auto& [k, v] : d) {
    if (k.find("/mlp/expert/") != std::string::npos || k.find("/mlp/router/") != std::string::npos) {
      EXPECT_EQ(k.rfind("target/encoder/layers_1/", 0), 0u) << k;
    }
  }

  RunResult ex = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(root) + " " + quote(root + "/hf"));
  EXPECT_EQ(ex.rc, 1) << ex.out;
  EXPECT_NE(ex.out.find("linear-mixing (Sparse Mixer) encoder, which has no Hugging Face T5 equivalent"),
            std::string::npos) << ex.out;

  // eval.gin leaves TASK_FEATURE_LENGTHS = None (the longest example's
  // length): refused as the config is read, with the length W_seq needs; with
  // that length the evaluation runs.
  std::vector<std::string> ev = {t5x_bin(), "eval", "--gin_file=configs/models/sparse_mixer/tiny.gin",
                                 "--gin_file=configs/runs/eval.gin"};
  for (const std::string& x :
       {std::string("MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'"), std::string("MIXTURE_OR_TASK_SPLIT = 'validation'"),
        "CHECKPOINT_PATH = '" + root + "/checkpoint_20'", "EVAL_OUTPUT_DIR = '" + root + "/eval'",
        std::string("ENCODER_MIXING_LENGTH = 16"), std::string("BATCH_SIZE = 4"),
        std::string("ACTIVATION_DTYPE = 'float32'"), std::string("network.T5Config.vocab_size = 1152"),
        std::string("network.T5Config.emb_dim = 16"), std::string("network.T5Config.head_dim = 4"),
        std::string("network.T5Config.mlp_dim = 32"), std::string("seqio.Evaluator.num_examples = 8")})
    ev.push_back("--gin_bindings=" + x);
  RunResult no_len = sh(join_cmd(ev));
  EXPECT_EQ(no_len.rc, 1) << no_len.out;
  EXPECT_NE(no_len.out.find("gives no 'inputs' length, so the inputs would take the longest example's length"),
            std::string::npos)
      << no_len.out;
  EXPECT_NE(no_len.out.find("hint: --gin.utils.DatasetConfig.task_feature_lengths=\"{'inputs': 16, 'targets': N}\" "
                            "(eval.gin and infer.gin read it from TASK_FEATURE_LENGTHS)"),
            std::string::npos)
      << no_len.out;
  EXPECT_FALSE(fs::exists(root + "/eval")) << "refused before the run writes";
  ev.push_back("--gin_bindings=TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}");
  RunResult with_len = sh(join_cmd(ev));
  EXPECT_EQ(with_len.rc, 0) << join_cmd(ev) << "\n" << with_len.out;
  EXPECT_TRUE(fs::exists(root + "/eval/inference_eval/gpl3_lines_copy-metrics.jsonl")) << with_len.out;

  // The mixing length is fixed: other inputs lengths are refused with the fix.
  std::vector<std::string> b = train_argv(root + "/len", 1, 1, {"ENCODER_MIXING_LENGTH = 8"});
  b[2] = a[2];
  for (const char* s : {"train", "train_eval"})
    b.push_back(std::string("--gin_bindings=") + s + "/utils.DatasetConfig.pack = False");
  RunResult bad = sh(join_cmd(b));
  EXPECT_NE(bad.rc, 0);
  EXPECT_NE(bad.out.find("has W_seq of length 8 but train/utils.DatasetConfig.task_feature_lengths['inputs'] is 16"),
            std::string::npos) << bad.out;
  EXPECT_FALSE(fs::exists(root + "/len")) << "refused as the config is read, before the run writes";
  fs::remove_all(root);
}

}  // namespace
}  // namespace t5x::ckpt_testing
