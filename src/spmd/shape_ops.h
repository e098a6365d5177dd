// Layout ops on sharded global arrays (ops/shape.h semantics; MTF table:
// concat / slice / pad / stack along a dim need that dim unsplit).
//
// Dims that keep their size keep their layout and need no communication.
// The dim an op works along (slice, pad, concat, dynamic_slice,
// dynamic_update_slice, cumsum, argmax) is all-gathered first when split
// (GSPMD's fallback, where MTF raises). New dims (stack, expand_dims,
// broadcast_to) are unsplit; constrain them afterwards if needed.
// reshape keeps the layout with no communication (GSPMD's reshape rule) when,
// in every block of dims that the reshape merges or splits, the split input
// dims are whole-split major dims then at most one partly split dim, and the
// output's major dims can take those mesh axes in order, each dim taking
// whole axes until fully split. Examples: [batch, length, joined_kv] ->
// [batch, length, heads, kv] with batch split (MTF T1.4); a model-split
// [embed, joined_kv] kernel -> [embed, heads, kv] with heads split; [batch,
// length] -> [group, token] with batch split n ways and group % n == 0 (group
// takes batch's axes); [group] split ('expert', 'data') -> [X, group/X] with
// X = |expert| (X takes 'expert', group/X takes 'data'), and back. Otherwise
// (a split minor dim merged with a major one, group % n != 0) it gathers x,
// reshapes, and returns a replicated array.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/array.h"

namespace t5x::spmd {

Array transpose(const Array& x, const std::vector<std::string>& order);
Array reshape(const Array& x, const Shape& shape);
Array broadcast_to(const Array& x, const Shape& shape);
Array slice(const Array& x, const std::string& dim, int64_t start, int64_t size);
Array pad(const Array& x, const std::string& dim, int64_t lo, int64_t hi, double value = 0.0);
Array concat(const std::vector<Array>& xs, const std::string& dim);
Array stack(const std::vector<Array>& xs, const std::string& name, int axis = 0);
Array expand_dims(const Array& x, const std::string& name, int axis = -1);
Array squeeze(const Array& x, const std::string& name);
Array dynamic_slice(const Array& x, const std::map<std::string, int64_t>& starts,
                    const std::map<std::string, int64_t>& sizes);
Array dynamic_update_slice(const Array& operand, const Array& update, const std::map<std::string, int64_t>& starts);
Array cumsum(const Array& x, const std::string& dim, bool exclusive = false, bool reverse = false);
Array argmax(const Array& x, const std::string& dim);

}  // namespace t5x::spmd
