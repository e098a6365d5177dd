#include "seqio/metrics/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <unordered_map>

#include "seqio/metrics/ngram.h"
#include "seqio/metrics/unicode.h"

namespace seqio::metrics {
namespace {

using unicode::is_number;
using unicode::is_punct;
using unicode::is_symbol;

bool is_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

// sacrebleu's TokenizerRegexp first rule: {-~ [-` space-& (-+ :-@ /
bool is_13a_punct(char32_t c) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x20 && c <= 0x26) || (c >= 0x28 && c <= 0x2B) ||
         (c >= 0x3A && c <= 0x40) || c == 0x2F;
}

// Python re.sub of a two-character pattern `(A)(B)` with replacement built
// from both: scan left to right, matches do not overlap.
template <class First, class Second, class Emit>
std::u32string sub_pairs(const std::u32string& s, First first, Second second, Emit emit) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 2);
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out.push_back(s[i]);
      ++i;
    }
  }
  return out;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

std::u32string tokenize_13a_u32(std::u32string line32) {
  // Language-independent part, on UTF-8 (the patterns are ASCII).
  std::string line = unicode::encode(line32);
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  std::u32string s = unicode::decode(" " + line + " ");
  std::u32string t;
  t.reserve(s.size() * 2);
  for (char32_t c : s) {
    if (is_13a_punct(c)) {
      t.push_back(U' ');
      t.push_back(c);
      t.push_back(U' ');
    } else {
      t.push_back(c);
    }
  }
  auto period_comma = [](char32_t c) { return c == U'.' || c == U','; };
  auto not_digit = [](char32_t c) { return !is_digit(c); };
  t = sub_pairs(t, not_digit, period_comma, [](std::u32string& o, char32_t a, char32_t b) {
    o += a; o += U' '; o += b; o += U' ';
  });
  t = sub_pairs(t, period_comma, not_digit, [](std::u32string& o, char32_t a, char32_t b) {
    o += U' '; o += a; o += U' '; o += b;
  });
  t = sub_pairs(t, is_digit, [](char32_t c) { return c == U'-'; },
                [](std::u32string& o, char32_t a, char32_t b) {
                  o += a; o += U' '; o += b; o += U' ';
                });
  return unicode::squeeze_spaces(t);
}

std::u32string tokenize_intl_u32(const std::u32string& s) {
  auto not_number = [](char32_t c) { return !is_number(c); };
  auto punct = [](char32_t c) { return is_punct(c); };
  std::u32string t = sub_pairs(s, not_number, punct, [](std::u32string& o, char32_t a, char32_t b) {
    o += a; o += U' '; o += b; o += U' ';
  });
  t = sub_pairs(t, punct, not_number, [](std::u32string& o, char32_t a, char32_t b) {
    o += U' '; o += a; o += U' '; o += b;
  });
  std::u32string u;
  u.reserve(t.size() + 8);
  for (char32_t c : t) {
    if (is_symbol(c)) {
      u += U' '; u += c; u += U' ';
    } else {
      u += c;
    }
  }
  return unicode::squeeze_spaces(u);
}

// Token interning so that n-grams are short keys of 4-byte ids.
class Vocab {
 public:
  std::vector<std::uint32_t> ids(const std::u32string& tokenized) {
    std::vector<std::uint32_t> out;
    for (auto& tok : unicode::split(tokenized)) {
      auto [it, inserted] = map_.try_emplace(tok, static_cast<std::uint32_t>(map_.size()));
      out.push_back(it->second);
    }
    return out;
  }

 private:
  std::unordered_map<std::u32string, std::uint32_t> map_;
};

double my_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

}  // namespace

std::string tokenize_13a(std::string_view line) {
  return unicode::encode(tokenize_13a_u32(unicode::decode(line)));
}

std::string tokenize_intl(std::string_view line) {
  return unicode::encode(tokenize_intl_u32(unicode::decode(line)));
}

BleuScore corpus_bleu(const std::vector<std::string>& predictions,
                      const std::vector<std::vector<std::string>>& references,
                      const BleuOptions& opt) {
  const std::string op = "[seqio.metrics.bleu] ";
  if (predictions.size() != references.size())
    throw std::invalid_argument(op + "got " + std::to_string(predictions.size()) +
                                " predictions but " + std::to_string(references.size()) +
                                " reference lists; they must match");
  if (opt.tokenize != "13a" && opt.tokenize != "intl" && opt.tokenize != "none")
    throw std::invalid_argument(op + "unknown tokenize '" + opt.tokenize +
                                "' (known: 13a, intl, none)");
  double smooth_value = opt.smooth_value;
  if (opt.smooth_method == "floor") {
    if (smooth_value < 0) smooth_value = 0.1;
  } else if (opt.smooth_method == "add-k") {
    if (smooth_value < 0) smooth_value = 1.0;
  } else if (opt.smooth_method != "exp" && opt.smooth_method != "none") {
    throw std::invalid_argument(op + "unknown smooth_method '" + opt.smooth_method +
                                "' (known: exp, floor, add-k, none)");
  }
  if (opt.max_ngram_order < 1 || opt.max_ngram_order > detail::kMaxNgramOrder)
    throw std::invalid_argument(op + "max_ngram_order must be in [1, " +
                                std::to_string(detail::kMaxNgramOrder) + "], got " +
                                std::to_string(opt.max_ngram_order));
  const int N = opt.max_ngram_order;

  auto preprocess = [&](const std::string& text, const std::string& what) {
    std::u32string s = unicode::decode(text, what);
    if (opt.lowercase) s = unicode::lower(s);
    s = std::u32string(unicode::rstrip(s));
    if (opt.tokenize == "13a") return tokenize_13a_u32(std::move(s));
    if (opt.tokenize == "intl") return tokenize_intl_u32(s);
    return s;
  };

  Vocab vocab;
  std::vector<double> correct(N, 0.0), total(N, 0.0);
  std::int64_t sys_len = 0, ref_len = 0;
  for (std::size_t ex = 0; ex < predictions.size(); ++ex) {
    if (references[ex].empty())
      throw std::invalid_argument(op + "example " + std::to_string(ex) + " has no reference");
    detail::SortedCounts ref_max;
    std::vector<std::int64_t> ref_lens;
    for (std::size_t r = 0; r < references[ex].size(); ++r) {
      auto toks = vocab.ids(preprocess(references[ex][r],
                                       "reference " + std::to_string(r) + " of example " +
                                           std::to_string(ex)));
      ref_lens.push_back(static_cast<std::int64_t>(toks.size()));
      auto counts = detail::sorted_ngram_counts(toks, 1, N);
      ref_max = r == 0 ? std::move(counts) : detail::max_merge(ref_max, counts);
    }
    auto hyp = vocab.ids(preprocess(predictions[ex], "prediction " + std::to_string(ex)));
    const auto hyp_len = static_cast<std::int64_t>(hyp.size());
    std::int64_t closest_len = -1, closest_diff = -1;
    for (std::int64_t len : ref_lens) {
      std::int64_t diff = std::llabs(hyp_len - len);
      if (closest_diff == -1 || diff < closest_diff) {
        closest_diff = diff;
        closest_len = len;
      } else if (diff == closest_diff && len < closest_len) {
        closest_len = len;
      }
    }
    sys_len += hyp_len;
    ref_len += closest_len;
    // Merge-join the sorted hypothesis counts with the reference maxima.
    std::size_t j = 0;
    for (const auto& [k, v] : detail::sorted_ngram_counts(hyp, 1, N)) {
      total[k.n - 1] += static_cast<double>(v);
      while (j < ref_max.size() && ref_max[j].first < k) ++j;
      if (j < ref_max.size() && ref_max[j].first == k)
        correct[k.n - 1] += static_cast<double>(std::min(v, ref_max[j].second));
    }
  }

  // sacrebleu BLEU.compute_bleu
  BleuScore out;
  out.sys_len = sys_len;
  out.ref_len = ref_len;
  out.bp = 1.0;
  if (sys_len < ref_len)
    out.bp = sys_len > 0 ? std::exp(1.0 - static_cast<double>(ref_len) / sys_len) : 0.0;
  out.precisions.assign(N, 0.0);
  bool any = std::any_of(correct.begin(), correct.end(), [](double c) { return c != 0.0; });
  if (!any) {
    out.counts = correct;
    out.totals = total;
    out.score = 0.0;
    return out;
  }
  double smooth_mteval = 1.0;
  int eff_order = N;
  for (int n = 1; n <= N; ++n) {
    if (opt.smooth_method == "add-k" && n > 1) {
      correct[n - 1] += smooth_value;
      total[n - 1] += smooth_value;
    }
    if (total[n - 1] == 0) break;
    if (opt.use_effective_order) eff_order = n;
    if (correct[n - 1] == 0) {
      if (opt.smooth_method == "exp") {
        smooth_mteval *= 2;
        out.precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1]);
      } else if (opt.smooth_method == "floor") {
        out.precisions[n - 1] = 100.0 * smooth_value / total[n - 1];
      }
    } else {
      out.precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1];
    }
  }
  double log_sum = 0.0;
  for (int n = 0; n < eff_order; ++n) log_sum += my_log(out.precisions[n]);
  out.score = out.bp * std::exp(log_sum / eff_order);
  out.counts = correct;
  out.totals = total;
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& predictions,
                      const std::vector<std::string>& references, const BleuOptions& options) {
  std::vector<std::vector<std::string>> refs;
  refs.reserve(references.size());
  for (const auto& r : references) refs.push_back({r});
  return corpus_bleu(predictions, refs, options);
}

}  // namespace seqio::metrics
