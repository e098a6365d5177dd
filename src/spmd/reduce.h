// Reductions and normalisations over named dims of sharded global arrays
// (Mesh-TensorFlow per-op table, sharding.md 1.2).
//
//   sum / mean     local reduce, then all-reduce(sum) over the mesh axes of the
//                  reduced dims that are split (vjp: broadcast; the all-reduce's
//                  vjp is the identity).
//   max / min      local reduce, all-reduce(max/min); the gradient is split
//                  evenly among tied maxima across all shards (as jax), via a
//                  summed tie count.
//   logsumexp      m = all-reduce(max) of the local max (no gradient), local
//                  sum of exp(x - m), all-reduce(sum), log + m.
//   softmax / log_softmax over a split dim: same two all-reduces (MAX, then
//                  SUM of [rows] values), output keeps x's layout.
// Output layout: x's, without the reduced dims. Unsplit reduced dims need no
// communication. Shapes, dtypes and errors as the plain ops (ops/reduce.h).
#pragma once
#include <string>
#include <vector>

#include "core/array.h"

namespace t5x::spmd {

Array sum(const Array& x, const std::vector<std::string>& dims);
Array sum(const Array& x);
Array mean(const Array& x, const std::vector<std::string>& dims);
Array mean(const Array& x);
Array max(const Array& x, const std::vector<std::string>& dims);
Array min(const Array& x, const std::vector<std::string>& dims);
Array logsumexp(const Array& x, const std::vector<std::string>& dims);
Array softmax(const Array& x, const std::string& dim);
Array log_softmax(const Array& x, const std::string& dim);

}  // namespace t5x::spmd
