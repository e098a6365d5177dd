// Parameter partitioning (t5x partitioning.py: params_axes + logical-axis
// rules -> PartitionSpecs; sharding.md 4.3).
//
// A parameter's dim names are its logical axis names (e.g. a T5 MLP kernel is
// [embed, mlp]); the rules map them onto the context's mesh axes:
//   1-D (standard_logical_axis_rules(act, 1)): embed -> None in weights, so
//     kernels are split over 'model' only and replicated over 'data'; their
//     gradient is all-reduced over 'data' by the pvary in each lowering.
//   2-D (standard_logical_axis_rules(act, 2)): embed -> 'data', so kernels are
//     split over data x model (ZeRO-3 / FSDP). The einsum lowering all-gathers
//     the weight over 'data' before use and its vjp reduce-scatters the
//     gradient over 'data'; optimizer slots share the param's layout.
// Axes the mesh lacks are dropped (the mesh acts as if they had size 1), and
// a kv_heads dim its axes do not divide is replicated
// (replicate_indivisible_kv_heads: MQA / GQA with G < |model|).
// Errors: "[sharding] ..." when a dim is not divisible by its axes.
#pragma once
#include <functional>
#include <map>
#include <string>

#include "core/array.h"
#include "mesh/logical_axis_rules.h"
#include "ops/autodiff.h"

namespace t5x::spmd {

// The spec of a param of `shape` (dim names = logical names) on the context mesh.
PartitionSpec param_spec(const Shape& shape, const LogicalAxisRules& rules);
// The same for the parameter `name`: an error names it, and when a dim is
// not divisible by its mesh axes the hint names the bindings that decide
// the split (a T5 with 4 heads on a 'model' axis of 3).
PartitionSpec param_spec(const std::string& name, const Shape& shape, const LogicalAxisRules& rules);
// Rethrows `e`, a partitioning error of the parameter `name` ("[sharding]
// ..."), naming the parameter, with that hint: param_spec above and
// model_info (the chief's check of the model's layout at start-up) use it.
[[noreturn]] void throw_param_sharding_error(const std::string& name, const std::invalid_argument& e);
std::map<std::string, PartitionSpec> param_specs(const std::map<std::string, Shape>& shapes,
                                                 const LogicalAxisRules& rules);
// Full host params (identical on every process) -> this process's shards.
ParamTree shard_params(const ParamTree& full, const LogicalAxisRules& rules);
// Sharded params -> full host params on every process.
ParamTree gather_params(const ParamTree& sharded);

// t5x::value_and_grad for sharded params: every gradient comes back in its
// param's layout (the tape gives an unsharded zero for a param the loss does
// not reach; it is cut to the param's shard here).
ValueAndGrad value_and_grad(const std::function<Array(const ParamTree&)>& fn, const ParamTree& params);

// Bytes of params + `slots_per_param` optimizer slots of the same layout.
struct ParamBytes {
  double unsharded = 0;    // all of them, on one device
  double per_process = 0;  // this process's shards (the largest over processes: shards are equal)
  double fraction() const { return unsharded > 0 ? per_process / unsharded : 0; }
};
ParamBytes param_bytes(const std::map<std::string, Shape>& shapes, DType dtype, const LogicalAxisRules& rules,
                       int slots_per_param = 2);

}  // namespace t5x::spmd
