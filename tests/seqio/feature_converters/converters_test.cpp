// seqio.md §5 and §8 T6-T12: the four feature converters and their validation.
#include "seqio/feature_converters/feature_converters.h"

#include <gtest/gtest.h>

namespace seqio {
namespace {

Example ex(Tokens inputs, Tokens targets) {
  return Example{{"inputs", std::move(inputs)}, {"targets", std::move(targets)}};
}
Example lm(Tokens targets) { return Example{{"targets", std::move(targets)}}; }
const Tokens& f(const Example& x, const char* k) { return get_tokens(x, k); }
FeatureConverterOptions unpacked() { return {.pack = false}; }

TEST(EncDec, T6Unpacked) {
  EncDecFeatureConverter c(unpacked());
  auto out = c({ex({9, 4, 3, 8, 1}, {3, 9, 4, 1})}, {{"inputs", 7}, {"targets", 5}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].size(), 4u);
  EXPECT_EQ(f(out[0], "encoder_input_tokens"), (Tokens{9, 4, 3, 8, 1, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_target_tokens"), (Tokens{3, 9, 4, 1, 0}));
  EXPECT_EQ(f(out[0], "decoder_input_tokens"), (Tokens{0, 3, 9, 4, 1}));
  EXPECT_EQ(f(out[0], "decoder_loss_weights"), (Tokens{1, 1, 1, 1, 0}));
  // Targets exactly at the length.
  auto full = c({ex({9, 4, 3, 8, 1}, {3, 9, 4, 5, 1})}, {{"inputs", 5}, {"targets", 5}});
  EXPECT_EQ(f(full[0], "decoder_input_tokens"), (Tokens{0, 3, 9, 4, 5}));
  EXPECT_EQ(f(full[0], "decoder_loss_weights"), (Tokens{1, 1, 1, 1, 1}));
}

TEST(EncDec, T6InputsTooLongIsAnError) {
  EncDecFeatureConverter c(unpacked());
  try {
    c({ex({9, 4, 3, 8, 4, 5, 1}, {3, 9, 4, 1})}, {{"inputs", 5}, {"targets", 5}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[EncDecFeatureConverter]"), std::string::npos) << m;
    EXPECT_NE(m.find("'inputs'"), std::string::npos) << m;
    EXPECT_NE(m.find("length 7"), std::string::npos) << m;
    EXPECT_NE(m.find("expected length of 5"), std::string::npos) << m;
  }
}

TEST(EncDec, OverLongTrimmedAndCountedWithoutLengthCheck) {
  EncDecFeatureConverter c({.pack = false, .apply_length_check = false});
  ConversionStats stats;
  auto out = c({ex({9, 4, 3, 8, 4, 5, 1}, {3, 9, 4, 1}), ex({7, 1}, {6, 6, 6, 6, 6, 6, 1})},
               {{"inputs", 5}, {"targets", 5}}, &stats);
  EXPECT_EQ(f(out[0], "encoder_input_tokens"), (Tokens{9, 4, 3, 8, 4}));
  EXPECT_EQ(f(out[1], "decoder_target_tokens"), (Tokens{6, 6, 6, 6, 6}));
  EXPECT_EQ(stats.input_examples, 2);
  EXPECT_EQ(stats.output_examples, 2);
  EXPECT_EQ(stats.trimmed_examples.at("inputs"), 1);
  EXPECT_EQ(stats.trimmed_tokens.at("inputs"), 2);
  EXPECT_EQ(stats.trimmed_examples.at("targets"), 1);
  EXPECT_EQ(stats.trimmed_tokens.at("targets"), 2);
  EXPECT_EQ(stats.tokens.at("inputs"), 7);
}

TEST(EncDec, T7Packed) {
  EncDecFeatureConverter c;
  auto out = c({ex({7, 8, 5, 1}, {3, 9, 1}), ex({8, 4, 9, 3, 1}, {4, 1})},
               {{"inputs", 10}, {"targets", 7}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].size(), 8u);
  EXPECT_EQ(f(out[0], "encoder_input_tokens"), (Tokens{7, 8, 5, 1, 8, 4, 9, 3, 1, 0}));
  EXPECT_EQ(f(out[0], "encoder_segment_ids"), (Tokens{1, 1, 1, 1, 2, 2, 2, 2, 2, 0}));
  EXPECT_EQ(f(out[0], "encoder_positions"), (Tokens{0, 1, 2, 3, 0, 1, 2, 3, 4, 0}));
  EXPECT_EQ(f(out[0], "decoder_target_tokens"), (Tokens{3, 9, 1, 4, 1, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_input_tokens"), (Tokens{0, 3, 9, 0, 4, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_loss_weights"), (Tokens{1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_segment_ids"), (Tokens{1, 1, 1, 2, 2, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_positions"), (Tokens{0, 1, 2, 0, 1, 0, 0}));
  EncDecFeatureConverter bos({.bos_id = 10});
  auto b = bos({ex({7, 8, 5, 1}, {3, 9, 1}), ex({8, 4, 9, 3, 1}, {4, 1})},
               {{"inputs", 10}, {"targets", 7}});
  EXPECT_EQ(f(b[0], "decoder_input_tokens"), (Tokens{10, 3, 9, 10, 4, 10, 0}));
}

TEST(EncDec, T8TooLongToPack) {
  EncDecFeatureConverter c;
  auto out = c({ex({7, 8, 5, 6, 9, 4, 1}, {3, 9, 1}), ex({8, 4, 9, 3, 5, 1}, {4, 1})},
               {{"inputs", 7}, {"targets", 3}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(f(out[0], "encoder_input_tokens"), (Tokens{7, 8, 5, 6, 9, 4, 1}));
  EXPECT_EQ(f(out[0], "encoder_segment_ids"), Tokens(7, 1));
  EXPECT_EQ(f(out[0], "encoder_positions"), (Tokens{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(f(out[0], "decoder_target_tokens"), (Tokens{3, 9, 1}));
  EXPECT_EQ(f(out[0], "decoder_input_tokens"), (Tokens{0, 3, 9}));
  EXPECT_EQ(f(out[0], "decoder_loss_weights"), (Tokens{1, 1, 1}));
  EXPECT_EQ(f(out[1], "encoder_input_tokens"), (Tokens{8, 4, 9, 3, 5, 1, 0}));
  EXPECT_EQ(f(out[1], "encoder_segment_ids"), (Tokens{1, 1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(f(out[1], "encoder_positions"), (Tokens{0, 1, 2, 3, 4, 5, 0}));
  EXPECT_EQ(f(out[1], "decoder_target_tokens"), (Tokens{4, 1, 0}));
  EXPECT_EQ(f(out[1], "decoder_input_tokens"), (Tokens{0, 4, 0}));
  EXPECT_EQ(f(out[1], "decoder_loss_weights"), (Tokens{1, 1, 0}));
  EXPECT_EQ(f(out[1], "decoder_segment_ids"), (Tokens{1, 1, 0}));
  EXPECT_EQ(f(out[1], "decoder_positions"), (Tokens{0, 1, 0}));
}

TEST(LM, T10UnpackedAndPacked) {
  LMFeatureConverter u(unpacked());
  auto a = u({lm({3, 9, 1})}, {{"targets", 5}});
  EXPECT_EQ(a[0].size(), 3u);
  EXPECT_EQ(f(a[0], "decoder_target_tokens"), (Tokens{3, 9, 1, 0, 0}));
  EXPECT_EQ(f(a[0], "decoder_input_tokens"), (Tokens{0, 3, 9, 1, 0}));
  EXPECT_EQ(f(a[0], "decoder_loss_weights"), (Tokens{1, 1, 1, 0, 0}));
  LMFeatureConverter p;
  auto b = p({lm({3, 9, 1}), lm({4, 1})}, {{"targets", 6}});
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(f(b[0], "decoder_target_tokens"), (Tokens{3, 9, 1, 4, 1, 0}));
  EXPECT_EQ(f(b[0], "decoder_input_tokens"), (Tokens{0, 3, 9, 0, 4, 0}));
  EXPECT_EQ(f(b[0], "decoder_loss_weights"), (Tokens{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(f(b[0], "decoder_positions"), (Tokens{0, 1, 2, 0, 1, 0}));
  EXPECT_EQ(f(b[0], "decoder_segment_ids"), (Tokens{1, 1, 1, 2, 2, 0}));
  LMFeatureConverter bos({.bos_id = 10});
  EXPECT_EQ(f(bos({lm({3, 9, 1}), lm({4, 1})}, {{"targets", 6}})[0], "decoder_input_tokens"),
            (Tokens{10, 3, 9, 10, 4, 10}));
  auto c = p({lm({3, 9, 4, 5, 1}), lm({4, 3, 2, 1})}, {{"targets", 5}});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(f(c[0], "decoder_input_tokens"), (Tokens{0, 3, 9, 4, 5}));
  EXPECT_EQ(f(c[1], "decoder_input_tokens"), (Tokens{0, 4, 3, 2, 0}));
  EXPECT_EQ(f(c[1], "decoder_loss_weights"), (Tokens{1, 1, 1, 1, 0}));
}

TEST(PrefixLM, SeqioDocstringExample) {
  // seqio PrefixLMFeatureConverter docstring: inputs [9,4,6,1], targets [3,9,1],
  // lengths {inputs: 10, targets: 4} -> 14 positions.
  PrefixLMFeatureConverter c(unpacked());
  auto out = c({ex({9, 4, 6, 1}, {3, 9, 1})}, {{"inputs", 10}, {"targets", 4}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].size(), 4u);
  EXPECT_EQ(f(out[0], "decoder_target_tokens"), (Tokens{9, 4, 6, 1, 3, 9, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_input_tokens"), (Tokens{0, 9, 4, 6, 1, 3, 9, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_loss_weights"), (Tokens{0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_causal_attention"),
            (Tokens{1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
  PrefixLMFeatureConverter all(unpacked(), /*loss_on_targets_only=*/false);
  EXPECT_EQ(f(all({ex({9, 4, 6, 1}, {3, 9, 1})}, {{"inputs", 10}, {"targets", 4}})[0],
              "decoder_loss_weights"),
            (Tokens{1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(PrefixLM, PackedSegmentsAndEmptyParts) {
  PrefixLMFeatureConverter c;
  // Second example has empty inputs: width 0 must survive packing.
  auto out = c({ex({7, 8, 1}, {3, 1}), ex({}, {4, 5, 1})}, {{"inputs", 4}, {"targets", 5}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].size(), 6u);
  EXPECT_EQ(f(out[0], "decoder_target_tokens"), (Tokens{7, 8, 1, 3, 1, 4, 5, 1, 0}));
  EXPECT_EQ(f(out[0], "decoder_segment_ids"), (Tokens{1, 1, 1, 1, 1, 2, 2, 2, 0}));
  EXPECT_EQ(f(out[0], "decoder_positions"), (Tokens{0, 1, 2, 3, 4, 0, 1, 2, 0}));
  EXPECT_EQ(f(out[0], "decoder_input_tokens"), (Tokens{0, 7, 8, 1, 3, 0, 4, 5, 0}));
  EXPECT_EQ(f(out[0], "decoder_causal_attention"), (Tokens{1, 1, 1, 1, 0, 1, 0, 0, 0}));
  EXPECT_EQ(f(out[0], "decoder_loss_weights"), (Tokens{0, 0, 0, 1, 1, 1, 1, 1, 0}));
  // Empty targets become one padding target (seqio): nothing to learn.
  PrefixLMFeatureConverter u(unpacked());
  auto e = u({ex({7, 1}, {})}, {{"inputs", 3}, {"targets", 2}});
  EXPECT_EQ(f(e[0], "decoder_target_tokens"), (Tokens{7, 1, 0, 0, 0}));
  EXPECT_EQ(f(e[0], "decoder_loss_weights"), (Tokens{0, 0, 0, 0, 0}));
  EXPECT_EQ(f(e[0], "decoder_causal_attention"), (Tokens{1, 1, 1, 0, 0}));
  EXPECT_EQ(c.packing_window({{"inputs", 4}, {"targets", 5}}), 9);
}

TEST(Encoder, T12UnpackedAndPacked) {
  EncoderFeatureConverter u(9, unpacked());
  auto a = u({ex({8, 9, 4, 9, 1}, {8, 7, 4, 6, 1})}, {{"inputs", 6}, {"targets", 6}});
  EXPECT_EQ(a[0].size(), 3u);
  EXPECT_EQ(f(a[0], "encoder_input_tokens"), (Tokens{8, 9, 4, 9, 1, 0}));
  EXPECT_EQ(f(a[0], "encoder_target_tokens"), (Tokens{8, 7, 4, 6, 1, 0}));
  EXPECT_EQ(f(a[0], "encoder_loss_weights"), (Tokens{0, 1, 0, 1, 0, 0}));
  EncoderFeatureConverter p(9);
  auto b = p({ex({8, 9, 9, 3, 4, 1}, {8, 7, 4, 3, 4, 1}), ex({8, 3, 9, 1}, {8, 3, 6, 1})},
             {{"inputs", 11}, {"targets", 11}});
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(f(b[0], "encoder_input_tokens"), (Tokens{8, 9, 9, 3, 4, 1, 8, 3, 9, 1, 0}));
  EXPECT_EQ(f(b[0], "encoder_target_tokens"), (Tokens{8, 7, 4, 3, 4, 1, 8, 3, 6, 1, 0}));
  EXPECT_EQ(f(b[0], "encoder_segment_ids"), (Tokens{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 0}));
  EXPECT_EQ(f(b[0], "encoder_positions"), (Tokens{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 0}));
  EXPECT_EQ(f(b[0], "encoder_loss_weights"), (Tokens{0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_THROW(p({ex({8}, {8})}, {{"inputs", 6}, {"targets", 5}}), std::invalid_argument);
}

TEST(Validation, FeatureLengthKeys) {
  EncDecFeatureConverter c;
  auto msg = [&](const SequenceLengths& l) {
    try {
      c({ex({1}, {1})}, l);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg({{"inputs", 5}}).find("missing features of TASK_FEATURES: ['targets']"),
            std::string::npos);
  EXPECT_NE(msg({{"inputs", 5}, {"targets", 5}, {"extra", 3}}).find("['extra']"),
            std::string::npos);
  EXPECT_NE(msg({{"inputs", 0}, {"targets", 5}}).find(">= 1"), std::string::npos);
}

TEST(Validation, MissingFeatureAndWrongType) {
  LMFeatureConverter c;
  try {
    c({lm({1}), Example{{"inputs", Tokens{1}}}}, {{"targets", 4}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("example 1 is missing the feature 'targets'"),
              std::string::npos)
        << e.what();
  }
  try {
    c({Example{{"targets", std::string("not tokenized")}}}, {{"targets", 4}});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("got string (rank 0), expected int32 tokens (rank 1)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(c({Example{{"targets", int64_t{3}}}}, {{"targets", 4}}), std::invalid_argument);
}

TEST(Convert, ExtraFeaturesIgnoredAndEmptyInput) {
  EncDecFeatureConverter c(unpacked());
  Example x = ex({5, 1}, {6, 1});
  x["inputs_pretokenized"] = std::string("hello");
  auto out = c({x}, {{"inputs", 3}, {"targets", 3}});
  EXPECT_EQ(out[0].size(), 4u);
  EXPECT_TRUE(c({}, {{"inputs", 3}, {"targets", 3}}).empty());
}

TEST(Convert, ChunkedByWindowEqualsWhole) {
  // Streaming contract: chunks that are multiples of packing_window() give
  // the same rows as one call.
  std::vector<Example> ds;
  for (int i = 0; i < 37; ++i) {
    Tokens in(1 + (i * 5) % 7, 3 + i), tg(1 + (i * 3) % 4, 4 + i);
    ds.push_back(ex(in, tg));
  }
  EncDecFeatureConverter c;
  const SequenceLengths L{{"inputs", 8}, {"targets", 5}};
  const auto whole = c(ds, L);
  const auto w = static_cast<size_t>(c.packing_window(L));
  ASSERT_EQ(w, 8u);
  std::vector<Example> chunked;
  for (size_t s = 0; s < ds.size(); s += 2 * w) {
    std::vector<Example> part(ds.begin() + s, ds.begin() + std::min(ds.size(), s + 2 * w));
    auto o = c(part, L);
    chunked.insert(chunked.end(), o.begin(), o.end());
  }
  EXPECT_EQ(chunked, whole);
  EXPECT_LT(whole.size(), ds.size());
}

TEST(Convert, ModelFeatureLengths) {
  EXPECT_EQ(EncDecFeatureConverter().get_model_feature_lengths({{"inputs", 7}, {"targets", 3}}),
            (SequenceLengths{{"encoder_input_tokens", 7}, {"encoder_segment_ids", 7},
                             {"encoder_positions", 7}, {"decoder_target_tokens", 3},
                             {"decoder_input_tokens", 3}, {"decoder_loss_weights", 3},
                             {"decoder_segment_ids", 3}, {"decoder_positions", 3}}));
  EXPECT_EQ(PrefixLMFeatureConverter(unpacked())
                .get_model_feature_lengths({{"inputs", 7}, {"targets", 3}})
                .at("decoder_causal_attention"),
            10);
}

}  // namespace
}  // namespace seqio

namespace seqio {
namespace {

TEST(Factory, ByName) {
  EXPECT_EQ(make_feature_converter("enc_dec")->name(), "EncDecFeatureConverter");
  EXPECT_EQ(make_feature_converter("LMFeatureConverter")->name(), "LMFeatureConverter");
  auto p = make_feature_converter("prefix_lm", {.pack = false});
  EXPECT_EQ(p->name(), "PrefixLMFeatureConverter");
  EXPECT_FALSE(p->pack());
  EXPECT_EQ(make_feature_converter("encoder", {}, 9)->name(), "EncoderFeatureConverter");
  EXPECT_THROW(make_feature_converter("encoder"), std::invalid_argument);
  EXPECT_THROW(make_feature_converter("t5"), std::invalid_argument);
}

}  // namespace
}  // namespace seqio

namespace seqio {
namespace {

// Expected values from seqio 0.0.20 run on the same inputs.
TEST(Passthrough, CopiedAndPaddedUnpacked) {
  FeatureConverterOptions o{.pack = false, .passthrough_features = {"idx"}};
  Example x{{"inputs", Tokens{7, 8, 1}}, {"targets", Tokens{3, 1}}, {"idx", Tokens{5, 6}}};
  auto a = EncDecFeatureConverter(o)({x}, {{"inputs", 4}, {"targets", 3}, {"idx", 4}});
  ASSERT_EQ(a[0].size(), 5u);
  EXPECT_EQ(get_tokens(a[0], "idx"), (Tokens{5, 6, 0, 0}));
  EXPECT_EQ(get_tokens(a[0], "encoder_input_tokens"), (Tokens{7, 8, 1, 0}));
  auto p = PrefixLMFeatureConverter(o)({x}, {{"inputs", 4}, {"targets", 3}, {"idx", 3}});
  EXPECT_EQ(get_tokens(p[0], "decoder_target_tokens"), (Tokens{7, 8, 1, 3, 1, 0, 0}));
  EXPECT_EQ(get_tokens(p[0], "decoder_loss_weights"), (Tokens{0, 0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(get_tokens(p[0], "decoder_causal_attention"), (Tokens{1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(get_tokens(p[0], "idx"), (Tokens{5, 6, 0}));
  // Its length is required, checked, and packing refuses it.
  const EncDecFeatureConverter c(o);
  EXPECT_THROW(c({x}, {{"inputs", 4}, {"targets", 3}}), std::invalid_argument);
  EXPECT_THROW(c({x}, {{"inputs", 4}, {"targets", 3}, {"idx", 1}}), std::invalid_argument);
  EXPECT_THROW(LMFeatureConverter({.pack = true, .passthrough_features = {"idx"}}),
               std::invalid_argument);
}

}  // namespace
}  // namespace seqio
