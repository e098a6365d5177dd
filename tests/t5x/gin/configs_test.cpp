// Every file under configs/ parses and validates against t5x's registry;
// the model files carry t5x's exact shapes; the run files require the same
// macros as t5x's.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "t5x/gin/config.h"
#include "t5x/gin/flags.h"
#include "t5x/gin/parser.h"
#include "test_util.h"

namespace t5x::gin {
namespace {

namespace fs = std::filesystem;
using testing::expect_gin_error;

const Registry& t5x_registry() {
  static Registry r = [] {
    Registry reg;
    register_t5x_configurables(reg);
    return reg;
  }();
  return r;
}

std::string cfg(const std::string& rel) {
  return (fs::path(T5X_SOURCE_DIR) / "configs" / rel).string();
}

Config load(const std::vector<std::string>& files, const std::vector<std::string>& bindings = {}) {
  std::vector<std::string> paths;
  for (const std::string& f : files) paths.push_back(cfg(f));
  return parse_config_files_and_bindings(paths, bindings, {}, &t5x_registry());
}

std::vector<std::string> missing_names(const Config& c) {
  std::vector<std::string> out;
  for (const MissingMacro& m : c.missing_macros()) out.push_back(m.name);
  return out;
}

TEST(GinConfigs, EveryFileParsesAndValidates) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(T5X_SOURCE_DIR) / "configs")) {
    if (e.path().extension() != ".gin") continue;
    ++n;
    Config c(&t5x_registry());
    EXPECT_NO_THROW(c.parse_file(e.path().string())) << e.path();
    EXPECT_FALSE(c.bindings().empty()) << e.path();
    // The operative config of every file round-trips.
    Config back(&t5x_registry());
    back.parse_string(c.operative_config_str(), "config.gin");
    EXPECT_TRUE(back.equivalent(c)) << e.path();
  }
  EXPECT_GE(n, 13u);
}

struct Shape {
  const char* file;
  int64_t emb, heads, layers, head_dim, mlp;
};

TEST(GinConfigs, T511ShapesMatchT5x) {
  for (const Shape& s : {Shape{"tiny", 8, 4, 2, 3, 16}, Shape{"small", 512, 6, 8, 64, 1024},
                         Shape{"base", 768, 12, 12, 64, 2048}, Shape{"large", 1024, 16, 24, 64, 2816},
                         Shape{"xl", 2048, 32, 24, 64, 5120}, Shape{"xxl", 4096, 64, 24, 64, 10240}}) {
    SCOPED_TRACE(s.file);
    const Config c = load({"models/t5_1_1/" + std::string(s.file) + ".gin", "runs/pretrain.gin"});
    const std::string t5 = "network.T5Config";
    EXPECT_EQ(c.get_int("", t5, "vocab_size"), 32128);
    EXPECT_EQ(c.get_int("", t5, "emb_dim"), s.emb);
    EXPECT_EQ(c.get_int("", t5, "num_heads"), s.heads);
    EXPECT_EQ(c.get_int("", t5, "num_encoder_layers"), s.layers);
    EXPECT_EQ(c.get_int("", t5, "num_decoder_layers"), s.layers);
    EXPECT_EQ(c.get_int("", t5, "head_dim"), s.head_dim);
    EXPECT_EQ(c.get_int("", t5, "mlp_dim"), s.mlp);
    EXPECT_EQ(c.get("", t5, "mlp_activations").to_gin(), "('gelu', 'linear')");
    EXPECT_FALSE(c.get_bool("", t5, "logits_via_embedding"));
    EXPECT_EQ(c.get_double("", t5, "dropout_rate"), 0.0);  // pretrain.gin
    EXPECT_EQ(c.get_string("", t5, "dtype"), "bfloat16");
    EXPECT_EQ(c.get_reference("", "network.Transformer", "config").name, "network.T5Config");
    EXPECT_DOUBLE_EQ(c.get_double("", "models.EncoderDecoderModel", "z_loss"), 1e-4);
    EXPECT_DOUBLE_EQ(c.get_double("", "adafactor.Adafactor", "decay_rate"), 0.8);
  }
}

TEST(GinConfigs, T510AndDecoderOnly) {
  const Config small = load({"models/t5_1_0/small.gin", "runs/finetune.gin"});
  EXPECT_EQ(small.get_int("", "network.T5Config", "emb_dim"), 512);
  EXPECT_EQ(small.get_int("", "network.T5Config", "num_heads"), 8);
  EXPECT_EQ(small.get_int("", "network.T5Config", "num_encoder_layers"), 6);
  EXPECT_EQ(small.get_int("", "network.T5Config", "mlp_dim"), 2048);
  EXPECT_EQ(small.get("", "network.T5Config", "mlp_activations").to_gin(), "('relu',)");
  EXPECT_TRUE(small.get_bool("", "network.T5Config", "logits_via_embedding"));
  EXPECT_DOUBLE_EQ(small.get_double("", "network.T5Config", "dropout_rate"), 0.1);  // finetune
  const Config base = load({"models/t5_1_0/base.gin", "runs/pretrain.gin"});
  EXPECT_EQ(base.get_int("", "network.T5Config", "mlp_dim"), 3072);

  const Config dec = load({"models/decoder_only/small.gin", "runs/pretrain.gin"});
  EXPECT_EQ(dec.get_int("", "network.TransformerConfig", "num_layers"), 8);
  EXPECT_EQ(dec.get_reference("", "models.DecoderOnlyModel", "decode_fn").name,
            "decoding.temperature_sample");
  EXPECT_EQ(dec.macro_value("MODEL").as_reference().name, "models.DecoderOnlyModel");
}

TEST(GinConfigs, RunFilesRequireT5xMacros) {
  using V = std::vector<std::string>;
  EXPECT_EQ(missing_names(load({"models/t5_1_1/tiny.gin", "runs/pretrain.gin"})),
            (V{"MIXTURE_OR_TASK_NAME", "MODEL_DIR", "TASK_FEATURE_LENGTHS", "TRAIN_STEPS"}));
  EXPECT_EQ(missing_names(load({"models/t5_1_1/tiny.gin", "runs/finetune.gin"})),
            (V{"INITIAL_CHECKPOINT_PATH", "MIXTURE_OR_TASK_NAME", "MODEL_DIR",
               "TASK_FEATURE_LENGTHS", "TRAIN_STEPS"}));
  EXPECT_EQ(missing_names(load({"models/t5_1_1/tiny.gin", "runs/eval.gin"})),
            (V{"CHECKPOINT_PATH", "EVAL_OUTPUT_DIR", "MIXTURE_OR_TASK_NAME"}));
  EXPECT_EQ(missing_names(load({"models/t5_1_1/tiny.gin", "runs/infer.gin"})),
            (V{"CHECKPOINT_PATH", "INFER_OUTPUT_DIR", "MIXTURE_OR_TASK_NAME",
               "TASK_FEATURE_LENGTHS"}));
  // A run file alone misses MODEL, which the model files define; a model file
  // alone misses DROPOUT_RATE, which the run files set.
  const V run_only = missing_names(load({"runs/pretrain.gin"}));
  EXPECT_NE(std::find(run_only.begin(), run_only.end(), "MODEL"), run_only.end());
  EXPECT_EQ(missing_names(load({"models/t5_1_1/base.gin"})), (V{"DROPOUT_RATE"}));
}

TEST(GinConfigs, T5xStyleCommandLine) {
  // The acceptance command of the trainer, files in either order.
  for (bool model_first : {true, false}) {
    std::vector<std::string> args = {
        "--gin_file=" + cfg(model_first ? "models/t5_1_1/tiny.gin" : "runs/pretrain.gin"),
        "--gin_file=" + cfg(model_first ? "runs/pretrain.gin" : "models/t5_1_1/tiny.gin"),
        "--gin.MODEL_DIR=/tmp/t5x_model", "--gin.MIXTURE_OR_TASK_NAME=wmt_ende",
        "--gin.TRAIN_STEPS=100", "--gin.TASK_FEATURE_LENGTHS={'inputs': 32, 'targets': 32}",
        "--gin.BATCH_SIZE=8", "--gin.train_script.train.eval_period=50"};
    const Config c = load_gin_config(parse_gin_flags(args), &t5x_registry());
    EXPECT_NO_THROW(c.check_complete());
    const std::string train = "train_script.train";
    EXPECT_EQ(c.get_string("", train, "model_dir"), "/tmp/t5x_model");
    EXPECT_EQ(c.get_int("", train, "total_steps"), 100);
    EXPECT_EQ(c.get_int("", train, "eval_period"), 50);
    const Reference model = c.get_reference("", train, "model");
    EXPECT_EQ(model.name, "models.EncoderDecoderModel");
    EXPECT_TRUE(model.call);
    const Reference ds = c.get_reference("", train, "train_dataset_cfg");
    EXPECT_EQ(ds.scope, "train");
    EXPECT_EQ(c.get_int(ds.scope, ds.name, "batch_size"), 8);
    EXPECT_EQ(c.get_string(ds.scope, ds.name, "split"), "train");
    EXPECT_EQ(c.get_string("train_eval", ds.name, "split"), "validation");
    EXPECT_EQ(c.get_int("train_eval", ds.name, "seed"), 42);
    EXPECT_EQ(c.get_dict("train", ds.name, "task_feature_lengths")[1].second.as_int(), 32);
    EXPECT_EQ(c.get_string("", "utils.create_learning_rate_scheduler", "factors"),
              "constant * rsqrt_decay");
    EXPECT_EQ(c.get_int("", "utils.SaveCheckpointConfig", "period"), 1000);
    EXPECT_DOUBLE_EQ(c.get_double("", "network.T5Config", "dropout_rate"), 0.0);
    // Parameters the files leave unbound come from the registry's t5x defaults.
    EXPECT_DOUBLE_EQ(c.get_double("", "adafactor.Adafactor", "epsilon2"), 1e-3);
  }
  const GinFlags typo = parse_gin_flags({"--gin_file=" + cfg("runs/pretrain.gin"),
                                         "--gin.utils.SaveCheckpointConfig.perod=10"});
  expect_gin_error([&] { load_gin_config(typo, &t5x_registry()); },
                   {"<--gin.utils.SaveCheckpointConfig.perod>:1:1", "no parameter 'perod'",
                    "did you mean 'period'"});
}

// The C++ parser reads every config file and the language corpus exactly as
// Python gin-config's parser does: testdata/python_gin_statements.tsv was
// written by gin_python_golden.py (pip gin-config 0.5.0) from the same files.
TEST(GinConfigs, MatchesPythonGinParser) {
  const fs::path root(T5X_SOURCE_DIR);
  std::ifstream in(root / "tests/t5x/gin/testdata/python_gin_statements.tsv");
  ASSERT_TRUE(in.good());
  std::map<std::string, std::vector<std::vector<std::string>>> golden;
  std::vector<std::string> order;
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cells.push_back(c);
    cells.resize(7);
    if (!golden.count(cells[0])) order.push_back(cells[0]);
    golden[cells[0]].push_back(cells);
  }
  ASSERT_GE(order.size(), 14u);
  size_t compared = 0;
  for (const std::string& rel : order) {
    SCOPED_TRACE(rel);
    std::ifstream f(root / rel);
    std::stringstream text;
    text << f.rdbuf();
    const std::vector<Statement> st = parse_gin(text.str(), rel);
    const auto& want = golden[rel];
    ASSERT_EQ(st.size(), want.size());
    for (size_t i = 0; i < st.size(); ++i) {
      const Statement& s = st[i];
      const auto& w = want[i];
      SCOPED_TRACE("line " + w[2]);
      EXPECT_EQ(std::to_string(s.where.line), w[2]);
      switch (s.kind) {
        case Statement::Kind::kImport: EXPECT_EQ(w[1], "import"); break;
        case Statement::Kind::kInclude:
          EXPECT_EQ(w[1], "include");
          EXPECT_EQ(s.text, w[6]);
          break;
        case Statement::Kind::kMacro:
          EXPECT_EQ(w[1], "macro");
          EXPECT_EQ(s.name, w[5]);
          EXPECT_EQ(s.value.to_gin(), w[6]);
          break;
        case Statement::Kind::kBinding:
          EXPECT_EQ(w[1], "binding");
          EXPECT_EQ(s.scope, w[3]);
          EXPECT_EQ(s.configurable, w[4]);
          EXPECT_EQ(s.name, w[5]);
          EXPECT_EQ(s.value.to_gin(), w[6]);
          break;
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 390u);
}

}  // namespace
}  // namespace t5x::gin
