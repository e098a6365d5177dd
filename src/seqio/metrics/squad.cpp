#include "seqio/metrics/squad.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <unordered_map>

#include "seqio/metrics/unicode.h"

namespace seqio::metrics {
namespace {

bool is_ascii_punct(char32_t c) {  // Python string.punctuation
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

// re.sub(r"\b(a|an|the)\b", " ", s) with Unicode \w.
std::u32string remove_articles(const std::u32string& s) {
  auto word_at = [&](std::size_t i) { return i < s.size() && unicode::is_word(s[i]); };
  auto boundary = [&](std::size_t i) {
    const bool before = i > 0 && unicode::is_word(s[i - 1]);
    return before != word_at(i);
  };
  static const std::u32string kArticles[] = {U"a", U"an", U"the"};
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t matched = 0;
    if (boundary(i)) {
      for (const auto& art : kArticles) {  // alternatives in pattern order
        if (s.compare(i, art.size(), art) == 0 && boundary(i + art.size())) {
          matched = art.size();
          break;
        }
      }
    }
    if (matched) {
      out.push_back(U' ');
      i += matched;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

std::u32string normalize(std::string_view answer, bool trivia) {
  std::u32string s = unicode::lower(unicode::decode(answer, "answer"));
  std::u32string t;
  t.reserve(s.size());
  for (char32_t c : s) {
    const bool punct = is_ascii_punct(c) ||
                       (trivia && (c == 0x2018 || c == 0x2019 || c == 0xB4 || c == U'`' || c == U'_'));
    if (!punct) t.push_back(c);
    else if (trivia) t.push_back(U' ');
  }
  return unicode::squeeze_spaces(remove_articles(t));
}

std::map<std::string, double> qa_metrics(const std::vector<std::vector<std::string>>& targets,
                                         const std::vector<std::string>& predictions,
                                         bool trivia, const char* op) {
  if (targets.size() != predictions.size())
    throw std::invalid_argument(std::string(op) + "Number of targets and predictions must match (" +
                                std::to_string(targets.size()) + " vs " +
                                std::to_string(predictions.size()) + ")");
  double em = 0.0, f1 = 0.0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].empty())
      throw std::invalid_argument(std::string(op) + "example " + std::to_string(i) +
                                  " has no reference answer");
    const std::string p = trivia ? normalize_trivia_qa(predictions[i]) : normalize_squad(predictions[i]);
    double best_em = 0.0, best_f1 = 0.0;
    for (const auto& t_raw : targets[i]) {
      const std::string t = trivia ? normalize_trivia_qa(t_raw) : normalize_squad(t_raw);
      best_em = std::max(best_em, qa_exact_match(t, p));
      best_f1 = std::max(best_f1, qa_f1(t, p));
    }
    em += best_em;
    f1 += best_f1;
  }
  const double n = static_cast<double>(targets.size());
  if (targets.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {{"em", nan}, {"f1", nan}};
  }
  return {{"em", 100.0 * em / n}, {"f1", 100.0 * f1 / n}};
}

}  // namespace

std::string normalize_squad(std::string_view answer) {
  return unicode::encode(normalize(answer, false));
}

std::string normalize_trivia_qa(std::string_view answer) {
  return unicode::encode(normalize(answer, true));
}

double qa_exact_match(std::string_view target, std::string_view prediction) {
  return target == prediction ? 1.0 : 0.0;
}

double qa_f1(std::string_view target, std::string_view prediction) {
  const auto p = unicode::split(unicode::decode(prediction));
  const auto t = unicode::split(unicode::decode(target));
  std::unordered_map<std::u32string, long> pc;
  for (const auto& w : p) ++pc[w];
  long same = 0;
  for (const auto& w : t) {
    auto it = pc.find(w);
    if (it != pc.end() && it->second > 0) {
      ++same;
      --it->second;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / p.size();
  const double recall = static_cast<double>(same) / t.size();
  return 2 * precision * recall / (precision + recall);
}

std::map<std::string, double> squad(const std::vector<std::vector<std::string>>& targets,
                                    const std::vector<std::string>& predictions) {
  return qa_metrics(targets, predictions, false, "[seqio.metrics.squad] ");
}

std::map<std::string, double> trivia_qa(const std::vector<std::vector<std::string>>& targets,
                                        const std::vector<std::string>& predictions) {
  return qa_metrics(targets, predictions, true, "[seqio.metrics.trivia_qa] ");
}

std::map<std::string, double> coqa_f1(const std::vector<std::vector<std::string>>& targets,
                                      const std::vector<std::string>& predictions) {
  const std::string op = "[seqio.metrics.coqa_f1] ";
  if (targets.size() != predictions.size())
    throw std::invalid_argument(op + "got " + std::to_string(targets.size()) + " targets but " +
                                std::to_string(predictions.size()) + " predictions; they must match");
  if (targets.empty()) return {{"f1", std::numeric_limits<double>::quiet_NaN()}};
  double sum = 0.0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].empty())
      throw std::invalid_argument(op + "example " + std::to_string(i) + " has no reference answer");
    const std::string p = normalize_squad(predictions[i]);
    double best = 0.0;
    for (const auto& t_raw : targets[i]) {
      const std::string t = normalize_squad(t_raw);
      // Normalised text has no surrounding spaces: empty means no tokens.
      best = std::max(best, (t.empty() && p.empty()) ? 1.0 : qa_f1(t, p));
    }
    sum += best;
  }
  return {{"f1", 100.0 * sum / targets.size()}};
}

}  // namespace seqio::metrics
