// Mixture rates (nested, relative), sampling, exhaustion, registries, resume.
#include "seqio/mixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "seqio/errors.h"
#include "test_util.h"

namespace seqio {
namespace {

using testing::to_lines;

std::shared_ptr<const Task> make_task(const std::string& name, int n, const std::string& split = "train") {
  std::vector<Example> exs;
  for (int i = 0; i < n; ++i) exs.push_back(Example{{"targets", Tokens{i + 1}}, {"task", name}});
  auto src = std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{split, exs}});
  return std::make_shared<Task>(name, src,
                                OutputFeatures{{"targets", Feature{std::make_shared<PassThroughVocabulary>(1000, 1)}},
                                               {"task", Feature{nullptr, false, true, DType::kString, 0}}});
}

class MixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TaskRegistry::reset();
    MixtureRegistry::reset();
    for (auto [name, n] : std::vector<std::pair<std::string, int>>{{"t_b", 300}, {"t_a", 300}, {"t_c", 300}, {"t_small", 5}})
      TaskRegistry::add(make_task(name, n));
  }
  void TearDown() override {
    TaskRegistry::reset();
    MixtureRegistry::reset();
  }
};

TEST_F(MixtureTest, NestedRatesFollowSeqioFormula) {
  auto sub = MixtureRegistry::add(std::make_shared<Mixture>(
      "sub", std::vector<MixtureEntry>{{"t_a", 1.0}, {"t_b", 3.0}}));
  Mixture top("top", {{"sub", 2.0}, {"t_a", 0.5}, {"t_c", std::nullopt}}, /*default_rate=*/1.0);
  auto tasks = top.tasks();
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0]->name(), "t_a");  // sorted by name
  EXPECT_EQ(tasks[2]->name(), "t_c");
  EXPECT_DOUBLE_EQ(top.get_rate(*TaskRegistry::get("t_a")), 0.5 + 2.0 * 1.0 / 4.0);
  EXPECT_DOUBLE_EQ(top.get_rate(*TaskRegistry::get("t_b")), 2.0 * 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(top.get_rate(*TaskRegistry::get("t_c")), 1.0);
  EXPECT_DOUBLE_EQ(top.total_rate(), 1.0 + 1.5 + 1.0);
  // Callable rate (e.g. seqio's mixing_rate_num_examples).
  Mixture by_size("by_size", {{"t_a", RateFn([](const Task& t) { return 7.0; })}});
  EXPECT_DOUBLE_EQ(by_size.get_rate(*TaskRegistry::get("t_a")), 7.0);
}

TEST_F(MixtureTest, ConstructionErrors) {
  EXPECT_THROW(Mixture("m", {{"t_a", std::nullopt}}), std::invalid_argument);  // need a rate
  EXPECT_THROW(Mixture("m", {{"nope", 1.0}}), std::invalid_argument);
  EXPECT_THROW(Mixture("m", {}), std::invalid_argument);
  // Rates are finite and >= 0 (inf and nan silently dropped a task; a
  // negative one, or all 0, left an empty stream).
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan(""), -1.0}) {
    try {
      Mixture("m", {{"t_a", bad}, {"t_b", 1.0}});
      ADD_FAILURE() << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("the rate of 't_a' is"), std::string::npos) << e.what();
    }
  }
  DatasetOptions zero_opt;
  EXPECT_THROW(Mixture("m", {{"t_a", 0.0}, {"t_b", 0.0}}).get_dataset(zero_opt), DataError);
  EXPECT_THROW(Mixture("m", {{"t_a", RateFn([](const Task&) { return -2.0; })}}).get_dataset(zero_opt), DataError);
  MixtureRegistry::add(std::make_shared<Mixture>("sub", std::vector<MixtureEntry>{{"t_a", 1.0}}));
  EXPECT_THROW(Mixture("m", {{"sub", RateFn([](const Task&) { return 1.0; })}}), std::invalid_argument);
  EXPECT_THROW(MixtureRegistry::add(std::make_shared<Mixture>("sub", std::vector<MixtureEntry>{{"t_a", 1.0}})),
               std::invalid_argument);
  EXPECT_THROW(TaskRegistry::add(make_task("t_a", 1)), std::invalid_argument);
  try {
    get_mixture_or_task("t_aa");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("No Task or Mixture found with name 't_aa' (closest: t_a"), std::string::npos)
        << e.what();
  }
  // Mixtures take precedence over tasks of the same name.
  MixtureRegistry::add(std::make_shared<Mixture>("t_b", std::vector<MixtureEntry>{{"t_a", 1.0}}));
  EXPECT_TRUE(std::holds_alternative<std::shared_ptr<const Mixture>>(get_mixture_or_task("t_b")));
}

TEST_F(MixtureTest, SamplingFollowsRelativeRates) {
  Mixture m("m", {{"t_a", 3.0}, {"t_b", 1.0}});
  DatasetOptions o;
  o.seed = 1;
  o.shuffle = false;
  auto out = take_all(*m.get_dataset(o), 2000);
  int a = 0;
  for (const auto& e : out) a += get_text(e, "task") == "t_a";
  // Stops when t_a (300 examples) runs out: ~400 draws, 3/4 of them t_a.
  EXPECT_EQ(a, 300);
  EXPECT_NEAR(static_cast<double>(out.size()), 400.0, 60.0);
}

// Rates are relative, also where each is finite but their sum is not
// (session 78: 1e308 and 1e308 drew every example from one task).
TEST_F(MixtureTest, HugeFiniteRatesAreRelativeToo) {
  const double big = std::numeric_limits<double>::max() / 2;
  Mixture huge("huge", {{"t_a", big}, {"t_b", big}});
  Mixture even("even", {{"t_a", 1.0}, {"t_b", 1.0}});
  DatasetOptions o;
  o.seed = 3;
  o.shuffle = false;
  const auto a = take_all(*huge.get_dataset(o), 200), b = take_all(*even.get_dataset(o), 200);
  ASSERT_EQ(a.size(), 200u);
  int from_a = 0;
  for (const auto& e : a) from_a += get_text(e, "task") == "t_a";
  EXPECT_GT(from_a, 70);
  EXPECT_LT(from_a, 130);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(get_text(a[i], "task"), get_text(b[i], "task")) << i;
}

TEST_F(MixtureTest, StopOnEmptyOrContinue) {
  Mixture m("m", {{"t_small", 1.0}, {"t_a", 1.0}});
  DatasetOptions o;
  o.seed = 3;
  o.shuffle = false;
  auto stop = take_all(*m.get_dataset(o));
  int small = 0;
  for (auto& e : stop) small += get_text(e, "task") == "t_small";
  EXPECT_EQ(small, 5);
  EXPECT_LT(stop.size(), 40u);
  o.stop_on_empty = false;
  auto all = take_all(*m.get_dataset(o));
  EXPECT_EQ(all.size(), 305u);  // every example of every task
}

TEST_F(MixtureTest, DeterministicResumableAndFiltersFeatures) {
  auto sub = MixtureRegistry::add(std::make_shared<Mixture>(
      "sub", std::vector<MixtureEntry>{{"t_a", 1.0}, {"t_b", 2.0}}));
  Mixture m("m", {{"sub", 1.0}, {"t_c", 1.0}});
  DatasetOptions o;
  o.seed = 9;
  o.num_epochs = std::nullopt;  // seqio's Mixture default: forever
  o.block_size = 16;
  auto full = to_lines(take_all(*m.get_dataset(o), 500));
  EXPECT_EQ(to_lines(take_all(*m.get_dataset(o), 500)), full);
  auto ds = m.get_dataset(o);
  take_all(*ds, 123);
  auto r = o;
  r.resume = position_from_json(position_to_json(ds->position()));
  EXPECT_EQ(to_lines(take_all(*m.get_dataset(r), 377)), std::vector<std::string>(full.begin() + 123, full.end()));
  auto s = o;
  s.start = 200;
  EXPECT_EQ(to_lines(take_all(*m.get_dataset(s), 300)), std::vector<std::string>(full.begin() + 200, full.end()));
  // Only output features are kept.
  Example e;
  m.get_dataset(o)->next(e);
  EXPECT_EQ(e.size(), 2u);
}

TEST_F(MixtureTest, SkipsTasksWithoutSplitAndChecksVocabularies) {
  TaskRegistry::add(make_task("t_val", 4, "validation"));
  Mixture m("m", {{"t_val", 1.0}, {"t_a", 1.0}});
  DatasetOptions o;
  o.seed = 1;
  o.split = "validation";
  EXPECT_EQ(take_all(*m.get_dataset(o)).size(), 4u);
  o.split = "test";
  EXPECT_THROW(m.get_dataset(o), DataError);
  std::vector<Example> exs{Example{{"targets", Tokens{1}}, {"task", std::string("x")}}};
  TaskRegistry::add(std::make_shared<Task>(
      "t_other_vocab",
      std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"train", exs}}),
      OutputFeatures{{"targets", Feature{std::make_shared<ByteVocabulary>()}},
                     {"task", Feature{nullptr, false, true, DType::kString, 0}}}));
  Mixture bad("bad", {{"t_a", 1.0}, {"t_other_vocab", 1.0}});
  o.split = "train";
  EXPECT_THROW(bad.get_dataset(o), DataError);
}

// seqio: a Mixture's tasks have the same output feature names (Mixture's
// constructor) and, per feature, equal vocabularies and dtypes
// (get_dataset's _check_compatible_features). The errors name the mixture,
// the tasks and what differs.
std::string mixture_error(const Mixture& m) {
  DatasetOptions o;
  o.seed = 1;
  try {
    m.get_dataset(o);
  } catch (const DataError& e) {
    return e.what();
  }
  return "no error";
}

std::shared_ptr<const Task> task_with(const std::string& name, OutputFeatures features) {
  std::vector<Example> exs{Example{{"targets", Tokens{1}}, {"inputs", Tokens{1}}}};
  return std::make_shared<Task>(
      name, std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"train", exs}}),
      std::move(features));
}

TEST_F(MixtureTest, DifferentOutputFeaturesAreNamed) {
  auto pass = std::make_shared<PassThroughVocabulary>(1000, 1);
  TaskRegistry::add(task_with("t_two", {{"targets", Feature{pass}}, {"inputs", Feature{pass}}}));
  TaskRegistry::add(task_with("t_one", {{"targets", Feature{pass}}}));
  try {
    Mixture("m1", {{"t_one", 1.0}, {"t_two", 1.0}});
    ADD_FAILURE() << "tasks with different output feature names mixed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'m1': tasks 't_one' and 't_two' have different output features"),
              std::string::npos)
        << e.what();
  }

  // The same SentencePiece model named by two paths: not equal in seqio
  // (its settings, path included), and the hint says so.
  const std::string model = "tests/golden/seqio/vocab/spm1000.model";
  TaskRegistry::add(task_with("t_rel", {{"targets", Feature{make_vocabulary("sentencepiece:" + model)}}}));
  TaskRegistry::add(task_with("t_dot", {{"targets", Feature{make_vocabulary("sentencepiece:./" + model)}}}));
  TaskRegistry::add(task_with("t_rel2", {{"targets", Feature{make_vocabulary("sentencepiece:" + model)}}}));
  const std::string vocab = mixture_error(Mixture("m3", {{"t_rel", 1.0}, {"t_dot", 1.0}}));
  // (the tasks in name order, as seqio sorts a Mixture's tasks)
  EXPECT_NE(vocab.find("mixture 'm3': feature 'targets' differs between task 't_dot' (int32, vocabulary "
                       "sentencepiece:./" + model + ") and task 't_rel' (int32, vocabulary sentencepiece:" + model +
                       ")"),
            std::string::npos)
      << vocab;
  EXPECT_NE(vocab.find("hint: seqio compares vocabularies by their settings, the model's path string included"),
            std::string::npos)
      << vocab;
  EXPECT_EQ(mixture_error(Mixture("m4", {{"t_rel", 1.0}, {"t_rel2", 1.0}})), "no error");
}

}  // namespace
}  // namespace seqio
