// Porter stemmer (M. F. Porter, "An algorithm for suffix stripping", 1980)
// in the NLTK_EXTENSIONS variant that nltk.stem.porter.PorterStemmer() uses
// by default and rouge-score's DefaultTokenizer(use_stemmer=True) calls.
// The NLTK variant adds: an irregular-forms table (skies -> sky, dying ->
// die, ...), words of <= 2 letters are kept, "ies"/"ied" on 4-letter words
// -> "ie", step 1c needs a consonant before the final y, step 2 "bli" ->
// "ble", "fulli" -> "ful", "logi" -> "log" and a recursive "alli" rule,
// and a 2-letter vowel-consonant word counts as *o (cvc).
// Input: lowercase ASCII letters/digits (other bytes pass through as
// consonants, as in nltk for non-vowel characters).
#pragma once

#include <string>
#include <string_view>

namespace seqio::metrics {

std::string porter_stem(std::string_view word);

}  // namespace seqio::metrics
