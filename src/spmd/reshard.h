// Resharding global arrays between layouts, sharding constraints, and moving
// whole arrays between the host and the mesh.
//
// reshard(x, spec) changes only the layout: the global value is the same. It
// runs the mesh layer's plan (mesh/reshard.h: local slices, all-gathers,
// all-to-alls, collective-permutes; MTF reshape lowering, GSPMD
// ReshardNoCache) on this process's shard. Its vjp is the reverse reshard of
// the cotangent (the transpose of a layout change is the inverse layout
// change), so gather <-> slice and all-to-all <-> all-to-all in backward.
//
// with_sharding_constraint(x, rules) resolves x's dim names (its logical axis
// names) with t5x's logical-axis rules and reshards to the result (flax
// with_logical_constraint; RulesFallback::kNoConstraint leaves x as is).
//
// shard(full, sharding): every process holds the same full array; each keeps
// its shard (placement of host data and checkpoints; not differentiated).
// gather(x): the full global value on every process as a single-device array
// (all-gathers over the split axes; tests and checkpoint writing).
// Errors: "[reshard] ..." from spec validation (unknown axis, indivisible dim,
// axis used twice), "[spmd] ..." for a mesh other than the context's.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/array.h"
#include "mesh/logical_axis_rules.h"

namespace t5x::spmd {

Array reshard(const Array& x, const PartitionSpec& spec);
Array with_sharding_constraint(const Array& x, const LogicalAxisRules& rules,
                               RulesFallback fallback = RulesFallback::kAxisIsUnsharded);
// Same with explicit logical names (one per dim of x) instead of x's dim names.
Array with_sharding_constraint(const Array& x, const std::vector<std::string>& logical_names,
                               const LogicalAxisRules& rules,
                               RulesFallback fallback = RulesFallback::kAxisIsUnsharded);

// Renames dims (ops/shape.h rename); the layout moves with the dims, no data
// moves (MTF: a rename only costs traffic when the new name must be laid out
// differently, which the next op's reshard pays).
Array rename(const Array& x, const std::map<std::string, std::string>& renames);

Array shard(const Array& full, const PartitionSpec& spec);
Array gather(const Array& x);

// Differentiable reshard of a local shard of a global array of `shape` from
// `src` to `dst` (for lowerings working on local values).
Array reshard_local(const Array& local, const Shape& shape, const PartitionSpec& src, const PartitionSpec& dst);
// Bytes one device sends for src -> dst with the ring formulas (the same on
// every rank, so every rank makes the same lowering choices).
double reshard_cost(const Shape& shape, const PartitionSpec& src, const PartitionSpec& dst, size_t elem_size);

}  // namespace t5x::spmd
