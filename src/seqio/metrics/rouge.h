// ROUGE-N, ROUGE-L and ROUGE-Lsum compatible with Google's rouge-score
// package (checked against rouge-score 0.1.2) as T5's
// t5.evaluation.metrics.rouge calls it: score keys rouge1, rouge2,
// rougeLsum; default tokenizer (lowercase, every run of characters outside
// [a-z0-9] separates tokens); no stemmer; " . " rewritten to " .\n" so that
// rougeLsum sees one sentence per line.
//
// Per example (rouge_scorer.RougeScorer.score):
//   rougeN: clipped n-gram overlap; P = overlap / max(#pred n-grams, 1),
//           R = overlap / max(#target n-grams, 1), F = 2PR / (P + R) (0 if
//           P + R = 0).
//   rougeL: LCS of the token sequences (Lin 2004, section 3.1).
//   rougeLsum: summary-level union LCS over "\n"-separated sentences with
//           each token counted at most as often as it occurs (Lin 2004,
//           section 3.2; ROUGE-1.5.5 behaviour).
// Corpus value: mean of per-example F-measure x 100. T5's `rouge` reports
// the median ("mid") of a 1000-sample bootstrap of that mean, which is
// random and close to the mean; T5's `rouge_mean` reports the mean itself.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace seqio::metrics {

struct RougeOptions {
  // "rouge1".."rouge9", "rougeL", "rougeLsum".
  std::vector<std::string> score_keys = {"rouge1", "rouge2", "rougeLsum"};
  // Porter stemmer (NLTK variant) on tokens longer than 3 characters.
  bool use_stemmer = false;
  // T5's _prepare_summary: replace " . " with " .\n" in both texts.
  bool prepare_summary = true;
};

struct RougeScore {
  double precision = 0.0, recall = 0.0, fmeasure = 0.0;  // 0..1
};

// rouge-score's default tokenizer (tokenize.tokenize).
std::vector<std::string> rouge_tokenize(std::string_view text, bool use_stemmer = false);

// One example; keys as in options.score_keys. `prepare_summary` is applied.
// Throws std::invalid_argument "[seqio.metrics.rouge] ..." on an unknown key.
std::map<std::string, RougeScore> rouge_score_example(std::string_view target,
                                                      std::string_view prediction,
                                                      const RougeOptions& options = {});

// Mean F-measure x 100 per key over the corpus (NaN for an empty corpus, as
// numpy's mean). Throws std::invalid_argument on a size mismatch.
std::map<std::string, double> rouge(const std::vector<std::string>& targets,
                                    const std::vector<std::string>& predictions,
                                    const RougeOptions& options = {});

}  // namespace seqio::metrics
