// Trimming, padding, packing and the autoregressive shift used by the feature
// converters (seqio/utils.py: trim_and_pad_dataset, trim_and_pack_dataset,
// make_autoregressive_inputs).
//
// A dataset is a std::vector<seqio::Example> in stream order. Only rank-1
// int32 features (Tokens) are packed or padded. Token id 0 is padding.
#pragma once
#include <cstdint>
#include <vector>

#include "seqio/example.h"
#include "seqio/feature.h"

namespace seqio::utils {

// trim_and_pad_dataset: every Tokens feature named in feature_lengths is cut to
// its length L and right-padded with 0 to exactly L ([length] = L). Other
// features are unchanged. Throws std::invalid_argument if a named feature
// holds text or a scalar.
std::vector<Example> trim_and_pad_dataset(const std::vector<Example>& ds,
                                          const SequenceLengths& feature_lengths);

// The number of consecutive examples packing looks at together:
// max(feature_lengths) (seqio padded_batches by this before packing).
int64_t packing_window(const SequenceLengths& feature_lengths);

// trim_and_pack_dataset with seqio's default (TF ops) algorithm:
//  - every key of feature_lengths must be a Tokens feature of every example
//    (else std::invalid_argument); other keys are dropped;
//  - examples are taken in windows of packing_window() consecutive examples;
//    packing never crosses a window boundary and keeps order;
//  - inside a window, next-fit with one open row: each feature's sequence is
//    trimmed to its length and then to its first count_nonzero() tokens (a 0
//    inside a sequence cuts its tail); if for ANY feature the row would
//    overflow, the row is emitted and a new one opened; the row is emitted at
//    the window's end;
//  - each row, per feature k, is right-padded with 0 to feature_lengths[k] and
//    gets k_positions (0.. within each segment, 0 on padding) and
//    k_segment_ids = cumsum(position == 0) * (token != 0): 1, 2, ... per row,
//    0 on padding.
// Outputs are in [length] = feature_lengths[k] for k, k_positions and
// k_segment_ids.
std::vector<Example> trim_and_pack_dataset(const std::vector<Example>& ds,
                                           const SequenceLengths& feature_lengths);

// make_autoregressive_inputs: shift right by one, position 0 = bos_id.
// With sequence_id (packed; same length as targets), every position whose
// segment id differs from the previous one also gets bos_id. This includes
// the first padding position after the last segment (segment 0 differs), but
// not later padding. Unpacked, the last token (EOS) is shifted out and the
// final position keeps the token before it.
// Throws std::invalid_argument if sequence_id's length differs.
Tokens make_autoregressive_inputs(const Tokens& targets, const Tokens* sequence_id = nullptr,
                                  int32_t bos_id = 0);

}  // namespace seqio::utils
