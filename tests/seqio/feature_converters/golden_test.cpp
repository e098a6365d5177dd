// Exact comparison with seqio 0.0.20's converters on GPL-3 text
// (tests/golden/seqio/feature_converters/converters.json, made by
// scripts/golden/seqio_converters_golden.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <memory>

#include "seqio/feature_converters/feature_converters.h"

namespace seqio {
namespace {

using nlohmann::json;

const json& golden() {
  static const json j = [] {
    std::ifstream f(std::string(T5X_SOURCE_DIR) +
                    "/tests/golden/seqio/feature_converters/converters.json");
    if (!f) throw std::runtime_error("missing converters.json golden");
    return json::parse(f);
  }();
  return j;
}

std::unique_ptr<FeatureConverter> make(const json& c) {
  FeatureConverterOptions o;
  o.pack = c["pack"];
  o.bos_id = c["bos_id"];
  const std::string kind = c["converter"];
  if (kind == "enc_dec") return std::make_unique<EncDecFeatureConverter>(o);
  if (kind == "lm") return std::make_unique<LMFeatureConverter>(o);
  if (kind == "prefix_lm")
    return std::make_unique<PrefixLMFeatureConverter>(o, c["loss_on_targets_only"].get<bool>());
  if (kind == "encoder") return std::make_unique<EncoderFeatureConverter>(c["mask_id"], o);
  throw std::runtime_error("unknown converter " + kind);
}

TEST(ConvertersGolden, AllCasesMatchSeqio) {
  const auto& cases = golden().at("cases");
  ASSERT_EQ(cases.size(), 11u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::vector<Example> ds;
    for (const auto& e : c["examples"]) {
      Example x;
      for (const auto& [k, v] : e.items()) x[k] = v.get<Tokens>();
      ds.push_back(std::move(x));
    }
    const auto out = (*make(c))(ds, c["lengths"].get<SequenceLengths>());
    ASSERT_EQ(out.size(), c["outputs"].size());
    for (size_t i = 0; i < out.size(); ++i) {
      const json& want = c["outputs"][i];
      ASSERT_EQ(out[i].size(), want.size()) << "row " << i;
      for (const auto& [k, v] : want.items())
        EXPECT_EQ(get_tokens(out[i], k), v.get<Tokens>()) << "row " << i << " feature " << k;
    }
  }
}

}  // namespace
}  // namespace seqio
