#include "seqio/preprocessors/pretraining.h"

#include <cmath>
#include <stdexcept>

#include "seqio/preprocessors/random.h"

namespace seqio::preprocessors {
namespace {

const Tokens& tokens_of(const Example& x, const std::string& key, const char* op) {
  auto it = x.find(key);
  if (it == x.end())
    throw std::invalid_argument(std::string("[") + op + "] example has no feature '" + key + "'");
  const auto* t = std::get_if<Tokens>(&it->second);
  if (t == nullptr)
    throw std::invalid_argument(std::string("[") + op + "] feature '" + key +
                                "' is not a token sequence (tokenize first)");
  return *t;
}

void copy_passthrough(const Example& from, Example& to, const std::vector<std::string>& keys,
                      const char* op) {
  for (const auto& k : keys) {
    auto it = from.find(k);
    if (it == from.end())
      throw std::invalid_argument(std::string("[") + op + "] passthrough feature '" + k +
                                  "' missing");
    to[k] = it->second;
  }
}

int64_t length_for(const SequenceLengths& lengths, const std::string& key, const char* op) {
  auto it = lengths.find(key);
  if (it == lengths.end())
    throw std::invalid_argument(std::string("[") + op + "] sequence_length has no '" + key + "'");
  return it->second;
}

}  // namespace

Dataset select_random_chunk(const Dataset& ds, uint64_t seed,
                            const SelectRandomChunkOptions& options) {
  if (options.max_length < 1)
    throw std::invalid_argument("[select_random_chunk] max_length must be >= 1");
  if (options.min_length && (*options.min_length < 1 || *options.min_length >= options.max_length))
    throw std::invalid_argument("[select_random_chunk] need 1 <= min_length < max_length");
  Dataset out;
  out.reserve(ds.size());
  for (size_t i = 0; i < ds.size(); ++i) {
    const Tokens& tokens = tokens_of(ds[i], options.feature_key, "select_random_chunk");
    if (tokens.empty()) continue;
    Rng rng = Rng::for_example(seed, "select_random_chunk", i);
    const auto n = static_cast<int64_t>(tokens.size());
    const int64_t length =
        options.min_length ? rng.uniform_int(*options.min_length, options.max_length)
                           : options.max_length;
    int64_t start = 0, end = 0;
    if (options.uniform_random_start) {
      start = rng.uniform_int(-length + 1, n);
      end = std::min(start + length, n);
      start = std::max<int64_t>(start, 0);
    } else {
      const int64_t num_segments = (n + length - 1) / length;
      start = length * rng.uniform_int(0, num_segments);
      end = std::min(start + length, n);
    }
    Example chunk;
    chunk[options.feature_key] = Tokens(tokens.begin() + start, tokens.begin() + end);
    copy_passthrough(ds[i], chunk, options.passthrough_feature_keys, "select_random_chunk");
    out.push_back(std::move(chunk));
  }
  return out;
}

Dataset reduce_concat_tokens(const Dataset& ds, const std::string& feature_key,
                             int64_t batch_size) {
  if (batch_size < 1) throw std::invalid_argument("[reduce_concat_tokens] batch_size must be >= 1");
  Dataset out;
  for (size_t b = 0; b < ds.size(); b += static_cast<size_t>(batch_size)) {
    Tokens joined;
    const size_t e = std::min(ds.size(), b + static_cast<size_t>(batch_size));
    for (size_t i = b; i < e; ++i)
      for (int32_t t : tokens_of(ds[i], feature_key, "reduce_concat_tokens"))
        if (t != 0) joined.push_back(t);
    Example x;
    x[feature_key] = std::move(joined);
    out.push_back(std::move(x));
  }
  return out;
}

Dataset split_tokens(const Dataset& ds, int64_t max_tokens_per_segment, uint64_t seed,
                     const SplitTokensOptions& options) {
  if (max_tokens_per_segment < 1)
    throw std::invalid_argument("[split_tokens] max_tokens_per_segment must be >= 1");
  if (options.min_tokens_per_segment &&
      (*options.min_tokens_per_segment < 1 ||
       *options.min_tokens_per_segment > max_tokens_per_segment))
    throw std::invalid_argument("[split_tokens] need 1 <= min_tokens_per_segment <= max");
  Dataset out;
  for (size_t i = 0; i < ds.size(); ++i) {
    const Tokens& tokens = tokens_of(ds[i], options.feature_key, "split_tokens");
    if (tokens.empty()) continue;
    int64_t length = max_tokens_per_segment;
    if (options.min_tokens_per_segment) {
      Rng rng = Rng::for_example(seed, "split_tokens", i);
      const float lo = std::log(static_cast<float>(*options.min_tokens_per_segment));
      const float hi = std::log(static_cast<float>(max_tokens_per_segment));
      const float u = static_cast<float>(rng.uniform());
      length = static_cast<int64_t>(std::exp(lo + (hi - lo) * u));
      length = std::max<int64_t>(length, 1);
    }
    for (size_t s = 0; s < tokens.size(); s += static_cast<size_t>(length)) {
      const size_t e = std::min(tokens.size(), s + static_cast<size_t>(length));
      Example seg;
      seg[options.feature_key] = Tokens(tokens.begin() + static_cast<std::ptrdiff_t>(s),
                                        tokens.begin() + static_cast<std::ptrdiff_t>(e));
      copy_passthrough(ds[i], seg, options.passthrough_feature_keys, "split_tokens");
      out.push_back(std::move(seg));
    }
  }
  return out;
}

Dataset split_tokens_to_inputs_length(const Dataset& ds, const SequenceLengths& sequence_lengths,
                                      const OutputFeatures& output_features, uint64_t seed) {
  int64_t max_tokens = length_for(sequence_lengths, "inputs", "split_tokens_to_inputs_length");
  auto f = output_features.find("inputs");
  if (f != output_features.end() && f->second.add_eos) max_tokens -= 1;  // room for EOS
  return split_tokens(ds, max_tokens, seed);
}

Dataset split_tokens_to_targets_length(const Dataset& ds, const SequenceLengths& sequence_lengths,
                                       const OutputFeatures& output_features, uint64_t seed) {
  int64_t max_tokens = length_for(sequence_lengths, "targets", "split_tokens_to_targets_length");
  auto f = output_features.find("targets");
  if (f != output_features.end() && f->second.add_eos) max_tokens -= 1;
  return split_tokens(ds, max_tokens, seed);
}

}  // namespace seqio::preprocessors
