#include "seqio/metrics/rouge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "seqio/metrics/ngram.h"
#include "seqio/metrics/porter.h"
#include "seqio/metrics/unicode.h"

namespace seqio::metrics {
namespace {

using Ids = std::vector<int>;

double fmeasure(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0.0; }

std::string prepare_summary(std::string_view s) {
  std::string out(s);
  std::size_t pos = 0;
  while ((pos = out.find(" . ", pos)) != std::string::npos) {
    out.replace(pos, 3, " .\n");
    pos += 2;  // the trailing char is now '\n'; Python's replace does not rescan it
  }
  return out;
}

class Interner {
 public:
  Ids ids(const std::vector<std::string>& toks) {
    Ids out;
    out.reserve(toks.size());
    for (const auto& t : toks) out.push_back(map_.try_emplace(t, static_cast<int>(map_.size())).first->second);
    return out;
  }

 private:
  std::unordered_map<std::string, int> map_;
};

// Dynamic-programming table of LCS lengths, (|ref|+1) x (|can|+1), row-major.
struct LcsTable {
  std::size_t cols;
  std::vector<int> v;
  int at(std::size_t i, std::size_t j) const { return v[i * cols + j]; }
};

LcsTable lcs_table(const Ids& ref, const Ids& can) {
  LcsTable t{can.size() + 1, std::vector<int>((ref.size() + 1) * (can.size() + 1), 0)};
  for (std::size_t i = 1; i <= ref.size(); ++i)
    for (std::size_t j = 1; j <= can.size(); ++j)
      t.v[i * t.cols + j] = ref[i - 1] == can[j - 1] ? t.at(i - 1, j - 1) + 1
                                                      : std::max(t.at(i - 1, j), t.at(i, j - 1));
  return t;
}

// Indices into `ref` of one LCS, with rouge-score's tie-breaking.
std::vector<std::size_t> lcs_indices(const Ids& ref, const Ids& can) {
  const LcsTable t = lcs_table(ref, can);
  std::vector<std::size_t> out;
  std::size_t i = ref.size(), j = can.size();
  while (i > 0 && j > 0) {
    if (ref[i - 1] == can[j - 1]) {
      out.push_back(i - 1);
      --i;
      --j;
    } else if (t.at(i, j - 1) > t.at(i - 1, j)) {
      --j;
    } else {
      --i;
    }
  }
  return out;
}

RougeScore score_ngrams(const Ids& target, const Ids& pred, int n) {
  auto count = [n](const Ids& toks) {
    return detail::sorted_ngram_counts(std::vector<std::uint32_t>(toks.begin(), toks.end()), n, n);
  };
  const auto tc = count(target), pc = count(pred);
  long overlap = 0, tn = 0, pn = 0;
  std::size_t j = 0;
  for (const auto& [g, c] : tc) {
    tn += c;
    while (j < pc.size() && pc[j].first < g) ++j;
    if (j < pc.size() && pc[j].first == g) overlap += std::min(c, pc[j].second);
  }
  for (const auto& [g, c] : pc) pn += c;
  RougeScore s;
  s.precision = static_cast<double>(overlap) / std::max(pn, 1L);
  s.recall = static_cast<double>(overlap) / std::max(tn, 1L);
  s.fmeasure = fmeasure(s.precision, s.recall);
  return s;
}

RougeScore score_lcs(const Ids& target, const Ids& pred) {
  RougeScore s;
  if (target.empty() || pred.empty()) return s;
  const double lcs = lcs_table(target, pred).v.back();
  s.precision = lcs / pred.size();
  s.recall = lcs / target.size();
  s.fmeasure = fmeasure(s.precision, s.recall);
  return s;
}

RougeScore score_summary_lcs(const std::vector<Ids>& ref, const std::vector<Ids>& can) {
  RougeScore s;
  if (ref.empty() || can.empty()) return s;
  std::size_t m = 0, n = 0;
  std::unordered_map<int, long> cnt_r, cnt_c;
  for (const auto& r : ref) { m += r.size(); for (int t : r) ++cnt_r[t]; }
  for (const auto& c : can) { n += c.size(); for (int t : c) ++cnt_c[t]; }
  if (m == 0 || n == 0) return s;
  long hits = 0;
  for (const auto& r : ref) {
    std::set<std::size_t> uni;
    for (const auto& c : can)
      for (std::size_t i : lcs_indices(r, c)) uni.insert(i);
    for (std::size_t i : uni) {
      const int t = r[i];
      if (cnt_c[t] > 0 && cnt_r[t] > 0) {
        ++hits;
        --cnt_c[t];
        --cnt_r[t];
      }
    }
  }
  s.recall = static_cast<double>(hits) / m;
  s.precision = static_cast<double>(hits) / n;
  s.fmeasure = fmeasure(s.precision, s.recall);
  return s;
}

// Lines of `text` split on '\n', empty lines dropped (rouge-score get_sents).
std::vector<std::string_view> sentences(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

int ngram_order(const std::string& key) {
  if (key.size() == 6 && key.compare(0, 5, "rouge") == 0 && key[5] >= '1' && key[5] <= '9')
    return key[5] - '0';
  return 0;
}

}  // namespace

std::vector<std::string> rouge_tokenize(std::string_view text, bool use_stemmer) {
  const std::u32string s = unicode::decode(text);
  std::vector<std::string> toks;
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    toks.push_back(use_stemmer && cur.size() > 3 ? porter_stem(cur) : cur);
    cur.clear();
  };
  for (char32_t c : s) {
    // str.lower() then [^a-z0-9]+ -> " ": only A-Z, U+0130 (-> "i\u0307")
    // and U+212A KELVIN SIGN (-> "k") lowercase into [a-z0-9].
    if ((c >= U'a' && c <= U'z') || (c >= U'0' && c <= U'9')) {
      cur.push_back(static_cast<char>(c));
    } else if (c >= U'A' && c <= U'Z') {
      cur.push_back(static_cast<char>(c + 32));
    } else if (c == 0x212A) {
      cur.push_back('k');
    } else if (c == 0x130) {
      cur.push_back('i');
      flush();  // the combining dot separates
    } else {
      flush();
    }
  }
  flush();
  return toks;
}

std::map<std::string, RougeScore> rouge_score_example(std::string_view target_in,
                                                      std::string_view prediction_in,
                                                      const RougeOptions& opt) {
  const std::string target = opt.prepare_summary ? prepare_summary(target_in) : std::string(target_in);
  const std::string pred =
      opt.prepare_summary ? prepare_summary(prediction_in) : std::string(prediction_in);
  Interner vocab;
  Ids t_ids, p_ids;
  bool have_tokens = false;
  std::map<std::string, RougeScore> out;
  for (const auto& key : opt.score_keys) {
    const int n = ngram_order(key);
    if (n == 0 && key != "rougeL" && key != "rougeLsum")
      throw std::invalid_argument("[seqio.metrics.rouge] invalid rouge type '" + key +
                                  "' (known: rouge1..rouge9, rougeL, rougeLsum)");
    if (key != "rougeLsum" && !have_tokens) {
      t_ids = vocab.ids(rouge_tokenize(target, opt.use_stemmer));
      p_ids = vocab.ids(rouge_tokenize(pred, opt.use_stemmer));
      have_tokens = true;
    }
    if (key == "rougeL") {
      out[key] = score_lcs(t_ids, p_ids);
    } else if (key == "rougeLsum") {
      std::vector<Ids> ts, ps;
      for (auto sv : sentences(target)) ts.push_back(vocab.ids(rouge_tokenize(sv, opt.use_stemmer)));
      for (auto sv : sentences(pred)) ps.push_back(vocab.ids(rouge_tokenize(sv, opt.use_stemmer)));
      out[key] = score_summary_lcs(ts, ps);
    } else {
      out[key] = score_ngrams(t_ids, p_ids, n);
    }
  }
  return out;
}

std::map<std::string, double> rouge(const std::vector<std::string>& targets,
                                    const std::vector<std::string>& predictions,
                                    const RougeOptions& opt) {
  if (targets.size() != predictions.size())
    throw std::invalid_argument("[seqio.metrics.rouge] got " + std::to_string(targets.size()) +
                                " targets but " + std::to_string(predictions.size()) +
                                " predictions; they must match");
  std::map<std::string, double> sum;
  for (const auto& k : opt.score_keys) sum[k] = 0.0;
  for (std::size_t i = 0; i < targets.size(); ++i)
    for (auto& [k, s] : rouge_score_example(targets[i], predictions[i], opt)) sum[k] += s.fmeasure;
  for (auto& [k, v] : sum)
    v = targets.empty() ? std::numeric_limits<double>::quiet_NaN() : 100.0 * v / targets.size();
  return sum;
}

}  // namespace seqio::metrics
