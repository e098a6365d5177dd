// Word-level edit distance as t5.evaluation.metrics.edit_distance computes
// it: both texts optionally lowercased (Python str.lower), split at every
// single non-\w character (re.split("[^\w]", s), so empty pieces count as
// words), then Levenshtein distance (unit insert/delete/substitute) between
// the two word lists. Values are distances, not percentages.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace seqio::metrics {

// re.split("[^\w]", text): pieces between single non-word characters.
std::vector<std::string> split_non_word(std::string_view text);

// Levenshtein distance between word sequences.
std::size_t word_edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b);

// {"min_edit", "max_edit", "mean_edit", "median_edit", "sum_edit"} over the
// examples (median of an even count = mean of the middle two, as numpy).
// Throws std::invalid_argument "[seqio.metrics.edit_distance] ..." on a size
// mismatch or an empty corpus (Python's min() of nothing fails too).
std::map<std::string, double> edit_distance(const std::vector<std::string>& targets,
                                            const std::vector<std::string>& predictions,
                                            bool lower = true);

}  // namespace seqio::metrics
