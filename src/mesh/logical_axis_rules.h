// Logical-axis rules: logical dim names -> mesh axes, with flax/t5x priority
// semantics (flax linen/spmd.py `logical_to_mesh_axes`; t5x/partitioning.py
// `standard_logical_axis_rules`). See sharding.md 4.2-4.3.
//
// Rules are an ordered list of (logical name, mesh axes) pairs; empty mesh axes
// mean None (replicated), several axes split the dim over their product, major
// to minor. Resolution for an array with dim names N:
//   every named dim starts "unassigned" (an empty name is None at once);
//   for each rule in order: if its logical name is a dim of N, that dim is still
//   unassigned, and none of the rule's mesh axes is already used by another dim
//   of N, the dim takes the rule's mesh axes (possibly None, which blocks any
//   later rule for that name);
//   dims still unassigned at the end -> None (flax's default fallback,
//   "axis is unsharded"). Names no rule mentions are therefore NOT an error by
//   default; RulesFallback::kRaiseError turns them (and any other dim left
//   unassigned) into an error, kNoConstraint drops the whole constraint
//   (flax `RulesFallback`, used by with_logical_constraint).
// Duplicate non-empty names in one array are an error, as in flax.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/sharding.h"

namespace t5x {

struct AxisRule {
  std::string logical;                 // e.g. "embed"
  std::vector<std::string> mesh_axes;  // e.g. {"model"}; empty = None
  bool operator==(const AxisRule&) const = default;
};
using LogicalAxisRules = std::vector<AxisRule>;

enum class RulesFallback { kAxisIsUnsharded, kRaiseError, kNoConstraint };

// Resolves logical names to a PartitionSpec (unassigned dims -> None).
// Throws std::invalid_argument "[logical_to_mesh_axes] ..." on duplicate names.
PartitionSpec logical_to_mesh_axes(const std::vector<std::string>& names, const LogicalAxisRules& rules);

// Same, with a fallback for dims no rule assigned: kAxisIsUnsharded -> None;
// kRaiseError -> throws "[logical_to_mesh_axes] Axis names (...) did not match
// a rule: 'x' ..."; kNoConstraint -> std::nullopt (leave the array as it is).
std::optional<PartitionSpec> logical_to_mesh_axes(const std::vector<std::string>& names,
                                                  const LogicalAxisRules& rules, RulesFallback fallback);

// t5x's presets for (activation_partitioning_dims, parameter_partitioning_dims)
// in {1,2}x{1,2}, followed by the replicated names (relpos_buckets,
// abspos_buckets, length, layers, stack, mlp_activations -> None), this
// port's kv_heads -> model (grouped-query K/V heads, see
// replicate_indivisible_kv_heads) and then `additional_rules`. Other values
// throw "[standard_logical_axis_rules] ...".
//   (1,1): batch->data, vocab->model, embed->None, mlp->model, heads->model,
//          kv->None, joined_kv->model
//   (2,1): batch->data, vocab->model, mlp->model, heads->model, kv->None,
//          joined_kv->model, embed->model
//   (1,2): as (2,1) but the last rule is embed->data
//   (2,2): as (2,1) followed by embed->data
LogicalAxisRules standard_logical_axis_rules(int activation_partitioning_dims = 1,
                                             int parameter_partitioning_dims = 1,
                                             const LogicalAxisRules& additional_rules = {});

// The one size-dependent rule: a "kv_heads" dim (the G K/V heads of
// grouped-query / multi-query attention) whose size is not divisible by its
// mesh axes is replicated instead (moe.md 4.5: G < |model| K/V heads cannot
// be split; each model shard then holds all G and its query heads read their
// group's). Every other indivisible dim stays an error. `shape`: the
// array's (logical name, size) pairs, in `spec` order.
void replicate_indivisible_kv_heads(const MeshDesc& mesh, const std::vector<std::pair<std::string, int64_t>>& shape,
                                    PartitionSpec& spec);

// Sharding of an array whose dim names are its logical axis names: resolves
// them with `rules` (and replicate_indivisible_kv_heads), validates the spec on `mesh` (errors as in
// validate_partition_spec, prefixed with the rules' outcome) and binds both.
// Example: [batch=8, length=16, embed=512] under standard rules (2,2) on
// (data=2, model=4) -> P('data', None, 'model').
Sharding logical_sharding(std::shared_ptr<const MeshDesc> mesh,
                          const std::vector<std::pair<std::string, int64_t>>& shape,
                          const LogicalAxisRules& rules);

// t5x contrib/moe standard_logical_axis_rules for the (data, expert, model)
// mesh: the preset above, then expert->expert, expert_mlp->model,
// expert_replicas->data, unmodeled->None, then `additional_rules`; finally
// every 'batch' rule is rewritten to batch->(expert, data) so the batch is
// split over both axes (expert-major).
LogicalAxisRules moe_logical_axis_rules(int activation_partitioning_dims = 1,
                                        int parameter_partitioning_dims = 1,
                                        const LogicalAxisRules& additional_rules = {});

// "[(batch, data), (embed, None), (x, (data, model))]".
std::string rules_to_string(const LogicalAxisRules& rules);

}  // namespace t5x
