// T5 unsupervised objectives (t5/data/preprocessors.py): denoise,
// span_corruption, iid_denoising, prefix_lm.
//
// Input examples hold tokenized "targets" (T5's c4 tasks rekey text to
// "targets" and tokenize before these run). None of these add EOS: T5 tasks
// follow them with append_eos_after_trim.
//
// Randomness: per input example of the denoise step, Rng::for_example(seed,
// "denoise", index) is split into a mask stream (0) and inputs/targets
// streams (1, 2), mirroring T5's six per-example seeds ([0:2] mask, [2:4]
// inputs_fn, [4:6] targets_fn). Chunk selection and splitting use their own
// stages (see pretraining.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqio/preprocessors/basic.h"
#include "seqio/preprocessors/noise.h"
#include "seqio/preprocessors/pretraining.h"

namespace seqio::preprocessors {

struct DenoiseOptions {
  double noise_density = 0.15;
  NoiseMaskFn noise_mask_fn;   // required
  NoiseTokensFn inputs_fn;     // required
  NoiseTokensFn targets_fn;    // empty: targets = the original tokens
  std::string input_feature_key = "inputs";
  std::vector<std::string> passthrough_feature_keys;
};

// One example: tokens = x["targets"], mask = noise_mask_fn(|tokens|, density,
// rng.split(0)), output {input_feature_key: inputs_fn(tokens, mask),
// "targets": targets_fn(tokens, mask) or tokens} plus passthrough keys.
// vocab_size positions the sentinels (vocab_size-1 = <extra_id_0>).
Example denoise_example(const Example& x, int32_t vocab_size, Rng rng,
                        const DenoiseOptions& options);

// The vocabulary size denoise uses: output_features["targets"]'s. Throws
// std::invalid_argument if targets has no vocabulary or if input_feature_key
// is an output feature with a different vocabulary (T5 raises ValueError).
int32_t denoise_vocab_size(const OutputFeatures& output_features,
                           const std::string& input_feature_key = "inputs");

// denoise over a dataset; example i uses Rng::for_example(seed, "denoise", i).
Dataset denoise(const Dataset& ds, const OutputFeatures& output_features, uint64_t seed,
                const DenoiseOptions& options);

struct SpanCorruptionOptions {
  double mean_noise_span_length = 3.0;
  double noise_density = 0.15;
  std::string input_feature_key = "inputs";
  bool merge_examples_to_reduce_padding = true;
  int64_t reserved_for_packing = 0;
  std::vector<std::string> passthrough_feature_keys;
  // random_spans_noise_mask's random_roll; nullopt: the gin binding
  // (random_spans_random_roll(), default False as in T5).
  std::optional<bool> random_roll;
};

// Why span corruption degenerates at these lengths, or nullopt. With
// (T, targets) = random_spans_helper(inputs_length, ...), a full chunk of T
// tokens gets counts = random_spans_counts(T) (at least one noise span, where
// the helper may count none), so:
//  - inputs of nonnoise + spans + EOS tokens over inputs_length (T5 at
//    inputs_length <= 9 with the defaults): append_eos_after_trim cuts their
//    end, which without random_roll is the sentinel of the last noise span;
//  - targets of noise + spans + EOS over targets_length: cut likewise;
//  - a single noise span without random_roll: the mask always ends with
//    noise, so the noise always sits at the chunk's tail (t5#905; inputs
//    up to about 28 tokens with the defaults).
// span_corruption passes this to seqio::warn_once.
std::optional<std::string> span_corruption_degenerate(int64_t inputs_length, int64_t targets_length,
                                                      const SpanCorruptionOptions& options, bool random_roll);

// span_corruption (T5 defaults: density 0.15, mean span 3):
//  1. (T, targets_len) = random_spans_helper(lengths[input_feature_key] -
//     reserved_for_packing, density, mean, 1, 1); throws std::invalid_argument
//     if lengths["targets"] < targets_len;
//  2. select_random_chunk(max_length 65536);
//  3. reduce_concat_tokens(batch 128) if merging (merging + passthrough keys
//     -> std::invalid_argument);
//  4. split_tokens(T);
//  5. denoise(random_spans_noise_mask(mean, random_roll),
//     noise_span_to_unique_sentinel, nonnoise_span_to_unique_sentinel).
// Degenerate lengths (span_corruption_degenerate) are warned about once.
// For a full chunk of T tokens the outputs are inputs_len-1 and targets_len-1
// tokens long, so append_eos_after_trim completes them exactly.
Dataset span_corruption(const Dataset& ds, const SequenceLengths& sequence_lengths,
                        const OutputFeatures& output_features, uint64_t seed,
                        const SpanCorruptionOptions& options = {});

// iid_denoising: select_random_chunk -> reduce_concat_tokens ->
// split_tokens_to_inputs_length -> denoise(iid_noise_mask, density 0.15,
// unique-sentinel inputs/targets).
Dataset iid_denoising(const Dataset& ds, const SequenceLengths& sequence_lengths,
                      const OutputFeatures& output_features, uint64_t seed);

// prefix_lm: select_random_chunk -> split_tokens_to_inputs_length ->
// denoise(random_prefix_noise_mask, inputs = drop_nonnoise_tokens (the prefix),
// targets = drop_noise_tokens (the rest)). noise_density > 0.5 throws.
Dataset prefix_lm(const Dataset& ds, const SequenceLengths& sequence_lengths,
                  const OutputFeatures& output_features, uint64_t seed,
                  double noise_density = 0.5);

}  // namespace seqio::preprocessors
