// Compares seqio::metrics with values from the Python originals (sacrebleu,
// rouge-score, nltk, scipy, scikit-learn, T5's qa_utils) on real licence
// text; the goldens come from scripts/golden/seqio_metrics.py.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "seqio/metrics/metrics.h"
#include "seqio/metrics/porter.h"
#include "seqio/metrics/unicode.h"

namespace seqio::metrics {
namespace {

using nlohmann::json;

json load(const std::string& name) {
  const std::string path = std::string(SEQIO_METRICS_GOLDEN_DIR) + "/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open golden file " + path);
  return json::parse(in);
}

void expect_rel(double expected, double actual, double rel, const std::string& what) {
  EXPECT_LE(std::abs(expected - actual), rel * std::max(1.0, std::abs(expected)))
      << what << ": expected " << expected << " got " << actual;
}

TEST(MetricsGolden, BleuCorporaMatchSacrebleu) {
  const json g = load("bleu.json");
  int n = 0;
  for (const auto& c : g["cases"]) {
    const json& inputs = c.contains("corpus") ? g["corpora"][c["corpus"].get<std::string>()] : c;
    const auto preds = inputs["predictions"].get<std::vector<std::string>>();
    const auto refs = inputs["references"].get<std::vector<std::vector<std::string>>>();
    BleuOptions opt;
    opt.tokenize = c["options"]["tokenize"];
    opt.lowercase = c["options"]["lowercase"];
    opt.smooth_method = c["options"]["smooth_method"];
    opt.use_effective_order = c["options"]["use_effective_order"];
    const BleuScore s = corpus_bleu(preds, refs, opt);
    const json& e = c["expected"];
    const std::string name = c["name"];
    EXPECT_NEAR(s.score, e["score"].get<double>(), 0.01) << name;
    EXPECT_NEAR(s.score, e["score"].get<double>(), 1e-9) << name << " (exact statistics)";
    EXPECT_EQ(s.sys_len, e["sys_len"].get<std::int64_t>()) << name;
    EXPECT_EQ(s.ref_len, e["ref_len"].get<std::int64_t>()) << name;
    EXPECT_NEAR(s.bp, e["bp"].get<double>(), 1e-12) << name;
    for (int k = 0; k < 4; ++k) {
      EXPECT_DOUBLE_EQ(s.counts[k], e["counts"][k].get<double>()) << name << " order " << k + 1;
      EXPECT_DOUBLE_EQ(s.totals[k], e["totals"][k].get<double>()) << name << " order " << k + 1;
    }
    ++n;
  }
  EXPECT_GE(n, 10);
}

TEST(MetricsGolden, BleuRegistryMatchesT5Call) {
  // t5.evaluation.metrics.bleu with tokenizer 13a / intl on the licence corpus.
  const json g = load("bleu.json");
  const json& corpus = g["corpora"]["licence"];
  const auto preds = corpus["predictions"].get<std::vector<std::string>>();
  const auto refs = corpus["references"].get<std::vector<std::vector<std::string>>>();
  std::vector<std::string> single;
  for (const auto& r : refs) single.push_back(r.at(0));
  for (const auto& c : g["cases"]) {
    if (c["name"] == "licence_13a") {
      EXPECT_NEAR(compute("bleu", single, preds).at("bleu"), c["expected"]["score"].get<double>(), 0.01);
    }
    if (c["name"] == "licence_intl") {
      EXPECT_NEAR(compute("bleu_intl", single, preds).at("bleu"), c["expected"]["score"].get<double>(),
                  0.01);
    }
  }
}

TEST(MetricsGolden, BleuTokenizersMatchSacrebleu) {
  const json g = load("bleu.json");
  int n = 0;
  for (const auto& t : g["tokenize"]) {
    const std::string text = t["text"];
    // sacrebleu right-strips before tokenising; the goldens did the same.
    std::u32string stripped(unicode::rstrip(unicode::decode(text)));
    const std::string in = unicode::encode(stripped);
    EXPECT_EQ(tokenize_13a(in), t["13a"].get<std::string>()) << "text: " << text;
    EXPECT_EQ(tokenize_intl(in), t["intl"].get<std::string>()) << "text: " << text;
    ++n;
  }
  EXPECT_GE(n, 50);
}

TEST(MetricsGolden, RougePerExampleMatchesRougeScore) {
  const json g = load("rouge.json");
  const std::vector<std::string> keys = {"rouge1", "rouge2", "rougeL", "rougeLsum"};
  for (bool stem : {false, true}) {
    RougeOptions opt;
    opt.score_keys = keys;
    opt.use_stemmer = stem;
    int i = 0;
    for (const auto& ex : g["examples"]) {
      const auto got = rouge_score_example(ex["target"].get<std::string>(),
                                           ex["prediction"].get<std::string>(), opt);
      const json& want = ex[stem ? "stem" : "nostem"];
      for (const auto& k : keys) {
        const std::string what = "example " + std::to_string(i) + " " + k + (stem ? " stem" : "");
        expect_rel(want[k][0].get<double>(), got.at(k).precision, 1e-9, what + " P");
        expect_rel(want[k][1].get<double>(), got.at(k).recall, 1e-9, what + " R");
        expect_rel(want[k][2].get<double>(), got.at(k).fmeasure, 1e-9, what + " F");
      }
      ++i;
    }
    EXPECT_GE(i, 50);
  }
}

TEST(MetricsGolden, RougeCorpusMeanMatchesT5) {
  const json g = load("rouge.json");
  std::vector<std::string> targets, preds;
  for (const auto& ex : g["examples"]) {
    targets.push_back(ex["target"]);
    preds.push_back(ex["prediction"]);
  }
  const auto got = compute("rouge", targets, preds);
  ASSERT_EQ(got.size(), 3u);
  for (const auto& [k, v] : g["corpus"]["mean"].items()) {
    expect_rel(v.get<double>(), got.at(k), 1e-4, "corpus " + k);
    // T5's bootstrap median is a resampling estimate of the same mean.
    EXPECT_NEAR(g["corpus"]["bootstrap_mid_seed0"][k].get<double>(), got.at(k), 1.5) << k;
  }
}

TEST(MetricsGolden, PorterStemmerMatchesNltk) {
  const json g = load("rouge.json");
  int n = 0, wrong = 0;
  for (const auto& pair : g["porter"]) {
    const std::string word = pair[0], want = pair[1];
    const std::string got = porter_stem(word);
    if (got != want && ++wrong <= 20) ADD_FAILURE() << word << ": nltk " << want << ", ours " << got;
    ++n;
  }
  EXPECT_EQ(wrong, 0) << "of " << n;
  EXPECT_GE(n, 1000);
}

TEST(MetricsGolden, QaAndEditDistanceMatchT5) {
  const json g = load("squad.json");
  std::vector<std::vector<std::string>> targets;
  std::vector<std::string> preds;
  for (const auto& ex : g["examples"]) {
    targets.push_back(ex["targets"]);
    preds.push_back(ex["prediction"]);
  }
  for (const std::string name : {"squad", "trivia_qa"}) {
    const auto got = compute(name, targets, preds);
    EXPECT_NEAR(got.at("em"), g["expected"][name]["em"].get<double>(), 1e-9) << name;
    EXPECT_NEAR(got.at("f1"), g["expected"][name]["f1"].get<double>(), 1e-9) << name;
  }
  const auto coqa = compute("coqa_f1", targets, preds);
  EXPECT_NEAR(coqa.at("f1"), g["expected"]["coqa_f1"]["f1"].get<double>(), 1e-9);

  // edit_distance against the first reference, as T5 with the editdistance package.
  std::vector<std::string> first;
  for (const auto& t : targets) first.push_back(t.at(0));
  auto check_edit = [&](const char* key, const std::map<std::string, double>& got) {
    for (const auto& [k, v] : g["expected"][key].items())
      EXPECT_NEAR(got.at(k), v.get<double>(), 1e-12) << key << " " << k;
  };
  check_edit("edit_distance_first_target", compute("edit_distance", first, preds));
  check_edit("edit_distance_first_target_cased", edit_distance(first, preds, /*lower=*/false));
  check_edit("edit_distance_first_target_even_count",
             edit_distance(std::vector<std::string>(first.begin(), first.end() - 1),
                           std::vector<std::string>(preds.begin(), preds.end() - 1)));

  int n = 0;
  for (const auto& t : g["normalize"]) {
    const std::string text = t["text"];
    EXPECT_EQ(normalize_squad(text), t["squad"].get<std::string>()) << text;
    EXPECT_EQ(normalize_trivia_qa(text), t["trivia_qa"].get<std::string>()) << text;
    ++n;
  }
  EXPECT_GE(n, 60);
}

TEST(MetricsGolden, ClassificationMatchesSklearnAndScipy) {
  const json g = load("classification.json");
  for (const auto& c : g["cases"]) {
    const std::string metric = c["metric"];
    const auto got = compute(metric, c["targets"].get<std::vector<std::string>>(),
                             c["predictions"].get<std::vector<std::string>>());
    for (const auto& [k, v] : c["expected"].items())
      expect_rel(v.get<double>(), got.at(k), 1e-9, metric + " " + k);
  }
}

TEST(MetricsGolden, FuzzedTextMatchesPythonTokenizersAndNormalisers) {
  // Random strings over awkward pieces (entities, Unicode spaces,
  // punctuation, symbols, numbers, final sigma, U+0130, combining marks).
  const json g = load("fuzz.json");
  int n = 0;
  for (const auto& c : g["cases"]) {
    const std::string text = c["text"];
    const std::string stripped = unicode::encode(std::u32string(unicode::rstrip(unicode::decode(text))));
    EXPECT_EQ(unicode::encode(unicode::lower(unicode::decode(text))), c["lower"].get<std::string>()) << text;
    EXPECT_EQ(tokenize_13a(stripped), c["13a"].get<std::string>()) << text;
    EXPECT_EQ(tokenize_intl(stripped), c["intl"].get<std::string>()) << text;
    EXPECT_EQ(rouge_tokenize(text), c["rouge"].get<std::vector<std::string>>()) << text;
    EXPECT_EQ(rouge_tokenize(text, true), c["rouge_stem"].get<std::vector<std::string>>()) << text;
    EXPECT_EQ(normalize_squad(text), c["squad"].get<std::string>()) << text;
    EXPECT_EQ(normalize_trivia_qa(text), c["trivia_qa"].get<std::string>()) << text;
    ++n;
  }
  EXPECT_GE(n, 100);
}

}  // namespace
}  // namespace seqio::metrics
