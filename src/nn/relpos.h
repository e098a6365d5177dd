// T5 relative position bias (Raffel et al. 2020, section 2.1; t5x
// examples/t5/layers.py RelativePositionBiases; identical to transformers'
// T5Attention._relative_position_bucket).
//
// relative_position = key position - query position. bidirectional: half the
// buckets per sign, positive offsets shifted by num_buckets/2; unidirectional
// (decoder): future offsets clipped to 0. Within a half, n = |offset| below
// max_exact = half/2 gets its own bucket, larger n get
//   max_exact + floor(log(n / max_exact + eps_f32) / log(max_distance / max_exact) * (half - max_exact))
// capped at half - 1 (computed in float32 like t5x).
//
// The table [heads, relpos_buckets] is ONE per stack, shared by its layers.
// Positions are aranges: the bias depends only on key - query, so within a
// packed segment it equals the bias computed from segment positions (and
// other segments are masked out).
#pragma once
#include <cstdint>

#include "core/array.h"

namespace t5x::nn {

struct RelposConfig {
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
};

int32_t relative_position_bucket(int64_t relative_position, bool bidirectional, const RelposConfig& cfg = {});

// int32 [length=q_len, kv_length=k_len]: bucket of (k - (q + q_offset)).
Array relative_position_buckets(int64_t q_len, int64_t k_len, bool bidirectional, const RelposConfig& cfg = {},
                                int64_t q_offset = 0);
// Decode step: int32 [batch, length=1, kv_length=k_len] for query positions
// `index` (int32 [batch]).
Array relative_position_buckets_at(const Array& index, int64_t k_len, bool bidirectional,
                                   const RelposConfig& cfg = {});

// table [heads, relpos_buckets], buckets [...] -> [heads, ...buckets' dims]
// (e.g. [heads, length, kv_length]); differentiable w.r.t. the table.
Array relative_position_bias(const Array& table, const Array& buckets);

}  // namespace t5x::nn
