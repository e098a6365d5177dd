// Corpus BLEU compatible with sacrebleu 2.x `corpus_bleu` (checked against
// sacrebleu 2.6.0), as T5's t5.evaluation.metrics.bleu calls it: smoothing
// "exp", no forced tokenisation check, case kept, use_effective_order=False,
// max n-gram order 4, 0-100 scale.
//
// Per segment: the prediction and every reference are optionally lowercased
// (Python str.lower), right-stripped (str.rstrip) and tokenised; n-grams of
// order 1..4 are counted on whitespace-split tokens. Matches are clipped by
// the maximum count over the segment's references; the reference length is
// the closest reference length (ties -> the shorter). Corpus score (Papineni
// et al. 2002, eq. 1-2): BP * exp(mean_n log p_n), BP = exp(1 - r/c) if c < r.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace seqio::metrics {

struct BleuOptions {
  // "13a" (mteval-v13a, sacrebleu's default), "intl" (mteval-v14
  // international; T5's default for t5.evaluation.metrics.bleu) or "none".
  std::string tokenize = "13a";
  bool lowercase = false;
  // "exp" (NIST geometric halving), "floor", "add-k" or "none".
  std::string smooth_method = "exp";
  // Used by "floor" (default 0.1) and "add-k" (default 1); < 0 -> default.
  double smooth_value = -1.0;
  bool use_effective_order = false;
  int max_ngram_order = 4;
};

struct BleuScore {
  double score = 0.0;                // 0..100
  std::vector<double> counts;        // [order] matched n-grams
  std::vector<double> totals;        // [order] prediction n-grams
  std::vector<double> precisions;    // [order] 0..100
  double bp = 0.0;                   // brevity penalty
  std::int64_t sys_len = 0;          // prediction tokens
  std::int64_t ref_len = 0;          // closest reference tokens
};

// `references[example]` holds that example's references (at least one).
// Throws std::invalid_argument "[seqio.metrics.bleu] ..." on size mismatch,
// unknown tokenizer/smoothing, an example without references or bad UTF-8.
BleuScore corpus_bleu(const std::vector<std::string>& predictions,
                      const std::vector<std::vector<std::string>>& references,
                      const BleuOptions& options = {});

// One reference per example.
BleuScore corpus_bleu(const std::vector<std::string>& predictions,
                      const std::vector<std::string>& references,
                      const BleuOptions& options = {});

// The tokenisers, returning space-joined tokens (UTF-8 in and out).
std::string tokenize_13a(std::string_view line);
std::string tokenize_intl(std::string_view line);

}  // namespace seqio::metrics
