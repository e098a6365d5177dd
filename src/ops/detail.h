// Internal helpers shared by the op families (not part of the public API).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/array.h"

namespace t5x {
class ShardedLowering;  // ops/lowering.h
}

namespace t5x::detail {

// Throws "[op] sharded inputs not supported yet (...)" unless every valid array
// is single-device or fully replicated (apply() calls it when no sharded
// lowering is installed).
void check_local(const char* op, const std::vector<Array>& xs);
// Throws "[op] has no CUDA kernel in this build (inputs on cuda:0)..." (the
// default Primitive::eval_cuda).
[[noreturn]] void no_cuda_kernel(const char* op, const std::vector<Array>& inputs);
// For a composite's expansion that calls a kernels::cpu entry point itself
// (composites expand on any device): throws no_cuda_kernel unless every
// valid input is on the CPU.
void require_cpu(const char* op, const std::vector<Array>& inputs);
// apply_composite (ops/primitive.h) of a one-output op.
Array composite1(const char* name, const std::vector<Array>& inputs, std::function<Array(const std::vector<Array>&)> expand,
                 std::function<Array(const ShardedLowering&, const std::vector<Array>&)> lower);
// True when an op may write its result over x's buffer (donation): x is its
// buffer's sole owner (Array::is_sole_owner), no tape is recording, and x and
// `others` are single-device CPU arrays. The callers (add_into,
// dynamic_update_slice_into) then hand x to an in-place primitive.
bool can_write_over(const Array& x, const std::vector<Array>& others);
// Output of an op over `inputs`: uninitialised (or zeroed), on the same mesh
// (replicated) as the first input that has one.
Array make_output(const Shape& shape, DType dtype, const std::vector<Array>& inputs, bool zero = false);

// Throws "[op] expected a floating dtype for x, got int32".
void check_floating(const char* op, const Array& x, const char* what = "x");
void check_same_dtype(const char* op, const Array& a, const Array& b, const char* an = "x", const char* bn = "y");
// Throws "[op] no dim 'd' in x[...]"; returns its index.
int require_dim(const char* op, const Array& x, const std::string& dim, const char* what = "x");
// "float32[batch=2, embed=3]"
std::string describe(const Array& x);

// Union of named shapes: dims of a in order, then dims of b not in a.
// Throws "[op] dim 'embed' has size 4 in x[...] but 3 in y[...]".
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides of `in`'s buffer laid over the dims of `out` (0 where in lacks a dim).
std::vector<int64_t> strides_over(const Shape& in, const Shape& out);

// Sums g over the dims absent from `target` and orders it like target
// (the vjp of a broadcast by name).
Array unbroadcast(const Array& g, const Shape& target);

}  // namespace t5x::detail
