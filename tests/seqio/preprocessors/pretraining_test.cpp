// seqio.md §4.2 pipelines: select_random_chunk, reduce_concat_tokens,
// split_tokens, span_corruption, iid_denoising, prefix_lm; and translate.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "seqio/preprocessors/basic.h"
#include "seqio/preprocessors/denoising.h"
#include "seqio/preprocessors/formatting.h"
#include "seqio/preprocessors/pretraining.h"
#include "seqio/warnings.h"
#include "test_util.h"

namespace seqio::preprocessors {
namespace {

Example doc(Tokens t) { return Example{{"targets", std::move(t)}}; }

Tokens iota_tokens(int n, int start = 3) {
  Tokens t(n);
  for (int i = 0; i < n; ++i) t[i] = start + (i % 200);  // stays below the sentinels (>= 259)
  return t;
}

// Undo unique-sentinel denoising. When the mask starts with non-noise,
// targets = S0 X1 S1 X2 ... and input sentinel S_j stands for the tokens after
// S_j in targets; when it starts with noise, targets = X1 S0 X2 S1 ... and S_j
// stands for the tokens before S_j.
Tokens reconstruct(const Tokens& inputs, const Tokens& targets, int32_t first_sentinel) {
  std::map<int32_t, Tokens> spans;
  const bool after = !targets.empty() && targets.front() >= first_sentinel;
  Tokens pending;
  int32_t cur = -1;
  for (int32_t t : targets) {
    if (t >= first_sentinel) {
      if (after) {
        cur = t;
        spans[cur];
      } else {
        spans[t] = pending;
        pending.clear();
      }
    } else if (after) {
      spans[cur].push_back(t);
    } else {
      pending.push_back(t);
    }
  }
  Tokens out;
  for (int32_t t : inputs) {
    if (t >= first_sentinel) out.insert(out.end(), spans[t].begin(), spans[t].end());
    else out.push_back(t);
  }
  if (!after) out.insert(out.end(), pending.begin(), pending.end());
  return out;
}

OutputFeatures byte_features(bool inputs_add_eos = true) {
  auto v = std::make_shared<ByteVocabulary>(100);  // vocab_size 359
  return {{"inputs", test::feature(v, inputs_add_eos)}, {"targets", test::feature(v)}};
}

TEST(SelectRandomChunk, PicksAlignedSegment) {
  Dataset ds{doc(iota_tokens(10)), doc({}), doc(iota_tokens(3)),
             Example{{"targets", iota_tokens(5)}, {"id", int64_t{4}}}};
  SelectRandomChunkOptions o;
  o.max_length = 4;
  o.passthrough_feature_keys = {};
  Dataset out = select_random_chunk(ds, 11, o);
  ASSERT_EQ(out.size(), 3u);  // the empty one is dropped
  const Tokens& c = get_tokens(out[0], "targets");
  // Segments of 10 tokens with L=4: [0,4), [4,8), [8,10).
  const Tokens full = iota_tokens(10);
  ASSERT_TRUE(c.size() == 4 || c.size() == 2);
  const auto start = std::search(full.begin(), full.end(), c.begin(), c.end()) - full.begin();
  EXPECT_EQ(start % 4, 0);
  EXPECT_EQ(get_tokens(out[1], "targets"), iota_tokens(3));
  EXPECT_FALSE(out[2].count("id"));  // other keys dropped
  EXPECT_EQ(select_random_chunk(ds, 11, o), out);  // deterministic
  // Every segment is reachable.
  std::set<Tokens> seen;
  for (uint64_t s = 0; s < 60; ++s) seen.insert(get_tokens(select_random_chunk(ds, s, o)[0], "targets"));
  EXPECT_EQ(seen.size(), 3u);
  o.passthrough_feature_keys = {"id"};
  EXPECT_THROW(select_random_chunk(ds, 11, o), std::invalid_argument);  // doc 0 lacks "id"
}

TEST(ReduceConcatTokens, JoinsBatchesAndDropsPadding) {
  Dataset ds{doc({5, 6}), Example{{"targets", Tokens{7, 0, 8}}, {"x", int64_t{1}}}, doc({9})};
  Dataset out = reduce_concat_tokens(ds, "targets", 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0], doc({5, 6, 7, 8}));
  EXPECT_EQ(out[1], doc({9}));
}

TEST(SplitTokens, ExactSegmentsWithShortTail) {
  Dataset out = split_tokens({doc({1, 2, 3, 4, 5, 6, 7}), doc({}), doc({8, 0, 9})}, 3);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0], doc({1, 2, 3}));
  EXPECT_EQ(out[1], doc({4, 5, 6}));
  EXPECT_EQ(out[2], doc({7}));
  EXPECT_EQ(out[3], doc({8, 0, 9}));  // inner zeros survive
  SplitTokensOptions o;
  o.min_tokens_per_segment = 2;
  for (const auto& x : split_tokens({doc(iota_tokens(100))}, 10, 5, o)) {
    EXPECT_GE(get_tokens(x, "targets").size(), 1u);
    EXPECT_LE(get_tokens(x, "targets").size(), 10u);
  }
}

TEST(SplitTokens, ToInputsLengthLeavesRoomForEos) {
  Dataset ds{doc(iota_tokens(10))};
  EXPECT_EQ(get_tokens(split_tokens_to_inputs_length(ds, {{"inputs", 5}}, byte_features())[0],
                       "targets").size(), 4u);
  EXPECT_EQ(get_tokens(split_tokens_to_inputs_length(ds, {{"inputs", 5}}, byte_features(false))[0],
                       "targets").size(), 5u);
  EXPECT_THROW(split_tokens_to_inputs_length(ds, {}, byte_features()), std::invalid_argument);
}

TEST(SpanCorruption, LengthsSentinelsAndRoundTrip) {
  // 40 documents of 300 tokens: merged into one 12000-token stream (batch 128),
  // cut into 568-token chunks.
  Dataset ds;
  for (int d = 0; d < 40; ++d) ds.push_back(doc(iota_tokens(300, 3 + d)));
  const SequenceLengths lengths{{"inputs", 512}, {"targets", 114}};
  const OutputFeatures of = byte_features();
  Dataset out = span_corruption(ds, lengths, of, /*seed=*/1);
  ASSERT_EQ(out.size(), (12000 + 567) / 568);
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    const Tokens& in = get_tokens(out[i], "inputs");
    const Tokens& tg = get_tokens(out[i], "targets");
    EXPECT_EQ(in.size(), 511u);  // 483 kept + 28 sentinels; EOS comes later
    EXPECT_EQ(tg.size(), 113u);  // 85 noise + 28 sentinels
    // Sentinels count down from vocab_size-1 in both.
    int32_t expect = 358;
    for (int32_t t : tg) {
      if (t > 258) {
        EXPECT_EQ(t, expect--);
      }
    }
    EXPECT_EQ(expect, 358 - 28);
    EXPECT_EQ(tg.front(), 358);    // targets start with <extra_id_0>
    EXPECT_EQ(in.back(), 358 - 27);  // inputs end with the last sentinel
    Example done = append_eos_after_trim(out[i], of, lengths);
    EXPECT_EQ(get_tokens(done, "inputs").size(), 512u);
    EXPECT_EQ(get_tokens(done, "targets").size(), 114u);
  }
  // Round trip: sentinels restore the merged stream.
  Tokens joined;
  for (const auto& x : out) {
    Tokens r = reconstruct(get_tokens(x, "inputs"), get_tokens(x, "targets"), 259);
    joined.insert(joined.end(), r.begin(), r.end());
  }
  Tokens expect;
  for (const auto& d : ds) expect.insert(expect.end(), get_tokens(d, "targets").begin(),
                                         get_tokens(d, "targets").end());
  EXPECT_EQ(joined, expect);
  EXPECT_EQ(span_corruption(ds, lengths, of, 1), out);
  EXPECT_NE(span_corruption(ds, lengths, of, 2), out);
}

TEST(SpanCorruption, ConfigurationErrors) {
  Dataset ds{doc(iota_tokens(50))};
  EXPECT_THROW(span_corruption(ds, {{"inputs", 512}, {"targets", 113}}, byte_features(), 1),
               std::invalid_argument);
  SpanCorruptionOptions o;
  o.passthrough_feature_keys = {"id"};
  EXPECT_THROW(span_corruption(ds, {{"inputs", 512}, {"targets", 114}}, byte_features(), 1, o),
               std::invalid_argument);
  OutputFeatures mismatched = byte_features();
  mismatched["inputs"].vocabulary = std::make_shared<ByteVocabulary>(0);
  EXPECT_THROW(span_corruption(ds, {{"inputs", 512}, {"targets", 114}}, mismatched, 1),
               std::invalid_argument);
}

TEST(SpanCorruption, ReservedForPackingAndNoMerge) {
  Dataset ds{doc(iota_tokens(1000)), doc(iota_tokens(20))};
  SpanCorruptionOptions o;
  o.merge_examples_to_reduce_padding = false;
  o.reserved_for_packing = 1;  // inputs 128 -> helper(127) = (140, 29)
  Dataset out = span_corruption(ds, {{"inputs", 128}, {"targets", 29}}, byte_features(), 3, o);
  // 1000 -> 7 full chunks of 140 + 20 tail; the 20-token doc stays separate.
  ASSERT_EQ(out.size(), 9u);
  EXPECT_EQ(get_tokens(out[0], "inputs").size(), 140u - 21 + 7);  // noise 21, spans 7
}

// Index of the first sentinel (<extra_id_0> = vocab_size - 1) in the inputs.
std::vector<int64_t> first_sentinel_positions(const Dataset& out, int32_t sentinel) {
  std::vector<int64_t> pos;
  for (const auto& x : out) {
    const Tokens& in = get_tokens(x, "inputs");
    pos.push_back(std::find(in.begin(), in.end(), sentinel) - in.begin());
  }
  return pos;
}

// random_roll from the options or from the process-wide gin default
// (random_spans_noise_mask.random_roll); T5's default False keeps the noise
// of these 20-token chunks (one span) at their tail.
TEST(SpanCorruption, RandomRollFromOptionsOrGin) {
  Dataset ds;
  for (int d = 0; d < 30; ++d) ds.push_back(doc(iota_tokens(97, 3 + d)));
  const SequenceLengths lengths{{"inputs", 20}, {"targets", 8}};
  const OutputFeatures of = byte_features();
  const int32_t sentinel = denoise_vocab_size(of) - 1;
  seqio::reset_warnings();
  auto previous = seqio::set_warning_sink([](const std::string&) {});
  ASSERT_FALSE(random_spans_random_roll());
  const Dataset plain = span_corruption(ds, lengths, of, 5);
  for (const auto& x : plain) EXPECT_EQ(get_tokens(x, "inputs").back(), sentinel);
  SpanCorruptionOptions o;
  o.random_roll = true;
  const Dataset rolled = span_corruption(ds, lengths, of, 5, o);
  ASSERT_EQ(rolled.size(), plain.size());
  auto pos = first_sentinel_positions(rolled, sentinel);
  EXPECT_GE(std::set<int64_t>(pos.begin(), pos.end()).size(), 10u);
  int at_tail = 0;
  for (const auto& x : rolled) at_tail += get_tokens(x, "inputs").back() == sentinel;
  EXPECT_LT(at_tail, int(rolled.size()) / 2);
  // The same rows from the gin default, and back to T5's default.
  set_random_spans_random_roll(true);
  EXPECT_EQ(span_corruption(ds, lengths, of, 5), rolled);
  o.random_roll = false;  // an explicit option wins over the default
  EXPECT_EQ(span_corruption(ds, lengths, of, 5, o), plain);
  set_random_spans_random_roll(false);
  EXPECT_EQ(span_corruption(ds, lengths, of, 5), plain);
  seqio::set_warning_sink(previous);
}

// The T5 quirks at short lengths are warned about, once per configuration.
TEST(SpanCorruption, WarnsAboutDegenerateLengths) {
  Dataset ds;
  for (int d = 0; d < 4; ++d) ds.push_back(doc(iota_tokens(60, 3 + d)));
  const OutputFeatures of = byte_features();
  std::vector<std::string> warnings;
  seqio::reset_warnings();
  auto previous = seqio::set_warning_sink([&](const std::string& w) { warnings.push_back(w); });
  auto warn = [&](int inputs, int targets, bool roll = false) {
    warnings.clear();
    SpanCorruptionOptions o;
    o.random_roll = roll;
    span_corruption(ds, {{"inputs", inputs}, {"targets", targets}}, of, 1, o);
    return warnings.empty() ? std::string() : warnings[0];
  };
  // inputs <= 9: a full chunk's inputs are one token too long, and trimming
  // cuts the sentinel off (9 tokens: 8 kept + 1 sentinel + EOS = 10).
  std::string w9;
  for (int L = 4; L <= 9; ++L) {
    const std::string w = warn(L, 10);
    EXPECT_NE(w.find("inputs length " + std::to_string(L)), std::string::npos) << w;
    EXPECT_NE(w.find("cuts their end, the sentinel of the last noise span"), std::string::npos) << w;
    w9 = w;
  }
  EXPECT_NE(w9.find("have 10 tokens with EOS, and trimming to 9"), std::string::npos) << w9;
  // The quirk itself: a full 9-token chunk gives 8 kept tokens + the
  // sentinel, so with EOS there are 10 and the trim to 9 drops the sentinel.
  SpanCorruptionOptions plain;
  plain.random_roll = false;
  const Dataset out9 = span_corruption(ds, {{"inputs", 9}, {"targets", 10}}, of, 1, plain);
  EXPECT_EQ(get_tokens(out9[0], "inputs").size(), 9u);
  EXPECT_EQ(get_tokens(out9[0], "inputs").back(), denoise_vocab_size(of) - 1);
  // The helper's targets length (2) is one short as well.
  const std::string t = warn(9, 2);
  EXPECT_NE(t.find("targets of a full chunk have 3 tokens with EOS, over the targets length 2"), std::string::npos) << t;
  // 10 and up: nothing cut; one span (up to 28) always at the tail.
  const std::string w10 = warn(10, 10);
  EXPECT_EQ(w10.find("cuts"), std::string::npos) << w10;
  EXPECT_NE(w10.find("single noise span always ends the chunk"), std::string::npos) << w10;
  EXPECT_NE(w10.find("random_spans_noise_mask.random_roll = True"), std::string::npos) << w10;
  EXPECT_NE(warn(28, 8).find("single noise span"), std::string::npos);
  EXPECT_EQ(warn(28, 8, /*roll=*/true), "");
  EXPECT_EQ(warn(29, 8), "");  // two spans
  EXPECT_EQ(warn(512, 114), "");
  // Once per configuration.
  warn(10, 10);
  EXPECT_TRUE(warnings.empty());
  seqio::set_warning_sink(previous);
}

TEST(IidDenoising, SentinelsAndLengths) {
  Dataset ds{doc(iota_tokens(700))};
  Dataset out = iid_denoising(ds, {{"inputs", 100}, {"targets", 100}}, byte_features(), 9);
  ASSERT_EQ(out.size(), 8u);  // 700 / 99
  int64_t noise = 0, total = 0;
  for (const auto& x : out) {
    Tokens r = reconstruct(get_tokens(x, "inputs"), get_tokens(x, "targets"), 259);
    total += static_cast<int64_t>(r.size());
    for (int32_t t : get_tokens(x, "targets")) noise += t < 259;
  }
  EXPECT_EQ(total, 700);
  EXPECT_NEAR(noise / 700.0, 0.15, 0.05);
}

TEST(PrefixLm, SplitsIntoPrefixAndRest) {
  Dataset ds{doc(iota_tokens(50)), doc({})};
  Dataset out = prefix_lm(ds, {{"inputs", 21}, {"targets", 21}}, byte_features(), 4);
  ASSERT_EQ(out.size(), 3u);  // chunks of 20, 20, 10
  Tokens joined;
  for (const auto& x : out) {
    const Tokens& in = get_tokens(x, "inputs");
    const Tokens& tg = get_tokens(x, "targets");
    EXPECT_GE(in.size(), 1u);
    EXPECT_GE(tg.size(), 1u);
    joined.insert(joined.end(), in.begin(), in.end());
    joined.insert(joined.end(), tg.begin(), tg.end());
  }
  EXPECT_EQ(joined, iota_tokens(50));
  EXPECT_THROW(prefix_lm(ds, {{"inputs", 21}}, byte_features(), 4, 0.7), std::invalid_argument);
}

TEST(Translate, T5Format) {
  Example x{{"en", std::string("That is good.")}, {"de", std::string("Das ist gut.")},
            {"id", int64_t{3}}};
  Example y = translate(x, "en", "de");
  EXPECT_EQ(y.size(), 2u);
  EXPECT_EQ(get_text(y, "inputs"), "translate English to German: That is good.");
  EXPECT_EQ(get_text(y, "targets"), "Das ist gut.");
  EXPECT_EQ(get_text(translate(Example{{"en", std::string("a")}, {"es", std::string("b")}},
                               "en", "es"), "inputs"),
            "translate English to Spanish: a");
  EXPECT_EQ(language_english_name("zh-cn"), "Chinese");
  EXPECT_THROW(translate(x, "en", "xx"), std::invalid_argument);
  EXPECT_THROW(translate(x, "en", "fr"), std::invalid_argument);  // no "fr" field
  EXPECT_EQ(get_text(summarize(Example{{"article", std::string("A")}, {"highlights", std::string("B")}},
                               "article", "highlights"), "inputs"),
            "summarize: A");
}

}  // namespace
}  // namespace seqio::preprocessors
