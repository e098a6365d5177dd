#include <gtest/gtest.h>

#include "seqio/metrics/unicode.h"

namespace seqio::metrics::unicode {
namespace {

TEST(MetricsUnicode, Utf8RoundTrip) {
  const std::string s = "a\u00e9\u20ac\U0001F600";
  const auto u = decode(s);
  ASSERT_EQ(u.size(), 4u);
  EXPECT_EQ(u[3], 0x1F600u);
  EXPECT_EQ(encode(u), s);
}

TEST(MetricsUnicode, InvalidUtf8ReportsOffset) {
  for (const auto& [bytes, offset] : std::vector<std::pair<std::string, int>>{
           {"ab\xC0\xAF", 2}, {"\xED\xA0\x80", 0}, {"xyz\xE2\x82", 3}, {"\x80", 0}}) {
    try {
      decode(bytes, "target 7");
      FAIL() << "accepted invalid UTF-8";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "[seqio.metrics] invalid UTF-8 at byte " +
                                           std::to_string(offset) +
                                           " of target 7 (metrics take UTF-8 text)");
    }
  }
}

TEST(MetricsUnicode, PythonLower) {
  EXPECT_EQ(encode(lower(decode("\u03a3\u0391\u03a3 \u03a3"))), "\u03c3\u03b1\u03c2 \u03c3");
  EXPECT_EQ(encode(lower(decode("\u0130"))), "i\u0307");
  EXPECT_EQ(encode(lower(decode("\u00c0\u00c9 ABC \u212a"))), "\u00e0\u00e9 abc k");
}

TEST(MetricsUnicode, PythonSplit) {
  const auto parts = split(decode("a\u00a0b\u3000c\x1c" "d\u200be"));
  ASSERT_EQ(parts.size(), 4u);  // U+200B is not whitespace in Python
  EXPECT_EQ(encode(parts[3]), "d\u200be");
  EXPECT_EQ(encode(squeeze_spaces(decode("  x \t y  "))), "x y");
  EXPECT_EQ(encode(std::u32string(rstrip(decode("x \u2028")))), "x");
}

TEST(MetricsUnicode, Categories) {
  EXPECT_TRUE(is_punct(U'\u00bf'));
  EXPECT_TRUE(is_punct(U','));
  EXPECT_FALSE(is_punct(U'$'));
  EXPECT_TRUE(is_symbol(U'$'));
  EXPECT_TRUE(is_symbol(U'\u20ac'));
  EXPECT_TRUE(is_number(U'\u00bd'));
  EXPECT_TRUE(is_number(U'7'));
  EXPECT_TRUE(is_word(U'\u00e9'));
  EXPECT_TRUE(is_word(U'_'));
  EXPECT_FALSE(is_word(U'-'));
}

TEST(MetricsUnicode, AsciiClassesMatchRegexModule) {
  // From Python: regex \p{P}, \p{S}, \p{N} and str.isspace() over ASCII.
  const std::string punct = "!\"#%&'()*,-./:;?@[\\]_{}", symbol = "$+<=>^`|~";
  for (char32_t c = 0; c < 0x80; ++c) {
    const char ch = static_cast<char>(c);
    EXPECT_EQ(is_punct(c), punct.find(ch) != std::string::npos) << int(c);
    EXPECT_EQ(is_symbol(c), symbol.find(ch) != std::string::npos) << int(c);
    EXPECT_EQ(is_number(c), ch >= '0' && ch <= '9') << int(c);
    EXPECT_EQ(is_space(c), ch == ' ' || (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x1F)) << int(c);
  }
}

}  // namespace
}  // namespace seqio::metrics::unicode
