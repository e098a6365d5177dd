#include "seqio/metrics/edit_distance.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "seqio/metrics/unicode.h"

namespace seqio::metrics {

std::vector<std::string> split_non_word(std::string_view text) {
  const std::u32string s = unicode::decode(text);
  std::vector<std::string> out;
  std::u32string cur;
  for (char32_t c : s) {
    if (unicode::is_word(c)) {
      cur.push_back(c);
    } else {
      out.push_back(unicode::encode(cur));
      cur.clear();
    }
  }
  out.push_back(unicode::encode(cur));
  return out;
}

std::size_t word_edit_distance(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
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

std::map<std::string, double> edit_distance(const std::vector<std::string>& targets,
                                            const std::vector<std::string>& predictions,
                                            bool lower) {
  const std::string op = "[seqio.metrics.edit_distance] ";
  if (targets.size() != predictions.size())
    throw std::invalid_argument(op + "got " + std::to_string(targets.size()) + " targets but " +
                                std::to_string(predictions.size()) + " predictions; they must match");
  if (targets.empty()) throw std::invalid_argument(op + "no examples");
  auto prep = [lower](const std::string& s) {
    return split_non_word(lower ? unicode::encode(unicode::lower(unicode::decode(s))) : s);
  };
  std::vector<double> d;
  d.reserve(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i)
    d.push_back(static_cast<double>(word_edit_distance(prep(predictions[i]), prep(targets[i]))));
  const double sum = std::accumulate(d.begin(), d.end(), 0.0);
  std::vector<double> sorted = d;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
  return {{"min_edit", sorted.front()},
          {"max_edit", sorted.back()},
          {"mean_edit", sum / n},
          {"median_edit", median},
          {"sum_edit", sum}};
}

}  // namespace seqio::metrics
