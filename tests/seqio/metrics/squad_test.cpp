#include <gtest/gtest.h>

#include <cmath>

#include "seqio/metrics/squad.h"

namespace seqio::metrics {
namespace {

TEST(MetricsSquad, Normalisation) {
  EXPECT_EQ(normalize_squad("The Quick, Brown fox!"), "quick brown fox");
  EXPECT_EQ(normalize_squad("An apple a day"), "apple day");
  EXPECT_EQ(normalize_squad("theatre"), "theatre");
  EXPECT_EQ(normalize_squad("rock_and_roll"), "rockandroll");
  EXPECT_EQ(normalize_trivia_qa("rock_and_roll"), "rock and roll");
  EXPECT_EQ(normalize_trivia_qa("\u2018The\u2019 end"), "end");
  // Python str.lower(): Greek final sigma.
  EXPECT_EQ(normalize_squad("\u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3"),
            "\u03bf\u03b4\u03c5\u03c3\u03c3\u03b5\u03c5\u03c2");
  // \b is Unicode-aware: "a" inside "\u00e9a" is not a word.
  EXPECT_EQ(normalize_squad("\u00e9a a\u00e9 a"), "\u00e9a a\u00e9");
}

TEST(MetricsSquad, TokenF1KnownAnswer) {
  EXPECT_NEAR(qa_f1("quick brown fox", "brown fox jumps"), 2.0 / 3.0, 1e-15);
  EXPECT_EQ(qa_f1("quick", ""), 0.0);
  EXPECT_NEAR(qa_f1("a a b", "a b b"), 2.0 / 3.0, 1e-15);  // clipped counts
}

TEST(MetricsSquad, MaxOverReferencesAndMean) {
  const std::vector<std::vector<std::string>> t = {{"Paris", "the city of Paris"}, {"42"}};
  const auto r = squad(t, {"city of paris.", "forty two"});
  EXPECT_DOUBLE_EQ(r.at("em"), 50.0);
  EXPECT_DOUBLE_EQ(r.at("f1"), 50.0);
  const auto same = squad(t, {"Paris", "42"});
  EXPECT_DOUBLE_EQ(same.at("em"), 100.0);
  EXPECT_DOUBLE_EQ(same.at("f1"), 100.0);
  const auto empty = squad(t, {"", ""});
  EXPECT_DOUBLE_EQ(empty.at("em"), 0.0);
  EXPECT_DOUBLE_EQ(empty.at("f1"), 0.0);
}

TEST(MetricsSquad, CoqaF1CountsTwoEmptyAnswersAsAgreement) {
  // "The" and "a." both normalise to nothing: SQuAD F1 0, CoQA F1 1.
  EXPECT_DOUBLE_EQ(squad({{"The"}}, {"a."}).at("f1"), 0.0);
  EXPECT_DOUBLE_EQ(squad({{"The"}}, {"a."}).at("em"), 100.0);
  EXPECT_DOUBLE_EQ(coqa_f1({{"The"}}, {"a."}).at("f1"), 100.0);
  EXPECT_DOUBLE_EQ(coqa_f1({{"The"}}, {"cat"}).at("f1"), 0.0);
  EXPECT_NEAR(coqa_f1({{"quick brown fox", "x"}}, {"brown fox jumps"}).at("f1"), 200.0 / 3.0, 1e-12);
}

TEST(MetricsSquad, Errors) {
  EXPECT_THROW(squad({{"a"}}, {}), std::invalid_argument);
  EXPECT_THROW(squad({{}}, {"a"}), std::invalid_argument);
  EXPECT_TRUE(std::isnan(squad({}, {}).at("em")));
}

}  // namespace
}  // namespace seqio::metrics
