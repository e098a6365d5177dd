#include "seqio/preprocessors/noise.h"

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <cmath>
#include <stdexcept>
#include <string>

namespace seqio::preprocessors {
namespace {

// Python round() and tf.round: half to even. nearbyint honours the current
// rounding mode, which is round-to-nearest-even unless someone changed it.
int64_t round_half_even(double x) { return static_cast<int64_t>(std::nearbyint(x)); }
int64_t round_half_even_f32(float x) { return static_cast<int64_t>(std::nearbyintf(x)); }

void check_sizes(const char* op, const Tokens& tokens, const NoiseMask& mask) {
  if (tokens.size() != mask.size())
    throw std::invalid_argument(std::string("[") + op + "] tokens (" +
                                std::to_string(tokens.size()) + ") and noise mask (" +
                                std::to_string(mask.size()) + ") differ in length");
}

// Uniform random composition of n items into k non-empty parts: choose k-1
// cut points among the n-1 gaps (T5's _random_segmentation shuffles a flag
// vector with k-1 ones; the distribution is the same).
std::vector<int64_t> random_segmentation(int64_t n, int64_t k, Rng rng) {
  std::vector<uint8_t> first_in_segment(static_cast<size_t>(n - 1), 0);
  for (int64_t i = 0; i < k - 1; ++i) first_in_segment[static_cast<size_t>(i)] = 1;
  rng.shuffle(first_in_segment);
  std::vector<int64_t> lengths;
  lengths.reserve(static_cast<size_t>(k));
  int64_t current = 1;
  for (uint8_t f : first_in_segment) {
    if (f) {
      lengths.push_back(current);
      current = 1;
    } else {
      ++current;
    }
  }
  lengths.push_back(current);
  return lengths;
}

}  // namespace

std::pair<int64_t, int64_t> random_spans_helper(int64_t inputs_length, double noise_density,
                                                double mean_noise_span_length,
                                                int64_t extra_tokens_per_span_inputs,
                                                int64_t extra_tokens_per_span_targets) {
  // Written so that nan and infinity fail too.
  if (!(inputs_length >= 1 && noise_density >= 0 && noise_density <= 1 && mean_noise_span_length > 0 &&
        std::isfinite(mean_noise_span_length)))
    throw std::invalid_argument(
        "[random_spans_helper] need inputs_length >= 1, 0 <= noise_density <= 1, "
        "mean_noise_span_length finite and > 0; got " + std::to_string(inputs_length) + ", " +
        std::to_string(noise_density) + ", " + std::to_string(mean_noise_span_length));
  auto lengths = [&](int64_t tokens_length) {
    const int64_t noise = round_half_even(static_cast<double>(tokens_length) * noise_density);
    const int64_t nonnoise = tokens_length - noise;
    const int64_t spans = round_half_even(static_cast<double>(noise) / mean_noise_span_length);
    return std::pair<int64_t, int64_t>{nonnoise + spans * extra_tokens_per_span_inputs + 1,
                                       noise + spans * extra_tokens_per_span_targets + 1};
  };
  int64_t tokens_length = inputs_length - 1;
  // Bounded in case of a degenerate configuration (e.g. density 1 with many
  // extra tokens): inputs(T) then never exceeds the limit.
  const int64_t cap = inputs_length * 1000 + 1000;
  while (lengths(tokens_length + 1).first <= inputs_length) {
    if (++tokens_length > cap)
      throw std::invalid_argument("[random_spans_helper] inputs length never exceeds " +
                                  std::to_string(inputs_length) + "; check noise_density");
  }
  auto [in_len, targets_length] = lengths(tokens_length);
  if (noise_density == 0.5 && targets_length > in_len) {
    tokens_length -= 1;
    targets_length -= 1;
  }
  return {tokens_length, targets_length};
}

SpanCounts random_spans_counts(int64_t length, double noise_density,
                               double mean_noise_span_length) {
  SpanCounts c;
  c.padded_length = std::max<int64_t>(length, 2);
  // T5 multiplies a float32 length by the density (converted to float32).
  const float product = static_cast<float>(c.padded_length) * static_cast<float>(noise_density);
  c.num_noise_tokens =
      std::clamp<int64_t>(round_half_even_f32(product), 1, c.padded_length - 1);
  const float ratio =
      static_cast<float>(c.num_noise_tokens) / static_cast<float>(mean_noise_span_length);
  c.num_noise_spans = std::max<int64_t>(round_half_even_f32(ratio), 1);
  c.num_nonnoise_tokens = c.padded_length - c.num_noise_tokens;
  return c;
}

NoiseMask random_spans_noise_mask(int64_t length, double noise_density, Rng rng,
                                  double mean_noise_span_length, bool random_roll) {
  if (length < 0) throw std::invalid_argument("[random_spans_noise_mask] negative length");
  if (noise_density == 0.0) return NoiseMask(static_cast<size_t>(length), 0);
  const SpanCounts c = random_spans_counts(length, noise_density, mean_noise_span_length);
  if (c.num_nonnoise_tokens < c.num_noise_spans)
    throw std::invalid_argument(
        "[random_spans_noise_mask] " + std::to_string(c.num_nonnoise_tokens) +
        " non-noise tokens cannot separate " + std::to_string(c.num_noise_spans) +
        " noise spans; lower noise_density or raise mean_noise_span_length");
  const auto noise_lengths = random_segmentation(c.num_noise_tokens, c.num_noise_spans, rng.split(0));
  const auto nonnoise_lengths =
      random_segmentation(c.num_nonnoise_tokens, c.num_noise_spans, rng.split(1));
  NoiseMask mask;
  mask.reserve(static_cast<size_t>(c.padded_length));
  for (size_t s = 0; s < noise_lengths.size(); ++s) {
    mask.insert(mask.end(), static_cast<size_t>(nonnoise_lengths[s]), 0);
    mask.insert(mask.end(), static_cast<size_t>(noise_lengths[s]), 1);
  }
  mask.resize(static_cast<size_t>(length));
  if (random_roll && length > 0) {
    Rng roll = rng.split(2);
    const auto offset = static_cast<size_t>(roll.uniform_int(0, c.padded_length)) %
                        static_cast<size_t>(length);
    std::rotate(mask.rbegin(), mask.rbegin() + static_cast<std::ptrdiff_t>(offset), mask.rend());
  }
  return mask;
}

namespace {
std::atomic<bool> gin_random_roll{false};
}  // namespace

void set_random_spans_random_roll(bool random_roll) { gin_random_roll = random_roll; }
bool random_spans_random_roll() { return gin_random_roll; }

NoiseMask iid_noise_mask(int64_t length, double noise_density, Rng rng) {
  NoiseMask mask(static_cast<size_t>(std::max<int64_t>(length, 0)));
  for (auto& m : mask) m = rng.uniform() < noise_density ? 1 : 0;
  return mask;
}

NoiseMask random_prefix_noise_mask(int64_t length, double noise_density, Rng rng) {
  if (noise_density > 0.5)
    throw std::invalid_argument(
        "[random_prefix_noise_mask] noise density must not exceed 0.5 (T5 raises "
        "NotImplementedError)");
  if (length <= 0) return NoiseMask{};
  const int64_t max_input_tokens = length - 1;
  const float scaled = static_cast<float>(1.0 - 2.0 * noise_density) *
                       static_cast<float>(max_input_tokens);
  const int64_t min_input_tokens =
      std::min(max_input_tokens, std::max<int64_t>(1, round_half_even_f32(scaled)));
  const int64_t n = rng.uniform_int(min_input_tokens, max_input_tokens + 1);
  NoiseMask mask(static_cast<size_t>(length), 0);
  for (int64_t i = 0; i < n; ++i) mask[static_cast<size_t>(i)] = 1;
  return mask;
}

Tokens noise_token_to_sentinel(const Tokens& tokens, const NoiseMask& mask, int32_t vocab_size) {
  check_sizes("noise_token_to_sentinel", tokens, mask);
  Tokens out(tokens);
  for (size_t i = 0; i < out.size(); ++i)
    if (mask[i]) out[i] = vocab_size - 1;
  return out;
}

Tokens noise_span_to_sentinel(const Tokens& tokens, const NoiseMask& mask, int32_t vocab_size) {
  check_sizes("noise_span_to_sentinel", tokens, mask);
  Tokens out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool prev = i > 0 && mask[i - 1];
    if (!mask[i]) out.push_back(tokens[i]);
    else if (!prev) out.push_back(vocab_size - 1);
  }
  return out;
}

Tokens nonnoise_span_to_sentinel(const Tokens& tokens, const NoiseMask& mask,
                                 int32_t vocab_size) {
  NoiseMask inv(mask.size());
  for (size_t i = 0; i < mask.size(); ++i) inv[i] = mask[i] ? 0 : 1;
  return noise_span_to_sentinel(tokens, inv, vocab_size);
}

Tokens noise_span_to_unique_sentinel(const Tokens& tokens, const NoiseMask& mask,
                                     int32_t vocab_size) {
  check_sizes("noise_span_to_unique_sentinel", tokens, mask);
  Tokens out;
  out.reserve(tokens.size());
  int32_t span = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool prev = i > 0 && mask[i - 1];
    if (!mask[i]) out.push_back(tokens[i]);
    else if (!prev) out.push_back(vocab_size - ++span);
  }
  return out;
}

Tokens nonnoise_span_to_unique_sentinel(const Tokens& tokens, const NoiseMask& mask,
                                        int32_t vocab_size) {
  NoiseMask inv(mask.size());
  for (size_t i = 0; i < mask.size(); ++i) inv[i] = mask[i] ? 0 : 1;
  return noise_span_to_unique_sentinel(tokens, inv, vocab_size);
}

Tokens drop_noise_tokens(const Tokens& tokens, const NoiseMask& mask, int32_t) {
  check_sizes("drop_noise_tokens", tokens, mask);
  Tokens out;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (!mask[i]) out.push_back(tokens[i]);
  return out;
}

Tokens drop_nonnoise_tokens(const Tokens& tokens, const NoiseMask& mask, int32_t) {
  check_sizes("drop_nonnoise_tokens", tokens, mask);
  Tokens out;
  for (size_t i = 0; i < tokens.size(); ++i)
    if (mask[i]) out.push_back(tokens[i]);
  return out;
}

}  // namespace seqio::preprocessors
