// Layout ops on named dims: transpose, rename, reshape, broadcast_to, slice,
// pad, concat, stack, dynamic_slice, dynamic_update_slice.
//
// Dims are always addressed by name. All ops accept every dtype; gradients
// flow for floating arrays. Errors (std::invalid_argument) name the op and
// the offending dims, e.g. "[slice] range [3, 9) out of bounds for dim
// 'length' of size 8 in float32[batch=2, length=8]".
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/array.h"

namespace t5x {

// Reorders dims: `order` is a permutation of x's dim names.
// x[a, b, c], {"c", "a", "b"} -> [c, a, b] (data moved accordingly).
Array transpose(const Array& x, const std::vector<std::string>& order);
// x with its dims in like's order (like has the same dim names): x itself,
// without building a list of names, when it already has that order (most
// calls on a decode step's hot path).
Array transpose_like(const Array& x, const Array& like);

// Renames dims without moving data: {"length": "q_length"}. New names must not
// collide with remaining ones.
Array rename(const Array& x, const std::map<std::string, std::string>& renames);

// Row-major reinterpretation with a new named shape of equal element count
// (e.g. [batch, length, joined_kv=512] -> [batch, length, heads=8, kv=64]).
Array reshape(const Array& x, const Shape& shape);

// Broadcasts x to `shape` by name: every dim of x must appear in shape with
// the same size; the result follows shape's order. Gradient sums back.
Array broadcast_to(const Array& x, const Shape& shape);

// x restricted to [start, start + size) along dim.
Array slice(const Array& x, const std::string& dim, int64_t start, int64_t size);

// Adds `lo` elements before and `hi` after along dim, filled with value.
Array pad(const Array& x, const std::string& dim, int64_t lo, int64_t hi, double value = 0.0);

// Joins arrays along an existing dim. All must have the same dims (same
// order) and dtype; sizes may differ only along dim.
Array concat(const std::vector<Array>& xs, const std::string& dim);

// Stacks equally shaped arrays along a new dim `name` of size xs.size(),
// inserted at position `axis` (0 = first; -1 = last).
Array stack(const std::vector<Array>& xs, const std::string& name, int axis = 0);

// Adds a dim `name` of size 1 at position `axis` (-1 = last); a view.
Array expand_dims(const Array& x, const std::string& name, int axis = -1);
// Removes dim `name`, which must have size 1; a view.
Array squeeze(const Array& x, const std::string& name);
// The slices of x along dim, each with dim removed (inverse of stack).
std::vector<Array> unstack(const Array& x, const std::string& dim);

// Sizes `sizes` (by dim name; unnamed dims keep their full extent) starting at
// `starts` (by dim name; default 0). Starts are clamped so the window fits,
// as in lax.dynamic_slice.
Array dynamic_slice(const Array& x, const std::map<std::string, int64_t>& starts,
                    const std::map<std::string, int64_t>& sizes);

// Copy of `operand` with `update` written at `starts` (by dim name; default
// 0); update must have the operand's dim names in the same order, each no
// larger. Starts are clamped as in lax.dynamic_update_slice (KV-cache writes).
Array dynamic_update_slice(const Array& operand, const Array& update, const std::map<std::string, int64_t>& starts);
// operand = dynamic_update_slice(operand, update, starts), written over the
// operand's buffer when it is the sole owner (Array::is_sole_owner), on one
// CPU device, with no tape recording (a decode step's cache write: XLA's
// buffer donation); else the copy above.
void dynamic_update_slice_into(Array& operand, const Array& update, const std::map<std::string, int64_t>& starts);

}  // namespace t5x
