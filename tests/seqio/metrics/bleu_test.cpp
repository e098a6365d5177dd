#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "seqio/metrics/bleu.h"

namespace seqio::metrics {
namespace {

TEST(MetricsBleu, IdenticalCorpusScores100) {
  std::vector<std::string> refs = {"The Program is free software.", "You may copy it, 2 times."};
  EXPECT_DOUBLE_EQ(corpus_bleu(refs, refs).score, 100.0);
}

TEST(MetricsBleu, ShortSegmentsWithoutFourGramsScoreZero) {
  // sacrebleu stops at the first order without any n-gram; log(0) -> 0.
  EXPECT_EQ(corpus_bleu({"yes", "no"}, std::vector<std::string>{"yes", "no"}).score, 0.0);
  BleuOptions eff;
  eff.use_effective_order = true;
  EXPECT_DOUBLE_EQ(corpus_bleu({"yes", "no"}, std::vector<std::string>{"yes", "no"}, eff).score, 100.0);
}

TEST(MetricsBleu, EmptyPredictionsScoreZeroWithZeroBrevityPenalty) {
  const auto s = corpus_bleu({"", "  "}, std::vector<std::string>{"a b c d", "e f g h"});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.sys_len, 0);
  EXPECT_EQ(s.ref_len, 8);
  EXPECT_EQ(s.bp, 0.0);
}

TEST(MetricsBleu, BrevityPenaltyKnownAnswer) {
  // All n-grams match; 6 prediction vs 7 reference tokens: 100 * exp(1 - 7/6).
  const auto s = corpus_bleu({"the cat sat on the mat"},
                             std::vector<std::string>{"the cat sat on the mat today"});
  EXPECT_NEAR(s.score, 100.0 * std::exp(1.0 - 7.0 / 6.0), 1e-9);
  EXPECT_NEAR(s.score, 84.64817248906144, 1e-9);  // sacrebleu 2.6.0
}

TEST(MetricsBleu, ExpSmoothingHalvesMissingOrders) {
  // p = 3/4, 2/3, 1/2 and 0/1 -> 1 / (2 * 1): geometric mean of 75, 66.7, 50, 50.
  const auto s = corpus_bleu({"a b c d"}, std::vector<std::string>{"a b c e"});
  EXPECT_NEAR(s.precisions[3], 50.0, 1e-12);
  EXPECT_NEAR(s.score, std::pow(75.0 * (200.0 / 3.0) * 50.0 * 50.0, 0.25), 1e-9);
  BleuOptions none;
  none.smooth_method = "none";
  EXPECT_EQ(corpus_bleu({"a b c d"}, std::vector<std::string>{"a b c e"}, none).score, 0.0);
}

TEST(MetricsBleu, CorpusStatisticsIgnoreExampleOrder) {
  std::vector<std::string> preds = {"the work is free", "a copy of the licence", "you may"};
  std::vector<std::string> refs = {"the work is not free", "a copy of this licence", "you must"};
  const double base = corpus_bleu(preds, refs).score;
  std::vector<int> idx = {0, 1, 2};
  while (std::next_permutation(idx.begin(), idx.end())) {
    std::vector<std::string> p, r;
    for (int i : idx) { p.push_back(preds[i]); r.push_back(refs[i]); }
    EXPECT_DOUBLE_EQ(corpus_bleu(p, r).score, base);
  }
  EXPECT_GT(base, 0.0);
  EXPECT_LT(base, 100.0);
}

TEST(MetricsBleu, ExtraIdenticalReferenceGives100) {
  std::vector<std::vector<std::string>> refs = {{"something else entirely", "the work is free"}};
  EXPECT_DOUBLE_EQ(corpus_bleu({"the work is free"}, refs).score, 100.0);
}

TEST(MetricsBleu, ClosestReferenceLengthPrefersShorterOnTies) {
  std::vector<std::vector<std::string>> refs = {{"a b c d e f", "a b c d"}};  // |5-6| = |5-4|
  EXPECT_EQ(corpus_bleu({"a b c d e"}, refs).ref_len, 4);
}

TEST(MetricsBleu, Tokenize13a) {
  EXPECT_EQ(tokenize_13a("In 2007. $5 Hello, world. 1,000.50 x-1 9- &amp; e.g."),
            "In 2007 . $ 5 Hello , world . 1,000.50 x-1 9 - & e . g .");
  EXPECT_EQ(tokenize_13a("co-\noperate<skipped> (a)"), "cooperate ( a )");
}

TEST(MetricsBleu, TokenizeIntl) {
  EXPECT_EQ(tokenize_intl("In 2007. $5 Hello, world. 1,000.50 e.g."),
            "In 2007 . $ 5 Hello , world . 1,000.50 e . g .");
  // mteval-v14 quirk kept by sacrebleu: a final number keeps its period.
  EXPECT_EQ(tokenize_intl("In 2007."), "In 2007.");
  EXPECT_EQ(tokenize_intl("\u00abQu\u00e9?\u00bb \u20ac5"), "\u00ab Qu\u00e9 ? \u00bb \u20ac 5");
}

TEST(MetricsBleu, LowercaseOption) {
  BleuOptions lc;
  lc.lowercase = true;
  EXPECT_DOUBLE_EQ(corpus_bleu({"THE WORK IS FREE"}, std::vector<std::string>{"the work is free"}, lc).score,
                   100.0);
  EXPECT_EQ(corpus_bleu({"THE WORK IS FREE"}, std::vector<std::string>{"the work is free"}).score, 0.0);
}

TEST(MetricsBleu, ErrorsNameTheProblem) {
  EXPECT_THROW(corpus_bleu({"a"}, std::vector<std::string>{}), std::invalid_argument);
  BleuOptions bad;
  bad.tokenize = "zh";
  try {
    corpus_bleu({"a"}, std::vector<std::string>{"a"}, bad);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[seqio.metrics.bleu] unknown tokenize 'zh'"), std::string::npos);
  }
  try {
    corpus_bleu({"ok", "bad \xff"}, std::vector<std::string>{"ok", "ok"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("byte 4 of prediction 1"), std::string::npos) << e.what();
  }
  std::vector<std::vector<std::string>> none = {{}};
  EXPECT_THROW(corpus_bleu({"a"}, none), std::invalid_argument);
}

}  // namespace
}  // namespace seqio::metrics
