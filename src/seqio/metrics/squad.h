// SQuAD v1.1 / TriviaQA / CoQA exact match and token F1 as T5 computes them
// (t5/evaluation/qa_utils.py, t5.evaluation.metrics.squad / trivia_qa):
// answers are normalised (Python str.lower, punctuation removed, the words
// a/an/the removed at \b boundaries, whitespace collapsed); each example
// scores the maximum over its references; results are means x 100.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace seqio::metrics {

// SQuAD: delete ASCII string.punctuation.
std::string normalize_squad(std::string_view answer);
// TriviaQA: replace string.punctuation and ‘ ’ ´ ` _ by a space, then strip.
std::string normalize_trivia_qa(std::string_view answer);

// Exact match and token F1 of already normalised strings (0..1).
double qa_exact_match(std::string_view target, std::string_view prediction);
double qa_f1(std::string_view target, std::string_view prediction);

// {"em", "f1"} in 0..100 (NaN for an empty corpus, as numpy's mean).
// targets[example] lists that example's accepted answers (at least one).
// Throws std::invalid_argument "[seqio.metrics.squad] ..." on size mismatch
// or an example without answers.
std::map<std::string, double> squad(const std::vector<std::vector<std::string>>& targets,
                                    const std::vector<std::string>& predictions);
std::map<std::string, double> trivia_qa(const std::vector<std::vector<std::string>>& targets,
                                        const std::vector<std::string>& predictions);

// {"f1"}: t5.evaluation.metrics.coqa_f1. Tokens are normalize_squad(text)
// split at whitespace; token F1 as above except that an empty target and an
// empty prediction agree (F1 = 1). Maximum over references, mean x 100.
std::map<std::string, double> coqa_f1(const std::vector<std::vector<std::string>>& targets,
                                      const std::vector<std::string>& predictions);

}  // namespace seqio::metrics
