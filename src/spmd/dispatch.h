// Dispatch of the plain ops (ops/) to their sharded lowerings.
//
// The op layer keeps one small hook: when some input of an op is split over
// the mesh (!is_fully_local()), it calls the installed dispatcher with the op
// name, the array inputs (in the op's argument order; null Arrays for absent
// optional ones) and the non-array arguments, and returns its outputs. The
// hook's types (t5x::OpArgs, ShardedDispatch, set_sharded_dispatch) live in
// ops/dispatch.h, since ops must not depend on spmd; spmd::install() sets it.
//
// Ops and their arguments:
//   add sub mul div maximum minimum (a, b); where (cond, x, y);
//   eq ne lt le gt ge logical_and logical_or (a, b) -> bool;
//   gated_gelu (h0, h1); rename (x; dims = {from, to, from, to, ...});
//   unary by name: neg abs sign square exp log tanh sqrt rsqrt sigmoid relu
//     gelu isnan isfinite logical_not; cast (dtype);
//   scalar forms add_scalar sub_scalar mul_scalar div_scalar maximum_scalar
//     minimum_scalar (scalar);
//   sum mean max min logsumexp (dims); softmax log_softmax argmax (dim);
//   cumsum (dim, ints = {exclusive, reverse});
//   einsum (x, y; dims = output dims);
//   one_hot (ids; k = depth, name, dims = mesh axes of the new dim, dtype);
//   take (x, ids; dim); top_k (x; k, dim) -> {values, indices};
//   transpose (dims = order); reshape, broadcast_to (shape);
//   slice (dim, ints = {start, size}); pad (dim, ints = {lo, hi}, scalar);
//   concat (xs...; dim); stack (xs...; name, k = axis);
//   expand_dims (name, k = axis); squeeze (name);
//   dynamic_slice (starts, sizes); dynamic_update_slice (operand, update; starts);
//   rms_norm (x, scale; dim, scalar = eps);
//   softmax_cross_entropy_with_integer_labels (logits, targets; dim = vocab,
//     scalar = z_loss, scalar2 = label_smoothing) -> {loss, z_loss};
//   dot_product_attention (q, k, v; attention = options, whose arrays are
//     taken from the options).
// Unknown names throw "[spmd] no sharded lowering for op 'x'".
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/array.h"
#include "ops/dispatch.h"
#include "ops/fused.h"

namespace t5x::spmd {

using OpArgs = t5x::OpArgs;  // ops/dispatch.h

std::vector<Array> dispatch(std::string_view op, const std::vector<Array>& inputs, const OpArgs& args);

// Registers dispatch() with the op layer (t5x::set_sharded_dispatch): from
// then on the plain ops (t5x::einsum, t5x::add, ...) on split arrays run their
// sharded lowering. Call once at start-up, before ops run on other threads.
void install();
bool installed();  // true while the op layer's dispatcher is this one

}  // namespace t5x::spmd
