#include "seqio/metrics/unicode.h"

#include <algorithm>
#include <stdexcept>

namespace seqio::metrics::unicode {
namespace {

bool in_ranges(const CodeRange* table, std::size_t n, char32_t c) {
  const CodeRange* end = table + n;
  // First range whose upper end is >= c.
  const CodeRange* it = std::lower_bound(
      table, end, c, [](const CodeRange& r, char32_t v) { return r.hi < v; });
  return it != end && it->lo <= c;
}

[[noreturn]] void bad_utf8(std::size_t offset, std::string_view what) {
  std::string msg = "[seqio.metrics] invalid UTF-8 at byte " + std::to_string(offset);
  if (!what.empty()) msg += " of " + std::string(what);
  throw std::invalid_argument(msg + " (metrics take UTF-8 text)");
}

char32_t lower_one(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  using unicode_tables::kLower;
  const LowerPair* end = kLower + unicode_tables::kLowerSize;
  const LowerPair* it = std::lower_bound(
      kLower, end, c, [](const LowerPair& p, char32_t v) { return p.from < v; });
  return (it != end && it->from == c) ? it->to : c;
}

bool is_cased(char32_t c) {
  return in_ranges(unicode_tables::kCased, unicode_tables::kCasedSize, c);
}
bool is_case_ignorable(char32_t c) {
  return in_ranges(unicode_tables::kCaseIgnorable,
                   unicode_tables::kCaseIgnorableSize, c);
}

// Unicode Final_Sigma as CPython applies it: a capital sigma preceded by a
// cased letter (skipping case-ignorables) and not followed by one.
bool final_sigma(std::u32string_view s, std::size_t i) {
  std::size_t j = i;
  char32_t c = 0;
  bool found = false;
  while (j > 0) {
    c = s[--j];
    if (!is_case_ignorable(c)) { found = true; break; }
  }
  if (!found || !is_cased(c)) return false;
  for (std::size_t k = i + 1; k < s.size(); ++k) {
    if (!is_case_ignorable(s[k])) return !is_cased(s[k]);
  }
  return true;
}

}  // namespace

std::u32string decode(std::string_view s, std::string_view what) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    unsigned char c0 = b[i];
    if (c0 < 0x80) { out.push_back(c0); ++i; continue; }
    int len;
    char32_t cp, min;
    if ((c0 & 0xE0) == 0xC0) { len = 2; cp = c0 & 0x1F; min = 0x80; }
    else if ((c0 & 0xF0) == 0xE0) { len = 3; cp = c0 & 0x0F; min = 0x800; }
    else if ((c0 & 0xF8) == 0xF0) { len = 4; cp = c0 & 0x07; min = 0x10000; }
    else bad_utf8(i, what);
    if (i + len > s.size()) bad_utf8(i, what);
    for (int k = 1; k < len; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) bad_utf8(i, what);
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) bad_utf8(i, what);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return in_ranges(unicode_tables::kSpace, unicode_tables::kSpaceSize, c);
}
bool is_word(char32_t c) {
  if (c < 0x80)
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  return in_ranges(unicode_tables::kWord, unicode_tables::kWordSize, c);
}
// ASCII classes of \p{P} / \p{S}: P = !"#%&'()*,-./:;?@[\]_{} ; S = $+<=>^`|~
static bool ascii_punct(char32_t c) {
  return (c >= 0x21 && c <= 0x2F && c != '$' && c != '+') || c == ':' || c == ';' || c == '?' ||
         c == '@' || (c >= '[' && c <= ']') || c == '_' || c == '{' || c == '}';
}

bool is_punct(char32_t c) {
  if (c < 0x80) return ascii_punct(c);
  return in_ranges(unicode_tables::kPunct, unicode_tables::kPunctSize, c);
}
bool is_symbol(char32_t c) {
  if (c < 0x80)
    return c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '`' ||
           c == '|' || c == '~';
  return in_ranges(unicode_tables::kSymbol, unicode_tables::kSymbolSize, c);
}
bool is_number(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return in_ranges(unicode_tables::kNumber, unicode_tables::kNumberSize, c);
}

std::u32string lower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char32_t c = text[i];
    if (c == 0x130) {
      out.push_back(U'i');
      out.push_back(0x307);
    } else if (c == 0x3A3) {
      out.push_back(final_sigma(text, i) ? 0x3C2 : 0x3C3);
    } else {
      out.push_back(lower_one(c));
    }
  }
  return out;
}

std::vector<std::u32string> split(std::u32string_view text) {
  std::vector<std::u32string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

std::u32string squeeze_spaces(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) {
      if (!out.empty()) out.push_back(U' ');
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}

std::u32string_view rstrip(std::u32string_view text) {
  std::size_t n = text.size();
  while (n > 0 && is_space(text[n - 1])) --n;
  return text.substr(0, n);
}

std::u32string_view strip(std::u32string_view text) {
  text = rstrip(text);
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  return text.substr(i);
}

}  // namespace seqio::metrics::unicode
