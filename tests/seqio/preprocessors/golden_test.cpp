// Compares against outputs of the Python originals (T5 / seqio) on GPL-3 text:
// tests/golden/seqio/preprocessors/preprocessors.json, made by
// scripts/golden/seqio_preproc_golden.py.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "seqio/preprocessors/basic.h"
#include "seqio/preprocessors/formatting.h"
#include "seqio/preprocessors/noise.h"
#include "seqio/preprocessors/pretraining.h"
#include "test_util.h"

namespace seqio::preprocessors {
namespace {

using nlohmann::json;

const json& golden() {
  static const json j = [] {
    std::ifstream f(std::string(T5X_SOURCE_DIR) +
                    "/tests/golden/seqio/preprocessors/preprocessors.json");
    if (!f) throw std::runtime_error("missing preprocessors.json golden");
    return json::parse(f);
  }();
  return j;
}

TEST(PreprocessorsGolden, RandomSpansHelper) {
  const auto& cases = golden().at("random_spans_helper");
  ASSERT_GE(cases.size(), 50u);
  for (const auto& c : cases) {
    auto [t, tg] = random_spans_helper(c["inputs_length"], c["noise_density"],
                                       c["mean_noise_span_length"], 1, 1);
    EXPECT_EQ(t, c["tokens_length"].get<int64_t>()) << c.dump();
    EXPECT_EQ(tg, c["targets_length"].get<int64_t>()) << c.dump();
  }
}

TEST(PreprocessorsGolden, NoiseMaskCounts) {
  // T5's masks come from TF Philox; counts and span structure must agree.
  int checked = 0;
  for (const auto& c : golden().at("random_spans_noise_mask")) {
    const int64_t len = c["length"];
    const double d = c["noise_density"], mean = c["mean_noise_span_length"];
    if (c.contains("error")) {
      EXPECT_THROW(random_spans_noise_mask(len, d, Rng(1), mean), std::invalid_argument)
          << c.dump();
      continue;
    }
    for (uint64_t seed = 0; seed < 3; ++seed) {
      NoiseMask m = random_spans_noise_mask(len, d, Rng(seed), mean);
      const NoiseMask t5 = c["mask"].get<NoiseMask>();
      ASSERT_EQ(m.size(), t5.size());
      auto noise = [](const NoiseMask& v) { return std::count(v.begin(), v.end(), 1); };
      auto spans = [](const NoiseMask& v) {
        int64_t s = 0;
        for (size_t i = 0; i < v.size(); ++i) s += v[i] && (i == 0 || !v[i - 1]);
        return s;
      };
      EXPECT_EQ(noise(m), c["num_noise_tokens"].get<int64_t>()) << "length " << len;
      EXPECT_EQ(spans(m), c["num_noise_spans"].get<int64_t>()) << "length " << len;
      if (len >= 2) {
        EXPECT_EQ(m.front(), t5.front());
        EXPECT_EQ(m.back(), t5.back());
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 25);
}

TEST(PreprocessorsGolden, TokenFunctionsOnT5Masks) {
  const int32_t vocab_size = golden().at("vocab_size");
  const std::map<std::string, NoiseTokensFn> fns = {
      {"noise_span_to_unique_sentinel", noise_span_to_unique_sentinel},
      {"nonnoise_span_to_unique_sentinel", nonnoise_span_to_unique_sentinel},
      {"noise_token_to_sentinel", noise_token_to_sentinel},
      {"noise_span_to_sentinel", noise_span_to_sentinel},
      {"nonnoise_span_to_sentinel", nonnoise_span_to_sentinel},
      {"drop_noise_tokens", drop_noise_tokens},
      {"drop_nonnoise_tokens", drop_nonnoise_tokens}};
  const auto& cases = golden().at("token_fns");
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    const Tokens tokens = c["tokens"].get<Tokens>();
    const NoiseMask mask = c["mask"].get<NoiseMask>();
    for (const auto& [name, fn] : fns)
      EXPECT_EQ(fn(tokens, mask, vocab_size), c[name].get<Tokens>()) << name;
  }
}

TEST(PreprocessorsGolden, TokenizeAndAppendEosAfterTrim) {
  auto v = std::make_shared<ByteVocabulary>(100);
  OutputFeatures of{{"inputs", test::feature(v, false)}, {"targets", test::feature(v, true)}};
  const auto& g = golden().at("tokenize_append_eos_after_trim");
  const SequenceLengths lengths = g["lengths"].get<SequenceLengths>();
  for (const auto& c : g["examples"]) {
    Example x{{"inputs", c["inputs_text"].get<std::string>()},
              {"targets", c["targets_text"].get<std::string>()}};
    Example y = append_eos_after_trim(tokenize(x, of), of, lengths);
    EXPECT_EQ(get_tokens(y, "inputs"), c["inputs"].get<Tokens>());
    EXPECT_EQ(get_tokens(y, "targets"), c["targets"].get<Tokens>());
    EXPECT_EQ(get_text(y, "inputs_pretokenized"), c["inputs_pretokenized"].get<std::string>());
    EXPECT_EQ(get_text(y, "targets_pretokenized"), c["targets_pretokenized"].get<std::string>());
  }
}

TEST(PreprocessorsGolden, ReduceConcatAndSplitTokens) {
  const auto& g = golden().at("reduce_concat_split");
  Dataset ds;
  for (const auto& d : g["docs"]) ds.push_back(Example{{"targets", d.get<Tokens>()}});
  Dataset concat = reduce_concat_tokens(ds, "targets", g["batch_size"]);
  ASSERT_EQ(concat.size(), g["concat"].size());
  for (size_t i = 0; i < concat.size(); ++i)
    EXPECT_EQ(get_tokens(concat[i], "targets"), g["concat"][i].get<Tokens>());
  Dataset split = split_tokens(concat, g["max_tokens_per_segment"]);
  ASSERT_EQ(split.size(), g["split"].size());
  for (size_t i = 0; i < split.size(); ++i)
    EXPECT_EQ(get_tokens(split[i], "targets"), g["split"][i].get<Tokens>());
}

TEST(PreprocessorsGolden, Translate) {
  for (const auto& c : golden().at("translate")) {
    const std::string src = c["source_language"], tgt = c["target_language"];
    Example x{{src, c["source"].get<std::string>()}, {tgt, c["target"].get<std::string>()}};
    Example y = translate(x, src, tgt);
    EXPECT_EQ(get_text(y, "inputs"), c["inputs"].get<std::string>());
    EXPECT_EQ(get_text(y, "targets"), c["targets"].get<std::string>());
    EXPECT_EQ(y.size(), c["keys"].size());
  }
}

}  // namespace
}  // namespace seqio::preprocessors
