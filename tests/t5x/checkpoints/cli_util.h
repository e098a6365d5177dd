// Helpers of the tests that drive the real `t5x` binary (ckpt tools, kill and
// resume, restore on another mesh): a tiny T5.1.1 on seqio's builtin
// gpl3_lines_copy task, fixed RANDOM_SEED and shuffle seed.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>
#include "../../common/tmpdir.h"

namespace t5x::ckpt_testing {

inline std::string t5x_bin() { return std::string(T5X_BINARY_DIR) + "/bin/t5x"; }

inline std::string temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("t5x_ckpt_cli_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  t5x_test::remove_at_exit(d);
  return d.string();
}

inline std::string fileio_read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct RunResult {
  int rc = -1;
  std::string out;  // stdout + stderr
};

// Runs a shell command, capturing stdout and stderr.
inline RunResult sh(const std::string& cmd) {
  RunResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

// Gin bindings of a tiny deterministic pretraining run.
inline std::vector<std::string> tiny_bindings(const std::string& model_dir, int steps, int period) {
  return {
      "MODEL_DIR = '" + model_dir + "'",
      "MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'",
      "TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}",
      "TRAIN_STEPS = " + std::to_string(steps),
      "BATCH_SIZE = 4",
      "USE_CACHED_TASKS = False",
      "RANDOM_SEED = 11",
      "train/utils.DatasetConfig.seed = 5",
      "ACTIVATION_DTYPE = 'float32'",
      "network.T5Config.vocab_size = 1152",
      "network.T5Config.emb_dim = 16",
      "network.T5Config.head_dim = 4",
      "network.T5Config.mlp_dim = 32",
      "utils.SaveCheckpointConfig.period = " + std::to_string(period),
      "train_script.train.eval_period = 1000",
      "train_script.train.stats_period = 1",
      "utils.create_learning_rate_scheduler.factors = 'constant'",
      "utils.create_learning_rate_scheduler.base_learning_rate = 0.05",
  };
}

// argv of `t5x train` for those bindings (plus extra ones).
inline std::vector<std::string> train_argv(const std::string& model_dir, int steps, int period,
                                           const std::vector<std::string>& extra = {}) {
  std::vector<std::string> a = {t5x_bin(), "train", "--gin_file=configs/models/t5_1_1/tiny.gin",
                                "--gin_file=configs/runs/pretrain.gin"};
  auto b = tiny_bindings(model_dir, steps, period);
  b.insert(b.end(), extra.begin(), extra.end());
  for (const auto& x : b) a.push_back("--gin_bindings=" + x);
  return a;
}

inline std::string join_cmd(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + quote(a);
  return s;
}

// `t5x ckpt info --digest_only PATH` as path -> "dtype (shape) digest".
inline std::map<std::string, std::string> digests(const std::string& path, std::string* err = nullptr) {
  RunResult r = sh(quote(t5x_bin()) + " ckpt info --digest_only " + quote(path));
  std::map<std::string, std::string> m;
  if (r.rc != 0) {
    if (err) *err = r.out;
    return m;
  }
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    auto sp = line.find(' ');
    if (sp != std::string::npos) m[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return m;
}

// step -> loss from MODEL_DIR/train/metrics.jsonl (the last line for a step wins).
inline std::map<int64_t, double> losses(const std::string& model_dir) {
  std::map<int64_t, double> loss;
  std::ifstream f(model_dir + "/train/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("loss")) loss[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return loss;
}

// Lines of an infer output file that are JSON objects with a "prediction";
// -1 when the file cannot be opened or a line is not such an object.
inline int prediction_lines(const std::string& path) {
  std::ifstream f(path);
  if (!f.good()) return -1;
  int lines = 0;
  for (std::string line; std::getline(f, line); ++lines) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("prediction")) return -1;
  }
  return lines;
}

// `t5x score` of gpl3_lines_copy's validation split with MODEL_GIN (the tiny
// model's sizes added for tiny.gin); returns the scores file's text.
inline std::string score(const std::string& ckpt, const std::string& model_gin, const std::string& out) {
  std::vector<std::string> argv = {t5x_bin(), "score", "--gin_file=" + model_gin, "--gin_search_paths=configs/models",
                                   "--gin_file=configs/runs/infer.gin"};
  for (const std::string& b : {"CHECKPOINT_PATH = '" + ckpt + "'", "INFER_OUTPUT_DIR = '" + out + "'",
                               std::string("MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'"),
                               std::string("MIXTURE_OR_TASK_SPLIT = 'validation'"),
                               std::string("TASK_FEATURE_LENGTHS = {'inputs': 16, 'targets': 16}"),
                               std::string("BATCH_SIZE = 8")})
    argv.push_back("--gin_bindings=" + b);
  if (model_gin.find("tiny.gin") != std::string::npos)
    for (const auto& b : tiny_bindings("", 0, 1))
      if (b.rfind("network.", 0) == 0) argv.push_back("--gin_bindings=" + b);
  RunResult r = sh(join_cmd(argv));
  EXPECT_EQ(r.rc, 0) << join_cmd(argv) << "\n" << r.out;
  return fileio_read(out + "/gpl3_lines_copy-score.jsonl-00000-of-00001");
}

}  // namespace t5x::ckpt_testing
