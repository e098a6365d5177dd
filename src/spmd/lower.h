// Internal helpers of the spmd lowerings (not a public API).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/array.h"
#include "spmd/collectives.h"

namespace t5x::spmd::lower {

// Mesh axes per dim name (the local computation's layout).
using Assignment = std::map<std::string, Axes>;

// Axes splitting dim `name` in `spec` of `shape` (empty if unsplit / absent).
Axes axes_of(const Shape& shape, const PartitionSpec& spec, const std::string& name);
// Spec of `shape` under `a` (dims a lacks are unsplit).
PartitionSpec spec_for(const Shape& shape, const Assignment& a);
// All axes used in `a`.
Axes used(const Assignment& a);
// Adds x's splits to `a` where the dim is unassigned and the axes are free.
void absorb(Assignment& a, const Shape& shape, const PartitionSpec& spec);
// x's local view resharded to spec_for(x, a), then pvary'd over the axes of
// `a` it does not use (so it can mix with values varying over them).
Array prepare(const Array& x, const Assignment& a);
// Wraps a local result whose layout is `a` into a global array.
Array finish(const Array& local, const Shape& global, const Assignment& a);
// True when some array is split over the mesh.
bool any_split(const std::vector<Array>& xs);
// Checks every array is on the context mesh.
void check_meshes(const char* op, const std::vector<Array>& xs);

}  // namespace t5x::spmd::lower
