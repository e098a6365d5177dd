// Index ops on sharded global arrays (Mesh-TensorFlow per-op table).
//
// one_hot(ids, depth, name, axes): the new dim `name` is split over `axes`
//   (the vocab axes, e.g. {"model"}): each device builds its depth/|axes|
//   columns from ids - rank*depth/|axes|; ids out of its range give zero rows.
//   No communication. ids keep their layout (they must not use `axes`).
// take(x, ids, dim): x's `dim` (e.g. vocab) replaced by ids' dims. With `dim`
//   split over A, each device looks up the ids in its range (others masked to
//   zero) and the partial results are all-reduced over A (MTF gather =
//   einsum(one_hot(ids), x)); x's gradient is scatter-added locally, and
//   summed over the axes that split ids (data-parallel all-reduce).
// top_k(x, k, dim): with `dim` split over A, local top-k (indices shifted by
//   the shard offset), all-gather of the k*|A| candidates and their indices,
//   then a global top-k. k must not exceed the local size of dim. Outputs have
//   x's layout with `dim` (size k) unsplit.
// Shapes, dtypes and errors as ops/index.h.
#pragma once
#include <string>
#include <utility>

#include "core/array.h"
#include "spmd/collectives.h"

namespace t5x::spmd {

Array one_hot(const Array& ids, int64_t depth, const std::string& name, const Axes& axes = {},
              DType dtype = DType::f32);
Array take(const Array& x, const Array& ids, const std::string& dim);
std::pair<Array, Array> top_k(const Array& x, int64_t k, const std::string& dim);

}  // namespace t5x::spmd
