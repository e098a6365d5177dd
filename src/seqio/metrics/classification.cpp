#include "seqio/metrics/classification.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace seqio::metrics {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

void check_sizes(const char* op, std::size_t t, std::size_t p) {
  if (t != p)
    throw std::invalid_argument(std::string("[seqio.metrics.") + op + "] got " + std::to_string(t) +
                                " targets but " + std::to_string(p) +
                                " predictions; they must match");
}

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::vector<long long> target_labels(const char* op, const std::vector<std::string>& targets) {
  std::vector<long long> out(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (!parse_int_label(targets[i], &out[i]))
      throw std::invalid_argument(std::string("[seqio.metrics.") + op + "] target " +
                                  std::to_string(i) + " ('" + targets[i] +
                                  "') is not an integer class id");
  return out;
}

std::vector<long long> prediction_labels(const std::vector<std::string>& preds) {
  std::vector<long long> out(preds.size());
  for (std::size_t i = 0; i < preds.size(); ++i)
    if (!parse_int_label(preds[i], &out[i])) out[i] = -1;
  return out;
}

std::vector<double> values(const char* op, const char* what, const std::vector<std::string>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!parse_double(v[i], &out[i]))
      throw std::invalid_argument(std::string("[seqio.metrics.") + op + "] " + what + " " +
                                  std::to_string(i) + " ('" + v[i] + "') is not a number");
  return out;
}

double f1_of(long tp, long fp, long fn) {
  const long den = 2 * tp + fp + fn;
  return den == 0 ? 0.0 : 2.0 * tp / den;
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = x.size();
  if (n < 2) return kNaN;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxx = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  const double nx = std::sqrt(sxx), ny = std::sqrt(syy);
  if (nx == 0 || ny == 0) return kNaN;
  double r = 0;
  for (std::size_t i = 0; i < n; ++i) r += ((x[i] - mx) / nx) * ((y[i] - my) / ny);
  return std::clamp(r, -1.0, 1.0);
}

// 1-based ranks; ties get the mean of the ranks they span.
std::vector<double> average_ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double r = (i + j) / 2.0 + 1.0;
    for (std::size_t k = i; k <= j; ++k) rank[order[k]] = r;
    i = j + 1;
  }
  return rank;
}

}  // namespace

bool parse_int_label(const std::string& text, long long* value) {
  const std::string s = trim(text);
  if (s.empty()) return false;
  std::size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
  if (i == s.size()) return false;
  for (std::size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return false;
  errno = 0;
  *value = std::strtoll(s.c_str(), nullptr, 10);
  return errno == 0;
}

bool parse_double(const std::string& text, double* value) {
  const std::string s = trim(text);
  if (s.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

std::map<std::string, double> accuracy(const std::vector<std::string>& targets,
                                       const std::vector<std::string>& predictions) {
  check_sizes("accuracy", targets.size(), predictions.size());
  return {{"accuracy", sequence_accuracy(targets, predictions).at("sequence_accuracy")}};
}

std::map<std::string, double> sequence_accuracy(const std::vector<std::string>& targets,
                                                const std::vector<std::string>& predictions) {
  check_sizes("sequence_accuracy", targets.size(), predictions.size());
  if (targets.empty()) return {{"sequence_accuracy", kNaN}};
  std::size_t same = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) same += targets[i] == predictions[i];
  return {{"sequence_accuracy", 100.0 * same / targets.size()}};
}

std::map<std::string, double> all_match(const std::vector<std::string>& targets,
                                        const std::vector<std::string>& predictions) {
  check_sizes("all_match", targets.size(), predictions.size());
  return {{"exact_match", targets == predictions ? 100.0 : 0.0}};
}

std::map<std::string, double> mean_multiclass_f1(const std::vector<std::string>& targets,
                                                 const std::vector<std::string>& predictions,
                                                 int num_classes) {
  check_sizes("mean_multiclass_f1", targets.size(), predictions.size());
  if (num_classes < 1)
    throw std::invalid_argument("[seqio.metrics.mean_multiclass_f1] num_classes must be >= 1, got " +
                                std::to_string(num_classes));
  const auto t = target_labels("mean_multiclass_f1", targets);
  const auto p = prediction_labels(predictions);
  std::vector<long> tp(num_classes, 0), fp(num_classes, 0), fn(num_classes, 0);
  auto in_range = [&](long long c) { return c >= 0 && c < num_classes; };
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == p[i]) {
      if (in_range(t[i])) ++tp[t[i]];
    } else {
      if (in_range(t[i])) ++fn[t[i]];
      if (in_range(p[i])) ++fp[p[i]];
    }
  }
  double sum = 0;
  for (int c = 0; c < num_classes; ++c) sum += f1_of(tp[c], fp[c], fn[c]);
  return {{"mean_" + std::to_string(num_classes) + "class_f1", 100.0 * sum / num_classes}};
}

std::map<std::string, double> f1_score_with_invalid(const std::vector<std::string>& targets,
                                                    const std::vector<std::string>& predictions) {
  check_sizes("f1_score_with_invalid", targets.size(), predictions.size());
  const auto t = target_labels("f1_score_with_invalid", targets);
  auto p = prediction_labels(predictions);
  long tp = 0, fp = 0, fn = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] != 0 && t[i] != 1)
      throw std::invalid_argument("[seqio.metrics.f1_score_with_invalid] target " +
                                  std::to_string(i) + " is " + std::to_string(t[i]) +
                                  "; targets must be 0 or 1");
    if (p[i] != 0 && p[i] != 1) p[i] = 1 - t[i];
    tp += t[i] == 1 && p[i] == 1;
    fp += t[i] == 0 && p[i] == 1;
    fn += t[i] == 1 && p[i] == 0;
  }
  return {{"f1", 100.0 * f1_of(tp, fp, fn)}};
}

std::map<std::string, double> pearson_corrcoef(const std::vector<std::string>& targets,
                                               const std::vector<std::string>& predictions) {
  check_sizes("pearson_corrcoef", targets.size(), predictions.size());
  const auto x = values("pearson_corrcoef", "target", targets);
  const auto y = values("pearson_corrcoef", "prediction", predictions);
  return {{"pearson_corrcoef", 100.0 * pearson(x, y)}};
}

std::map<std::string, double> spearman_corrcoef(const std::vector<std::string>& targets,
                                                const std::vector<std::string>& predictions) {
  check_sizes("spearman_corrcoef", targets.size(), predictions.size());
  const auto x = values("spearman_corrcoef", "target", targets);
  const auto y = values("spearman_corrcoef", "prediction", predictions);
  // scipy.stats.spearmanr propagates a nan (nan_policy='propagate'); ranking
  // one among numbers gave a value that depended on where it stood.
  for (const auto* v : {&x, &y})
    if (std::any_of(v->begin(), v->end(), [](double a) { return std::isnan(a); }))
      return {{"spearman_corrcoef", std::numeric_limits<double>::quiet_NaN()}};
  return {{"spearman_corrcoef", 100.0 * pearson(average_ranks(x), average_ranks(y))}};
}

}  // namespace seqio::metrics
