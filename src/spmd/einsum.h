// Einsum over named dims on sharded global arrays (MTF einsum lowering +
// GSPMD dot handling, sharding.md 1.2 and 3.4).
//
// The local computation's layout (mesh axes per dim) is chosen among, per
// dim, x's axes, y's axes, the requested output axes or none, minimising the
// bytes each device sends under the ring formulas (resharding the operands,
// reducing partial sums, resharding the result), then the local work. With
// that layout:
//   - batch / free dims split alike in both operands: local, no communication;
//   - a contracted (or summed-out) dim split over A: local einsum -> partial
//     sums -> all-reduce(sum) over A, 2*S_out*(k-1)/k bytes; or, when
//     `out_spec` puts an axis of A on an output dim, reduce-scatter onto that
//     dim, S_out*(k-1)/k bytes (the rest of A is all-reduced);
//   - an operand split on a dim the layout needs whole (e.g. a ZeRO-3 weight
//     split over 'data' while the batch is also over 'data'): all-gathered
//     first; its gradient is then reduce-scattered (the all-gather's vjp);
//   - an operand replicated over an axis the other is split over is pvary'd,
//     so its gradient is all-reduced over that axis (data-parallel weights).
// The result has the chosen layout on the output dims, or `out_spec` when
// given. Shapes, dtypes and errors as ops/einsum.h.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/sharding.h"
#include "spmd/collectives.h"

namespace t5x::spmd {

Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out_dims,
             const std::optional<PartitionSpec>& out_spec = std::nullopt);
// "batch length embed, embed mlp -> batch length mlp"
Array einsum(const std::string& spec, const Array& x, const Array& y,
             const std::optional<PartitionSpec>& out_spec = std::nullopt);

// Lazy all-reduce (MTF LazyAllreduceSum): einsum_partial keeps the partial
// sums of the contracted split dims pending; pending results with the same
// layout and pending axes add locally (add), and resolve() reduces once
// (all-reduce, or reduce-scatter onto an output dim that out_spec splits over
// a pending axis; then a reshard to out_spec). Two branches that each end in
// a model-split contraction (parallel attention + MLP) thus pay one
// all-reduce instead of two. Differentiable like everything else.
struct PartialSum {
  Array local;         // this device's partial result, local shape of `spec`
  Shape shape;         // global shape
  PartitionSpec spec;  // layout of the output dims
  Axes pending;        // mesh axes still to be summed over (mesh order)
};
PartialSum einsum_partial(const Array& x, const Array& y, const std::vector<std::string>& out_dims);
// Partial sums that differ in layout or pending axes (the einsums chose
// different strategies) are reduced first and added as global arrays.
PartialSum add(const PartialSum& a, const PartialSum& b);
Array resolve(const PartialSum& p, const std::optional<PartitionSpec>& out_spec = std::nullopt);

// The layout einsum would use, as a readable plan (tests and docs), e.g.
// "layout {embed: model}; x: reshard 0 B; y: reshard 0 B; all_reduce over (model) 64 B".
std::string einsum_plan(const Array& x, const Array& y, const std::vector<std::string>& out_dims,
                        const std::optional<PartitionSpec>& out_spec = std::nullopt);

}  // namespace t5x::spmd
