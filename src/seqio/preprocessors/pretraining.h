// Dataset-level pretraining preprocessors from T5 t5/data/preprocessors.py:
// select_random_chunk, reduce_concat_tokens, split_tokens(+_to_inputs_length /
// _to_targets_length).
//
// A "dataset" here is a std::vector<Example> in stream order. Random choices
// use Rng::for_example(seed, <stage name>, index of the input example), so the
// output is a pure function of (seed, input) whatever the thread count.
// Token id 0 is padding (reduce_concat_tokens deletes it).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqio/example.h"
#include "seqio/preprocessors/basic.h"

namespace seqio::preprocessors {

using Dataset = std::vector<Example>;

struct SelectRandomChunkOptions {
  std::string feature_key = "targets";
  int64_t max_length = 65536;
  // When set, the chunk length is uniform in [min_length, max_length).
  std::optional<int64_t> min_length;
  // T5 uniform_random_start: start uniform in [-length+1, n), clipped at 0.
  bool uniform_random_start = false;
  // Copied unchanged (T5 passthrough_feature_keys); every other key is dropped.
  std::vector<std::string> passthrough_feature_keys;
};

// select_random_chunk: drops examples whose feature is empty; otherwise with n
// tokens and chunk length L picks segment s uniform in [0, ceil(n/L)) and keeps
// tokens[s*L, min(s*L+L, n)). Output keys: feature_key + passthrough keys.
Dataset select_random_chunk(const Dataset& ds, uint64_t seed,
                            const SelectRandomChunkOptions& options = {});

// reduce_concat_tokens: keep only feature_key; concatenate each run of
// batch_size consecutive examples into one (no separators), deleting every 0.
Dataset reduce_concat_tokens(const Dataset& ds, const std::string& feature_key = "targets",
                             int64_t batch_size = 128);

struct SplitTokensOptions {
  std::string feature_key = "targets";
  // When set, each input example draws its segment length log-uniformly in
  // [min, max) (float32 exp/log, truncated), as T5 does.
  std::optional<int64_t> min_tokens_per_segment;
  std::vector<std::string> passthrough_feature_keys;
};

// split_tokens: drops empty examples; cuts each into consecutive segments of
// exactly max_tokens_per_segment tokens (the last one shorter). Output keys:
// feature_key + passthrough keys (copied to every segment).
Dataset split_tokens(const Dataset& ds, int64_t max_tokens_per_segment, uint64_t seed = 0,
                     const SplitTokensOptions& options = {});

// split_tokens(max = sequence_lengths["inputs"] - (inputs add_eos ? 1 : 0)),
// splitting feature "targets" (T5 split_tokens_to_inputs_length).
Dataset split_tokens_to_inputs_length(const Dataset& ds, const SequenceLengths& sequence_lengths,
                                      const OutputFeatures& output_features, uint64_t seed = 0);
// Same with the "targets" length (T5 split_tokens_to_targets_length).
Dataset split_tokens_to_targets_length(const Dataset& ds, const SequenceLengths& sequence_lengths,
                                       const OutputFeatures& output_features, uint64_t seed = 0);

}  // namespace seqio::preprocessors
