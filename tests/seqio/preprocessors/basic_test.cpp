// seqio.md §4.1 and §8 T18-T20: rekey, tokenize, append_eos(_after_trim),
// truncate_inputs_left, trimming with counts.
#include "seqio/preprocessors/basic.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace seqio::preprocessors {
namespace {

using seqio::test::feature;
using seqio::test::TableVocabulary;

TEST(Rekey, MapsDropsAndFillsEmpty) {  // T20
  Example x{{"text", std::string("That is good.")}, {"other", std::string("That is bad.")}};
  Example y = rekey(x, {{"inputs", "other"}, {"targets", "text"}});
  EXPECT_EQ(y.size(), 2u);
  EXPECT_EQ(get_text(y, "inputs"), "That is bad.");
  EXPECT_EQ(get_text(y, "targets"), "That is good.");
  Example z = rekey(x, {{"inputs", "text"}, {"targets", ""}});
  EXPECT_EQ(get_text(z, "inputs"), "That is good.");
  EXPECT_EQ(get_text(z, "targets"), "");
  EXPECT_EQ(rekey(x, {}), x);
  EXPECT_THROW(rekey(x, {{"inputs", "missing"}}), std::invalid_argument);
}

TEST(Tokenize, KeepsPretokenizedCopies) {  // T19
  auto v = std::make_shared<TableVocabulary>(
      std::map<std::string, Tokens>{{"This is", {0, 1}}, {"a test.", {2, 3}}}, 10, 1);
  OutputFeatures of{{"prefix", feature(v, true)}, {"suffix", feature(v, false)}};
  Example x{{"prefix", std::string("This is")}, {"suffix", std::string("a test.")},
            {"idx", int64_t{7}}};
  Example y = tokenize(x, of);
  EXPECT_EQ(get_tokens(y, "prefix"), (Tokens{0, 1}));
  EXPECT_EQ(get_tokens(y, "suffix"), (Tokens{2, 3}));
  EXPECT_EQ(get_text(y, "prefix_pretokenized"), "This is");
  EXPECT_EQ(get_text(y, "suffix_pretokenized"), "a test.");
  EXPECT_EQ(std::get<int64_t>(y.at("idx")), 7);
  Example n = tokenize(x, of, /*copy_pretokenized=*/false);
  EXPECT_EQ(n.size(), 3u);
  EXPECT_FALSE(n.count("prefix_pretokenized"));
  Example e = tokenize_and_append_eos(x, of);
  EXPECT_EQ(get_tokens(e, "prefix"), (Tokens{0, 1, 1}));
  EXPECT_EQ(get_tokens(e, "suffix"), (Tokens{2, 3}));  // add_eos false
}

TEST(Tokenize, ByteVocabularyAndErrors) {
  auto v = std::make_shared<ByteVocabulary>();
  OutputFeatures of{{"targets", feature(v)}};
  Example y = tokenize({{"targets", std::string("Hi é")}}, of, true, true);
  EXPECT_EQ(get_tokens(y, "targets"), (Tokens{'H' + 3, 'i' + 3, ' ' + 3, 0xC3 + 3, 0xA9 + 3, 1}));
  EXPECT_THROW(tokenize({{"targets", Tokens{5}}}, of), std::invalid_argument);
  OutputFeatures no_vocab{{"targets", Feature{}}};
  EXPECT_THROW(tokenize({{"targets", std::string("a")}}, no_vocab), std::invalid_argument);
}

// T18 fixture: eos 1; inputs add_eos false, others true.
OutputFeatures t18_features() {
  auto v = std::make_shared<PassThroughVocabulary>(100, 1);
  return {{"inputs", feature(v, false)}, {"targets", feature(v)}, {"arrows", feature(v)},
          {"strings", feature(v)}};
}

TEST(AppendEos, OnlyAddEosFeatures) {  // T18
  Example x{{"inputs", Tokens{1, 2, 3}}, {"targets", Tokens{4, 5, 6, 7}},
            {"arrows", Tokens{8, 9, 10, 11}}, {"bows", Tokens{12, 13}}};
  Example y = append_eos(x, t18_features());
  EXPECT_EQ(get_tokens(y, "inputs"), (Tokens{1, 2, 3}));
  EXPECT_EQ(get_tokens(y, "targets"), (Tokens{4, 5, 6, 7, 1}));
  EXPECT_EQ(get_tokens(y, "arrows"), (Tokens{8, 9, 10, 11, 1}));
  EXPECT_EQ(get_tokens(y, "bows"), (Tokens{12, 13}));
}

// An add_eos feature that is still text (the step placed before tokenize)
// is an error, as seqio's append on a string tensor is; it was passed over,
// and the examples had no EOS (bad-input sweep, session 78).
TEST(AppendEos, TextFeatureIsRefused) {
  const Example x{{"targets", std::string("not tokenized")}};
  for (int after_trim : {0, 1}) {
    try {
      if (after_trim) append_eos_after_trim(x, t18_features(), {{"targets", 3}});
      else append_eos(x, t18_features());
      ADD_FAILURE() << "text took an EOS";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("feature 'targets' is still text"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("after seqio.preprocessors.tokenize"), std::string::npos) << e.what();
    }
  }
}

TEST(AppendEosAfterTrim, TrimsToLengthMinusOne) {  // T18
  Example x{{"inputs", Tokens{1, 2, 3}}, {"targets", Tokens{4, 5, 6, 7}},
            {"arrows", Tokens{8, 9, 10, 11}}, {"bows", Tokens{12, 13}}};
  SequenceLengths lengths{{"inputs", 4}, {"targets", 3}, {"arrows", 5}};
  Example y = append_eos_after_trim(x, t18_features(), lengths);
  EXPECT_EQ(get_tokens(y, "inputs"), (Tokens{1, 2, 3}));
  EXPECT_EQ(get_tokens(y, "targets"), (Tokens{4, 5, 1}));
  EXPECT_EQ(get_tokens(y, "arrows"), (Tokens{8, 9, 10, 11, 1}));
  EXPECT_EQ(get_tokens(y, "bows"), (Tokens{12, 13}));
  // No length for targets: plain append.
  Example z = append_eos_after_trim(x, t18_features(), {{"arrows", 5}});
  EXPECT_EQ(get_tokens(z, "targets"), (Tokens{4, 5, 6, 7, 1}));
  EXPECT_THROW(append_eos_after_trim(x, t18_features(), {{"targets", 0}}), std::invalid_argument);
}

TEST(AppendEos, VocabularyWithoutEosIsAnError) {
  OutputFeatures of{{"targets", feature(std::make_shared<PassThroughVocabulary>(10))}};
  try {
    append_eos({{"targets", Tokens{3}}}, of);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'targets'"), std::string::npos);
  }
}

TEST(TruncateInputsLeft, KeepsTail) {  // T20
  Example x{{"inputs", Tokens{1, 2, 3}}, {"targets", Tokens{9}}};
  EXPECT_EQ(get_tokens(truncate_inputs_left(x, {{"inputs", 2}}), "inputs"), (Tokens{2, 3}));
  EXPECT_EQ(get_tokens(truncate_inputs_left(x, {{"inputs", 5}}), "inputs"), (Tokens{1, 2, 3}));
  EXPECT_EQ(truncate_inputs_left(x, {{"targets", 1}}), x);
  // Python x[-0:] keeps everything.
  EXPECT_EQ(get_tokens(truncate_inputs_left(x, {{"inputs", 0}}), "inputs"), (Tokens{1, 2, 3}));
}

TEST(TrimToLengths, OverLongExampleIsTrimmedAndCounted) {
  TrimCounts counts;
  Example x{{"inputs", Tokens{1, 2, 3, 4, 5, 6, 7}}, {"targets", Tokens{4, 1}},
            {"inputs_pretokenized", std::string("raw")}};
  Example y = trim_to_lengths(x, {{"inputs", 5}, {"targets", 5}}, &counts);
  EXPECT_EQ(get_tokens(y, "inputs"), (Tokens{1, 2, 3, 4, 5}));
  EXPECT_EQ(get_tokens(y, "targets"), (Tokens{4, 1}));  // no padding
  EXPECT_EQ(get_text(y, "inputs_pretokenized"), "raw");
  trim_to_lengths(Example{{"inputs", Tokens{1, 2, 3, 4, 5, 6}}}, {{"inputs", 5}}, &counts);
  EXPECT_EQ(counts.examples.at("inputs"), 2);
  EXPECT_EQ(counts.tokens.at("inputs"), 3);
  EXPECT_FALSE(counts.examples.count("targets"));
  EXPECT_EQ(counts.total_examples(), 2);
  EXPECT_EQ(counts.total_tokens(), 3);
}

}  // namespace
}  // namespace seqio::preprocessors
