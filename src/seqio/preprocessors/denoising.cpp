#include "seqio/preprocessors/denoising.h"

#include <stdexcept>

#include "seqio/warnings.h"

namespace seqio::preprocessors {

Example denoise_example(const Example& x, int32_t vocab_size, Rng rng,
                        const DenoiseOptions& options) {
  if (!options.noise_mask_fn || !options.inputs_fn)
    throw std::invalid_argument("[denoise] noise_mask_fn and inputs_fn are required");
  const Tokens& tokens = get_tokens(x, "targets");
  const NoiseMask mask = options.noise_mask_fn(static_cast<int64_t>(tokens.size()),
                                               options.noise_density, rng.split(0));
  Example y;
  y[options.input_feature_key] = options.inputs_fn(tokens, mask, vocab_size);
  y["targets"] = options.targets_fn ? options.targets_fn(tokens, mask, vocab_size) : tokens;
  for (const auto& k : options.passthrough_feature_keys) {
    auto it = x.find(k);
    if (it == x.end())
      throw std::invalid_argument("[denoise] passthrough feature '" + k + "' missing");
    y[k] = it->second;
  }
  return y;
}

int32_t denoise_vocab_size(const OutputFeatures& output_features,
                           const std::string& input_feature_key) {
  auto t = output_features.find("targets");
  if (t == output_features.end() || !t->second.vocabulary)
    throw std::invalid_argument("[denoise] output feature 'targets' with a vocabulary is required");
  auto in = output_features.find(input_feature_key);
  if (in != output_features.end() &&
      (!in->second.vocabulary || !(*in->second.vocabulary == *t->second.vocabulary)))
    throw std::invalid_argument("[denoise] vocabularies of '" + input_feature_key +
                                "' and 'targets' must be equal");
  return t->second.vocabulary->vocab_size();
}

Dataset denoise(const Dataset& ds, const OutputFeatures& output_features, uint64_t seed,
                const DenoiseOptions& options) {
  const int32_t vocab_size = denoise_vocab_size(output_features, options.input_feature_key);
  Dataset out;
  out.reserve(ds.size());
  for (size_t i = 0; i < ds.size(); ++i)
    out.push_back(denoise_example(ds[i], vocab_size, Rng::for_example(seed, "denoise", i), options));
  return out;
}

std::optional<std::string> span_corruption_degenerate(int64_t inputs_length, int64_t targets_length,
                                                      const SpanCorruptionOptions& options, bool random_roll) {
  if (options.noise_density == 0) return std::nullopt;  // no noise at all: nothing to cut or place
  const auto [tokens_length, helper_targets] =
      random_spans_helper(inputs_length, options.noise_density, options.mean_noise_span_length);
  (void)helper_targets;
  const SpanCounts c = random_spans_counts(tokens_length, options.noise_density, options.mean_noise_span_length);
  const int64_t inputs = c.num_nonnoise_tokens + c.num_noise_spans + 1;
  const int64_t targets = c.num_noise_tokens + c.num_noise_spans + 1;
  const std::string where = "span_corruption with inputs length " + std::to_string(inputs_length) +
                            " (chunks of " + std::to_string(tokens_length) + " tokens, " +
                            std::to_string(c.num_noise_spans) + " noise span(s))";
  std::string why;
  if (inputs > inputs_length)
    why += "; the inputs of a full chunk have " + std::to_string(inputs) + " tokens with EOS, and trimming to " +
           std::to_string(inputs_length) + " cuts their end" +
           (random_roll ? "" : ", the sentinel of the last noise span: targets then name a sentinel the inputs lack");
  if (targets > targets_length)
    why += "; the targets of a full chunk have " + std::to_string(targets) + " tokens with EOS, over the targets length " +
           std::to_string(targets_length) + ", and are cut";
  if (c.num_noise_spans == 1 && !random_roll)
    why += "; the single noise span always ends the chunk (T5 issue 905): bind "
           "random_spans_noise_mask.random_roll = True to place it anywhere";
  if (why.empty()) return std::nullopt;
  return where + why + "\n  hint: use longer inputs (TASK_FEATURE_LENGTHS) for span corruption";
}

Dataset span_corruption(const Dataset& ds, const SequenceLengths& sequence_lengths,
                        const OutputFeatures& output_features, uint64_t seed,
                        const SpanCorruptionOptions& options) {
  auto in_len = sequence_lengths.find(options.input_feature_key);
  auto tg_len = sequence_lengths.find("targets");
  if (in_len == sequence_lengths.end() || tg_len == sequence_lengths.end())
    throw std::invalid_argument("[span_corruption] sequence_length needs '" +
                                options.input_feature_key + "' and 'targets'");
  const int64_t inputs_length = in_len->second - options.reserved_for_packing;
  const auto [tokens_length, targets_length] =
      random_spans_helper(inputs_length, options.noise_density, options.mean_noise_span_length);
  if (tg_len->second < targets_length)
    throw std::invalid_argument("[span_corruption] expected targets length for span corruption (" +
                                std::to_string(targets_length) +
                                ") is greater than the configured targets length (" +
                                std::to_string(tg_len->second) + ")");
  if (options.merge_examples_to_reduce_padding && !options.passthrough_feature_keys.empty())
    throw std::invalid_argument(
        "[span_corruption] passthrough keys cannot be used with "
        "merge_examples_to_reduce_padding=true");
  SelectRandomChunkOptions chunk;
  chunk.passthrough_feature_keys = options.passthrough_feature_keys;
  Dataset x = select_random_chunk(ds, seed, chunk);
  if (options.merge_examples_to_reduce_padding) x = reduce_concat_tokens(x, "targets", 128);
  SplitTokensOptions split;
  split.passthrough_feature_keys = options.passthrough_feature_keys;
  x = split_tokens(x, tokens_length, seed, split);
  const bool roll = options.random_roll.value_or(random_spans_random_roll());
  if (auto why = span_corruption_degenerate(inputs_length, tg_len->second, options, roll)) warn_once(*why);
  DenoiseOptions d;
  d.noise_density = options.noise_density;
  const double mean = options.mean_noise_span_length;
  d.noise_mask_fn = [mean, roll](int64_t n, double density, Rng rng) {
    return random_spans_noise_mask(n, density, rng, mean, roll);
  };
  d.inputs_fn = noise_span_to_unique_sentinel;
  d.targets_fn = nonnoise_span_to_unique_sentinel;
  d.input_feature_key = options.input_feature_key;
  d.passthrough_feature_keys = options.passthrough_feature_keys;
  return denoise(x, output_features, seed, d);
}

Dataset iid_denoising(const Dataset& ds, const SequenceLengths& sequence_lengths,
                      const OutputFeatures& output_features, uint64_t seed) {
  Dataset x = select_random_chunk(ds, seed);
  x = reduce_concat_tokens(x, "targets", 128);
  x = split_tokens_to_inputs_length(x, sequence_lengths, output_features, seed);
  DenoiseOptions d;
  d.noise_density = 0.15;
  d.noise_mask_fn = iid_noise_mask;
  d.inputs_fn = noise_span_to_unique_sentinel;
  d.targets_fn = nonnoise_span_to_unique_sentinel;
  return denoise(x, output_features, seed, d);
}

Dataset prefix_lm(const Dataset& ds, const SequenceLengths& sequence_lengths,
                  const OutputFeatures& output_features, uint64_t seed, double noise_density) {
  if (noise_density > 0.5)
    throw std::invalid_argument("[prefix_lm] noise density must not exceed 0.5");
  Dataset x = select_random_chunk(ds, seed);
  x = split_tokens_to_inputs_length(x, sequence_lengths, output_features, seed);
  DenoiseOptions d;
  d.noise_density = noise_density;
  d.noise_mask_fn = random_prefix_noise_mask;
  d.inputs_fn = drop_nonnoise_tokens;
  d.targets_fn = drop_noise_tokens;
  return denoise(x, output_features, seed, d);
}

}  // namespace seqio::preprocessors
