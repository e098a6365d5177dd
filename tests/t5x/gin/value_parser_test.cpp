// Language-level tests: literals, containers, references, statements, and
// the file:line:column + hint of every malformed-text error.
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "t5x/gin/parser.h"
#include "test_util.h"

namespace t5x::gin {
namespace {

using testing::expect_gin_error;

TEST(GinValue, ScalarLiterals) {
  EXPECT_EQ(parse_value("42").as_int(), 42);
  EXPECT_EQ(parse_value("-7").as_int(), -7);
  EXPECT_EQ(parse_value("+7").as_int(), 7);
  EXPECT_EQ(parse_value("1_020_000").as_int(), 1020000);
  EXPECT_EQ(parse_value("0x1f").as_int(), 31);
  EXPECT_EQ(parse_value("-9223372036854775808").as_int(), std::numeric_limits<int64_t>::min());
  EXPECT_DOUBLE_EQ(parse_value("1e-3").as_double(), 0.001);
  EXPECT_DOUBLE_EQ(parse_value("0.0001").as_double(), 1e-4);
  EXPECT_DOUBLE_EQ(parse_value(".5").as_double(), 0.5);
  EXPECT_DOUBLE_EQ(parse_value("1.").as_double(), 1.0);
  EXPECT_DOUBLE_EQ(parse_value("-2.5E+2").as_double(), -250.0);
  EXPECT_EQ(parse_value("1e-30").kind(), ValueKind::kFloat);
  EXPECT_TRUE(std::isinf(parse_value("inf").as_double()));
  EXPECT_LT(parse_value("-inf").as_double(), 0);
  EXPECT_TRUE(std::isnan(parse_value("nan").as_double()));
  EXPECT_EQ(parse_value("3").as_double(), 3.0);  // int promotes to float
  EXPECT_TRUE(parse_value("True").as_bool());
  EXPECT_FALSE(parse_value("False").as_bool());
  EXPECT_TRUE(parse_value("None").is_none());
}

TEST(GinValue, Strings) {
  EXPECT_EQ(parse_value("'abc'").as_string(), "abc");
  EXPECT_EQ(parse_value("\"a'b\"").as_string(), "a'b");
  EXPECT_EQ(parse_value(R"('it\'s\n\t\\')").as_string(), "it's\n\t\\");
  EXPECT_EQ(parse_value(R"('\x41\u00e9')").as_string(), "A\xc3\xa9");
  EXPECT_EQ(parse_value(R"(r'a\d')").as_string(), "a\\d");
  EXPECT_EQ(parse_value("'ab' \"cd\"").as_string(), "abcd");  // implicit concatenation
  EXPECT_EQ(parse_value("'''x'y'''").as_string(), "x'y");
  EXPECT_EQ(parse_value("'gs://t5-data/vocabs/cc_all.32000.100extra/sentencepiece.model'")
                .as_string(),
            "gs://t5-data/vocabs/cc_all.32000.100extra/sentencepiece.model");
}

TEST(GinValue, Containers) {
  Value l = parse_value("[1, 'a', [2.5, None],]");
  ASSERT_EQ(l.kind(), ValueKind::kList);
  ASSERT_EQ(l.as_list().size(), 3u);
  EXPECT_EQ(l.as_list()[1].as_string(), "a");
  EXPECT_TRUE(l.as_list()[2].as_list()[1].is_none());

  Value t = parse_value("('gelu', 'linear')");
  EXPECT_EQ(t.kind(), ValueKind::kTuple);
  EXPECT_EQ(t.as_list()[0].as_string(), "gelu");
  EXPECT_EQ(parse_value("('relu',)").as_list().size(), 1u);
  EXPECT_EQ(parse_value("()").kind(), ValueKind::kTuple);
  EXPECT_EQ(parse_value("(5)").as_int(), 5);  // parentheses only group

  Value d = parse_value("{'inputs': 512, 'targets': 114, 3: (1, 2)}");
  ASSERT_EQ(d.as_dict().size(), 3u);
  EXPECT_EQ(d.as_dict()[0].first.as_string(), "inputs");
  EXPECT_EQ(d.as_dict()[1].second.as_int(), 114);
  EXPECT_EQ(d.as_dict()[2].first.as_int(), 3);

  Value multi = parse_value("[\n  1,  # one\n  2,\n]");
  EXPECT_EQ(multi.as_list().size(), 2u);
}

TEST(GinValue, ReferencesAndMacros) {
  Value r = parse_value("@train/utils.DatasetConfig()");
  EXPECT_EQ(r.as_reference().scope, "train");
  EXPECT_EQ(r.as_reference().name, "utils.DatasetConfig");
  EXPECT_TRUE(r.as_reference().call);
  Value c = parse_value("@trainer.Trainer");
  EXPECT_FALSE(c.as_reference().call);
  EXPECT_EQ(c.as_reference().scope, "");
  EXPECT_EQ(parse_value("@a/b/f").as_reference().scope, "a/b");
  EXPECT_EQ(parse_value("%MODEL_DIR").macro_name(), "MODEL_DIR");
  EXPECT_EQ(parse_value("%gin.REQUIRED").kind(), ValueKind::kRequired);
  Value l = parse_value("[@seqio.PyLoggingLogger, %X, {'k': @f()}]");
  EXPECT_EQ(l.as_list()[0].as_reference().name, "seqio.PyLoggingLogger");
  EXPECT_EQ(l.as_list()[1].macro_name(), "X");
  EXPECT_TRUE(l.as_list()[2].as_dict()[0].second.as_reference().call);
}

TEST(GinValue, PrintsAsPythonRepr) {
  EXPECT_EQ(parse_value("1e-3").to_gin(), "0.001");
  EXPECT_EQ(parse_value("1e-6").to_gin(), "1e-06");
  EXPECT_EQ(parse_value("100000.0").to_gin(), "100000.0");
  EXPECT_EQ(parse_value("1e16").to_gin(), "1e+16");
  EXPECT_EQ(parse_value("1e-30").to_gin(), "1e-30");
  EXPECT_EQ(parse_value("0.1").to_gin(), "0.1");
  EXPECT_EQ(parse_value("2.0").to_gin(), "2.0");
  EXPECT_EQ(parse_value("\"it's\"").to_gin(), "\"it's\"");
  EXPECT_EQ(parse_value("'a\\nb'").to_gin(), "'a\\nb'");
  EXPECT_EQ(parse_value("('relu',)").to_gin(), "('relu',)");
  EXPECT_EQ(parse_value("{'inputs': 512}").to_gin(), "{'inputs': 512}");
  EXPECT_EQ(parse_value("@s/f()").to_gin(), "@s/f()");
}

TEST(GinValue, PrintParseRoundTrip) {
  for (const char* text :
       {"[1, -2, 3.25, 'x', \"y'z\", None, True, (), (1,), {'a': [1, {'b': @f}]}]",
        "%gin.REQUIRED", "@a/b/c.d()", "0.30000000000000004", "-1e-300", "1.7976931348623157e+308",
        "'\\x01\\t\\u00e9'", "inf"}) {
    const Value v = parse_value(text);
    EXPECT_EQ(parse_value(v.to_gin()), v) << text << " -> " << v.to_gin();
  }
}

TEST(GinValue, TypeMismatchNamesLocation) {
  const Value v = parse_value("'abc'", SourceLocation{"f.gin", 7, 12});
  expect_gin_error([&] { v.as_int(); }, {"f.gin:7:12", "expected int", "string 'abc'", "hint:"});
  expect_gin_error([&] { parse_value("2.5").as_int(); }, {"expected int", "float 2.5"});
  expect_gin_error([&] { parse_value("1").as_bool(); }, {"expected bool"});
}

TEST(GinParse, BindingsMacrosScopes) {
  const auto st = parse_gin(
      "network.T5Config.emb_dim = 768\n"
      "train/utils.DatasetConfig.split = 'train'\n"
      "a/b/f.x = 1\n"
      "t5x.models.EncoderDecoderModel.z_loss = 1e-4\n"
      "models.EncoderDecoderModel.predict_batch_with_aux.num_decodes = 4\n"
      "BATCH = 128\n",
      "t.gin");
  ASSERT_EQ(st.size(), 6u);
  EXPECT_EQ(st[0].configurable, "network.T5Config");
  EXPECT_EQ(st[0].name, "emb_dim");
  EXPECT_EQ(st[0].scope, "");
  EXPECT_EQ(st[1].scope, "train");
  EXPECT_EQ(st[1].configurable, "utils.DatasetConfig");
  EXPECT_EQ(st[2].scope, "a/b");
  EXPECT_EQ(st[2].configurable, "f");
  EXPECT_EQ(st[3].configurable, "t5x.models.EncoderDecoderModel");
  EXPECT_EQ(st[4].configurable, "models.EncoderDecoderModel.predict_batch_with_aux");
  EXPECT_EQ(st[4].name, "num_decodes");
  EXPECT_EQ(st[5].kind, Statement::Kind::kMacro);
  EXPECT_EQ(st[5].name, "BATCH");
  EXPECT_EQ(st[5].where.line, 6);
}

TEST(GinParse, BlocksImportsIncludesComments) {
  const auto st = parse_gin(
      "# header comment\n"
      "from __gin__ import dynamic_registration\n"
      "import __main__ as train_script\n"
      "include 'base.gin'  # trailing comment\n"
      "\n"
      "train_script.train:\n"
      "  model = %MODEL  # comment\n"
      "\n"
      "  # comment inside the block\n"
      "  logger_cls = [@a,\n"
      "      @b]\n"
      "train/utils.DatasetConfig:\n"
      "    batch_size = 8\n",
      "t.gin");
  ASSERT_GE(st.size(), 6u);
  EXPECT_EQ(st[0].kind, Statement::Kind::kImport);
  EXPECT_EQ(st[0].text, "from __gin__ import dynamic_registration");
  EXPECT_EQ(st[1].text, "import __main__ as train_script");
  EXPECT_EQ(st[2].kind, Statement::Kind::kInclude);
  EXPECT_EQ(st[2].text, "base.gin");
  EXPECT_EQ(st[3].configurable, "train_script.train");
  EXPECT_EQ(st[3].name, "model");
  EXPECT_EQ(st[3].where.line, 7);
  EXPECT_EQ(st[4].name, "logger_cls");
  EXPECT_EQ(st[4].value.as_list().size(), 2u);
  EXPECT_EQ(st[5].scope, "train");
  EXPECT_EQ(st[5].name, "batch_size");
}

TEST(GinParse, SkipsAUtf8ByteOrderMark) {
  const auto st = parse_gin("\xEF\xBB\xBF" "f.x = 3\n", "m.gin");
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].value.as_int(), 3);
  expect_gin_error([] { parse_gin("\xEF\xBB\xBF" "f.x 3\n", "m.gin"); }, {"m.gin:1:5", "expected '='"});
}

TEST(GinParse, LineContinuation) {
  const auto st = parse_gin("f.x = \\\n  [1, 2]\ng.y = 'a' \\\n  'b'\n", "t.gin");
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].value.as_list().size(), 2u);
  EXPECT_EQ(st[1].value.as_string(), "ab");
  EXPECT_EQ(st[1].where.line, 3);
}

// Where gin-config reads these lines differently from an error, the same.
TEST(GinParse, IndentationImportsEscapesAndRepeatedKeysAsGinReadsThem) {
  // Indentation outside a `configurable:` block means nothing (a multi-line
  // --gin_bindings is often indented).
  auto st = parse_gin("  f.x = 1\n  f.y = 2\n", "m.gin");
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[1].name, "y");
  EXPECT_EQ(st[1].value.as_int(), 2);
  // Imports, and a scope named `from`.
  st = parse_gin("import a.b as c\nfrom x.y import z\nfrom/m.f.x = 1\n", "m.gin");
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].text, "import a.b as c");
  EXPECT_EQ(st[1].text, "from x.y import z");
  EXPECT_EQ(st[2].kind, Statement::Kind::kBinding);
  EXPECT_EQ(st[2].scope, "from");
  EXPECT_EQ(st[2].configurable, "m.f");
  // Python's octal escapes.
  EXPECT_EQ(parse_value("'\\101\\012\\0'").as_string(), std::string("A\n\0", 3));
  // A repeated dict key: the later value, in the first key's place.
  EXPECT_EQ(parse_value("{'a': 1, 'b': 2, 'a': 3}").to_gin(), "{'a': 3, 'b': 2}");
}

TEST(GinParseErrors, MalformedLinesGiveLocationAndHint) {
  expect_gin_error([] { parse_gin("a.b = 1\nf.x 5\n", "m.gin"); },
                   {"m.gin:2:5", "expected '='", "hint:"});
  expect_gin_error([] { parse_gin("f.x = [1, 2\n\ng.y = 3\n", "m.gin"); },
                   {"m.gin:1:7", "'[' is never closed", "hint: add the matching ']'"});
  expect_gin_error([] { parse_gin("f.x = 'abc\n", "m.gin"); },
                   {"m.gin:1:7", "unterminated string", "hint:"});
  expect_gin_error([] { parse_gin("f.x = wmt_ende\n", "m.gin"); },
                   {"m.gin:1:7", "bare name 'wmt_ende'", "quote strings ('wmt_ende')"});
  expect_gin_error([] { parse_gin("f.x = (1, 2]\n", "m.gin"); },
                   {"m.gin:1:12", "does not match '('", "hint: close it with ')'"});
  expect_gin_error([] { parse_gin("f.x = 1 2\n", "m.gin"); }, {"m.gin:1:9", "hint:"});
  // gin-config's import forms only (it raises SyntaxError on the rest).
  for (const char* bad : {"import foo bar\n", "from foo\n", "import a.b as\n", "import 'x'\n", "import a/b\n",
                          "from a import\n"})
    expect_gin_error([&] { parse_gin(bad, "m.gin"); }, {"m.gin:1:", "hint: write "});
  expect_gin_error([] { parse_gin("f.x = '\\N{BULLET}'\n", "m.gin"); }, {"\\N{...} escapes", "hint:"});
  expect_gin_error([] { parse_gin("f.x = %s/A\n", "m.gin"); },
                   {"m.gin:1:9", "scoped macros (%scope/NAME) are not supported", "hint:"});
  expect_gin_error([] { parse_gin("f:\ng.x = 1\n", "m.gin"); },
                   {"m.gin:1:1", "no indented parameter lines", "hint:"});
  expect_gin_error([] { parse_gin("s/MACRO = 1\n", "m.gin"); },
                   {"m.gin:1:1", "cannot have a scope", "hint:"});
  expect_gin_error([] { parse_gin("f.x = @g(1)\n", "m.gin"); },
                   {"m.gin:1:10", "arguments are not allowed", "hint:"});
  expect_gin_error([] { parse_gin("f.x = 1 $\n", "m.gin"); },
                   {"m.gin:1:9", "unexpected character '$'", "hint:"});
  expect_gin_error([] { parse_gin(std::string("f.x = 1 \0\n", 10), "m.gin"); },
                   {"m.gin:1:9", "unexpected byte 0x00 (a control character)", "hint:"});
  expect_gin_error([] { parse_gin("f.x = \xC3\xA9\n", "m.gin"); },
                   {"m.gin:1:7", "unexpected byte 0xc3 (not ASCII)", "ASCII only"});
  expect_gin_error([] { parse_gin("include base.gin\n", "m.gin"); },
                   {"m.gin:1:9", "include needs a quoted path", "hint:"});
  expect_gin_error([] { parse_gin("f.x = 99999999999999999999\n", "m.gin"); },
                   {"m.gin:1:7", "does not fit in 64 bits", "hint:"});
  expect_gin_error([] { parse_gin("f.x = {'a' 1}\n", "m.gin"); },
                   {"m.gin:1:12", "expected ':' after dict key", "hint:"});
  expect_gin_error([] { parse_gin("f.x = 012\n", "m.gin"); }, {"leading zeros", "hint:"});
  // Python (and so gin-config) takes an underscore only between digits.
  for (const char* bad : {"f.x = 1__0\n", "f.x = 1_\n", "f.x = 1_.5\n"})
    expect_gin_error([&] { parse_gin(bad, "m.gin"); },
                     {"m.gin:1:7", "malformed number", "hint: an underscore goes between two digits"});
  EXPECT_EQ(parse_value("0x_1f").as_int(), 31);
  expect_gin_error([] { parse_gin("f.x = 1 \\ 2\n", "m.gin"); },
                   {"m.gin:1:9", "backslash must end the line", "hint:"});
}

// Deep nesting is an error at the bracket past the limit (256), not a stack
// overflow: 20000 levels of each bracket kind.
TEST(GinParseErrors, DeepNestingFailsAtTheLimit) {
  auto nested = [](const std::string& open, const std::string& close, int n) {
    std::string v;
    for (int i = 0; i < n; ++i) v += open;
    v += "1";
    for (int i = 0; i < n; ++i) v += close;
    return "f.x = " + v + "\n";
  };
  EXPECT_NO_THROW(parse_gin(nested("[", "]", 256), "m.gin"));
  expect_gin_error([&] { parse_gin(nested("[", "]", 257), "m.gin"); },
                   {"m.gin:1:263", "nest deeper than 256", "hint:"});
  expect_gin_error([&] { parse_gin(nested("[", "]", 20000), "m.gin"); }, {"m.gin:1:263", "nest deeper"});
  expect_gin_error([&] { parse_gin(nested("(", ",)", 20000), "m.gin"); }, {"m.gin:1:263", "nest deeper"});
  expect_gin_error([&] { parse_gin(nested("{1: ", "}", 20000), "m.gin"); }, {"nest deeper"});
}

}  // namespace
}  // namespace t5x::gin

namespace t5x::gin {
namespace {

// Malformed input of any shape gives a GinError, never another exception or
// a crash: random token soup, and every prefix of a real config file.
TEST(GinParseErrors, ArbitraryTextFailsOnlyWithGinError) {
  const std::string alphabet = "ab_.:/=@%()[]{},'\"\\#\n  \t-+1e9xTNr";
  std::mt19937 rng(1234);
  size_t failures = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const size_t len = rng() % 40;
    for (size_t k = 0; k < len; ++k) text += alphabet[rng() % alphabet.size()];
    try {
      parse_gin(text, "fuzz.gin");
    } catch (const GinError& e) {
      ++failures;
      EXPECT_EQ(e.where().file, "fuzz.gin") << text;
      EXPECT_GE(e.where().line, 1) << text;
      EXPECT_FALSE(e.hint().empty()) << text;
    }
  }
  EXPECT_GT(failures, 1000u);  // most soup is malformed

  std::ifstream in(std::string(T5X_SOURCE_DIR) + "/configs/runs/finetune.gin");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string full = ss.str();
  ASSERT_GT(full.size(), 1000u);
  for (size_t n = 0; n <= full.size(); n += 7) {
    try {
      parse_gin(std::string_view(full).substr(0, n), "prefix.gin");
    } catch (const GinError& e) {
      EXPECT_FALSE(e.hint().empty());
    }
  }
}

}  // namespace
}  // namespace t5x::gin
