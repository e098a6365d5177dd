// `t5x train` and `t5x infer` build their model through the one gin reader
// (t5x/models/gin_model.h): a prefix LM configured in gin
// (models.DecoderOnlyModel.inputs_bidirectional_attention = True) is a prefix
// LM in both. They once used a second reader that dropped the flag, so a
// configured prefix LM trained and scored as a causal LM.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ops/ops.h"
#include "t5x/trainer/infer.h"
#include "t5x/trainer/trainer.h"
#include "test_util.h"

namespace t5x::trainer {
namespace {

using testing::temp_dir;

Distributed single() { return Distributed::create(PartitionerConfig{}, make_single_communicator()); }

// A tiny decoder-only model (configs/models/decoder_only/small.gin, cut down).
std::vector<std::string> prefix_lm_bindings(bool bidirectional) {
  return {"MIXTURE_OR_TASK_NAME = 'gpl3_lines_copy'",
          "TASK_FEATURE_LENGTHS = {'inputs': 12, 'targets': 12}",
          "BATCH_SIZE = 4",
          "USE_CACHED_TASKS = False",
          "ACTIVATION_DTYPE = 'float32'",
          "network.TransformerConfig.vocab_size = 1152",
          "network.TransformerConfig.emb_dim = 32",
          "network.TransformerConfig.num_heads = 2",
          "network.TransformerConfig.num_layers = 2",
          "network.TransformerConfig.head_dim = 8",
          "network.TransformerConfig.mlp_dim = 64",
          std::string("models.DecoderOnlyModel.inputs_bidirectional_attention = ") + (bidirectional ? "True" : "False")};
}

gin::Config prefix_lm_config(std::vector<std::string> b, const std::string& run_file) {
  seqio::register_builtin_tasks();
  gin::LoadOptions o;
  o.search_paths = {"configs"};
  return gin::parse_config_files_and_bindings({"configs/models/decoder_only/small.gin", run_file}, b, o);
}

TrainRunConfig train_config(const std::string& dir, bool bidirectional) {
  auto b = prefix_lm_bindings(bidirectional);
  for (std::string s : {"MODEL_DIR = '" + dir + "'", std::string("TRAIN_STEPS = 2"), std::string("RANDOM_SEED = 7"),
                        std::string("train/utils.DatasetConfig.seed = 3"), std::string("train_script.train.eval_period = 1000"),
                        std::string("utils.create_learning_rate_scheduler.factors = 'constant'"),
                        std::string("utils.create_learning_rate_scheduler.base_learning_rate = 0.05")})
    b.push_back(s);
  return read_train_config(prefix_lm_config(b, "configs/runs/pretrain.gin"));
}

InferRunConfig score_config(const std::string& checkpoint, const std::string& out, bool bidirectional) {
  auto b = prefix_lm_bindings(bidirectional);
  b.push_back("CHECKPOINT_PATH = '" + checkpoint + "'");
  b.push_back("INFER_OUTPUT_DIR = '" + out + "'");
  b.push_back("MIXTURE_OR_TASK_SPLIT = 'validation'");
  b.push_back("infer_script.infer.mode = 'score'");
  return read_infer_config(prefix_lm_config(b, "configs/runs/infer.gin"));
}

// Largest change of the logits at position 1 when the last prefix token
// (position 3) changes: zero exactly for a causal LM, not for a prefix LM.
double prefix_sensitivity(const BaseTransformerModel& m) {
  ParamTree params = m.init(prng_key(1));
  auto logits_at_1 = [&](int64_t tok3) {
    const Shape s{{"batch", 1}, {"length", 6}};
    Batch b{{"decoder_input_tokens", Array::from_ints(s, {0, 11, 12, tok3, 14, 15})},
            {"decoder_target_tokens", Array::from_ints(s, {11, 12, tok3, 14, 15, 1})},
            {"decoder_causal_attention", Array::from_ints(s, {1, 1, 1, 1, 0, 0})}};
    std::vector<float> v = transpose(m.logits(params, b), {"batch", "length", "vocab"}).to_floats();
    const size_t V = v.size() / 6;
    return std::vector<float>(v.begin() + V, v.begin() + 2 * V);
  };
  std::vector<float> a = logits_at_1(13), c = logits_at_1(700);
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(c[i])));
  return d;
}

bool built_bidirectional(const BaseTransformerModel& m) {
  auto* d = dynamic_cast<const DecoderOnlyModel*>(&m);
  if (!d) throw std::runtime_error("not a DecoderOnlyModel");
  return d->inputs_bidirectional_attention();
}

std::vector<double> scores(const std::string& file) {
  std::vector<double> out;
  std::ifstream f(file);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line)["score"].get<double>());
  return out;
}

TEST(ModelReader, TrainAndInferBuildThePrefixLMOfTheGinConfig) {
  TrainerOptions o;
  o.durable_checkpoints = false;
  std::map<bool, std::vector<double>> losses, score;
  std::string prefix_lm_checkpoint;
  for (bool bidirectional : {false, true}) {
    SCOPED_TRACE(bidirectional ? "prefix LM" : "causal LM");
    const std::string dir = temp_dir(bidirectional ? "reader_prefix_lm" : "reader_causal_lm");
    Trainer t(train_config(dir, bidirectional), single(), o);
    EXPECT_EQ(built_bidirectional(t.model()), bidirectional);
    const double sens = prefix_sensitivity(t.model());
    if (bidirectional) EXPECT_GT(sens, 1e-4);
    else EXPECT_EQ(sens, 0.0);
    losses[bidirectional] = t.train().losses;
    ASSERT_EQ(losses[bidirectional].size(), 2u);
    if (bidirectional) prefix_lm_checkpoint = dir + "/checkpoint_2";
  }
  // The same data, seed and parameters: only the attention mask differs.
  EXPECT_NE(losses[false][0], losses[true][0]);

  // `t5x infer` scores one checkpoint as the configured model.
  for (bool bidirectional : {false, true}) {
    const std::string out = temp_dir(bidirectional ? "reader_score_prefix" : "reader_score_causal");
    InferRunConfig c = score_config(prefix_lm_checkpoint, out, bidirectional);
    EXPECT_EQ(built_bidirectional(*make_model(c.model)), bidirectional);
    EXPECT_EQ(prefix_sensitivity(*make_model(c.model)) > 1e-4, bidirectional);
    run_infer(c, single());
    score[bidirectional] = scores(out + "/gpl3_lines_copy-score.jsonl-00000-of-00001");
  }
  ASSERT_EQ(score[false].size(), 20u);
  ASSERT_EQ(score[true].size(), 20u);
  int differ = 0;
  for (size_t i = 0; i < 20; ++i) differ += score[false][i] != score[true][i];
  EXPECT_EQ(differ, 20);
}

}  // namespace
}  // namespace t5x::trainer
