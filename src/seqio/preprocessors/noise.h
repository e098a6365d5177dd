// T5 denoising building blocks: the span-length arithmetic, noise masks and the
// token functions that turn (tokens, mask) into inputs / targets.
//
// Source: T5 t5/data/preprocessors.py (random_spans_helper,
// random_spans_noise_mask, iid_noise_mask, random_prefix_noise_mask,
// noise_span_to_unique_sentinel, ...). Counts and lengths are reproduced
// exactly, including float32 products and half-to-even rounding. Which
// positions are noise is random; T5 uses TF's stateless Philox, we use the
// counter-based Rng of random.h, so masks match T5's in distribution and in
// every count, not bit for bit.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "seqio/example.h"
#include "seqio/preprocessors/random.h"

namespace seqio::preprocessors {

// One flag per token; 1 = noise.
using NoiseMask = std::vector<uint8_t>;

// random_spans_helper(inputs_length, noise_density, mean_noise_span_length,
// extra_tokens_per_span_inputs, extra_tokens_per_span_targets):
// the raw token count T whose span-corrupted inputs (plus one EOS) fit
// inputs_length, and the targets length (with EOS) that T produces.
// For raw length T: noise = round(T*d), spans = round(noise/mean) (float64,
// half-to-even); inputs(T) = T-noise + spans*e_in + 1, targets(T) = noise +
// spans*e_tg + 1. T starts at inputs_length-1 and grows while inputs(T+1) fits.
// If d == 0.5 and targets > inputs, both are decremented.
// Example: (512, 0.15, 3.0, 1, 1) -> {568, 114}.
// Returns {tokens_length, targets_length}.
std::pair<int64_t, int64_t> random_spans_helper(int64_t inputs_length, double noise_density,
                                                double mean_noise_span_length,
                                                int64_t extra_tokens_per_span_inputs = 1,
                                                int64_t extra_tokens_per_span_targets = 1);

// The counts random_spans_noise_mask uses for a sequence of `length` tokens:
// L' = max(length, 2); noise = clamp(round_f32(L'*d), 1, L'-1);
// spans = max(1, round_f32(noise/mean)). (Before truncation to `length`.)
struct SpanCounts {
  int64_t padded_length = 0;
  int64_t num_noise_tokens = 0;
  int64_t num_noise_spans = 0;
  int64_t num_nonnoise_tokens = 0;
};
SpanCounts random_spans_counts(int64_t length, double noise_density,
                               double mean_noise_span_length = 3.0);

// random_spans_noise_mask: spans alternate [nonnoise_1, noise_1, ..., nonnoise_k,
// noise_k] (always starting with non-noise, ending with noise); span lengths
// are uniform random compositions of the noise and non-noise counts into k
// positive parts. The mask is then truncated to `length`. noise_density == 0
// gives all zeros. random_roll rotates the (length L') mask by a uniform
// offset in [0, L') before truncation (T5's fix for issue #905).
// Throws std::invalid_argument if the non-noise tokens cannot fill the spans
// (noise_density too high for mean_noise_span_length).
NoiseMask random_spans_noise_mask(int64_t length, double noise_density, Rng rng,
                                  double mean_noise_span_length = 3.0, bool random_roll = false);

// gin `random_spans_noise_mask.random_roll` (t5.data.preprocessors; default
// False, as there): the roll span_corruption uses when its options leave
// random_roll unset. t5x sets it from its gin config when it reads a
// DatasetConfig (trainer/run_config.h). Process-wide, like a gin binding.
void set_random_spans_random_roll(bool random_roll);
bool random_spans_random_roll();

// iid_noise_mask: each token is noise iff a uniform draw in [0,1) < noise_density.
NoiseMask iid_noise_mask(int64_t length, double noise_density, Rng rng);

// random_prefix_noise_mask: the first n tokens are noise, n uniform in
// [min(len-1, max(1, round_f32((1-2d)*(len-1)))), len-1]. Used by prefix_lm,
// where the noise (prefix) becomes inputs. Throws if noise_density > 0.5
// (T5 raises NotImplementedError).
NoiseMask random_prefix_noise_mask(int64_t length, double noise_density, Rng rng);

// Token functions (tokens, mask, vocab_size) -> new tokens. Sentinel ids are
// vocab_size-1 (<extra_id_0>), vocab_size-2 (<extra_id_1>), ...
// Throw std::invalid_argument if mask and tokens differ in length.
Tokens noise_token_to_sentinel(const Tokens& tokens, const NoiseMask& mask, int32_t vocab_size);
Tokens noise_span_to_sentinel(const Tokens& tokens, const NoiseMask& mask, int32_t vocab_size);
Tokens nonnoise_span_to_sentinel(const Tokens& tokens, const NoiseMask& mask, int32_t vocab_size);
// j-th noise span (1-based) -> vocab_size - j; its other tokens are dropped.
Tokens noise_span_to_unique_sentinel(const Tokens& tokens, const NoiseMask& mask,
                                     int32_t vocab_size);
Tokens nonnoise_span_to_unique_sentinel(const Tokens& tokens, const NoiseMask& mask,
                                        int32_t vocab_size);
Tokens drop_noise_tokens(const Tokens& tokens, const NoiseMask& mask, int32_t vocab_size = 0);
Tokens drop_nonnoise_tokens(const Tokens& tokens, const NoiseMask& mask, int32_t vocab_size = 0);

using NoiseMaskFn = std::function<NoiseMask(int64_t length, double noise_density, Rng rng)>;
using NoiseTokensFn =
    std::function<Tokens(const Tokens& tokens, const NoiseMask& mask, int32_t vocab_size)>;

}  // namespace seqio::preprocessors
