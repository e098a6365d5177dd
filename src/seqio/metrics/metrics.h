// seqio metric registry: metric functions by name, on postprocessed target
// and prediction strings, as seqio's Evaluator and the `seqio metric` CLI
// use them. Each metric reproduces the t5.evaluation.metrics function of the
// same name (values x 100); see the per-metric headers for sources and
// docs/seqio-metrics.md for the comparison against the Python originals.
//
// Names and result keys:
//   accuracy            {"accuracy"}
//   sequence_accuracy   {"sequence_accuracy"}
//   all_match           {"exact_match"}
//   bleu                {"bleu"}  sacrebleu corpus BLEU, 13a tokenizer
//   bleu_intl           {"bleu"}  same with the "intl" tokenizer (T5's default)
//   rouge               {"rouge1","rouge2","rougeLsum"}  mean F (T5 rouge_mean)
//   rouge_mean          alias of rouge
//   squad               {"em","f1"}
//   trivia_qa           {"em","f1"}
//   coqa_f1             {"f1"}
//   edit_distance       {"min_edit","max_edit","mean_edit","median_edit","sum_edit"}
//                       (word-level distances, not percentages)
//   mean_multiclass_f1  {"mean_<n>class_f1"}, n = 1 + largest label seen
//   mean_<N>class_f1    {"mean_<N>class_f1"} with N classes, e.g. mean_3class_f1
//   f1_score_with_invalid {"f1"}
//   pearson_corrcoef    {"pearson_corrcoef"}
//   spearman_corrcoef   {"spearman_corrcoef"}
//
// All functions are pure (no shared mutable state) and safe to call from
// several threads at once.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "seqio/metrics/bleu.h"
#include "seqio/metrics/classification.h"
#include "seqio/metrics/edit_distance.h"
#include "seqio/metrics/rouge.h"
#include "seqio/metrics/squad.h"

namespace seqio::metrics {

// One target per example. Throws std::invalid_argument:
//   "[seqio.metrics] unknown metric 'X'; did you mean 'Y'? known: ..." for an
//   unknown name, and the metric's own errors (size mismatch, bad UTF-8,
//   unparsable labels) with a "[seqio.metrics.<name>] " prefix.
std::map<std::string, double> compute(const std::string& name,
                                      const std::vector<std::string>& targets,
                                      const std::vector<std::string>& predictions);

// Several references per example (targets[example] = its references): squad,
// trivia_qa, coqa_f1, bleu and bleu_intl use them all; the other metrics accept
// exactly one reference per example (std::invalid_argument otherwise).
std::map<std::string, double> compute(const std::string& name,
                                      const std::vector<std::vector<std::string>>& targets,
                                      const std::vector<std::string>& predictions);

// Whether `name` scores text (bleu, rouge, squad, ...; seqio's versions take
// strings and fail on numbers), as opposed to labels or numbers.
bool scores_text(const std::string& name);

// The registered names, sorted (mean_<N>class_f1 is accepted in addition).
std::vector<std::string> metric_names();

}  // namespace seqio::metrics
