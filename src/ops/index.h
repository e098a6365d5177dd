// Index ops: iota, one_hot, take (gather / embedding lookup), top_k.
//
// Errors: "[take] index 40 out of range for dim 'vocab' of size 32",
// "[one_hot] indices must be int32/int64, got float32[...]".
#pragma once
#include <string>
#include <utility>

#include "core/array.h"

namespace t5x {

// Array of `shape` whose value is the index along `dim` (broadcast over the
// other dims). dtype: any numeric dtype. Not differentiable.
Array iota(const Shape& shape, const std::string& dim, DType dtype = DType::i32);

// one_hot(indices[batch, length], depth=V, "vocab") -> [batch, length, vocab=V]
// with 1 at the index and 0 elsewhere (indices outside [0, V) give all zeros,
// as jax.nn.one_hot). indices: int32/int64. Not differentiable.
Array one_hot(const Array& indices, int64_t depth, const std::string& name, DType dtype = DType::f32);

// Gathers along dim: the dim is replaced, in place, by the dims of indices.
//   take(embedding[vocab=V, embed=E], tokens[batch=B, length=L], "vocab")
//     -> [batch=B, length=L, embed=E]
// indices: int32/int64 in [0, size) (else throws, naming the bad index).
// Gradient w.r.t. x: scatter-add of the cotangent (repeated ids accumulate).
Array take(const Array& x, const Array& indices, const std::string& dim);

// The k largest entries along dim, sorted descending (ties: lower index first),
// and their int32 indices. dim keeps its name with size k. Gradient flows to
// the selected entries of x.
std::pair<Array, Array> top_k(const Array& x, int64_t k, const std::string& dim);

}  // namespace t5x
