// infer / score / eval run modes on a checkpoint the trainer wrote, and the
// inference evaluation during training.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "t5x/trainer/infer.h"
#include "t5x/trainer/trainer.h"
#include "t5x/checkpoints/manifest.h"
#include "test_util.h"

namespace t5x::trainer {
namespace {

namespace fs = std::filesystem;
using testing::temp_dir;
using testing::tiny_bindings;
using testing::tiny_config;
using testing::read_jsonl;

Distributed single() { return Distributed::create(PartitionerConfig{}, make_single_communicator()); }

// One trained checkpoint shared by the tests of this file.
const std::string& trained_dir() {
  static std::string dir = [] {
    std::string d = temp_dir("infer_model");
    auto b = tiny_bindings(d, 6);
    TrainerOptions o;
    o.durable_checkpoints = false;
    Trainer t(read_train_config(tiny_config(b)), single(), o);
    t.train();
    return d;
  }();
  return dir;
}

InferRunConfig infer_config(const std::string& out_dir, const std::string& mode) {
  std::vector<std::string> b = {
      "MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'",
      "TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 24}",
      "CHECKPOINT_PATH = '" + trained_dir() + "/checkpoint_6'",
      "INFER_OUTPUT_DIR = '" + out_dir + "'",
      "MIXTURE_OR_TASK_SPLIT = 'validation'",
      "BATCH_SIZE = 4",
      "ACTIVATION_DTYPE = 'float32'",
      "network.T5Config.vocab_size = 1152",
      "network.T5Config.emb_dim = 32",
      "network.T5Config.head_dim = 8",
      "network.T5Config.mlp_dim = 64",
      "infer_script.infer.checkpoint_period = 2",
      "infer_script.infer.mode = '" + mode + "'",
  };
  return read_infer_config(tiny_config(b, "configs/runs/infer.gin"));
}

TEST(Infer, PredictWritesT5xJsonlAndResumesChunks) {
  std::string out = temp_dir("infer_out");
  InferRunConfig c = infer_config(out, "predict");
  EXPECT_EQ(c.restore.dtype, "bfloat16");  // infer.gin
  InferStats s = run_infer(c, single());
  const std::string file = out + "/gpl3_lines_copy-predict.jsonl-00000-of-00001";
  ASSERT_TRUE(fs::exists(file));
  ASSERT_TRUE(fs::exists(file + ".COMPLETED"));
  auto rows = read_jsonl(file);
  ASSERT_EQ(rows.size(), 20u);  // tests/data/seqio/gpl3_lines.validation.txt
  EXPECT_EQ(s.examples, 20);
  for (const auto& r : rows) {
    EXPECT_TRUE(r["inputs"].contains("inputs_pretokenized"));
    EXPECT_TRUE(r["prediction"].is_string());
  }
  // Restart with the first chunk (8 examples) already done: it is reused, not recomputed.
  fs::remove(file);
  fs::remove(file + ".COMPLETED");
  const std::string tmp = out + "/tmp-gpl3_lines_copy-predict.jsonl-00000-of-00001";
  fs::create_directories(tmp);
  {
    std::ofstream chunk(tmp + "/gpl3_lines_copy-predict.jsonl-00000-of-00001-chunk00000");
    for (int i = 0; i < 8; ++i) chunk << R"({"inputs": {}, "prediction": "from an earlier run"})" << "\n";
    std::ofstream(tmp + "/gpl3_lines_copy-predict.jsonl-00000-of-00001-chunk00000.COMPLETED") << "\n";
  }
  InferStats s2 = run_infer(c, single());
  EXPECT_EQ(s2.chunks_skipped, 1);
  EXPECT_EQ(s2.examples, 12);
  auto rows2 = read_jsonl(file);
  ASSERT_EQ(rows2.size(), 20u);
  EXPECT_EQ(rows2[7]["prediction"], "from an earlier run");
  EXPECT_EQ(rows2[8]["prediction"], rows[8]["prediction"]);
  EXPECT_EQ(rows2[19]["inputs"], rows[19]["inputs"]);
  EXPECT_FALSE(fs::exists(tmp));
}

// A finished output file is reused only by a run with its settings: another
// checkpoint's (or batch size's) run is refused, not answered with the old
// predictions; an older output without settings is still taken as done. A
// split the task lacks is refused before the restore, naming the setting.
TEST(Infer, FinishedOutputOfAnotherRunIsRefused) {
  std::string out = temp_dir("infer_done");
  InferRunConfig c = infer_config(out, "predict");
  run_infer(c, single());
  const std::string file = out + "/gpl3_lines_copy-predict.jsonl-00000-of-00001";
  // The settings live in a hidden file beside the output: `cat
  // TASK-predict.jsonl-*` takes in the .COMPLETED marker, which stays a blank line.
  const std::string settings = out + "/.gpl3_lines_copy-predict.jsonl-00000-of-00001.settings.json";
  {
    std::ifstream f(settings);
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    EXPECT_NE(text.find("\"checkpoint\""), std::string::npos) << text;
    std::ifstream m(file + ".COMPLETED");
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(m)), {}), "\n");
  }
  EXPECT_EQ(run_infer(c, single()).examples, 0);  // the same run: done
  InferRunConfig other = c;
  other.restore.paths = {trained_dir() + "/checkpoint_4"};
  ASSERT_TRUE(fs::exists(other.restore.paths[0]));
  // on_checked (where the program writes config.gin) runs only for an
  // accepted run: a refused one leaves the config that describes the output.
  bool checked = false;
  try {
    run_infer(other, single(), nullptr, [&] { checked = true; });
    ADD_FAILURE() << "another checkpoint's run reused the output";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(file + " was written by a run with other settings"), std::string::npos) << m;
    EXPECT_NE(m.find("checkpoint_4"), std::string::npos) << m;
    EXPECT_NE(m.find("hint: write into another INFER_OUTPUT_DIR"), std::string::npos) << m;
  }
  EXPECT_FALSE(checked);
  run_infer(c, single(), nullptr, [&] { checked = true; });
  EXPECT_TRUE(checked);
  // The decoding and the split are settings too (a resume with another
  // temperature reused the old chunks).
  for (int k = 0; k < 2; ++k) {
    InferRunConfig d = c;
    if (k == 0) {
      d.model.decode.method = DecodeOptions::Method::temperature_sample;
      d.model.decode.sampling.temperature = 0.3;
    } else {
      d.dataset.split = "train";
    }
    try {
      run_infer(d, single());
      ADD_FAILURE() << (k == 0 ? "another decoding" : "another split") << " reused the output";
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(file + " was written by a run with other settings"), std::string::npos) << m;
      EXPECT_NE(m.find(k == 0 ? "\"temperature\":0.3" : "\"split\":\"train\""), std::string::npos) << m;
    }
  }
  fs::remove(settings);  // an output written before the settings were kept: taken as done
  EXPECT_EQ(run_infer(other, single()).examples, 0);
  InferRunConfig bad = c;
  bad.dataset.split = "test";
  bad.output_dir = temp_dir("infer_no_split");
  try {
    run_infer(bad, single());
    ADD_FAILURE() << "a missing split was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[infer] task 'gpl3_lines_copy' has no split 'test' (its splits: "), std::string::npos) << m;
    EXPECT_NE(m.find("hint: set MIXTURE_OR_TASK_SPLIT"), std::string::npos) << m;
  }
}

// A shard outside [0, num_shards) and t5x's predict_with_aux (which ran as
// predict, without its aux outputs) are refused when the config is read,
// before the restore and before config.gin (session 78).
TEST(Infer, BadShardAndModeAreRefusedByName) {
  const std::string out = temp_dir("infer_bad_shard");
  for (const auto& [binding, message] : std::vector<std::pair<std::string, std::string>>{
           {"infer_script.infer.shard_id = 2", "infer_script.infer.shard_id = 2 with num_shards = 1: shard_id must be"},
           {"infer_script.infer.shard_id = -1", "shard_id = -1 with num_shards = 1"},
           {"infer_script.infer.mode = 'predict_with_aux'", "'predict_with_aux' (predictions with their aux"}}) {
    std::vector<std::string> b = {"MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'",
                                  "TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 24}",
                                  "CHECKPOINT_PATH = '" + out + "/none'",
                                  "INFER_OUTPUT_DIR = '" + out + "'",
                                  binding};
    try {
      read_infer_config(tiny_config(b, "configs/runs/infer.gin"));
      ADD_FAILURE() << binding << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << binding << ": " << e.what();
    }
  }
}

// A checkpoint of a larger model than the gin's (a layer more) is refused
// under RestoreCheckpointConfig.strict, the default, as a resume is: infer
// would otherwise run the smaller model on part of the weights. strict =
// False drops the extra layer with a warning.
TEST(Infer, CheckpointOfALargerModelIsRefusedUnderStrict) {
  InferRunConfig c = infer_config(temp_dir("infer_smaller"), "score");
  c.model.network.num_encoder_layers -= 1;
  ASSERT_GE(c.model.network.num_encoder_layers, 1);
  ASSERT_TRUE(c.restore.strict);
  try {
    run_infer(c, single());
    ADD_FAILURE() << "a smaller model read part of the checkpoint";
  } catch (const CheckpointError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("parameter(s) this model does not have (e.g. 'encoder/layers_"), std::string::npos) << m;
    EXPECT_NE(m.find("it was saved by a larger model"), std::string::npos) << m;
    EXPECT_NE(m.find("utils.RestoreCheckpointConfig.strict = False"), std::string::npos) << m;
  }
  c.restore.strict = false;
  std::ostringstream log;
  EXPECT_EQ(run_infer(c, single(), &log).examples, 20);
  EXPECT_NE(log.str().find("of the checkpoint are not in this model"), std::string::npos) << log.str();
}

// A resume reuses a chunk only when it is as its marker records (size and
// CRC-32C), and only the chunks of a run with the same settings (bad-input
// sweep, session 59: an emptied or padded chunk, or a resume with another
// BATCH_SIZE, lost, doubled or mixed examples, and said COMPLETED).
TEST(Infer, ResumeReusesOnlyIntactChunksOfTheSameRun) {
  const std::string out = temp_dir("infer_resume_checks");
  InferRunConfig c = infer_config(out, "predict");
  const std::string file = out + "/gpl3_lines_copy-predict.jsonl-00000-of-00001";
  const std::string tmp = out + "/tmp-gpl3_lines_copy-predict.jsonl-00000-of-00001";
  const std::string chunk0 = tmp + "/gpl3_lines_copy-predict.jsonl-00000-of-00001-chunk00000";
  run_infer(c, single());
  const auto want = read_jsonl(file);
  ASSERT_EQ(want.size(), 20u);
  auto restart = [&] {
    fs::remove(file);
    fs::remove(file + ".COMPLETED");
    fs::create_directories(tmp);
  };
  // A chunk changed after its marker was written is computed again.
  restart();
  {
    std::ofstream f(chunk0, std::ios::binary);
    for (int i = 0; i < 8; ++i) f << R"({"inputs": {}, "prediction": "from an earlier run"})" << "\n";
  }
  const FileDigest d = digest_file(chunk0);
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", unsigned(d.crc32c));
  std::ofstream(chunk0 + ".COMPLETED") << nlohmann::json{{"examples", 8}, {"bytes", d.bytes}, {"crc32c", crc}}.dump();
  std::ofstream(chunk0, std::ios::app) << "{}\n";  // one line more than recorded
  std::ostringstream log;
  InferStats s = run_infer(c, single(), &log);
  EXPECT_EQ(s.chunks_skipped, 0);
  EXPECT_NE(log.str().find(chunk0 + ": " + std::to_string(d.bytes + 3) + " bytes; its marker records " +
                           std::to_string(d.bytes) + "; computing it again"),
            std::string::npos)
      << log.str();
  EXPECT_EQ(read_jsonl(file), want);
  // Partial output of a run with other settings is refused, not mixed in.
  restart();
  std::ofstream(tmp + "/run.json") << R"({"batch_size": 2})" << "\n";
  try {
    run_infer(c, single());
    FAIL() << "mixed the output of another run";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("was written by a run with other settings"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hint: resume with the same settings, or delete " + tmp), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(file));
}

TEST(Infer, ScoreWritesLogLikelihoods) {
  std::string out = temp_dir("score_out");
  InferStats s = run_infer(infer_config(out, "score"), single());
  auto rows = read_jsonl(out + "/gpl3_lines_copy-score.jsonl-00000-of-00001");
  ASSERT_EQ(rows.size(), 20u);
  for (const auto& r : rows) {
    double v = r["score"].get<double>();
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_LT(v, 0.0);  // a log-probability of a non-empty target
  }
}

// `t5x eval` of the trained checkpoint_6 on the validation split into `out`,
// with `extra` bindings.
std::map<std::string, std::map<std::string, double>> eval_into(const std::string& out,
                                                               const std::vector<std::string>& extra = {}) {
  std::vector<std::string> b = {
      "MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'",
      "CHECKPOINT_PATH = '" + trained_dir() + "/checkpoint_6'",
      "EVAL_OUTPUT_DIR = '" + out + "'",
      "MIXTURE_OR_TASK_SPLIT = 'validation'",
      "BATCH_SIZE = 8",
      "ACTIVATION_DTYPE = 'float32'",
      "network.T5Config.vocab_size = 1152",
      "network.T5Config.emb_dim = 32",
      "network.T5Config.head_dim = 8",
      "network.T5Config.mlp_dim = 64",
  };
  b.insert(b.end(), extra.begin(), extra.end());
  return run_eval(read_eval_config(tiny_config(b, "configs/runs/eval.gin")), single());
}

TEST(Infer, EvalComputesTaskMetrics) {
  std::string out = temp_dir("eval_out");
  auto m = eval_into(out);
  ASSERT_EQ(m.count("gpl3_lines_copy"), 1u);
  ASSERT_FALSE(m["gpl3_lines_copy"].empty());
  for (const auto& [k, v] : m["gpl3_lines_copy"]) {
    EXPECT_GE(v, 0.0) << k;
    EXPECT_LE(v, 100.0) << k;
  }
  EXPECT_TRUE(fs::exists(out + "/inference_eval/gpl3_lines_copy-metrics.jsonl"));
  EXPECT_TRUE(fs::exists(out + "/inference_eval/gpl3_lines_copy-000006.jsonl"));
  EXPECT_EQ(read_jsonl(out + "/inference_eval/gpl3_lines_copy-000006.jsonl").size(), 20u);
}

// seqio.Evaluator.num_examples takes the first N examples of the task (the
// metrics are those of evaluating that prefix alone); JSONLogger's
// write_n_results writes the first N predictions (0: no file).
TEST(Infer, EvaluatorNumExamplesAndWriteNResults) {
  auto eval = [](const std::string& out, const std::vector<std::string>& extra) { return eval_into(out, extra); };
  const std::string all = temp_dir("eval_all"), five = temp_dir("eval_five"), none = temp_dir("eval_none");
  auto m_all = eval(all, {});
  auto m_five = eval(five, {"seqio.Evaluator.num_examples = 5", "seqio.JSONLogger.write_n_results = 3"});
  const auto rows_all = read_jsonl(all + "/inference_eval/gpl3_lines_copy-000006.jsonl");
  const auto rows_five = read_jsonl(five + "/inference_eval/gpl3_lines_copy-000006.jsonl");
  ASSERT_EQ(rows_all.size(), 20u);
  ASSERT_EQ(rows_five.size(), 3u);
  for (size_t i = 0; i < rows_five.size(); ++i) EXPECT_EQ(rows_five[i], rows_all[i]) << i;
  // Sequence accuracy over 5 examples is a multiple of 20%.
  const double acc = m_five.at("gpl3_lines_copy").at("sequence_accuracy");
  EXPECT_NEAR(acc / 20.0, std::round(acc / 20.0), 1e-9) << acc;
  eval(none, {"seqio.JSONLogger.write_n_results = 0"});
  EXPECT_TRUE(fs::exists(none + "/inference_eval/gpl3_lines_copy-metrics.jsonl"));
  EXPECT_FALSE(fs::exists(none + "/inference_eval/gpl3_lines_copy-000006.jsonl"));
  try {
    eval(temp_dir("eval_neg"), {"seqio.Evaluator.num_examples = -1"});
    ADD_FAILURE() << "a negative num_examples was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("seqio.Evaluator.num_examples (EVALUATOR_NUM_EXAMPLES) must be >= 0"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace t5x::trainer
