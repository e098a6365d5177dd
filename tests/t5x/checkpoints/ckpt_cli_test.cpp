// `t5x ckpt` on real checkpoints of `t5x train`: export-hf then import-hf is
// bitwise (T5.1.1 and T5.1.0), the import restores in `t5x train`, `info`
// names axes and falls back past damaged steps, bad input gets a message that
// names the file, and automatic resume skips a damaged newest checkpoint and
// still reproduces the uninterrupted run. A scalable_t5 run's stacked
// checkpoint exports through its config.gin and scores as its export.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.h"

namespace t5x::ckpt_testing {
namespace {

namespace fs = std::filesystem;

std::string train(const std::string& dir, int steps, int period, const std::vector<std::string>& model_gin = {},
                  const std::vector<std::string>& extra = {}) {
  auto argv = train_argv(dir, steps, period, extra);
  if (!model_gin.empty()) {
    argv.erase(argv.begin() + 2);  // the tiny.gin
    argv.insert(argv.begin() + 2, model_gin.begin(), model_gin.end());
  }
  RunResult r = sh(join_cmd(argv));
  EXPECT_EQ(r.rc, 0) << join_cmd(argv) << "\n" << r.out;
  return r.out;
}

std::map<std::string, std::string> only_target(const std::map<std::string, std::string>& m) {
  std::map<std::string, std::string> t;
  for (const auto& [k, v] : m)
    if (k.rfind("target/", 0) == 0) t[k] = v;
  return t;
}

void export_import_is_bitwise(const std::string& name, const std::vector<std::string>& model_gin,
                              const std::vector<std::string>& extra, const std::string& proj, bool tied) {
  const std::string root = temp_dir(name);
  const std::string model = root + "/model", hf = root + "/hf", back = root + "/back";
  train(model, 2, 2, model_gin, extra);
  RunResult ex = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(model) + " " + quote(hf));
  ASSERT_EQ(ex.rc, 0) << ex.out;
  EXPECT_NE(ex.out.find("config.gin"), std::string::npos) << "config should come from MODEL_DIR/config.gin:\n" << ex.out;
  auto cfg = nlohmann::json::parse(std::ifstream(hf + "/config.json"));
  EXPECT_EQ(cfg["feed_forward_proj"], proj);
  EXPECT_EQ(cfg["tie_word_embeddings"], tied);
  EXPECT_EQ(cfg["dropout_rate"], 0.0);  // DROPOUT_RATE of pretrain.gin
  RunResult im = sh(quote(t5x_bin()) + " ckpt import-hf " + quote(hf) + " " + quote(back) + " --step=2");
  ASSERT_EQ(im.rc, 0) << im.out;
  std::string err;
  auto a = only_target(digests(model + "/checkpoint_2", &err));
  ASSERT_FALSE(a.empty()) << err;
  auto b = only_target(digests(back + "/checkpoint_2", &err));
  EXPECT_EQ(a, b) << err;
  // Importing into the same place (or any run) again refuses, keeping its model.gin.
  const std::string gin = fileio_read(back + "/model.gin");
  RunResult again = sh(quote(t5x_bin()) + " ckpt import-hf " + quote(hf) + " " + quote(back) + " --step=7");
  EXPECT_EQ(again.rc, 1);
  EXPECT_NE(again.out.find(back + " already holds checkpoint_2, model.gin (a run or an earlier conversion)"),
            std::string::npos) << again.out;
  EXPECT_FALSE(fs::exists(back + "/checkpoint_7"));
  EXPECT_EQ(fileio_read(back + "/model.gin"), gin);
  RunResult into_run = sh(quote(t5x_bin()) + " ckpt import-hf " + quote(hf) + " " + quote(model) + " --step=7");
  EXPECT_EQ(into_run.rc, 1);
  EXPECT_NE(into_run.out.find(model + " already holds checkpoint_0, checkpoint_2, config.gin"), std::string::npos) << into_run.out;
  EXPECT_FALSE(fs::exists(model + "/checkpoint_7"));
  fs::remove_all(root);
}

TEST(CkptCli, ExportHfThenImportHfIsBitwiseT5_1_1) {
  export_import_is_bitwise("t511", {}, {}, "gated-gelu", false);
}

TEST(CkptCli, ExportHfThenImportHfIsBitwiseT5_1_0) {
  export_import_is_bitwise("t510", {"--gin_file=configs/models/t5_1_0/small.gin"},
                           {"network.T5Config.num_heads = 4", "network.T5Config.num_encoder_layers = 2",
                            "network.T5Config.num_decoder_layers = 2"},
                           "relu", true);
}

// The import restores in `t5x score` (same scores as the original, from the
// written model.gin alone) and in `t5x train`.
TEST(CkptCli, ImportedCheckpointRestoresInScoreAndTrain) {
  const std::string root = temp_dir("imported_train");
  train(root + "/model", 2, 2);
  // Values transformers cannot take, and the checkpoint as its own output, are refused (bad-input sweep,
  // session 59: nan was written as null; the model landed inside the checkpoint).
  const std::string ckpt2 = root + "/model/checkpoint_2";
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {quote(root + "/hf_bad") + " --dropout_rate=nan", "--dropout_rate must be in [0, 1), got nan"},
           {quote(root + "/hf_bad") + " --relative_attention_max_distance=-5",
            "--relative_attention_max_distance must be >= 1, got -5"},
           {quote(ckpt2), "the output directory is the checkpoint itself"}}) {
    RunResult bad = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(ckpt2) + " " + flags);
    EXPECT_NE(bad.rc, 0) << flags;
    EXPECT_NE(bad.out.find(message), std::string::npos) << bad.out;
  }
  EXPECT_FALSE(fs::exists(ckpt2 + "/config.json"));
  ASSERT_EQ(sh(quote(t5x_bin()) + " ckpt export-hf " + quote(root + "/model") + " " + quote(root + "/hf")).rc, 0);
  RunResult im = sh(quote(t5x_bin()) + " ckpt import-hf " + quote(root + "/hf") + " " + quote(root + "/ft"));
  ASSERT_EQ(im.rc, 0) << im.out;
  ASSERT_TRUE(fs::exists(root + "/ft/model.gin"));
  const std::string a = score(root + "/model/checkpoint_2", "configs/models/t5_1_1/tiny.gin", root + "/score_a");
  const std::string b = score(root + "/ft/checkpoint_0", root + "/ft/model.gin", root + "/score_b");
  EXPECT_NE(a.find("\"score\":"), std::string::npos) << a;
  EXPECT_EQ(a, b);
  // The written model.gin alone describes the model; the run resumes from checkpoint_0.
  std::vector<std::string> argv = {t5x_bin(), "train", "--gin_file=" + root + "/ft/model.gin",
                                   "--gin_search_paths=configs/models", "--gin_file=configs/runs/pretrain.gin"};
  for (const auto& b : tiny_bindings(root + "/ft", 1, 1))
    if (b.rfind("network.", 0) != 0) argv.push_back("--gin_bindings=" + b);
  RunResult r = sh(join_cmd(argv));
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("resumed from " + root + "/ft/checkpoint_0 at step 0 (parameters only: it holds no optimizer "
                       "state, which starts fresh)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("holds no data position"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(root + "/ft/checkpoint_1/checkpoint"));
  fs::remove_all(root);
}

// t5x's scalable_t5 with scan_layers through the real binary: its checkpoint
// holds the layers stacked (encoder/encoder/...); export-hf reads it through
// the run's config.gin as umT5, and import-hf of that export gives the
// scores `t5x score` gives from the stacked checkpoint itself. A copy of the
// checkpoint without its config.gin is refused, naming the stacked leaf and
// the flag; with --gin_file it exports the same file.
TEST(CkptCli, ScalableT5ScannedCheckpointExportsAndScores) {
  const std::string root = temp_dir("scalable_scan");
  const std::string gin = "tests/t5x/trainer/scalable_t5_tiny.gin";  // score() binds its widths
  train(root + "/model", 2, 2, {"--gin_file=" + gin});
  const std::string ckpt = root + "/model/checkpoint_2";
  std::string err;
  const auto d = digests(ckpt, &err);
  ASSERT_TRUE(d.count("target/encoder/encoder/attention/query/kernel")) << err;
  EXPECT_NE(d.at("target/encoder/encoder/attention/query/kernel").find("(16,2,4,4)"), std::string::npos);
  RunResult ex = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(root + "/model") + " " + quote(root + "/hf"));
  ASSERT_EQ(ex.rc, 0) << ex.out;
  EXPECT_NE(ex.out.find("umT5"), std::string::npos) << ex.out;
  RunResult im = sh(quote(t5x_bin()) + " ckpt import-hf " + quote(root + "/hf") + " " + quote(root + "/ft"));
  ASSERT_EQ(im.rc, 0) << im.out;
  const std::string a = score(ckpt, gin, root + "/score_a");
  const std::string b = score(root + "/ft/checkpoint_0", root + "/ft/model.gin", root + "/score_b");
  EXPECT_NE(a.find("\"score\":"), std::string::npos) << a;
  EXPECT_EQ(a, b);
  fs::create_directories(root + "/bare");
  fs::copy(ckpt, root + "/bare/checkpoint_2", fs::copy_options::recursive);
  RunResult bare = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(root + "/bare/checkpoint_2") + " " + quote(root + "/hf2"));
  EXPECT_EQ(bare.rc, 1) << bare.out;
  EXPECT_NE(bare.out.find("is in t5x's scalable_t5 layout (layers stacked by scan_layers)"), std::string::npos)
      << bare.out;
  EXPECT_NE(bare.out.find("pass the model's scalable_t5 --gin_file"), std::string::npos) << bare.out;
  std::string widths;
  for (const auto& b : tiny_bindings("", 0, 1))
    if (b.rfind("network.", 0) == 0) widths += " --gin_bindings=" + quote(b);
  RunResult with_gin = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(root + "/bare/checkpoint_2") + " " +
                          quote(root + "/hf2") + " --gin_file=" + quote(gin) + " --gin.DROPOUT_RATE=0.0" + widths);
  ASSERT_EQ(with_gin.rc, 0) << with_gin.out;
  EXPECT_EQ(fileio_read(root + "/hf2/model.safetensors"), fileio_read(root + "/hf/model.safetensors"));
  fs::remove_all(root);
}

// GQA uptraining through the real binary: a multi-head run, `ckpt
// convert-gqa` (num_heads from the run's config.gin), then `t5x train` with
// num_kv_heads = 2 restoring it through utils.RestoreCheckpointConfig; the
// loss falls over the uptraining steps.
// FNet-encoder T5 (network.T5Config.encoder_mixing = 'fourier') through the
// ordinary commands: packed batches are refused with the fix named; unpacked
// it trains (loss falls), its checkpoint has the mixing norm and no encoder
// attention or relative position bias, `t5x infer` decodes with it, and
// export-hf refuses it.
TEST(CkptCli, FNetEncoderTrainsDecodesAndRefusesHfExport) {
  const std::string root = temp_dir("fnet");
  const std::vector<std::string> gin = {"--gin_file=configs/models/t5_1_1/tiny_fnet.gin"};
  auto argv = [&](const std::string& dir, int steps, bool pack) {
    std::vector<std::string> a = train_argv(dir, steps, steps);
    a[2] = gin[0];
    for (const char* s : {"train", "train_eval"})
      a.push_back(std::string("--gin_bindings=") + s + "/utils.DatasetConfig.pack = " + (pack ? "True" : "False"));
    return a;
  };
  RunResult packed = sh(join_cmd(argv(root + "/packed", 2, true)));
  EXPECT_EQ(packed.rc, 1) << packed.out;
  EXPECT_NE(packed.out.find("the Fourier-mixing (FNet) encoder cannot take packed inputs"), std::string::npos)
      << packed.out;
  EXPECT_NE(packed.out.find("but train/utils.DatasetConfig.pack is True"), std::string::npos) << packed.out;
  EXPECT_NE(packed.out.find("hint: --gin.train/utils.DatasetConfig.pack=False"), std::string::npos) << packed.out;
  // Refused as the config is read: nothing of the run was written.
  EXPECT_FALSE(std::filesystem::exists(root + "/packed")) << packed.out;

  const std::string model = root + "/model";
  RunResult r = sh(join_cmd(argv(model, 20, false)));
  ASSERT_EQ(r.rc, 0) << r.out;
  auto loss = losses(model);
  ASSERT_EQ(loss.size(), 20u) << r.out;
  double first = 0, last = 0;
  for (int64_t s = 1; s <= 3; ++s) first += loss[s] / 3;
  for (int64_t s = 18; s <= 20; ++s) last += loss[s] / 3;
  EXPECT_LT(last, 0.9 * first) << "loss did not fall: " << first << " -> " << last;

  std::string err;
  auto d = only_target(digests(model + "/checkpoint_20", &err));
  ASSERT_FALSE(d.empty()) << err;
  EXPECT_EQ(d.count("target/encoder/relpos_bias/rel_embedding"), 0u);
  EXPECT_EQ(d.count("target/encoder/layers_0/attention/query/kernel"), 0u);
  EXPECT_EQ(d.at("target/encoder/layers_1/pre_mixing_layer_norm/scale").rfind("float32 (16) ", 0), 0u);
  EXPECT_EQ(d.count("target/decoder/layers_0/self_attention/query/kernel"), 1u);

  std::vector<std::string> infer = {t5x_bin(), "infer", gin[0], "--gin_file=configs/runs/infer.gin"};
  for (const std::string& b :
       {"CHECKPOINT_PATH = '" + model + "/checkpoint_20'", "INFER_OUTPUT_DIR = '" + root + "/infer'",
        std::string("MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'"), std::string("MIXTURE_OR_TASK_SPLIT = 'validation'"),
        std::string("TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}"), std::string("BATCH_SIZE = 4"),
        std::string("ACTIVATION_DTYPE = 'float32'"), std::string("network.T5Config.vocab_size = 1152"),
        std::string("network.T5Config.emb_dim = 16"), std::string("network.T5Config.head_dim = 4"),
        std::string("network.T5Config.mlp_dim = 32")})
    infer.push_back("--gin_bindings=" + b);
  RunResult in = sh(join_cmd(infer));
  ASSERT_EQ(in.rc, 0) << join_cmd(infer) << "\n" << in.out;
  EXPECT_GT(prediction_lines(root + "/infer/gpl3_lines_copy-predict.jsonl-00000-of-00001"), 0) << in.out;

  RunResult ex = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(model) + " " + quote(root + "/hf"));
  EXPECT_EQ(ex.rc, 1) << ex.out;
  EXPECT_NE(ex.out.find("Fourier-mixing (FNet) encoder, which has no Hugging Face T5 equivalent"), std::string::npos)
      << ex.out;
  EXPECT_FALSE(fs::exists(root + "/hf/model.safetensors"));
  fs::remove_all(root);
}

TEST(CkptCli, ConvertGqaRestoresInTrainAndLossFalls) {
  const std::string root = temp_dir("convert_gqa");
  train(root + "/mha", 2, 2);
  RunResult cv = sh(quote(t5x_bin()) + " ckpt convert-gqa " + quote(root + "/mha") + " " + quote(root + "/gqa") +
                    " --num_kv_heads=2");
  ASSERT_EQ(cv.rc, 0) << cv.out;
  EXPECT_NE(cv.out.find("(num_heads 4 from " + root + "/mha/config.gin)"), std::string::npos) << cv.out;
  EXPECT_NE(cv.out.find("8 key/value kernels mean-pooled to num_kv_heads 2"), std::string::npos) << cv.out;
  std::string err;
  auto a = only_target(digests(root + "/mha/checkpoint_2", &err));
  auto b = only_target(digests(root + "/gqa/checkpoint_2", &err));
  ASSERT_EQ(a.size(), b.size()) << err;
  int pooled = 0;
  for (const auto& [k, v] : a) {
    const bool dec_kv = k.rfind("target/decoder/", 0) == 0 &&
                        (k.find("/key/kernel") != std::string::npos || k.find("/value/kernel") != std::string::npos);
    if (!dec_kv) {
      EXPECT_EQ(b[k], v) << k << " should be copied";
      continue;
    }
    ++pooled;
    EXPECT_EQ(b[k].rfind("float32 (16,2,4)", 0), 0u) << k << ": " << b[k];
  }
  EXPECT_EQ(pooled, 8);
  // A group size that does not divide the heads is refused.
  RunResult bad = sh(quote(t5x_bin()) + " ckpt convert-gqa " + quote(root + "/mha") + " " + quote(root + "/bad") +
                     " --num_kv_heads=3");
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.out.find("num_kv_heads = 3 must divide num_heads = 4"), std::string::npos) << bad.out;
  // A given 0 is refused for the encoder as for the decoder.
  RunResult enc0 = sh(quote(t5x_bin()) + " ckpt convert-gqa " + quote(root + "/mha") + " " + quote(root + "/bad") +
                      " --num_kv_heads=2 --encoder_num_kv_heads=0");
  EXPECT_EQ(enc0.rc, 64);
  EXPECT_NE(enc0.out.find("--encoder_num_kv_heads must be >= 1, got 0"), std::string::npos) << enc0.out;
  // Into its own run: refused, the run untouched (it would resume from the GQA step).
  RunResult self = sh(quote(t5x_bin()) + " ckpt convert-gqa " + quote(root + "/mha/checkpoint_2") + " " +
                      quote(root + "/mha") + " --num_kv_heads=2 --step=5");
  EXPECT_EQ(self.rc, 1);
  EXPECT_NE(self.out.find(root + "/mha already holds checkpoint_0, checkpoint_2, config.gin"), std::string::npos) << self.out;
  EXPECT_FALSE(fs::exists(root + "/mha/checkpoint_5"));
  EXPECT_FALSE(fs::exists(root + "/bad"));

  // An unreadable config.gin: the note said "the config comes from the
  // parameter shapes" (export-hf's fallback), which convert-gqa has not.
  fs::create_directories(root + "/badgin");
  fs::copy(root + "/mha/checkpoint_2", root + "/badgin/checkpoint_2", fs::copy_options::recursive);
  std::ofstream(root + "/badgin/config.gin") << "network.T5Config.num_heads = (\n";
  RunResult bg = sh(quote(t5x_bin()) + " ckpt convert-gqa " + quote(root + "/badgin") + " " + quote(root + "/bad2") +
                    " --num_kv_heads=2");
  EXPECT_EQ(bg.rc, 64) << bg.out;
  EXPECT_NE(bg.out.find("note: could not read the model from " + root + "/badgin/config.gin"), std::string::npos)
      << bg.out;
  EXPECT_NE(bg.out.find("); give the model's --num_heads=H"), std::string::npos) << bg.out;
  EXPECT_EQ(bg.out.find("parameter shapes"), std::string::npos) << bg.out;

  // Hugging Face T5 has no grouped K/V heads: export-hf refuses (there is no
  // config.gin next to the converted checkpoint, so it goes by the shapes).
  RunResult ex = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(root + "/gqa") + " " + quote(root + "/hf"));
  EXPECT_EQ(ex.rc, 1);
  EXPECT_NE(ex.out.find("has no Hugging Face T5 equivalent"), std::string::npos) << ex.out;
  EXPECT_FALSE(fs::exists(root + "/hf/model.safetensors"));

  // Restoring with num_kv_heads that does not match the checkpoint names the
  // kernel, both shapes and the binding (the error had no hint).
  for (const auto& [bind, want] : std::vector<std::pair<std::string, std::string>>{
           {"network.T5Config.num_kv_heads = None", "bind network.T5Config.num_kv_heads = 2"},
           {"network.T5Config.num_kv_heads = 1", "bind network.T5Config.num_kv_heads = 2"}}) {
    std::vector<std::string> wrong = train_argv(
        root + "/wrong", 3, 100,
        {bind, "utils.RestoreCheckpointConfig.path = '" + root + "/gqa/checkpoint_2'",
         "utils.RestoreCheckpointConfig.mode = 'specific'"});
    RunResult w = sh(join_cmd(wrong));
    EXPECT_EQ(w.rc, 1) << w.out;
    EXPECT_NE(w.out.find("/key/kernel` in checkpoint (16, 2, 4) does not match expected"), std::string::npos) << w.out;
    EXPECT_NE(w.out.find("hint: the checkpoint's key / value kernels are grouped with kv_heads = 2; " + want),
              std::string::npos)
        << w.out;
  }
  std::vector<std::string> grouped_on_mha = train_argv(
      root + "/wrong_mha", 3, 100,
      {"network.T5Config.num_kv_heads = 2", "utils.RestoreCheckpointConfig.path = '" + root + "/mha/checkpoint_2'",
       "utils.RestoreCheckpointConfig.mode = 'specific'"});
  RunResult w = sh(join_cmd(grouped_on_mha));
  EXPECT_EQ(w.rc, 1) << w.out;
  EXPECT_NE(w.out.find("in checkpoint (16, 16) does not match expected (16, 2, 4)"), std::string::npos) << w.out;
  EXPECT_NE(w.out.find("multi-head; leave network.T5Config.num_kv_heads unbound (None)"), std::string::npos) << w.out;
  EXPECT_NE(w.out.find("t5x ckpt convert-gqa --num_kv_heads=2"), std::string::npos) << w.out;

  // Uptraining: a new MODEL_DIR restoring the converted checkpoint, 12 steps.
  const std::string up = root + "/uptrain";
  std::vector<std::string> argv = train_argv(
      up, 14, 100,
      {"network.T5Config.num_kv_heads = 2", "utils.RestoreCheckpointConfig.path = '" + root + "/gqa/checkpoint_2'",
       "utils.RestoreCheckpointConfig.mode = 'specific'"});
  RunResult r = sh(join_cmd(argv));
  ASSERT_EQ(r.rc, 0) << join_cmd(argv) << "\n" << r.out;
  auto loss = losses(up);
  ASSERT_EQ(loss.size(), 12u) << r.out;  // steps 3..14: the step was restored
  EXPECT_EQ(loss.begin()->first, 3);
  double first = 0, last = 0;
  for (int64_t s = 3; s <= 5; ++s) first += loss[s] / 3;
  for (int64_t s = 12; s <= 14; ++s) last += loss[s] / 3;
  EXPECT_LT(last, first) << "loss did not fall: " << first << " -> " << last;
  EXPECT_TRUE(fs::exists(up + "/checkpoint_14/checkpoint"));
  fs::remove_all(root);
}

// Where export-hf takes its config from: config.gin, flags, or the shapes.
TEST(CkptCli, ExportHfConfigFromGinFlagsOrShapes) {
  const std::string root = temp_dir("export_cfg");
  const std::string model = root + "/model";
  train(model, 0, 2, {}, {"network.T5Config.mlp_activations = ('silu', 'linear')"});
  auto exp = [&](const std::string& out, const std::string& flags) {
    return sh(quote(t5x_bin()) + " ckpt export-hf " + quote(model) + " " + quote(root + "/" + out) + " " + flags);
  };
  auto cfg = [&](const std::string& out) { return nlohmann::json::parse(std::ifstream(root + "/" + out + "/config.json")); };
  // config.gin: silu-gated -> gated-silu, and dense_act_fn follows (transformers reads it).
  RunResult r = exp("gin", "");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(cfg("gin")["feed_forward_proj"], "gated-silu");
  EXPECT_EQ(cfg("gin")["dense_act_fn"], "silu");
  // A flag overrides the gin; a non-gated one contradicts the wi_0/wi_1 kernels.
  r = exp("flag", "--feed_forward_proj=gated-gelu --dtype=bfloat16");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(cfg("flag")["dense_act_fn"], "gelu_new");
  EXPECT_EQ(cfg("flag")["torch_dtype"], "bfloat16");
  r = exp("bad", "--feed_forward_proj=relu");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("wi_0/wi_1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(root + "/bad/model.safetensors"));  // refused before writing
  // A gin file that describes another model is refused, naming the field.
  r = exp("other", "--gin_file=configs/models/t5_1_1/tiny.gin --gin.network.T5Config.vocab_size=1152");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("emb_dim: 8 in gin, 16 in the checkpoint"), std::string::npos) << r.out;
  // Without config.gin: the shapes decide (gated -> T5.1.1 gated-gelu).
  fs::remove(model + "/config.gin");
  r = exp("shapes", "");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("parameter shapes (T5.1.1 gated-gelu)"), std::string::npos) << r.out;
  EXPECT_EQ(cfg("shapes")["feed_forward_proj"], "gated-gelu");
  EXPECT_EQ(sh(quote(t5x_bin()) + " ckpt export-hf " + quote(model) + " x --dtype=int8").rc, 64);
  fs::remove_all(root);
}

void truncate_file(const std::string& path, uintmax_t keep) { fs::resize_file(path, keep); }

std::string some_chunk(const std::string& ckpt, const std::string& array) {
  for (const auto& e : fs::directory_iterator(ckpt + "/" + array))
    if (e.path().filename().string()[0] != '.') return e.path().string();
  return "";
}

TEST(CkptCli, InfoAndClearErrorsOnDamagedInput) {
  const std::string root = temp_dir("faults");
  const std::string model = root + "/model";
  train(model, 2, 2);
  RunResult info = sh(quote(t5x_bin()) + " ckpt info " + quote(model));
  ASSERT_EQ(info.rc, 0) << info.out;
  EXPECT_NE(info.out.find("checkpoint " + model + "/checkpoint_2"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("(vocab=1152, embed=16)"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("state/step"), std::string::npos);

  // Nonexistent path; a usage error.
  RunResult r = sh(quote(t5x_bin()) + " ckpt info " + quote(root + "/nope"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(root + "/nope: no such file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hint"), std::string::npos) << r.out;
  EXPECT_EQ(sh(quote(t5x_bin()) + " ckpt info").rc, 64);
  EXPECT_EQ(sh(quote(t5x_bin()) + " ckpt frobnicate x").rc, 64);

  // Truncated chunk: the digest read and export-hf name the chunk file.
  const std::string chunk = some_chunk(model + "/checkpoint_2", "target.encoder.layers_0.mlp.wi_0.kernel");
  ASSERT_FALSE(chunk.empty());
  truncate_file(chunk, fs::file_size(chunk) / 2);
  r = sh(quote(t5x_bin()) + " ckpt info --digest " + quote(model + "/checkpoint_2"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(chunk), std::string::npos) << r.out;
  r = sh(quote(t5x_bin()) + " ckpt export-hf " + quote(model + "/checkpoint_2") + " " + quote(root + "/hf"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(chunk), std::string::npos) << r.out;
  // ... and info on the MODEL_DIR falls back to step 0 and says why.
  r = sh(quote(t5x_bin()) + " ckpt info " + quote(model));
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("skipped " + model + "/checkpoint_2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoint " + model + "/checkpoint_0"), std::string::npos) << r.out;

  // Corrupt and missing msgpack; a half-written tmp dir.
  truncate_file(model + "/checkpoint_0/checkpoint", 20);
  r = sh(quote(t5x_bin()) + " ckpt info " + quote(model + "/checkpoint_0"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(model + "/checkpoint_0/checkpoint"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("truncated or corrupt"), std::string::npos) << r.out;
  fs::remove(model + "/checkpoint_0/checkpoint");
  r = sh(quote(t5x_bin()) + " ckpt info " + quote(model + "/checkpoint_0"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("not a complete t5x checkpoint"), std::string::npos) << r.out;
  fs::create_directories(model + "/checkpoint_4.tmp-1700000000/target.x");
  r = sh(quote(t5x_bin()) + " ckpt info " + quote(model));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find("checkpoint_4.tmp-1700000000: half-written"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no complete checkpoint"), std::string::npos) << r.out;

  // import-hf: missing directory / safetensors, truncated safetensors.
  r = sh(quote(t5x_bin()) + " ckpt import-hf " + quote(root + "/nohf") + " " + quote(root + "/x"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(root + "/nohf: no such directory"), std::string::npos) << r.out;
  train(root + "/m2", 0, 2);
  ASSERT_EQ(sh(quote(t5x_bin()) + " ckpt export-hf " + quote(root + "/m2") + " " + quote(root + "/hf2")).rc, 0);
  const std::string st = root + "/hf2/model.safetensors";
  truncate_file(st, fs::file_size(st) - 100);
  r = sh(quote(t5x_bin()) + " ckpt import-hf " + quote(root + "/hf2") + " " + quote(root + "/x"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(st), std::string::npos) << r.out;
  fs::remove(st);
  r = sh(quote(t5x_bin()) + " ckpt import-hf " + quote(root + "/hf2") + " " + quote(root + "/x"));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.out.find(st + ": missing"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("safe_serialization=True"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(root + "/x/checkpoint_0"));
  fs::remove_all(root);
}

// Automatic resume skips a damaged newest checkpoint, says so, and the run
// still ends with the parameters of an uninterrupted one.
TEST(CkptCli, ResumeSkipsDamagedNewestCheckpoint) {
  const std::string root = temp_dir("resume_damaged");
  train(root + "/ref", 6, 2);
  train(root + "/run", 4, 2);
  const std::string chunk = some_chunk(root + "/run/checkpoint_4", "target.decoder.layers_1.mlp.wo.kernel");
  ASSERT_FALSE(chunk.empty());
  truncate_file(chunk, 3);
  std::string out = train(root + "/run", 6, 2);
  EXPECT_NE(out.find("skipped " + root + "/run/checkpoint_4"), std::string::npos) << out;
  EXPECT_NE(out.find("resumed from " + root + "/run/checkpoint_2"), std::string::npos) << out;
  auto a = digests(root + "/ref/checkpoint_6"), b = digests(root + "/run/checkpoint_6");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  fs::remove_all(root);
}

}  // namespace
}  // namespace t5x::ckpt_testing
