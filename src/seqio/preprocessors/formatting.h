// Text-to-text formatting preprocessors (T5 t5/data/preprocessors.py).
#pragma once
#include <string>
#include <string_view>

#include "seqio/example.h"

namespace seqio::preprocessors {

// English name of a language code as T5 gets it from babel
// (Locale(code[:2]).english_name), for the WMT/T5 languages: en, de, fr, ro,
// es, it, pt, nl, ru, zh, ja, ko, cs, fi, tr, et, lv, lt, gu, kk, hi, pl, ar,
// sv, da. Only the first two characters are used (T5 warns on "zh-cn" etc.).
// Throws std::invalid_argument for other codes (use translate_named).
std::string language_english_name(std::string_view code);

// translate(x, source_language, target_language):
//   {inputs: "translate <Source> to <Target>: " + x[source], targets: x[target]}.
// Other keys are dropped, as in T5. Example: en->de gives
// "translate English to German: That is good." Throws if a field is missing
// or not text.
Example translate(const Example& x, std::string_view source_language,
                  std::string_view target_language);
// Same with explicit field keys and display names.
Example translate_named(const Example& x, const std::string& source_key,
                        const std::string& target_key, std::string_view source_name,
                        std::string_view target_name);

// summarize(x, article_key, summary_key): {inputs: "summarize: " + article,
// targets: summary}.
Example summarize(const Example& x, const std::string& article_key,
                  const std::string& summary_key);

}  // namespace seqio::preprocessors
