#include "mesh/logical_axis_rules.h"

#include "mesh/partition_spec.h"

#include <set>
#include <stdexcept>

namespace t5x {
namespace {

std::string names_string(const std::vector<std::string>& names) {
  std::string s = "(";
  for (size_t i = 0; i < names.size(); ++i)
    s += (i ? ", " : "") + (names[i].empty() ? std::string("None") : "'" + names[i] + "'");
  return s + ")";
}

// Per dim: nullopt = unassigned, else the assigned mesh axes (empty = None).
std::vector<std::optional<std::vector<std::string>>> resolve(const std::vector<std::string>& names,
                                                             const LogicalAxisRules& rules) {
  std::set<std::string> seen, dups;
  for (const auto& n : names)
    if (!n.empty() && !seen.insert(n).second) dups.insert(n);
  if (!dups.empty()) {
    std::string d;
    for (const auto& n : dups) d += (d.empty() ? "'" : ", '") + n + "'";
    throw std::invalid_argument("[logical_to_mesh_axes] Unsupported: dimensions " + d +
                                " occur more than once in array names " + names_string(names));
  }
  std::vector<std::optional<std::vector<std::string>>> result(names.size());
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].empty()) result[i] = std::vector<std::string>{};
  std::set<std::string> used;
  for (const auto& rule : rules) {
    size_t pos = names.size();
    for (size_t i = 0; i < names.size(); ++i)
      if (!names[i].empty() && names[i] == rule.logical) pos = i;
    if (pos == names.size() || result[pos].has_value()) continue;
    bool free = true;
    for (const auto& a : rule.mesh_axes) free &= !used.count(a);
    if (!free) continue;
    result[pos] = rule.mesh_axes;
    used.insert(rule.mesh_axes.begin(), rule.mesh_axes.end());
  }
  return result;
}

}  // namespace

PartitionSpec logical_to_mesh_axes(const std::vector<std::string>& names, const LogicalAxisRules& rules) {
  return *logical_to_mesh_axes(names, rules, RulesFallback::kAxisIsUnsharded);
}

std::optional<PartitionSpec> logical_to_mesh_axes(const std::vector<std::string>& names,
                                                  const LogicalAxisRules& rules, RulesFallback fallback) {
  auto result = resolve(names, rules);
  PartitionSpec spec = PartitionSpec::replicated(names.size());
  std::string unmatched;
  for (size_t i = 0; i < names.size(); ++i) {
    if (result[i])
      spec.dims[i] = *result[i];
    else
      unmatched += (unmatched.empty() ? "'" : ", '") + names[i] + "'";
  }
  if (!unmatched.empty()) {
    if (fallback == RulesFallback::kRaiseError)
      throw std::invalid_argument("[logical_to_mesh_axes] Axis names " + names_string(names) +
                                  " did not match a rule: " + unmatched + " got no mesh axis from rules " +
                                  rules_to_string(rules));
    if (fallback == RulesFallback::kNoConstraint) return std::nullopt;
  }
  return spec;
}

LogicalAxisRules standard_logical_axis_rules(int act, int param, const LogicalAxisRules& additional_rules) {
  const std::vector<std::string> data{"data"}, model{"model"}, none{};
  LogicalAxisRules rules;
  if (act == 1 && param == 1) {
    rules = {{"batch", data}, {"vocab", model}, {"embed", none},    {"mlp", model},
             {"heads", model}, {"kv", none},    {"joined_kv", model}};
  } else if ((act == 1 || act == 2) && (param == 1 || param == 2)) {
    rules = {{"batch", data}, {"vocab", model}, {"mlp", model},
             {"heads", model}, {"kv", none},    {"joined_kv", model}};
    if (act == 2) rules.push_back({"embed", model});
    if (param == 2) rules.push_back({"embed", data});
  } else {
    throw std::invalid_argument("[standard_logical_axis_rules] activation_partitioning_dims = " +
                                std::to_string(act) + ", parameter_partitioning_dims = " +
                                std::to_string(param) + " is not supported (each must be 1 or 2)");
  }
  for (const char* n : {"relpos_buckets", "abspos_buckets", "length", "layers", "stack", "mlp_activations"})
    rules.push_back({n, none});
  rules.push_back({"kv_heads", model});
  rules.insert(rules.end(), additional_rules.begin(), additional_rules.end());
  return rules;
}

void replicate_indivisible_kv_heads(const MeshDesc& mesh, const std::vector<std::pair<std::string, int64_t>>& shape,
                                    PartitionSpec& spec) {
  for (size_t i = 0; i < shape.size() && i < spec.dims.size(); ++i) {
    if (shape[i].first != "kv_heads" || spec.dims[i].empty()) continue;
    int64_t n = 1;
    for (const auto& a : spec.dims[i])
      if (int k = mesh.axis_index(a); k >= 0) n *= mesh.axis_sizes[size_t(k)];
    if (shape[i].second % n != 0) spec.dims[i].clear();
  }
}

Sharding logical_sharding(std::shared_ptr<const MeshDesc> mesh,
                          const std::vector<std::pair<std::string, int64_t>>& shape,
                          const LogicalAxisRules& rules) {
  if (!mesh) throw std::invalid_argument("[logical_sharding] no mesh given");
  std::vector<std::string> names;
  for (const auto& d : shape) names.push_back(d.first);
  PartitionSpec spec = logical_to_mesh_axes(names, rules);
  replicate_indivisible_kv_heads(*mesh, shape, spec);
  try {
    validate_partition_spec(*mesh, shape, spec);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(e.what()) + " (spec " + spec_to_string(spec) +
                                " from the logical-axis rules)");
  }
  return Sharding{std::move(mesh), std::move(spec)};
}

LogicalAxisRules moe_logical_axis_rules(int act, int param, const LogicalAxisRules& additional_rules) {
  LogicalAxisRules rules = standard_logical_axis_rules(act, param);
  rules.push_back({"expert", {"expert"}});
  rules.push_back({"expert_mlp", {"model"}});
  rules.push_back({"expert_replicas", {"data"}});
  rules.push_back({"unmodeled", {}});
  rules.insert(rules.end(), additional_rules.begin(), additional_rules.end());
  for (auto& r : rules)
    if (r.logical == "batch") r.mesh_axes = {"expert", "data"};
  return rules;
}

std::string rules_to_string(const LogicalAxisRules& rules) {
  std::string s = "[";
  for (size_t i = 0; i < rules.size(); ++i) {
    s += (i ? ", (" : "(") + rules[i].logical + ", ";
    const auto& m = rules[i].mesh_axes;
    if (m.empty()) s += "None";
    else if (m.size() == 1) s += m[0];
    else {
      s += "(";
      for (size_t j = 0; j < m.size(); ++j) s += (j ? ", " : "") + m[j];
      s += ")";
    }
    s += ")";
  }
  return s + "]";
}

}  // namespace t5x
