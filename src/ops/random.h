// Random sampling from counter-based keys (core/random.h), reproducing
// jax.random (threefry2x32, jax_threefry_partitionable=False) bit for bit for
// float32: element i of a sample of n values depends only on (key, i, n), so
// the result is identical for any thread count.
//
// Sampling happens in float32; other floating dtypes get the f32 sample
// rounded (jax would draw 16-bit samples from 16-bit words instead).
// Not differentiable (the outputs are constants). Shapes are named.
// Errors: "[uniform] dtype must be floating, got int32".
#pragma once
#include "core/array.h"
#include "core/random.h"

namespace t5x {

// jax.random.uniform: values in [minval, maxval).
Array uniform(const PRNGKey& key, const Shape& shape, double minval = 0.0, double maxval = 1.0,
              DType dtype = DType::f32);
// jax.random.normal: sqrt(2) * erfinv(u), u uniform in (-1, 1).
Array normal(const PRNGKey& key, const Shape& shape, DType dtype = DType::f32);
// jax.random.truncated_normal: standard normal restricted to (lower, upper),
// by inverse CDF. Used by t5x's truncated-normal initialisers.
Array truncated_normal(const PRNGKey& key, double lower, double upper, const Shape& shape, DType dtype = DType::f32);
// jax.random.bernoulli: bool array, true with probability p.
Array bernoulli(const PRNGKey& key, double p, const Shape& shape);
// jax.random.categorical(key, logits, axis=dim): one sample index (int32) per
// row, drawn by the Gumbel-max trick; `dim` is removed.
Array categorical(const PRNGKey& key, const Array& logits, const std::string& dim);
// The Gumbel noise categorical(key, logits) adds to logits' flat elements
// at[i] (row-major; logits of n elements, float32): what a sampler that
// knows the winner is among a few elements needs, bitwise.
std::vector<float> categorical_noise_at(const PRNGKey& key, int64_t n, const std::vector<int64_t>& at);

// Inverted dropout as flax nn.Dropout: keep with probability 1 - rate and
// scale kept values by 1 / (1 - rate). `broadcast_dims` share one mask value
// along those dims (t5x broadcasts along "length"). rate == 0 returns x.
Array dropout(const PRNGKey& key, const Array& x, double rate, const std::vector<std::string>& broadcast_dims = {});

}  // namespace t5x
