#include <gtest/gtest.h>

#include <cmath>

#include "seqio/metrics/porter.h"
#include "seqio/metrics/rouge.h"

namespace seqio::metrics {
namespace {

const std::vector<std::string> kAllKeys = {"rouge1", "rouge2", "rougeL", "rougeLsum"};

RougeOptions all_keys() {
  RougeOptions o;
  o.score_keys = kAllKeys;
  return o;
}

TEST(MetricsRouge, TokenizerLowercasesAndSplitsOnNonAlphanumerics) {
  using V = std::vector<std::string>;
  EXPECT_EQ(rouge_tokenize("The quick-brown FOX, 2x!"), (V{"the", "quick", "brown", "fox", "2x"}));
  EXPECT_EQ(rouge_tokenize("caf\u00e9 na\u00efve"), (V{"caf", "na", "ve"}));
  // U+0130 lowercases to "i" + combining dot; KELVIN SIGN to "k".
  EXPECT_EQ(rouge_tokenize("\u0130stanbul \u212Aelvin"), (V{"i", "stanbul", "kelvin"}));
  EXPECT_TRUE(rouge_tokenize(" ... ").empty());
  EXPECT_EQ(rouge_tokenize("running cats ran", true), (V{"run", "cat", "ran"}));
}

TEST(MetricsRouge, KnownAnswer) {
  const auto s = rouge_score_example("the cat sat on the mat", "the cat on the mat", all_keys());
  EXPECT_DOUBLE_EQ(s.at("rouge1").precision, 1.0);
  EXPECT_DOUBLE_EQ(s.at("rouge1").recall, 5.0 / 6.0);
  EXPECT_NEAR(s.at("rouge1").fmeasure, 10.0 / 11.0, 1e-15);
  EXPECT_NEAR(s.at("rouge2").precision, 0.75, 1e-15);
  EXPECT_NEAR(s.at("rouge2").recall, 0.6, 1e-15);
  EXPECT_NEAR(s.at("rouge2").fmeasure, 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(s.at("rougeL").fmeasure, 10.0 / 11.0, 1e-15);
}

TEST(MetricsRouge, LsumUsesSentencesAfterT5Preparation) {
  // " . " becomes a line break, so swapped sentences still match fully
  // at summary level while plain LCS sees only half.
  const auto s = rouge_score_example("the cat sat . the dog ran", "the dog ran . the cat sat", all_keys());
  EXPECT_DOUBLE_EQ(s.at("rougeLsum").fmeasure, 1.0);
  EXPECT_DOUBLE_EQ(s.at("rougeL").fmeasure, 0.5);
  EXPECT_DOUBLE_EQ(s.at("rouge1").fmeasure, 1.0);
  RougeOptions raw = all_keys();
  raw.prepare_summary = false;
  EXPECT_DOUBLE_EQ(rouge_score_example("the cat sat . the dog ran", "the dog ran . the cat sat", raw)
                       .at("rougeLsum").fmeasure,
                   0.5);
}

TEST(MetricsRouge, IdenticalIs100AndEmptyIs0) {
  const std::vector<std::string> t = {"The licence applies.\nIt is free.", "Copy it"};
  for (const auto& [k, v] : rouge(t, t)) EXPECT_DOUBLE_EQ(v, 100.0) << k;
  for (const auto& [k, v] : rouge(t, {"", ""})) EXPECT_DOUBLE_EQ(v, 0.0) << k;
  EXPECT_TRUE(std::isnan(rouge({}, {}).at("rouge1")));
}

TEST(MetricsRouge, CorpusValueIsMeanOfExampleF) {
  const std::vector<std::string> t = {"the cat sat on the mat", "a b"};
  const std::vector<std::string> p = {"the cat on the mat", "a b"};
  EXPECT_NEAR(rouge(t, p).at("rouge1"), 100.0 * (10.0 / 11.0 + 1.0) / 2.0, 1e-12);
}

TEST(MetricsRouge, Errors) {
  RougeOptions o;
  o.score_keys = {"rougeX"};
  EXPECT_THROW(rouge_score_example("a", "a", o), std::invalid_argument);
  EXPECT_THROW(rouge({"a"}, {}), std::invalid_argument);
}

TEST(MetricsPorter, NltkExtensions) {
  const std::pair<const char*, const char*> cases[] = {
      {"caresses", "caress"}, {"ponies", "poni"},         {"ties", "tie"},
      {"running", "run"},     {"happily", "happili"},     {"generalization", "gener"},
      {"skies", "sky"},       {"dying", "die"},           {"relational", "relat"},
      {"hopping", "hop"},     {"hoping", "hope"},         {"agreed", "agre"},
      {"sized", "size"},      {"falling", "fall"},        {"controll", "control"},
      {"electricity", "electr"}, {"digitizer", "digit"},  {"feed", "feed"},
      {"analogousli", "analog"}, {"archaeology", "archaeolog"}, {"cats", "cat"},
  };
  for (const auto& [w, s] : cases) EXPECT_EQ(porter_stem(w), s) << w;
}

}  // namespace
}  // namespace seqio::metrics
