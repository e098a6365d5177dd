// WordNet 3.0 glosses (Debian package wordnet-base, /usr/share/wordnet/data.*)
// as (word, part of speech) -> definition pairs for the `wordnet_define` task.
//
// A data.POS line is "offset lex_filenum ss_type w_cnt(hex) word lex_id ...
// p_cnt ... | gloss" (wndb(5WN)). The gloss is "definition; \"example\"; ...":
// we keep the definition, i.e. the text before the first `; "` (or the whole
// gloss when there is no example). Words: '_' -> ' ', adjective markers such
// as "(a)" / "(p)" / "(ip)" are dropped.
#pragma once
#include <string>
#include <vector>

namespace t5x::bible {

struct Gloss {
  std::string word;
  std::string pos;         // "noun", "verb", "adjective", "adverb"
  std::string definition;
};

// Parses one data.* line; returns false for the licence header lines
// (which start with two spaces). Throws std::runtime_error naming the
// problem when a synset line is malformed.
bool parse_wordnet_data_line(const std::string& line, std::vector<Gloss>& out);

// Deterministic split of a word: FNV-1a of the word, mod 100: 0-89 train,
// 90-94 validation, 95-99 test. All senses of a word share a split.
std::string split_of_word(const std::string& word);

}  // namespace t5x::bible
