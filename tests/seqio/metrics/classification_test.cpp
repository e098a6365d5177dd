#include <gtest/gtest.h>

#include <cmath>

#include "seqio/metrics/classification.h"
#include "seqio/metrics/edit_distance.h"

namespace seqio::metrics {
namespace {

TEST(MetricsClassification, AccuracyAndSequenceAccuracy) {
  const std::vector<std::string> t = {"a", "b", "c", "d"}, p = {"a", "x", "c", "d"};
  EXPECT_DOUBLE_EQ(accuracy(t, p).at("accuracy"), 75.0);
  EXPECT_DOUBLE_EQ(sequence_accuracy(t, p).at("sequence_accuracy"), 75.0);
  EXPECT_DOUBLE_EQ(all_match(t, p).at("exact_match"), 0.0);
  EXPECT_DOUBLE_EQ(all_match(t, t).at("exact_match"), 100.0);
  EXPECT_DOUBLE_EQ(sequence_accuracy({"a "}, {"a"}).at("sequence_accuracy"), 0.0);  // exact strings
}

TEST(MetricsClassification, MeanMulticlassF1KnownAnswer) {
  // Class 0: tp 1 fn 1 -> 2/3; class 1: fp 1 fn 1 -> 0; class 2: tp 1 fp 1 -> 2/3.
  const auto r = mean_multiclass_f1({"0", "1", "2", "0"}, {"0", "2", "2", "1"}, 3);
  EXPECT_NEAR(r.at("mean_3class_f1"), 100.0 * 4.0 / 9.0, 1e-12);
  // An unparsable prediction is wrong (-1); an unused class scores 0.
  const auto r4 = mean_multiclass_f1({"0", "1"}, {"0", "yes"}, 4);
  EXPECT_NEAR(r4.at("mean_4class_f1"), 100.0 * 1.0 / 4.0, 1e-12);
  EXPECT_THROW(mean_multiclass_f1({"zero"}, {"0"}, 2), std::invalid_argument);
}

TEST(MetricsClassification, F1WithInvalid) {
  // Predictions 2 and "x" become 1 - target: [1, 1, 0, 0] vs [1, 0, 1, 1].
  const auto r = f1_score_with_invalid({"1", "0", "1", "1"}, {"1", "2", "0", "x"});
  EXPECT_NEAR(r.at("f1"), 40.0, 1e-12);
}

TEST(MetricsClassification, Correlations) {
  EXPECT_NEAR(pearson_corrcoef({"1", "2", "3"}, {"2", "4", "6"}).at("pearson_corrcoef"), 100.0, 1e-9);
  EXPECT_NEAR(pearson_corrcoef({"1", "2", "3"}, {"6", "4", "2"}).at("pearson_corrcoef"), -100.0, 1e-9);
  EXPECT_NEAR(spearman_corrcoef({"1", "2", "3", "4"}, {"1", "4", "9", "16"}).at("spearman_corrcoef"),
              100.0, 1e-9);
  EXPECT_LT(pearson_corrcoef({"1", "2", "3", "4"}, {"1", "4", "9", "16"}).at("pearson_corrcoef"), 99.0);
  // Ties take the mean rank: x ranks [1, 2.5, 2.5, 4].
  EXPECT_NEAR(spearman_corrcoef({"1", "2", "2", "3"}, {"1", "2", "3", "4"}).at("spearman_corrcoef"),
              100.0 * 4.5 / std::sqrt(4.5 * 5.0), 1e-9);
  EXPECT_TRUE(std::isnan(pearson_corrcoef({"1", "1"}, {"1", "2"}).at("pearson_corrcoef")));
  // A nan among the values propagates, as scipy.stats.spearmanr's default
  // (scipy 1.17: nan for both orders); it ranked as a number before.
  EXPECT_TRUE(std::isnan(spearman_corrcoef({"1", "2", "3", "4"}, {"nan", "2", "3", "4"}).at("spearman_corrcoef")));
  EXPECT_TRUE(std::isnan(spearman_corrcoef({"1", "2", "3", "4"}, {"4", "3", "2", "nan"}).at("spearman_corrcoef")));
  EXPECT_THROW(pearson_corrcoef({"1", "one"}, {"1", "2"}), std::invalid_argument);
}

TEST(MetricsEditDistance, SplitsAtEverySingleNonWordCharacter) {
  using V = std::vector<std::string>;
  EXPECT_EQ(split_non_word("Hello,  w\u00f6rld!"), (V{"Hello", "", "", "w\u00f6rld", ""}));
  EXPECT_EQ(split_non_word(""), (V{""}));
  EXPECT_EQ(word_edit_distance({"a", "b"}, {"a", "c", "b"}), 1u);
  EXPECT_EQ(word_edit_distance({"kitten"}, {}), 1u);
  // Distances 0, 2 ("the", "dog" vs "a", "cat") and 1 (a trailing "" piece).
  const auto r = edit_distance({"The dog", "the dog", "cat"}, {"the dog", "a cat", "cat."});
  EXPECT_DOUBLE_EQ(r.at("min_edit"), 0.0);
  EXPECT_DOUBLE_EQ(r.at("max_edit"), 2.0);
  EXPECT_DOUBLE_EQ(r.at("median_edit"), 1.0);
  EXPECT_DOUBLE_EQ(r.at("sum_edit"), 3.0);
  EXPECT_DOUBLE_EQ(r.at("mean_edit"), 1.0);
  EXPECT_DOUBLE_EQ(edit_distance({"The dog"}, {"the dog"}, false).at("sum_edit"), 1.0);
  EXPECT_THROW(edit_distance({}, {}), std::invalid_argument);
}

}  // namespace
}  // namespace seqio::metrics
