#include "t5x/models/decoding.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "ops/ops.h"
#include "spmd/reshard.h"

namespace t5x {

namespace {

constexpr double kNegInf = -1.0e7;  // t5x decoding.NEG_INF
constexpr double kMinTemperature = 1e-4;

// log(sum_i exp(x[i])), in float64.
double row_logsumexp(const float* x, int64_t n) {
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, double(x[i]));
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(double(x[i]) - m);
  return m + std::log(s);
}

std::vector<double> log_softmax_row(const float* x, int64_t n) {
  const double lse = row_logsumexp(x, n);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = double(x[i]) - lse;
  return out;
}

// step.gather_rows(rows), unless row r takes row r for every r (one beam, or
// beams that keep their places): then the cache stays as it is, instead of
// being copied whole each step.
void gather_moved_rows(DecodeStepFn& step, const std::vector<int64_t>& rows) {
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r] != int64_t(r)) return step.gather_rows(rows);
}

void check_logits(const Array& logits, int64_t rows) {
  if (!logits.has_dim("batch") || !logits.has_dim("vocab") || logits.rank() != 2 || logits.dim("batch") != rows)
    throw std::invalid_argument("[decoding] step function must return logits [batch=" + std::to_string(rows) +
                                ", vocab], got " + logits.shape().to_string());
}

// Host copy of logits [rows, vocab] in that order.
std::vector<float> host_logits(const Array& logits, int64_t rows, int64_t& vocab) {
  check_logits(logits, rows);
  vocab = logits.dim("vocab");
  return transpose(cast(gather_if_split(logits), DType::f32), {"batch", "vocab"}).to_floats();
}

// Each row's argmax over vocab of logits [batch, vocab] (ops argmax: the
// first maximum, a NaN above all, as jnp.argmax).
std::vector<int64_t> row_argmax(const Array& logits) {
  return gather_if_split(argmax(logits, "vocab")).to_ints();
}

struct Decode {
  double score;
  std::vector<int64_t> seq;
};

DecodeResult pack(const std::vector<std::vector<Decode>>& per_example, int64_t length) {
  int64_t b = int64_t(per_example.size()), n = b ? int64_t(per_example[0].size()) : 0;
  std::vector<int64_t> seqs;
  std::vector<float> scores;
  for (auto ex : per_example) {
    std::stable_sort(ex.begin(), ex.end(), [](const Decode& x, const Decode& y) { return x.score < y.score; });
    for (const auto& d : ex) {
      seqs.insert(seqs.end(), d.seq.begin(), d.seq.end());
      scores.push_back(float(d.score));
    }
  }
  DecodeResult r;
  r.sequences = Array::from_ints(Shape{{"batch", b}, {"decodes", n}, {"length", length}}, seqs);
  r.scores = Array::from_vector(Shape{{"batch", b}, {"decodes", n}}, scores);
  return r;
}

std::vector<int64_t> input_rows(const Array& inputs, int64_t& batch, int64_t& length) {
  if (!inputs.valid() || inputs.rank() != 2 || !inputs.has_dim("batch") || !inputs.has_dim("length"))
    throw std::invalid_argument("[decoding] inputs must be int [batch, length]");
  batch = inputs.dim("batch");
  length = inputs.dim("length");
  return transpose(gather_if_split(inputs), {"batch", "length"}).to_ints();
}

// The k-th largest of m[0, n) (1 <= k <= n).
float kth_largest(const float* m, int64_t n, int64_t k) {
  std::vector<float> s(m, m + n);
  std::nth_element(s.begin(), s.begin() + (k - 1), s.end(), std::greater<float>());
  return s[size_t(k - 1)];
}

// Tempered, top-k / top-p masked logits of a row (m from x, V values).
void mask_row(const SamplingOptions& o, int64_t V, float* m, const float* x) {
  for (int64_t v = 0; v < V; ++v) m[v] = float(double(x[v]) / o.temperature);
  if (o.topk > 0 && o.topk < V) {
    const float kth = kth_largest(m, V, o.topk);
    for (int64_t v = 0; v < V; ++v)
      if (m[v] < kth) m[v] = float(kNegInf);
  } else if (o.topp > 0.0) {
    auto lp = log_softmax_row(m, V);
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lp[size_t(a)] > lp[size_t(b)]; });
    double cum = 0;
    std::vector<char> keep(static_cast<size_t>(V), 0);
    for (int64_t k : order) {
      keep[size_t(k)] = 1;
      cum += std::exp(lp[size_t(k)]);
      if (cum >= o.topp) break;
    }
    for (int64_t v = 0; v < V; ++v)
      if (!keep[size_t(v)]) m[v] = float(kNegInf);
  }
}

// A top-k draw at temperature 1 with rescaled scores from a step's
// candidates (temperature_sample): the sampled tokens, and each row's kept
// entries (index ascending, values) where those stand for the masked row;
// otherwise (kept_at empty) the whole masked rows [R, V], for the draw over
// them.
struct CandidateDraw {
  int64_t vocab = 0;
  std::vector<int64_t> sampled;
  std::vector<std::vector<int64_t>> kept_at;
  std::vector<std::vector<float>> kept;
  std::vector<float> masked;
};

CandidateDraw draw_from_candidates(const DecodeStepFn::Candidates& c, const SamplingOptions& o, int64_t R,
                                   uint32_t it) {
  CandidateDraw d;
  const int64_t V = d.vocab = c.vocab;
  if (V < 1 || int64_t(c.index.size()) != R || int64_t(c.value.size()) != R)
    throw std::invalid_argument("[decoding] step function's top_candidates returned " +
                                std::to_string(c.value.size()) + " rows of vocab " + std::to_string(V) + " for " +
                                std::to_string(R) + " rows");
  // A row's kept entries, when its candidates are a part of the
  // vocabulary: the rest are below its k-th largest (the candidates hold
  // every entry reaching it), so NEG_INF. Drawing and scoring from the kept
  // ones alone is exact when their maximum is far above NEG_INF: a NEG_INF
  // entry's noisy value (the noise is under 17) never wins, and its
  // exp(NEG_INF - max) is 0 in double (below 2^-1074 for a gap over 745).
  d.kept_at.resize(size_t(R));
  d.kept.resize(size_t(R));
  std::vector<float> kth_of(static_cast<size_t>(R));
  bool sparse = true;
  for (int64_t r = 0; r < R; ++r) {
    const std::vector<int32_t>& ix = c.index[size_t(r)];
    const std::vector<float>& x = c.value[size_t(r)];
    if (ix.empty() ? int64_t(x.size()) != V : ix.size() != x.size())
      throw std::invalid_argument("[decoding] step function's top_candidates row " + std::to_string(r) + " has " +
                                  std::to_string(ix.size()) + " indices and " + std::to_string(x.size()) +
                                  " values (vocab " + std::to_string(V) + ")");
    for (size_t i = 0; i < ix.size(); ++i)
      if (ix[i] < 0 || ix[i] >= V || (i > 0 && ix[i] <= ix[i - 1]))
        throw std::invalid_argument("[decoding] step function's top_candidates row " + std::to_string(r) +
                                    " has indices out of order or outside the vocabulary");
    // Every entry (index implied, or listed whole): masked as the logits.
    if (int64_t(x.size()) == V) {
      sparse = false;
      continue;
    }
    if (int64_t(x.size()) < o.topk)
      throw std::invalid_argument("[decoding] step function's top_candidates row " + std::to_string(r) +
                                  " has " + std::to_string(x.size()) + " entries, fewer than topk " +
                                  std::to_string(o.topk));
    const float kth = kth_of[size_t(r)] = kth_largest(x.data(), int64_t(x.size()), o.topk);
    float top = -std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < ix.size(); ++i) {
      sparse = sparse && std::isfinite(x[i]);
      if (x[i] >= kth) {
        d.kept_at[size_t(r)].push_back(ix[i]);
        d.kept[size_t(r)].push_back(x[i]);
        top = std::max(top, x[i]);
      }
    }
    sparse = sparse && double(top) > kNegInf + 1000.0;
  }
  if (sparse) {
    // The categorical's noise at the kept entries of the [R, V] draw.
    std::vector<int64_t> flat;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t v : d.kept_at[size_t(r)]) flat.push_back(r * V + v);
    const std::vector<float> g = categorical_noise_at(fold_in(o.rng, it), R * V, flat);
    d.sampled.assign(size_t(R), 0);
    size_t f = 0;
    for (int64_t r = 0; r < R; ++r) {
      float best = 0;
      for (size_t i = 0; i < d.kept[size_t(r)].size(); ++i, ++f) {
        const float y = g[f] + d.kept[size_t(r)][i];  // f32, as categorical's add
        if (i == 0 || y > best) {
          best = y;
          d.sampled[size_t(r)] = d.kept_at[size_t(r)][i];
        }
      }
    }
  } else {
    // The whole masked rows, for temperature_sample's draw over them.
    d.masked.assign(size_t(R * V), float(kNegInf));
    for (int64_t r = 0; r < R; ++r) {
      float* m = d.masked.data() + r * V;
      const std::vector<float>& x = c.value[size_t(r)];
      if (int64_t(x.size()) == V) {
        mask_row(o, V, m, x.data());
        continue;
      }
      // mask_row's rule on the candidates; the rest are below the k-th.
      const float kth = kth_of[size_t(r)];
      for (size_t i = 0; i < x.size(); ++i) m[c.index[size_t(r)][i]] = x[i] < kth ? float(kNegInf) : x[i];
    }
    d.kept_at.clear();
    d.kept.clear();
  }
  return d;
}

}  // namespace

std::vector<int64_t> DecodeStepFn::greedy_tokens(const Array& decoder_inputs, const std::vector<int64_t>& index) {
  const Array lg = logits(decoder_inputs, index);
  check_logits(lg, decoder_inputs.dim("batch"));
  return row_argmax(lg);
}

DecodeStepFn::Candidates DecodeStepFn::top_candidates(const Array& decoder_inputs, const std::vector<int64_t>& index,
                                                      int64_t keep) {
  if (keep < 1) throw std::invalid_argument("[decoding] top_candidates needs keep >= 1, got " + std::to_string(keep));
  const int64_t rows = decoder_inputs.dim("batch");
  Candidates c;
  const std::vector<float> lg = host_logits(logits(decoder_inputs, index), rows, c.vocab);
  c.index.resize(size_t(rows));
  for (int64_t r = 0; r < rows; ++r) c.value.emplace_back(lg.begin() + r * c.vocab, lg.begin() + (r + 1) * c.vocab);
  return c;
}

Array gather_if_split(const Array& a) { return !a.valid() || a.is_fully_local() ? a : spmd::gather(a); }

double brevity_penalty(double alpha, double length) { return std::pow((5.0 + length) / 6.0, alpha); }

DecodeResult temperature_sample(const Array& inputs, const std::vector<int64_t>& initial_index, DecodeStepFn& step,
                                const SamplingOptions& o) {
  if (o.topk > 0 && o.topp > 0.0)
    throw std::invalid_argument("[temperature_sample] topk and topp are mutually exclusive (got topk=" +
                                std::to_string(o.topk) + ", topp=" + std::to_string(o.topp) + ")");
  if (o.num_decodes < 1) throw std::invalid_argument("[temperature_sample] num_decodes must be >= 1");
  int64_t B, L;
  auto in = input_rows(inputs, B, L);
  int64_t N = o.num_decodes, R = B * N;
  if (!initial_index.empty() && int64_t(initial_index.size()) != B)
    throw std::invalid_argument("[temperature_sample] initial_index needs one entry per example");
  if (N > 1) {
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < R; ++r) rows.push_back(r / N);
    step.gather_rows(rows);
  }
  // end[r]: row r decodes positions below it. max_decode_steps counts after
  // the prompt, as t5x's max_decode_len = sum(inputs != 0) + max_decode_steps.
  std::vector<int64_t> out(size_t(R * L), 0), dec(size_t(R * L), 0), pos(static_cast<size_t>(R)),
      end(static_cast<size_t>(R), L);
  for (int64_t r = 0; r < R; ++r) {
    int64_t b = r / N, prompt = 0;
    for (int64_t j = 0; j < L; ++j) {
      int64_t t = in[size_t(b * L + j)];
      if (t != 0) {
        ++prompt;
        out[size_t(r * L + j)] = t;
        if (j + 1 < L) dec[size_t(r * L + j + 1)] = t;
      }
    }
    pos[size_t(r)] = initial_index.empty() ? 0 : initial_index[size_t(b)];
    if (o.max_decode_steps >= 0) end[size_t(r)] = std::min(L, prompt + o.max_decode_steps);
  }
  std::vector<char> finished(static_cast<size_t>(R), 0);
  std::vector<double> score(static_cast<size_t>(R), 0.0);
  auto active = [&](int64_t r) {
    int64_t p = pos[size_t(r)];
    return !finished[size_t(r)] && p < end[size_t(r)];
  };
  const bool greedy = o.temperature <= kMinTemperature;
  for (uint32_t it = 0;; ++it) {
    bool any = false;
    for (int64_t r = 0; r < R; ++r) any = any || active(r);
    if (!any) break;
    std::vector<int64_t> idx(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) idx[size_t(r)] = std::min(pos[size_t(r)], L - 1);
    const Array dec_inputs = Array::from_ints(Shape{{"batch", R}, {"length", L}}, dec);
    // Greedy under rescale_log_probs scores 0 (the argmax has probability 1),
    // as t5x's sample_logits_with_zero_temperature: only the argmax is needed.
    const bool argmax_only = greedy && o.rescale_log_probs;
    // Top-k at temperature 1 with rescaled scores: only each row's entries at
    // or above its k-th largest logit are drawn or scored (the rest are
    // NEG_INF), so the step's candidates are enough.
    const bool topk_only = !greedy && o.temperature == 1.0 && o.topk > 0 && o.rescale_log_probs;
    std::vector<int64_t> sampled;
    std::vector<float> lg, masked;
    // Rows drawn from their candidates alone: the kept entries (index
    // ascending) and their values.
    std::vector<std::vector<int64_t>> kept_at;
    std::vector<std::vector<float>> kept;
    int64_t V = 0;
    if (argmax_only) {
      sampled = step.greedy_tokens(dec_inputs, idx);
      if (int64_t(sampled.size()) != R)
        throw std::invalid_argument("[decoding] step function's greedy_tokens returned " +
                                    std::to_string(sampled.size()) + " tokens for " + std::to_string(R) + " rows");
    } else if (topk_only) {
      CandidateDraw d = draw_from_candidates(step.top_candidates(dec_inputs, idx, o.topk), o, R, it);
      V = d.vocab;
      sampled = std::move(d.sampled);
      kept_at = std::move(d.kept_at);
      kept = std::move(d.kept);
      masked = std::move(d.masked);
    } else {
      const Array logits = step.logits(dec_inputs, idx);
      lg = host_logits(logits, R, V);
      masked.resize(lg.size());
      if (greedy) {
        sampled = row_argmax(logits);
      } else {
        for (int64_t r = 0; r < R; ++r) mask_row(o, V, masked.data() + r * V, lg.data() + r * V);
      }
    }
    if (sampled.empty())
      sampled = categorical(fold_in(o.rng, it), Array::from_vector(Shape{{"batch", R}, {"vocab", V}}, masked), "vocab")
                    .to_ints();
    // The sampled token's log-probability under the scored distribution.
    auto log_prob = [&](int64_t r, int64_t tok) {
      if (!kept_at.empty()) {  // the kept entries; the rest add exact zeros
        const std::vector<int64_t>& at = kept_at[size_t(r)];
        const std::vector<float>& x = kept[size_t(r)];
        const size_t i = size_t(std::lower_bound(at.begin(), at.end(), tok) - at.begin());
        return double(x[i]) - row_logsumexp(x.data(), int64_t(x.size()));
      }
      const float* x = (o.rescale_log_probs ? masked.data() : lg.data()) + r * V;
      return double(x[tok]) - row_logsumexp(x, V);
    };
    for (int64_t r = 0; r < R; ++r) {
      if (!active(r)) {
        ++pos[size_t(r)];
        continue;
      }
      int64_t j = pos[size_t(r)], b = r / N;
      int64_t forced = in[size_t(b * L + j)];
      int64_t tok = forced != 0 ? forced : sampled[size_t(r)];
      if (forced == 0) {
        if (!argmax_only) score[size_t(r)] += log_prob(r, tok);  // the token's log_softmax
        if (tok == o.eos_id) finished[size_t(r)] = 1;
      }
      out[size_t(r * L + j)] = tok;
      if (j + 1 < L) dec[size_t(r * L + j + 1)] = tok;
      ++pos[size_t(r)];
    }
  }
  std::vector<std::vector<Decode>> ex(static_cast<size_t>(B));
  for (int64_t r = 0; r < R; ++r)
    ex[size_t(r / N)].push_back({score[size_t(r)], std::vector<int64_t>(out.begin() + r * L, out.begin() + (r + 1) * L)});
  return pack(ex, L);
}

DecodeResult beam_search(const Array& inputs, DecodeStepFn& step, const BeamSearchOptions& o) {
  int64_t B, L;
  auto in = input_rows(inputs, B, L);
  for (int64_t t : in)
    if (t != 0) throw std::invalid_argument("[beam_search] prompts are not supported: inputs must be all zeros");
  const int64_t K = o.num_decodes, R = B * K;
  if (K < 1) throw std::invalid_argument("[beam_search] num_decodes must be >= 1");
  {
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < R; ++r) rows.push_back(r / K);
    gather_moved_rows(step, rows);
  }
  std::vector<int64_t> seq(size_t(R * L), 0), dec(size_t(R * L), 0);
  std::vector<double> live(static_cast<size_t>(R), kNegInf);
  for (int64_t b = 0; b < B; ++b) live[size_t(b * K)] = 0.0;
  std::vector<std::vector<Decode>> fin(static_cast<size_t>(B));
  const double min_bp = brevity_penalty(o.alpha, double(L));
  for (int64_t i = 0; i < L; ++i) {
    int64_t V = 0;
    auto lg = host_logits(
        step.logits(Array::from_ints(Shape{{"batch", R}, {"length", L}}, dec), std::vector<int64_t>(size_t(R), i)), R,
        V);
    std::vector<int64_t> parents(static_cast<size_t>(R));
    std::vector<double> new_live(static_cast<size_t>(R));
    std::vector<int64_t> new_tok(static_cast<size_t>(R));
    for (int64_t b = 0; b < B; ++b) {
      struct Cand {
        double lp;
        int64_t k, v;
      };
      // Candidates in t5x's order: score, then beam and token.
      const auto before = [](const Cand& x, const Cand& y) {
        return x.lp > y.lp || (x.lp == y.lp && (x.k * 1000003 + x.v) < (y.k * 1000003 + y.v));
      };
      // The best 2K of all K x V candidates are among the best 2K of each
      // beam's V: keep those per beam (a short sorted list, one pass over the
      // row) instead of sorting K x V.
      const int64_t top = std::min<int64_t>(2 * K, K * V);
      std::vector<Cand> cands;
      cands.reserve(size_t(K * (top + 1)));
      for (int64_t k = 0; k < K; ++k) {
        const float* x = lg.data() + (b * K + k) * V;
        const double lse = row_logsumexp(x, V), base = live[size_t(b * K + k)];
        const auto row = cands.end() - cands.begin();
        for (int64_t v = 0; v < V; ++v) {
          const Cand c{base + (double(x[v]) - lse), k, v};
          const auto kept = int64_t(cands.size()) - row;
          if (kept == top && !before(c, cands.back())) continue;
          cands.insert(std::upper_bound(cands.begin() + row, cands.end(), c, before), c);
          if (kept == top) cands.pop_back();
        }
      }
      std::partial_sort(cands.begin(), cands.begin() + top, cands.end(), before);
      cands.resize(size_t(top));
      std::vector<Cand> live_c;
      for (const auto& c : cands) {
        if (c.v == o.eos_id) {
          Decode d{c.lp / brevity_penalty(o.alpha, double(i + 1)),
                   std::vector<int64_t>(seq.begin() + (b * K + c.k) * L, seq.begin() + (b * K + c.k + 1) * L)};
          d.seq[size_t(i)] = c.v;
          fin[size_t(b)].push_back(std::move(d));
        } else {
          live_c.push_back(c);
        }
      }
      auto& f = fin[size_t(b)];
      std::stable_sort(f.begin(), f.end(), [](const Decode& x, const Decode& y) { return x.score > y.score; });
      if (int64_t(f.size()) > K) f.resize(size_t(K));
      for (int64_t k = 0; k < K; ++k) {
        const Cand& c = live_c[size_t(k)];
        parents[size_t(b * K + k)] = b * K + c.k;
        new_live[size_t(b * K + k)] = c.lp;
        new_tok[size_t(b * K + k)] = c.v;
      }
    }
    gather_moved_rows(step, parents);
    std::vector<int64_t> nseq(seq.size()), ndec(dec.size());
    for (int64_t r = 0; r < R; ++r) {
      int64_t p = parents[size_t(r)];
      std::copy(seq.begin() + p * L, seq.begin() + (p + 1) * L, nseq.begin() + r * L);
      std::copy(dec.begin() + p * L, dec.begin() + (p + 1) * L, ndec.begin() + r * L);
      nseq[size_t(r * L + i)] = new_tok[size_t(r)];
      if (i + 1 < L) ndec[size_t(r * L + i + 1)] = new_tok[size_t(r)];
    }
    seq.swap(nseq);
    dec.swap(ndec);
    live = new_live;
    // t5x beam_search_loop_cond_fn: stop when, for every example, the worst
    // finished score beats the best any live beam could still reach.
    bool terminated = true;
    for (int64_t b = 0; b < B && terminated; ++b) {
      double best_live = *std::max_element(live.begin() + b * K, live.begin() + (b + 1) * K) / min_bp;
      double worst_fin = int64_t(fin[size_t(b)].size()) == K ? fin[size_t(b)].back().score : kNegInf;
      terminated = worst_fin > best_live;
    }
    if (terminated) break;
  }
  std::vector<std::vector<Decode>> ex(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    if (fin[size_t(b)].empty()) {
      for (int64_t k = 0; k < K; ++k)
        ex[size_t(b)].push_back({live[size_t(b * K + k)],
                                 std::vector<int64_t>(seq.begin() + (b * K + k) * L, seq.begin() + (b * K + k + 1) * L)});
    } else {
      ex[size_t(b)] = fin[size_t(b)];
      while (int64_t(ex[size_t(b)].size()) < K) ex[size_t(b)].push_back({kNegInf, std::vector<int64_t>(size_t(L), 0)});
    }
  }
  return pack(ex, L);
}

}  // namespace t5x
