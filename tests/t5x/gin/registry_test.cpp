// Registry: name matching (gin's partial module paths), suggestions,
// defaults, misuse.
#include <stdexcept>

#include <gtest/gtest.h>

#include "t5x/gin/registry.h"
#include "test_util.h"

namespace t5x::gin {
namespace {

using testing::expect_gin_error;

TEST(GinRegistry, EditDistance) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("EMB_DIM", "emb_dim"), 0u);  // case-insensitive
  EXPECT_EQ(edit_distance("emb_dm", "emb_dim"), 1u);
}

TEST(GinRegistry, NearestNames) {
  const std::vector<std::string> params{"emb_dim", "mlp_dim", "head_dim", "num_heads", "dtype"};
  const auto near = nearest_names("emb_dm", params);
  ASSERT_FALSE(near.empty());
  EXPECT_EQ(near[0], "emb_dim");
  EXPECT_TRUE(nearest_names("zzzzzzzzzzzz", params).empty());
}

TEST(GinRegistry, FindsShortAndLongModulePaths) {
  Registry r;
  r.add("utils.DatasetConfig", {{"split", ""}});
  r.add("train_script.train", {{"total_steps", ""}});
  r.add("a.Foo", {});
  r.add("b.Foo", {});
  EXPECT_EQ(r.find("utils.DatasetConfig")->name, "utils.DatasetConfig");
  EXPECT_EQ(r.find("DatasetConfig")->name, "utils.DatasetConfig");
  EXPECT_EQ(r.find("t5x.utils.DatasetConfig")->name, "utils.DatasetConfig");
  EXPECT_EQ(r.find("train")->name, "train_script.train");
  EXPECT_EQ(r.find("atasetConfig"), nullptr);  // suffixes match whole components only
  EXPECT_EQ(r.find("Nothing"), nullptr);
  expect_gin_error([&] { r.find("Foo", SourceLocation{"x.gin", 4, 1}); },
                   {"x.gin:4:1", "'Foo' is ambiguous: a.Foo, b.Foo", "hint:"});
}

TEST(GinRegistry, UnknownNamesSuggestNearest) {
  Registry r;
  register_t5x_configurables(r);
  expect_gin_error([&] { r.lookup("network.T5Confg", SourceLocation{"m.gin", 3, 1}); },
                   {"m.gin:3:1", "unknown configurable 'network.T5Confg'",
                    "did you mean 'network.T5Config'"});
  expect_gin_error([&] { r.lookup("utils.DataSetConfg", SourceLocation{"m.gin", 1, 1}); },
                   {"did you mean 'utils.DatasetConfig'"});
  expect_gin_error([&] { r.lookup("adafactor.AdaFactr", SourceLocation{"m.gin", 1, 1}); },
                   {"did you mean 'adafactor.Adafactor'"});
  const ConfigurableSpec& spec = r.lookup("utils.SaveCheckpointConfig", {});
  expect_gin_error([&] { r.check_param(spec, "perod", SourceLocation{"m.gin", 9, 3}); },
                   {"m.gin:9:3", "has no parameter 'perod'", "did you mean 'period'"});
  expect_gin_error([&] { r.check_param(spec, "qqqqqqqqqqqqqq", SourceLocation{"m.gin", 1, 1}); },
                   {"known parameters:", "period", "keep"});
}

TEST(GinRegistry, GlobalStartsWithT5xNames) {
  EXPECT_TRUE(Registry::global().contains("network.T5Config"));
  EXPECT_TRUE(Registry::global().contains("train_script.train"));
}

TEST(GinRegistry, DefaultsAndMisuse) {
  Registry r;
  register_t5x_configurables(r);
  const size_t n = r.size();
  register_t5x_configurables(r);  // idempotent
  EXPECT_EQ(r.size(), n);
  const ConfigurableSpec* ada = r.find("adafactor.Adafactor");
  ASSERT_NE(ada, nullptr);
  EXPECT_DOUBLE_EQ(ada->param("decay_rate")->default_value->as_double(), 0.8);
  EXPECT_DOUBLE_EQ(ada->param("epsilon1")->default_value->as_double(), 1e-30);
  EXPECT_DOUBLE_EQ(ada->param("epsilon2")->default_value->as_double(), 1e-3);
  EXPECT_DOUBLE_EQ(ada->param("clipping_threshold")->default_value->as_double(), 1.0);
  EXPECT_EQ(ada->param("min_dim_size_to_factor")->default_value->as_int(), 128);
  EXPECT_TRUE(ada->param("beta1")->default_value->is_none());
  const ConfigurableSpec* lr = r.find("utils.create_learning_rate_scheduler");
  EXPECT_EQ(lr->param("factors")->default_value->as_string(),
            "constant * linear_warmup * rsqrt_decay");
  EXPECT_FALSE(r.find("utils.DatasetConfig")->param("batch_size")->default_value.has_value());
  EXPECT_THROW(r.add("adafactor.Adafactor", {}), std::invalid_argument);
  EXPECT_THROW(r.add("x.Y", {{"a", ""}, {"a", ""}}), std::invalid_argument);
  for (const char* name :
       {"network.T5Config", "network.Transformer", "models.EncoderDecoderModel",
        "models.DecoderOnlyModel", "adafactor.Adafactor", "optimizers.adamw",
        "utils.SaveCheckpointConfig", "utils.RestoreCheckpointConfig", "utils.CheckpointConfig",
        "utils.DatasetConfig", "partitioning.PjitPartitioner",
        "partitioning.standard_logical_axis_rules", "seqio.SentencePieceVocabulary",
        "seqio.Evaluator", "train_script.train", "utils.create_learning_rate_scheduler",
        "trainer.Trainer", "eval_script.evaluate", "infer_script.infer"})
    EXPECT_TRUE(r.contains(name)) << name;
}

}  // namespace
}  // namespace t5x::gin
