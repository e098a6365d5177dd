#include <gtest/gtest.h>

#include <algorithm>

#include "seqio/metrics/metrics.h"

namespace seqio::metrics {
namespace {

using V = std::vector<std::string>;

TEST(MetricsRegistry, NamesAreSortedAndAllCompute) {
  const auto names = metric_names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char* want : {"accuracy", "sequence_accuracy", "bleu", "bleu_intl", "rouge", "squad",
                           "trivia_qa", "mean_multiclass_f1", "f1_score_with_invalid",
                           "pearson_corrcoef", "spearman_corrcoef", "all_match", "coqa_f1",
                           "edit_distance"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  // Perfect predictions score 100 everywhere. Text metrics get sentences
  // (BLEU needs 4-grams, ROUGE-2 bigrams), the others class labels.
  const V labels = {"0", "1", "1", "0", "1"};
  const V text = {"the work is free to copy", "you may convey verbatim copies of it"};
  for (const auto& n : names) {
    const bool is_text = n.rfind("bleu", 0) == 0 || n.rfind("rouge", 0) == 0;
    const V& t = is_text ? text : labels;
    const double perfect = n == "edit_distance" ? 0.0 : 100.0;  // distances, not percentages
    for (const auto& [k, v] : compute(n, t, t)) EXPECT_DOUBLE_EQ(v, perfect) << n << " " << k;
  }
}

TEST(MetricsRegistry, ResultKeys) {
  const std::vector<std::string> t = {"a b c d", "e f"};
  auto keys = [](const std::map<std::string, double>& m) {
    std::vector<std::string> k;
    for (const auto& [a, b] : m) k.push_back(a);
    return k;
  };
  EXPECT_EQ(keys(compute("rouge", t, t)), (V{"rouge1", "rouge2", "rougeLsum"}));
  EXPECT_EQ(keys(compute("squad", t, t)), (V{"em", "f1"}));
  EXPECT_EQ(keys(compute("bleu", t, t)), (V{"bleu"}));
  EXPECT_EQ(keys(compute("mean_3class_f1", V{"0", "2"}, V{"0", "1"})), (V{"mean_3class_f1"}));
  EXPECT_EQ(keys(compute("mean_multiclass_f1", V{"0", "2"}, V{"0", "1"})), (V{"mean_3class_f1"}));
}

TEST(MetricsRegistry, UnknownNameSuggestsNearest) {
  try {
    compute("bleuu", V{"a"}, V{"a"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[seqio.metrics] unknown metric 'bleuu'; did you mean 'bleu'?"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("squad"), std::string::npos);
  }
  EXPECT_THROW(compute("mean_0class_f1", V{"0"}, V{"0"}), std::invalid_argument);
}

TEST(MetricsRegistry, MultipleReferences) {
  const std::vector<std::vector<std::string>> t = {{"the work", "a program"}, {"free"}};
  EXPECT_DOUBLE_EQ(compute("squad", t, V{"a program", "free"}).at("em"), 100.0);
  EXPECT_DOUBLE_EQ(compute("bleu", t, V{"a program", "free"}).at("bleu"),
                   compute("bleu", V{"a program", "free"}, V{"a program", "free"}).at("bleu"));
  try {
    compute("accuracy", t, V{"a", "b"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[seqio.metrics.accuracy] example 0 has 2 targets"),
              std::string::npos);
  }
}

TEST(MetricsRegistry, SizeMismatchIsAnError) {
  for (const auto& n : metric_names()) EXPECT_THROW(compute(n, V{"1", "0"}, V{"1"}), std::invalid_argument) << n;
}

}  // namespace
}  // namespace seqio::metrics
