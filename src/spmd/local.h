// Local views of global arrays: the bridge between the global-view Array
// (global named shape + Sharding + this process's shard) and the per-process
// ("manual", jax shard_map-style) program the spmd lowerings run.
//
// to_local(X) is X's shard as a plain single-device Array of the local shape
// (zero-copy); from_local(x, shape, sharding) wraps a local shard back into a
// global Array. Both are differentiable relabelings, so a lowering is a small
// program of local ops (ops/) and collectives (spmd/collectives.h) that the
// tape differentiates like any other.
//
// Cotangent convention (jax shard_map with varying-axis tracking): a local
// value is "varying" over the mesh axes its shard depends on and "invariant"
// (identical on every device) over the others. The local cotangent of an
// invariant value is the full gradient; that of a varying value is this
// device's part. A global Array's local view varies exactly over the axes of
// its PartitionSpec. Lowerings keep this straight by calling pvary() on an
// invariant operand before mixing it with a varying one (its vjp is the sum
// over the axis: the data-parallel gradient all-reduce).
//
// While a tape records, each tracked global array gets ONE local view per
// tape (cached by autodiff slot, weakly), so all cotangents of a global array
// are summed on its local view and the tape never adds sharded arrays.
#pragma once
#include <string>
#include <vector>

#include "core/array.h"
#include "mesh/communicator.h"
#include "mesh/partition_spec.h"

namespace t5x::spmd {

// X's local shard as a single-device array of X's local shape.
Array to_local(const Array& x);
// Global array of `shape` with `sharding` whose shard is `local` (which must
// have the local shape). Errors: "[spmd] ...".
Array from_local(const Array& local, const Shape& shape, const Sharding& sharding);

// Helpers shared by the lowerings.
NamedShape named_shape(const Shape& s);
CommDtype comm_dtype(DType dt, const char* op);
// Spec of a global array (replicated when it has no mesh / no spec).
PartitionSpec spec_of(const Array& x);
// Mesh axes used by any dim of `spec`, in spec order.
std::vector<std::string> used_axes(const PartitionSpec& spec);
// Checks that x lives on the current context's mesh (or on none).
void check_mesh(const char* op, const Array& x);
// "P('data', None)" of x.
std::string describe_sharded(const Array& x);

}  // namespace t5x::spmd
