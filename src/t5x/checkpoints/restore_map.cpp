#include "t5x/checkpoints/restore_map.h"

#include <regex>
#include <set>

#include "t5x/checkpoints/host_tensor.h"

namespace t5x {

namespace {

// Python's \1 and \g<1> / \g<name-less index> -> std::regex's $1.
std::string python_to_ecma_format(const std::string& repl) {
  std::string out;
  for (size_t i = 0; i < repl.size(); ++i) {
    if (repl[i] == '$') { out += "$$"; continue; }
    if (repl[i] == '\\' && i + 1 < repl.size()) {
      if (std::isdigit(static_cast<unsigned char>(repl[i + 1]))) { out += '$'; out += repl[++i]; continue; }
      if (repl[i + 1] == 'g' && i + 2 < repl.size() && repl[i + 2] == '<') {
        size_t close = repl.find('>', i + 3);
        if (close != std::string::npos) {
          out += "$" + repl.substr(i + 3, close - i - 3);
          i = close;
          continue;
        }
      }
    }
    out += repl[i];
  }
  return out;
}

}  // namespace

std::vector<RestoreEntry> plan_restore(const std::vector<std::string>& targets,
                                       const std::vector<std::string>& ckpt_paths,
                                       const std::vector<AssignmentRule>& rules,
                                       const RestoreOptions& opt) {
  std::vector<std::regex> res;
  for (const auto& r : rules) {
    try {
      res.emplace_back(r.pattern);
    } catch (const std::regex_error& e) {
      throw std::invalid_argument("[assignment_map] invalid regex '" + r.pattern + "': " + e.what());
    }
  }
  const std::set<std::string> ckpt(ckpt_paths.begin(), ckpt_paths.end());
  std::set<std::string> used_ckpt;
  std::vector<bool> rule_used(rules.size(), false);
  std::vector<RestoreEntry> plan;
  std::string problems;
  for (const auto& t : targets) {
    RestoreEntry e{t, std::nullopt, ""};
    bool matched = false;
    for (size_t k = 0; k < rules.size() && !matched; ++k) {
      std::smatch m;
      if (!std::regex_match(t, m, res[k])) continue;
      matched = true;
      rule_used[k] = true;
      if (!rules[k].replacement) {
        e.reason = "skipped by rule '" + rules[k].pattern + "'";
        break;
      }
      std::string src = m.format(python_to_ecma_format(*rules[k].replacement));
      if (!ckpt.count(src)) {
        problems += "\n  rule '" + rules[k].pattern + "' maps " + t + " to " + src +
                    ", which is not in the checkpoint";
        break;
      }
      e.checkpoint_path = src;
      e.reason = "rule '" + rules[k].pattern + "'";
    }
    if (!matched) {
      if (ckpt.count(t)) {
        e.checkpoint_path = t;
        e.reason = "same name";
      } else if (opt.fallback_to_scratch) {
        e.reason = "missing from checkpoint (fresh initialisation)";
      } else {
        problems += "\n  " + t + " is not in the checkpoint (set fallback_to_scratch or add an "
                    "assignment_map rule)";
      }
    }
    if (e.checkpoint_path) used_ckpt.insert(*e.checkpoint_path);
    plan.push_back(std::move(e));
  }
  if (opt.strict)
    for (const auto& c : ckpt_paths)
      if (!used_ckpt.count(c)) problems += "\n  checkpoint leaf " + c + " is not used (strict restore)";
  if (opt.require_all_rules_match)
    for (size_t k = 0; k < rules.size(); ++k)
      if (!rule_used[k]) problems += "\n  assignment_map rule '" + rules[k].pattern + "' matched nothing";
  if (!problems.empty()) throw CheckpointError("cannot restore:" + problems);
  return plan;
}

}  // namespace t5x
