// Unicode helpers that reproduce the Python string behaviour the metric
// originals rely on: str.lower(), str.split(), str.rstrip(), re's \w, and the
// `regex` module's \p{P}, \p{S}, \p{N} (sacrebleu's "intl" tokenizer).
// Tables come from scripts/golden/seqio_metrics.py (Python 3.11 /
// Unicode 14 for str and re; the regex module's own Unicode version for \p).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace seqio::metrics {

struct CodeRange {
  char32_t lo, hi;  // inclusive
};
struct LowerPair {
  char32_t from, to;
};

namespace unicode_tables {
extern const CodeRange kSpace[], kWord[], kPunct[], kSymbol[], kNumber[];
extern const CodeRange kCased[], kCaseIgnorable[];
extern const std::size_t kSpaceSize, kWordSize, kPunctSize, kSymbolSize,
    kNumberSize, kCasedSize, kCaseIgnorableSize;
extern const LowerPair kLower[];
extern const std::size_t kLowerSize;
}  // namespace unicode_tables

namespace unicode {

// Strict UTF-8 decoding (no surrogates, no overlongs). Throws
// std::invalid_argument "[seqio.metrics] invalid UTF-8 at byte N" (plus
// `what`, e.g. "prediction 3") on bad input.
std::u32string decode(std::string_view utf8, std::string_view what = {});
std::string encode(std::u32string_view text);

bool is_space(char32_t c);   // Python str.isspace()
bool is_word(char32_t c);    // Python re \w (str patterns)
bool is_punct(char32_t c);   // regex \p{P}
bool is_symbol(char32_t c);  // regex \p{S}
bool is_number(char32_t c);  // regex \p{N}

// Python str.lower(), including U+0130 -> "i\u0307" and Final_Sigma.
std::u32string lower(std::u32string_view text);

// Python str.split() with no argument: runs of whitespace separate, no
// empty pieces.
std::vector<std::u32string> split(std::u32string_view text);
// " ".join(text.split())
std::u32string squeeze_spaces(std::u32string_view text);
// Python str.rstrip() / str.strip() with no argument.
std::u32string_view rstrip(std::u32string_view text);
std::u32string_view strip(std::u32string_view text);

}  // namespace unicode
}  // namespace seqio::metrics
