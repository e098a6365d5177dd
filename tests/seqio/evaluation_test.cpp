// Evaluator: numbering, re-sorting, decoding, postprocessing, metrics.
#include "seqio/evaluation.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "seqio/errors.h"
#include "seqio/mixture.h"

namespace seqio {
namespace {

class EvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TaskRegistry::reset();
    MixtureRegistry::reset();
    auto vocab = std::make_shared<ByteVocabulary>();
    std::vector<Example> exs;
    for (std::string s : {"Alpha", "Beta", "Gamma", "Delta", "Epsilon"})
      exs.push_back(Example{{"inputs", vocab->encode("q " + s)}, {"targets", vocab->encode(s)}});
    auto src = std::make_shared<InMemoryDataSource>(std::map<std::string, std::vector<Example>>{{"validation", exs}});
    OutputFeatures f{{"inputs", Feature{vocab}}, {"targets", Feature{vocab}}};
    auto lower = [](const std::string& s, const Example&, bool) {
      std::string o = s;
      std::transform(o.begin(), o.end(), o.begin(), ::tolower);
      return o;
    };
    TaskRegistry::add(std::make_shared<Task>("eval_a", src, f, std::vector<Preprocessor>{}, lower,
                                             std::vector<std::string>{"exact", "count"}));
    TaskRegistry::add(std::make_shared<Task>("eval_nometric", src, f));
    MixtureRegistry::add(std::make_shared<Mixture>(
        "eval_mix", std::vector<MixtureEntry>{{"eval_a", 1.0}, {"eval_nometric", 1.0}}));
  }
  void TearDown() override {
    TaskRegistry::reset();
    MixtureRegistry::reset();
  }
  static std::map<std::string, double> metrics(const std::string& name, const std::vector<std::string>& t,
                                               const std::vector<std::string>& p) {
    if (name == "exact") {
      double hit = 0;
      for (size_t i = 0; i < t.size(); ++i) hit += t[i] == p[i];
      return {{"exact", 100.0 * hit / t.size()}};
    }
    return {{"n", static_cast<double>(t.size())}};
  }
};

// Echoes the targets except for example 1, in reverse order.
std::vector<std::pair<int64_t, Tokens>> echo(const IndexedBatch& b) {
  std::vector<std::pair<int64_t, Tokens>> out;
  for (auto it = b.rbegin(); it != b.rend(); ++it) {
    Tokens t = get_tokens(it->second, "targets");
    if (it->first == 1) t = ByteVocabulary().encode("wrong");
    t.push_back(1);
    t.push_back(0x41);  // after EOS: dropped by decode
    out.emplace_back(it->first, t);
  }
  return out;
}

TEST_F(EvaluatorTest, PredictPostprocessAndMetrics) {
  EvaluatorOptions o;
  o.batch_size = 2;
  Evaluator ev("eval_mix", o, metrics);
  EXPECT_EQ(ev.task_names(), std::vector<std::string>{"eval_a"});  // no metric -> skipped
  EXPECT_EQ(ev.sequence_lengths("eval_a").at("inputs"), 9);     // measured maxima
  EXPECT_EQ(ev.sequence_lengths("eval_a").at("targets"), 7);
  auto r = ev.evaluate(echo).at("eval_a");
  EXPECT_EQ(r.targets, (std::vector<std::string>{"alpha", "beta", "gamma", "delta", "epsilon"}));
  EXPECT_EQ(r.predictions[1], "wrong");
  EXPECT_EQ(r.predictions[4], "epsilon");
  EXPECT_DOUBLE_EQ(r.metrics.at("exact"), 80.0);
  EXPECT_DOUBLE_EQ(r.metrics.at("n"), 5.0);
}

TEST_F(EvaluatorTest, ScoresAndNumberChecks) {
  EvaluatorOptions o;
  o.num_examples = 3;
  o.score_metrics["mean_score"] = [](const std::vector<std::string>&, const std::vector<double>& s) {
    double m = 0;
    for (double x : s) m += x;
    return std::map<std::string, double>{{"mean_score", m / s.size()}};
  };
  Evaluator ev("eval_a", o, metrics);
  auto r = ev.evaluate(nullptr, [](const IndexedBatch& b) {
    std::vector<std::pair<int64_t, double>> out;
    for (const auto& [i, ex] : b) out.emplace_back(i, -1.0 * i);
    return out;
  });
  EXPECT_EQ(r.at("eval_a").scores, (std::vector<double>{0, -1, -2}));
  EXPECT_DOUBLE_EQ(r.at("eval_a").metrics.at("mean_score"), -1.0);
  EXPECT_THROW(ev.evaluate([](const IndexedBatch& b) {
    std::vector<std::pair<int64_t, Tokens>> out;
    for (const auto& [i, ex] : b)
      if (i != 2) out.emplace_back(i, Tokens{});
    return out;
  }),
               DataError);
  EXPECT_THROW(ev.evaluate([](const IndexedBatch& b) {
    return std::vector<std::pair<int64_t, Tokens>>{{0, {}}, {0, {}}};
  }),
               DataError);
}

TEST_F(EvaluatorTest, DuplicateMetricKeyIsAnError) {
  Evaluator ev("eval_a", {}, [](const std::string&, const std::vector<std::string>&, const std::vector<std::string>&) {
    return std::map<std::string, double>{{"same", 1.0}};
  });
  EXPECT_THROW(ev.evaluate(echo), DataError);
}

}  // namespace
}  // namespace seqio
