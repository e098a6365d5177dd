// Built-in demo tasks, task modules, registries, JSON I/O, rate helpers.
#include "seqio/registration.h"

#include <gtest/gtest.h>

#include "seqio/cache.h"
#include "seqio/json_io.h"
#include "seqio/mixture.h"
#include "test_util.h"

namespace seqio {
namespace {

int module_runs = 0;
SEQIO_TASK_MODULE(test_module) {
  ++module_runs;
  std::vector<Example> exs(4, Example{{"targets", Tokens{5, 1}}});
  TaskRegistry::add(std::make_shared<Task>(
      "module_task", std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"train", exs}}),
      OutputFeatures{{"targets", Feature{std::make_shared<ByteVocabulary>()}}}));
}

TEST(Registration, TaskModulesRunOnce) {
  auto names = load_task_modules();
  EXPECT_NE(std::find(names.begin(), names.end(), "test_module"), names.end());
  EXPECT_TRUE(load_task_modules().empty());
  EXPECT_EQ(module_runs, 1);
  EXPECT_EQ(get_subtasks("module_task").size(), 1u);
  TaskRegistry::remove("module_task");
  TaskRegistry::remove("module_task");  // silent when absent
  EXPECT_EQ(TaskRegistry::find("module_task"), nullptr);
  EXPECT_THROW(load_shared_module("no/such/module.so"), std::runtime_error);
}

TEST(Registration, BuiltinDemoTasks) {
  register_builtin_tasks();
  register_builtin_tasks();  // idempotent
  auto names = TaskRegistry::names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* n : {"gpl3_lm", "gpl3_prefix", "gpl3_lines_copy"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  DatasetOptions o;
  o.shuffle = false;
  o.seed = 0;
  o.split = "validation";
  o.sequence_lengths = {{"targets", 16}};
  auto out = take_all(*get_dataset("gpl3_lm", o));
  ASSERT_EQ(out.size(), 11u);  // validation paragraphs
  auto vocab = TaskRegistry::get("gpl3_lm")->output_features().at("targets").vocabulary;
  for (const auto& e : out) {
    const auto& t = get_tokens(e, "targets");
    EXPECT_LE(t.size(), 16u);
    EXPECT_EQ(t.back(), 1);  // append_eos_after_trim
    const std::string text = get_text(e, "targets_pretokenized");
    EXPECT_EQ(vocab->decode(t), vocab->decode(vocab->encode(text)).substr(0, vocab->decode(t).size()));
  }
  auto subtasks = get_subtasks("gpl3_mix");
  ASSERT_EQ(subtasks.size(), 2u);
  EXPECT_EQ(subtasks[0]->name(), "gpl3_lines_copy");
  EXPECT_TRUE(TaskRegistry::get("gpl3_prefix")->supports_caching());
}

TEST(Registration, MixingRateNumExamples) {
  register_builtin_tasks();
  auto t = TaskRegistry::get("gpl3_lines_copy");  // text lines: count by reading
  EXPECT_DOUBLE_EQ(mixing_rate_num_examples()(*t), 533.0);
  EXPECT_DOUBLE_EQ(mixing_rate_num_examples(100.0)(*t), 100.0);
  EXPECT_DOUBLE_EQ(mixing_rate_num_examples(std::nullopt, 2.0, 2.0)(*t), std::sqrt(1066.0));
  testing::TempDir d("rate");
  auto p = TaskRegistry::get("gpl3_prefix");
  write_cache(*p, d.file("c"), {});
  EXPECT_DOUBLE_EQ(mixing_rate_num_examples(std::nullopt, 1.0, 1.0, "validation", {d.file("c")})(*p), 11.0);
}

TEST(JsonIo, RoundTripAndDeterministicOrder) {
  Example ex{{"z", Tokens{3, 0, -1}}, {"a", std::string("caf\xC3\xA9 \"q\"")}, {"n", int64_t{-7}}, {"x", 0.1}};
  const std::string line = example_to_json_line(ex);
  EXPECT_EQ(line, "{\"a\":\"caf\xC3\xA9 \\\"q\\\"\",\"n\":-7,\"x\":0.1,\"z\":[3,0,-1]}");
  EXPECT_EQ(example_from_json(nlohmann::json::parse(line)), ex);
  EXPECT_THROW(example_from_json(nlohmann::json::parse("{\"a\": [1, \"x\"]}")), std::runtime_error);
}

TEST(Feature, SeqioDefaults) {
  Feature f;
  EXPECT_TRUE(f.add_eos);
  EXPECT_TRUE(f.required);
  EXPECT_EQ(f.dtype, DType::kInt32);
  EXPECT_EQ(f.rank, 1);
  EXPECT_EQ(dtype_from_name("string"), DType::kString);
  EXPECT_THROW(dtype_from_name("bf16"), std::invalid_argument);
  EXPECT_TRUE(value_matches(Tokens{}, DType::kInt32));
  EXPECT_FALSE(value_matches(int64_t{1}, DType::kInt32));
}

}  // namespace
}  // namespace seqio
