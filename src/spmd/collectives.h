// Collectives as differentiable ops on LOCAL arrays (this process's values in
// the per-process program; see spmd/local.h for the varying/invariant
// cotangent convention). `axes` name mesh axes of the current context; the
// group is the devices that differ only on them, ranked row-major over `axes`
// in the order given (mesh/mesh.h), which is the shard order of a dim split
// over those axes. Axes of size 1 make every collective an identity.
//
// Each vjp is the op's transpose (sharding.md section 0 semantics, docs/sharding.md 6):
//
//   op                                   forward                                vjp
//   all_reduce(x, axes)        varying -> invariant sum over the group        identity (pvary)
//   pvary(x, axes)           invariant -> varying, identity                   all_reduce(sum)
//   all_gather(x, d, axes)     varying -> varying concat along d              reduce_scatter(d)
//   all_gather_invariant       varying -> invariant concat along d            keep own block of d (no traffic)
//   reduce_scatter(x, d, axes) varying -> block rank of the sum along d       all_gather(d)
//   all_to_all(x, s, c, axes)  split s into |group| pieces, piece j to member j,
//                              concat the received pieces along c             all_to_all(c, s)
//   ppermute(x, axes, pairs)   out(dst) = x(src), zeros where no source       ppermute(reversed pairs)
//   axis_slice(x, d, axes)   invariant -> block rank of d (MTF allsplit)      all_gather_invariant(d)
//   all_reduce max/min                                                        not differentiable
//
// Under a mesh-invariant context (Context::mesh_invariant) a float32 sum
// (all_reduce, hence pvary's vjp) adds the members pairwise in group-rank
// order (Communicator::all_reduce_pairwise): one process's microbatch order.
//
// Why two all-gathers: the cotangent of an invariant value is the full
// gradient on every device, so gathering into an invariant value transposes
// to a local slice; gathering into a varying value (a weight gathered to be
// used with batch-split activations, ZeRO-3) transposes to a reduce-scatter.
// Shapes: all_gather multiplies dim d by the group size, reduce_scatter and
// axis_slice divide it (it must be divisible), all_to_all divides s and
// multiplies c. dtypes: f32, bf16 (reductions in f32), i32, i64.
// Errors: "[all_gather] no dim 'x' in ...", "[reduce_scatter] dim 'embed' of
// size 6 is not divisible by the group size 4", unknown mesh axes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/array.h"
#include "mesh/communicator.h"

namespace t5x::spmd {

using Axes = std::vector<std::string>;

Array all_reduce(const Array& x, const Axes& axes, ReduceOp op = ReduceOp::kSum);
Array pvary(const Array& x, const Axes& axes);
Array all_gather(const Array& x, const std::string& dim, const Axes& axes);
Array all_gather_invariant(const Array& x, const std::string& dim, const Axes& axes);
Array reduce_scatter(const Array& x, const std::string& dim, const Axes& axes);
Array all_to_all(const Array& x, const std::string& split_dim, const std::string& concat_dim, const Axes& axes);
// pairs: (source, destination) ranks within the group over `axes`.
Array ppermute(const Array& x, const Axes& axes, const std::vector<std::pair<int, int>>& pairs);
Array axis_slice(const Array& x, const std::string& dim, const Axes& axes);

// Size of the group over `axes` and this device's rank in it (current context).
int64_t group_size(const Axes& axes);
int64_t group_rank(const Axes& axes);
// `axes` without those of size 1 (which need no communication).
Axes nontrivial(const Axes& axes);

}  // namespace t5x::spmd
