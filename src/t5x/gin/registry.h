// Registry of gin configurables: the names a gin file may bind and the
// parameters each accepts, with optional defaults.
//
// Names follow t5x's gin files (`network.T5Config`, `utils.DatasetConfig`,
// `train_script.train`, ...). As in gin, a name may be written shorter or
// longer than registered as long as the dotted suffixes agree and the match
// is unique: `DatasetConfig`, `utils.DatasetConfig` and
// `t5x.utils.DatasetConfig` all name `utils.DatasetConfig`, and `train`
// names `train_script.train`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "t5x/gin/error.h"
#include "t5x/gin/value.h"

namespace t5x::gin {

struct ParamSpec {
  std::string name;
  std::optional<Value> default_value;  // nullopt: no default (the caller decides)
};

struct ConfigurableSpec {
  std::string name;              // canonical name, e.g. "network.T5Config"
  std::vector<ParamSpec> params;
  std::string doc;               // one line, shown by tools

  const ParamSpec* param(std::string_view p) const;
};

class Registry {
 public:
  // The process-wide registry. It starts with t5x's names
  // (register_t5x_configurables); the code that owns a behaviour adds its
  // own. Registration is not thread-safe: register before parsing.
  static Registry& global();

  // Adds a configurable. Throws std::invalid_argument ("[gin] ...") when the
  // name is already registered or a parameter is listed twice.
  void add(ConfigurableSpec spec);

  // Convenience: params given as {name, default gin text} pairs; an empty
  // text means "no default". The defaults are parsed with parse_value.
  void add(const std::string& name,
           const std::vector<std::pair<std::string, std::string>>& params,
           const std::string& doc = {});

  bool contains(std::string_view canonical_name) const;
  size_t size() const { return specs_.size(); }
  std::vector<std::string> names() const;  // sorted

  // Resolves a name as written in gin text (see the header comment).
  // Returns nullptr when nothing matches; throws GinError at `where` when
  // several configurables match.
  const ConfigurableSpec* find(std::string_view name, const SourceLocation& where = {}) const;

  // find() that throws GinError at `where` for an unknown name, listing the
  // nearest registered names as the hint.
  const ConfigurableSpec& lookup(std::string_view name, const SourceLocation& where) const;

  // Throws GinError at `where` when `spec` has no parameter `param`,
  // suggesting the nearest parameter names.
  void check_param(const ConfigurableSpec& spec, std::string_view param,
                   const SourceLocation& where) const;

  // Up to `k` registered names closest to `name` by edit distance
  // (case-insensitive, compared on the full name and on its last component).
  std::vector<std::string> nearest(std::string_view name, size_t k = 3) const;

 private:
  std::map<std::string, ConfigurableSpec, std::less<>> specs_;
};

// Levenshtein distance, case-insensitive.
size_t edit_distance(std::string_view a, std::string_view b);

// Up to `k` of `candidates` closest to `word` (distance <= max(2, |word|/3)),
// nearest first.
std::vector<std::string> nearest_names(std::string_view word,
                                       const std::vector<std::string>& candidates,
                                       size_t k = 3);

// Registers the configurables that t5x's gin files (and ours under configs/)
// bind, with t5x's parameter names and defaults. Idempotent.
void register_t5x_configurables(Registry& registry = Registry::global());

}  // namespace t5x::gin
