// Which checkpoint leaf each target leaf restores from (t5x
// RestoreCheckpointConfig: assignment_map, strict, fallback_to_scratch;
// state_utils.apply_assignment_map).
//
// Rules are (regex, replacement-or-nullopt) pairs applied to each *target*
// path ("target/encoder/layers_0/...", "state/param_states/..."): the first
// rule whose regex fully matches wins; the replacement (with \1 or \g<1>
// group references, as Python's Match.expand) names the checkpoint leaf to
// read; nullopt means "do not restore this leaf" (it keeps its fresh
// initialisation). Unmatched paths restore from the same path.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace t5x {

struct AssignmentRule {
  std::string pattern;                     // ECMAScript regex, full match
  std::optional<std::string> replacement;  // nullopt = skip
};

struct RestoreEntry {
  std::string target_path;
  std::optional<std::string> checkpoint_path;  // nullopt: use the fresh/fallback value
  std::string reason;                          // "same name", "rule <pattern>", "skipped by rule", "missing (fallback)"
};

struct RestoreOptions {
  bool strict = true;                 // unused checkpoint leaves are an error
  bool fallback_to_scratch = false;   // missing leaves keep fresh values instead of failing
  bool require_all_rules_match = true;
};

// Throws CheckpointError listing every problem: a rule mapping to a key that
// is not in the checkpoint, target keys missing without fallback, unused
// checkpoint keys under strict, rules that matched nothing. Throws
// std::invalid_argument "[assignment_map] ..." for an invalid regex.
std::vector<RestoreEntry> plan_restore(const std::vector<std::string>& target_paths,
                                       const std::vector<std::string>& checkpoint_paths,
                                       const std::vector<AssignmentRule>& rules = {},
                                       const RestoreOptions& opt = {});

}  // namespace t5x
