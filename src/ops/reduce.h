// Reductions and normalisations over named dims.
//
// sum / mean / max / min remove the listed dims: x[batch, length, embed],
// {"length"} -> [batch, embed]; the variants without dims reduce everything to
// a scalar []. Sums accumulate in f64 (f32/bf16/f16) or the integer type;
// results are stored in x's dtype. mean, logsumexp, softmax, log_softmax need
// floating dtypes; sum/max/min also take int32/int64.
// Gradients: sum/mean broadcast back; max/min split the gradient evenly among
// tied maxima (as jax); logsumexp -> softmax weights.
// Errors: "[sum] no dim 'lenght' in x float32[...]", "[sum] dim 'embed' listed twice".
#pragma once
#include <string>
#include <vector>

#include "core/array.h"

namespace t5x {

Array sum(const Array& x, const std::vector<std::string>& dims);
Array sum(const Array& x);
Array mean(const Array& x, const std::vector<std::string>& dims);
Array mean(const Array& x);
Array max(const Array& x, const std::vector<std::string>& dims);
Array max(const Array& x);
Array min(const Array& x, const std::vector<std::string>& dims);
Array min(const Array& x);

// log(sum(exp(x))) over dims, computed stably (max-shifted). -inf rows give -inf.
Array logsumexp(const Array& x, const std::vector<std::string>& dims);

// Softmax / log-softmax along one dim; same shape as x. Computed in f32 for
// 16-bit inputs and rounded back.
Array softmax(const Array& x, const std::string& dim);
Array log_softmax(const Array& x, const std::string& dim);

// Index of the largest element along dim (first one on ties; NaN counts as
// largest), int32, dim removed. Not differentiable.
Array argmax(const Array& x, const std::string& dim);

// Cumulative sum along dim (inclusive; `exclusive` shifts by one and starts at
// 0; `reverse` sums from the end). Same shape and dtype as x.
Array cumsum(const Array& x, const std::string& dim, bool exclusive = false, bool reverse = false);

}  // namespace t5x
