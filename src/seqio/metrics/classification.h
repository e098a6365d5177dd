// Label and score metrics of t5.evaluation.metrics, on strings as the seqio
// Evaluator hands them over (after postprocessing). All values are x 100;
// an empty corpus gives NaN where numpy / scikit-learn would.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace seqio::metrics {

// {"accuracy"}: sklearn.metrics.accuracy_score on the strings.
std::map<std::string, double> accuracy(const std::vector<std::string>& targets,
                                       const std::vector<std::string>& predictions);
// {"sequence_accuracy"}: mean exact string equality.
std::map<std::string, double> sequence_accuracy(const std::vector<std::string>& targets,
                                                const std::vector<std::string>& predictions);
// {"exact_match"}: 100 if every prediction equals its target, else 0.
std::map<std::string, double> all_match(const std::vector<std::string>& targets,
                                        const std::vector<std::string>& predictions);

// Labels are class ids written as integers ("0", "2", " 1 "). Targets must
// parse (std::invalid_argument naming the example otherwise); a prediction
// that does not parse counts as -1, i.e. wrong, as T5's
// string_label_to_class_id postprocessor maps unknown labels to -1.
//
// {"mean_<num_classes>class_f1"}: sklearn fbeta_score(beta=1,
// labels=range(num_classes), average="macro"): the unweighted mean over
// classes of 2TP / (2TP + FP + FN), a class without any TP/FP/FN scoring 0.
std::map<std::string, double> mean_multiclass_f1(const std::vector<std::string>& targets,
                                                 const std::vector<std::string>& predictions,
                                                 int num_classes);
// {"f1"}: binary F1 of class 1 after a prediction other than 0/1 is set to
// 1 - target (t5 f1_score_with_invalid).
std::map<std::string, double> f1_score_with_invalid(const std::vector<std::string>& targets,
                                                    const std::vector<std::string>& predictions);

// Values parse as floating point (std::invalid_argument otherwise).
// {"pearson_corrcoef"}: scipy.stats.pearsonr r x 100 (NaN if constant).
std::map<std::string, double> pearson_corrcoef(const std::vector<std::string>& targets,
                                               const std::vector<std::string>& predictions);
// {"spearman_corrcoef"}: Pearson r of average ranks (ties share their mean rank).
std::map<std::string, double> spearman_corrcoef(const std::vector<std::string>& targets,
                                                const std::vector<std::string>& predictions);

// Parsers shared with the registry; false when `text` (whitespace trimmed)
// is not an integer / a number.
bool parse_int_label(const std::string& text, long long* value);
bool parse_double(const std::string& text, double* value);

}  // namespace seqio::metrics
