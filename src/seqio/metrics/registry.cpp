#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "seqio/metrics/metrics.h"

namespace seqio::metrics {
namespace {

using Refs = std::vector<std::vector<std::string>>;
using Strings = std::vector<std::string>;
using Result = std::map<std::string, double>;
using Fn = std::function<Result(const Refs&, const Strings&)>;

Strings single(const std::string& name, const Refs& refs) {
  Strings out;
  out.reserve(refs.size());
  for (std::size_t i = 0; i < refs.size(); ++i) {
    if (refs[i].size() != 1)
      throw std::invalid_argument("[seqio.metrics." + name + "] example " + std::to_string(i) +
                                  " has " + std::to_string(refs[i].size()) +
                                  " targets; this metric takes exactly one per example");
    out.push_back(refs[i][0]);
  }
  return out;
}

Refs wrap(const Strings& targets) {
  Refs out;
  out.reserve(targets.size());
  for (const auto& t : targets) out.push_back({t});
  return out;
}

// Wraps a one-target metric.
template <class F>
Fn one(const std::string& name, F f) {
  return [name, f](const Refs& refs, const Strings& preds) { return f(single(name, refs), preds); };
}

Fn bleu_fn(const std::string& tokenize) {
  return [tokenize](const Refs& refs, const Strings& preds) {
    BleuOptions opt;
    opt.tokenize = tokenize;
    return Result{{"bleu", corpus_bleu(preds, refs, opt).score}};
  };
}

Result inferred_multiclass_f1(const Strings& targets, const Strings& preds) {
  long long max_label = 0;
  for (const auto* v : {&targets, &preds})
    for (const auto& s : *v) {
      long long x;
      if (parse_int_label(s, &x)) max_label = std::max(max_label, x);
    }
  if (max_label > 1000000)
    throw std::invalid_argument("[seqio.metrics.mean_multiclass_f1] label " +
                                std::to_string(max_label) +
                                " is implausibly large; use mean_<N>class_f1 to fix N");
  return mean_multiclass_f1(targets, preds, static_cast<int>(max_label + 1));
}

const std::map<std::string, Fn>& registry() {
  static const std::map<std::string, Fn> kRegistry = {
      {"accuracy", one("accuracy", accuracy)},
      {"sequence_accuracy", one("sequence_accuracy", sequence_accuracy)},
      {"all_match", one("all_match", all_match)},
      {"bleu", bleu_fn("13a")},
      {"bleu_intl", bleu_fn("intl")},
      {"rouge", one("rouge", [](const Strings& t, const Strings& p) { return rouge(t, p); })},
      {"rouge_mean", one("rouge_mean", [](const Strings& t, const Strings& p) { return rouge(t, p); })},
      {"squad", [](const Refs& t, const Strings& p) { return squad(t, p); }},
      {"trivia_qa", [](const Refs& t, const Strings& p) { return trivia_qa(t, p); }},
      {"coqa_f1", [](const Refs& t, const Strings& p) { return coqa_f1(t, p); }},
      {"edit_distance", one("edit_distance", [](const Strings& t, const Strings& p) {
         return edit_distance(t, p);
       })},
      {"mean_multiclass_f1", one("mean_multiclass_f1", inferred_multiclass_f1)},
      {"f1_score_with_invalid", one("f1_score_with_invalid", f1_score_with_invalid)},
      {"pearson_corrcoef", one("pearson_corrcoef", pearson_corrcoef)},
      {"spearman_corrcoef", one("spearman_corrcoef", spearman_corrcoef)},
  };
  return kRegistry;
}

// "mean_<N>class_f1" -> N, or 0.
int multiclass_n(const std::string& name) {
  const std::string pre = "mean_", post = "class_f1";
  if (name.size() <= pre.size() + post.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - post.size(), post.size(), post) != 0)
    return 0;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - post.size());
  if (digits.empty() || digits.size() > 6 || digits[0] == '0' ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return 0;
  return std::stoi(digits);
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

[[noreturn]] void unknown(const std::string& name) {
  std::string best;
  std::size_t best_d = std::string::npos;
  std::string known;
  for (const auto& n : metric_names()) {
    const std::size_t d = edit_distance(name, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
    known += (known.empty() ? "" : ", ") + n;
  }
  throw std::invalid_argument("[seqio.metrics] unknown metric '" + name + "'; did you mean '" +
                              best + "'? known: " + known + ", mean_<N>class_f1");
}

}  // namespace

std::map<std::string, double> compute(const std::string& name, const Refs& targets,
                                      const Strings& predictions) {
  const auto& reg = registry();
  auto it = reg.find(name);
  if (it != reg.end()) return it->second(targets, predictions);
  if (int n = multiclass_n(name))
    return mean_multiclass_f1(single(name, targets), predictions, n);
  unknown(name);
}

bool scores_text(const std::string& name) {
  static const std::set<std::string> kText = {"bleu",  "bleu_intl", "rouge",   "rouge_mean",
                                              "squad", "trivia_qa", "coqa_f1", "edit_distance"};
  return kText.count(name) > 0;
}

std::map<std::string, double> compute(const std::string& name, const Strings& targets,
                                      const Strings& predictions) {
  return compute(name, wrap(targets), predictions);
}

std::vector<std::string> metric_names() {
  std::vector<std::string> out;
  for (const auto& [k, v] : registry()) out.push_back(k);
  return out;
}

}  // namespace seqio::metrics
