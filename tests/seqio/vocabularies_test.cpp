// Vocabularies against goldens from Python seqio 0.0.20
// (scripts/golden/seqio_vocab.py) and seqio's documented rules.
#include "seqio/vocabularies.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

namespace seqio {
namespace {

const char* kModel = "tests/golden/seqio/vocab/spm1000.model";

std::vector<nlohmann::json> golden_rows() {
  std::ifstream f("tests/golden/seqio/vocab/golden.jsonl");
  EXPECT_TRUE(f.good());
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(f, line)) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

TEST(Vocabulary, GoldenEncodeDecodeMatchesPythonSeqio) {
  std::map<std::string, std::shared_ptr<const Vocabulary>> vocabs;
  int checked = 0;
  for (const auto& r : golden_rows()) {
    const std::string spec = r["vocab"];
    auto& v = vocabs[spec];
    if (!v) v = make_vocabulary(spec);
    const std::string op = r["op"];
    if (op == "size") {
      EXPECT_EQ(v->vocab_size(), r["vocab_size"].get<int>()) << spec;
      EXPECT_EQ(v->eos_id().value(), r["eos_id"].get<int>()) << spec;
      EXPECT_EQ(v->unk_id().value(), r["unk_id"].get<int>()) << spec;
    } else if (op == "encode") {
      EXPECT_EQ(v->encode(r["text"].get<std::string>()), r["ids"].get<Tokens>())
          << spec << " text: " << r["text"];
    } else if (op == "decode") {
      EXPECT_EQ(v->decode(r["ids"].get<Tokens>()), r["text"].get<std::string>())
          << spec << " ids: " << r["ids"];
    } else if (op == "decode_ids") {
      EXPECT_EQ(v->clean_ids_for_decode(r["ids"].get<Tokens>()), r["out"].get<Tokens>()) << spec;
    } else if (op == "piece") {
      auto* sp = dynamic_cast<const SentencePieceVocabulary*>(v.get());
      ASSERT_NE(sp, nullptr);
      EXPECT_EQ(sp->id_to_piece(r["id"].get<int>()), r["piece"].get<std::string>());
    } else {
      FAIL() << "unknown op " << op;
    }
    ++checked;
  }
  EXPECT_GT(checked, 400);
}

TEST(SentencePieceVocabulary, ExtraIdsCountDownFromTop) {
  SentencePieceVocabulary v(kModel, 100);
  EXPECT_EQ(v.vocab_size(), 1100);
  EXPECT_EQ(v.encode("<extra_id_0>"), Tokens{1099});
  EXPECT_EQ(v.encode("<extra_id_99>"), Tokens{1000});
  EXPECT_EQ(v.decode({1099}), "<extra_id_0>");
  SentencePieceVocabulary fwd(kModel, 100, /*reverse_extra_ids=*/false);
  EXPECT_EQ(fwd.encode("<extra_id_0>"), Tokens{1000});
  EXPECT_EQ(fwd.decode({1000, 1001}), "<extra_id_0> <extra_id_1>");  // seqio T16
}

TEST(SentencePieceVocabulary, DecodeRules) {
  SentencePieceVocabulary v(kModel);
  Tokens ids = v.encode("free software");
  ASSERT_FALSE(ids.empty());
  Tokens with_eos = ids;
  with_eos.push_back(1);
  with_eos.insert(with_eos.end(), ids.begin(), ids.end());
  EXPECT_EQ(v.decode(with_eos), "free software");        // cut after EOS
  EXPECT_EQ(v.decode({5000}), v.decode({2}));             // out of range -> UNK
  EXPECT_EQ(v.decode({2}), " \xE2\x81\x87 ");              // UNK renders as " ⁇ "
  EXPECT_EQ(v.encode(""), Tokens{});
  EXPECT_THROW(v.decode({-1}), std::invalid_argument);
  EXPECT_EQ(v.pad_id(), 0);
}

TEST(SentencePieceVocabulary, MissingModelNamesPath) {
  try {
    SentencePieceVocabulary v("no/such/model.spm");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/model.spm"), std::string::npos);
  }
  // A directory or an empty file is named as such (it said "unk is not defined").
  const std::string empty = ::testing::TempDir() + "/empty.model";
  std::ofstream(empty).close();
  for (const auto& [path, what] : {std::pair<std::string, std::string>{::testing::TempDir(), "is a directory"},
                                   {empty, "is an empty file"}}) {
    try {
      SentencePieceVocabulary v(path, 100);
      ADD_FAILURE() << path;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("SentencePiece model '" + path + "' " + what), std::string::npos)
          << e.what();
    }
  }
  // A truncated model: the loader's message, then a hint naming the cause.
  const std::string cut = ::testing::TempDir() + "/cut.model";
  {
    std::ifstream in(kModel, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), {});
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, 100000);
  }
  try {
    SentencePieceVocabulary v(cut);
    ADD_FAILURE() << "a truncated model loaded";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("SentencePiece model '" + cut + "' cannot be loaded: "), std::string::npos) << m;
    EXPECT_NE(m.find("(hint: its 100000 bytes are truncated or not a SentencePiece model"), std::string::npos) << m;
  }
}

// seqio/vocabularies_test.py's "AsciiVocab": base 128, _decode drops 0 and
// renders 1 as "<eos>".
class AsciiVocab : public Vocabulary {
 public:
  AsciiVocab(int extra_ids, bool use_eos, bool use_unk)
      : Vocabulary(extra_ids), eos_(use_eos), unk_(use_unk) {}
  std::optional<int32_t> eos_id() const override { return eos_ ? std::optional<int32_t>(1) : std::nullopt; }
  std::optional<int32_t> unk_id() const override { return unk_ ? std::optional<int32_t>(2) : std::nullopt; }
  int32_t base_vocab_size() const override { return 128; }
  Tokens encode(std::string_view s) const override { return Tokens(s.begin(), s.end()); }
  std::string spec() const override { return "ascii"; }

 protected:
  std::string decode_clean(const Tokens& ids) const override {
    std::string out;
    for (int32_t i : ids) {
      if (i == 0) continue;
      if (i == 1) {
        out += "<eos>";
        continue;
      }
      // Python chr(i) as UTF-8.
      if (i < 0x80) {
        out.push_back(static_cast<char>(i));
      } else {
        out.push_back(static_cast<char>(0xC0 | (i >> 6)));
        out.push_back(static_cast<char>(0x80 | (i & 0x3F)));
      }
    }
    return out;
  }

 private:
  bool eos_, unk_;
};

TEST(Vocabulary, SeqioAsciiFixture) {
  const Tokens ids = {161, 84, 101, 115, 116, 105, 110, 103, 46, 127, 191, 1, 0, 10};
  EXPECT_EQ(AsciiVocab(0, true, true).decode(ids), "\x02Testing.\x7f\x02<eos>");
  Tokens ids2 = {161, 84, 101, 115, 116, 105, 110, 103, 46, 127, 191, 1, 33, 1};
  EXPECT_EQ(AsciiVocab(35, false, true).decode(ids2), "\x02Testing.\x7f\x02<eos>!<eos>");
  EXPECT_EQ(AsciiVocab(0, true, false).decode(ids), "\xC2\xA1Testing.\x7f\xC2\xBF<eos>");
  Tokens ids3 = ids;
  ids3.insert(ids3.begin(), 1);
  EXPECT_EQ(AsciiVocab(0, true, false).decode(ids3), "<eos>");
  EXPECT_EQ(AsciiVocab(0, false, false).decode(ids2), "\xC2\xA1Testing.\x7f\xC2\xBF<eos>!<eos>");
}

TEST(ByteVocabulary, OffsetAndExtraIds) {
  ByteVocabulary v(10);
  EXPECT_EQ(v.vocab_size(), 269);
  EXPECT_EQ(v.encode("A\xC3\xA9"), (Tokens{0x41 + 3, 0xC3 + 3, 0xA9 + 3}));
  EXPECT_EQ(v.decode({0x41 + 3, 260, 2, 0, 0x42 + 3}), "AB");  // extra id, UNK, PAD vanish
  EXPECT_EQ(v.decode({0x41 + 3, 1, 0x42 + 3}), "A");
}

TEST(PassThroughVocabulary, SeqioT17) {
  PassThroughVocabulary v(128, 1);
  EXPECT_EQ(v.clean_ids_for_decode({2, 3, 4, 1, 5, 6, 7, 8, 9}), (Tokens{2, 3, 4, 1}));
  PassThroughVocabulary noeos(128);
  EXPECT_EQ(noeos.clean_ids_for_decode({2, 3, 4, 1, 5}), (Tokens{2, 3, 4, 1, 5}));
  EXPECT_EQ(v.encode("5 6  7"), (Tokens{5, 6, 7}));
  EXPECT_EQ(v.decode({5, 6, 1, 7}), "5 6 1");
  EXPECT_THROW(v.encode("5 x"), std::invalid_argument);
  EXPECT_THROW(v.encode("2147483648"), std::invalid_argument);  // was read as -2147483648
  EXPECT_EQ(v.encode("2147483647 -2147483648"), (Tokens{2147483647, -2147483648}));
  EXPECT_EQ(v.spec(), "passthrough:128:eos_id=1");
}

TEST(Utf8, DecodeIgnoreDropsInvalidSequences) {
  EXPECT_EQ(utf8_decode_ignore("a\xE2\x82" "b"), "ab");
  EXPECT_EQ(utf8_decode_ignore("\xED\xA0\x80x"), "x");       // surrogate
  EXPECT_EQ(utf8_decode_ignore("\xF4\x90\x80\x80y"), "y");   // > U+10FFFF
  EXPECT_EQ(utf8_decode_ignore("\xE2\x82\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(first_invalid_utf8("ok\xC3("), std::optional<size_t>(2));
  EXPECT_EQ(first_invalid_utf8("caf\xC3\xA9"), std::nullopt);
}

TEST(MakeVocabulary, SpecsRoundTripAndErrors) {
  EXPECT_EQ(make_vocabulary("byte:extra_ids=3")->spec(), "byte:extra_ids=3");
  EXPECT_EQ(make_vocabulary(std::string("sentencepiece:") + kModel + ":extra_ids=5")->vocab_size(), 1005);
  EXPECT_THROW(make_vocabulary("word:foo"), std::invalid_argument);
  EXPECT_THROW(make_vocabulary("byte:extra=3"), std::invalid_argument);
  EXPECT_THROW(make_vocabulary("passthrough:0"), std::invalid_argument);  // no token ids
  EXPECT_THROW(make_vocabulary("passthrough:-1"), std::invalid_argument);
  // A runaway sentinel count is refused before anything is built.
  EXPECT_THROW(make_vocabulary("sentencepiece:tests/golden/seqio/vocab/spm1000.model:extra_ids=100000000"),
               std::invalid_argument);
  EXPECT_THROW(ByteVocabulary(2000000), std::invalid_argument);
  // Beyond an int: out of range, not "needs an integer".
  try {
    make_vocabulary("byte:extra_ids=100000000000");
    ADD_FAILURE() << "extra_ids=1e11 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'extra_ids=100000000000' in 'byte:extra_ids=100000000000' is out of range"),
              std::string::npos) << e.what();
  }
  EXPECT_EQ(ByteVocabulary(1 << 20).vocab_size(), 259 + (1 << 20));
  EXPECT_TRUE(*make_vocabulary("byte") == ByteVocabulary(0));
}

}  // namespace
}  // namespace seqio
