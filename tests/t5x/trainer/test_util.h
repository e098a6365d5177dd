// Shared setup of the trainer tests: a tiny T5.1.1 (configs/models/t5_1_1/tiny.gin
// shapes, vocabulary cut to the demo SentencePiece model's 1100 ids) trained
// on seqio's builtin GPL-3 demo tasks with configs/runs/pretrain.gin.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../../common/tmpdir.h"
#include "mesh/communicator.h"
#include "seqio/registration.h"
#include "t5x/gin/config.h"

namespace t5x::trainer::testing {

inline std::string temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("t5x_trainer_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  t5x_test::remove_at_exit(d);
  return d.string();
}

// One directory shared by the ranks of an mpiexec run (checkpoints are
// written shard by shard): named after the launcher's pid, made by rank 0.
inline std::string shared_temp_dir(Communicator& world, const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("t5x_trainer_test_" + name + "_" + std::to_string(::getppid()));
  if (world.rank() == 0) {
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    t5x_test::remove_at_exit(d);  // rank 0's exit comes after every rank's last use (MPI_Finalize)
  }
  world.barrier();
  return d.string();
}

// Gin bindings of a small, deterministic pretraining run.
inline std::vector<std::string> tiny_bindings(const std::string& model_dir, int steps, const std::string& task = "gpl3_lines_copy") {
  return {
      "MODEL_DIR = '" + model_dir + "'",
      "MIXTURE_OR_TASK_NAME = '" + task + "'",
      "TASK_FEATURE_LENGTHS = {'inputs': 24, 'targets': 24}",
      "TRAIN_STEPS = " + std::to_string(steps),
      "BATCH_SIZE = 8",
      "USE_CACHED_TASKS = False",
      "RANDOM_SEED = 7",
      "ACTIVATION_DTYPE = 'float32'",
      "network.T5Config.vocab_size = 1152",
      "network.T5Config.emb_dim = 32",
      "network.T5Config.head_dim = 8",
      "network.T5Config.mlp_dim = 64",
      "train/utils.DatasetConfig.seed = 3",
      "utils.SaveCheckpointConfig.period = 2",
      "train_script.train.eval_period = 1000",
      "train_script.train.eval_steps = 2",
      "train_script.train.stats_period = 1",
      "utils.create_learning_rate_scheduler.factors = 'constant'",
      "utils.create_learning_rate_scheduler.base_learning_rate = 0.05",
  };
}

// Bindings of an inference evaluation on the validation split of gpl3_lines_copy.
inline std::vector<std::string> infer_eval_bindings() {
  return {"train_script.train.infer_eval_dataset_cfg = @infer_eval/utils.DatasetConfig()",
          "infer_eval/utils.DatasetConfig.mixture_or_task_name = 'gpl3_lines_copy'",
          "infer_eval/utils.DatasetConfig.task_feature_lengths = None",
          "infer_eval/utils.DatasetConfig.split = 'validation'",
          "infer_eval/utils.DatasetConfig.batch_size = 8", "infer_eval/utils.DatasetConfig.shuffle = False",
          "infer_eval/utils.DatasetConfig.seed = 42", "infer_eval/utils.DatasetConfig.use_cached = False",
          "infer_eval/utils.DatasetConfig.pack = False"};
}

// The records of a JSON-lines file (t5x infer's outputs), in order.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The predict and score files `t5x infer` writes for gpl3_lines_copy in dir.
struct InferFiles {
  std::vector<nlohmann::json> predict, score;
};
inline InferFiles read_infer_files(const std::string& dir) {
  return {read_jsonl(dir + "/gpl3_lines_copy-predict.jsonl-00000-of-00001"),
          read_jsonl(dir + "/gpl3_lines_copy-score.jsonl-00000-of-00001")};
}

// A reference run's files: all 20 validation examples, and predictions long
// enough (over 10 characters each on average) that comparing them says something.
inline void expect_substantial_reference(const InferFiles& ref) {
  ASSERT_EQ(ref.predict.size(), 20u);
  ASSERT_EQ(ref.score.size(), 20u);
  size_t chars = 0;
  for (const auto& r : ref.predict) chars += r["prediction"].get<std::string>().size();
  EXPECT_GT(chars, 20 * 10u) << "the reference decodes little: the comparison would be weak";
}

// A mesh run's files against one process's: predictions token for token,
// the same inputs, scores within 1e-5 relative.
inline void expect_same_infer_files(const InferFiles& got, const InferFiles& ref) {
  ASSERT_EQ(got.predict.size(), ref.predict.size());
  ASSERT_EQ(got.score.size(), ref.score.size());
  for (size_t i = 0; i < got.predict.size(); ++i) {
    EXPECT_EQ(got.predict[i], ref.predict[i]) << "example " << i;
    EXPECT_EQ(got.score[i]["inputs"], ref.score[i]["inputs"]);
    const double want = ref.score[i]["score"].get<double>();
    EXPECT_NEAR(got.score[i]["score"].get<double>(), want, 1e-5 * std::abs(want)) << "example " << i;
  }
}

// A tiny scalable_t5 model (4 heads, 2 + 2 layers, scan_layers = True);
// tiny_bindings set its widths.
inline std::string scalable_model_file() { return "tests/t5x/trainer/scalable_t5_tiny.gin"; }

inline gin::Config tiny_config(const std::vector<std::string>& bindings,
                               const std::string& run_file = "configs/runs/pretrain.gin",
                               const std::string& model_file = "configs/models/t5_1_1/tiny.gin") {
  seqio::register_builtin_tasks();
  gin::LoadOptions o;
  o.search_paths = {"configs"};
  return gin::parse_config_files_and_bindings({model_file, run_file}, bindings, o);
}

}  // namespace t5x::trainer::testing
