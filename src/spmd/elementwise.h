// Elementwise ops on sharded global arrays (Mesh-TensorFlow: slicewise, no
// communication once the operands share a layout).
//
// Operands broadcast by name as in ops/elementwise.h. The layout of the local
// computation takes each operand's splits in order (first operand first) as
// long as a dim is not split yet and its mesh axes are free; an operand whose
// layout differs is resharded to it first (slice / all-to-all / all-gather,
// spmd/reshard.h), and an operand replicated over an axis the others are
// split over is pvary'd (its gradient is summed over that axis: e.g. a bias
// added to batch-split activations gets the data-parallel all-reduce).
// The output keeps that layout. With no split operand these call the plain
// ops. Errors are those of the plain ops plus "[spmd] ..." mesh mismatches.
#pragma once
#include <functional>
#include <vector>

#include "core/array.h"

namespace t5x::spmd {

using LocalFn = std::function<Array(const std::vector<Array>&)>;

// Applies the local elementwise `fn` (which must broadcast by name like the
// plain ops: output dims = first operand's, then the new dims of the others)
// to the operands' local shards laid out compatibly.
Array elementwise(const char* op, const std::vector<Array>& xs, const LocalFn& fn);

// General form for ops that work along some dims (slice, pad, concat,
// cumsum, fused kernels, ...): like elementwise, but the dims in `whole` are
// never split in the local layout (an operand split there is all-gathered
// first), and fn may return several outputs. Output dims split in the
// layout keep it (global size = local size x shards); the others (new dims,
// `whole` dims) are unsplit.
using LocalFnN = std::function<std::vector<Array>(const std::vector<Array>&)>;
std::vector<Array> layout_op(const char* op, const std::vector<Array>& xs, const std::vector<std::string>& whole,
                             const LocalFnN& fn);

Array add(const Array& a, const Array& b);
Array sub(const Array& a, const Array& b);
Array mul(const Array& a, const Array& b);
Array div(const Array& a, const Array& b);
Array maximum(const Array& a, const Array& b);
Array minimum(const Array& a, const Array& b);
Array where(const Array& cond, const Array& x, const Array& y);
// Unary op applied shard by shard (f: any plain unary op, e.g. t5x::exp, or a
// lambda such as [](const Array& v) { return v * 2.0; }).
Array unary(const Array& x, const std::function<Array(const Array&)>& f);

}  // namespace t5x::spmd
