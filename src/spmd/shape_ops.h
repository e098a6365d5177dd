// Layout ops on sharded global arrays (ops/shape.h semantics; MTF table:
// concat / slice / pad / stack along a dim need that dim unsplit).
//
// Dims that keep their size keep their layout and need no communication.
// The dim an op works along (slice, pad, concat, dynamic_slice,
// dynamic_update_slice, cumsum, argmax) is all-gathered first when split
// (GSPMD's fallback, where MTF raises). New dims (stack, expand_dims,
// broadcast_to) are unsplit; constrain them afterwards if needed.
// reshape keeps the layout when every split dim lies in a prefix of dims that
// the reshape leaves unchanged (e.g. [batch, length, joined_kv] ->
// [batch, length, heads, kv] with batch split: local, no traffic, MTF T1.4);
// otherwise it gathers x, reshapes, and returns a replicated array.
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
