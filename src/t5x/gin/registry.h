// Registry of gin configurables: the names a gin file may bind and the
// parameters each accepts, with optional defaults.
//
// Each configurable has a canonical name, the one t5x's gin files write and
// the C++ layers read (`network.T5Config`, `utils.DatasetConfig`,
// `train_script.train`, ...), and a full name, the one gin-config registers
// it under: its module path plus the name (`t5x.examples.t5.network.T5Config`,
// `t5x.utils.DatasetConfig`). As in gin-config (selector_map.py), a name in
// gin text matches a configurable when it is its full name or a suffix of it
// that starts after a dot: `DatasetConfig`, `utils.DatasetConfig` and
// `t5x.utils.DatasetConfig` all name `utils.DatasetConfig`, and `train` names
// `train_script.train`; `garbage.utils.DatasetConfig` and `tils.DatasetConfig`
// name nothing. A name equal to a full name matches that one only; otherwise
// a name matching several configurables is ambiguous (an error).
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
  // gin-config's registered name: the module path plus the name, e.g.
  // "t5x.examples.t5.network.T5Config". add() fills an empty one with `name`;
  // `name` must be this or a dotted suffix of it.
  std::string full_name;
  std::vector<ParamSpec> params;
  std::string doc;               // one line, shown by tools
  // Visible to a config only once one of its texts imports the module, as
  // gin's dynamic registration registers a module's classes on import:
  // t5x's scalable_t5 network, whose `network.T5Config` would otherwise
  // make the T5 network's ambiguous in every file that writes it without
  // an import (Registry::find with `loaded`).
  bool needs_import = false;

  const ParamSpec* param(std::string_view p) const;
};

// What the import statements of one gin text bind, as gin-config's
// dynamic registration does (config.py, ParseContext.process_import): each
// bound name maps to the module path it stands for.
//   import a.b.c            a -> a            (the top-level package)
//   import a.b.c as d       d -> a.b.c
//   from a.b import c       c -> a.b.c
//   from a.b import c as d  d -> a.b.c
// `from __gin__ import dynamic_registration` and imports of `__main__`
// (`import __main__ as train_script`) bind nothing: t5x.cpp has no __main__
// module; its scripts' configurables are registered as `train_script.train`,
// `eval_script.evaluate`, `infer_script.infer`, which match as usual. A later
// import of the same name replaces the earlier one (Python's rule).
class Imports {
 public:
  // Records one import statement. `module` is the whole dotted path (for
  // `from a.b import c`: "a.b.c"); `alias` is the `as` name or empty.
  // Throws GinError at `where` for `__gin__` imports gin-config rejects (an
  // alias, an unknown feature).
  void add(const std::string& module, bool is_from, const std::string& alias,
           const SourceLocation& where = {});
  // `name` with its first component replaced by the module path it was
  // imported as, or nullopt when that component is no imported name.
  std::optional<std::string> expand(std::string_view name) const;
  bool empty() const { return bound_.empty(); }
  const std::map<std::string, std::string, std::less<>>& bound() const { return bound_; }

 private:
  std::map<std::string, std::string, std::less<>> bound_;  // bound name -> module path
};

class Registry {
 public:
  // The process-wide registry. It starts with t5x's names
  // (register_t5x_configurables); the code that owns a behaviour adds its
  // own. Registration is not thread-safe: register before parsing.
  static Registry& global();

  // Adds a configurable. Throws std::invalid_argument ("[gin] ...") when the
  // canonical or full name is already registered, the canonical name is not
  // a dotted suffix of the full name, or a parameter is listed twice.
  void add(ConfigurableSpec spec);

  // Convenience: params given as {name, default gin text} pairs; an empty
  // text means "no default". The defaults are parsed with parse_value.
  // `full_name` empty: the name itself.
  void add(const std::string& name,
           const std::vector<std::pair<std::string, std::string>>& params,
           const std::string& doc = {}, const std::string& full_name = {});

  // A second full name for a registered configurable: a module whose class
  // this port implements as the same configurable (t5x's GPU copy of the T5
  // network, `t5x.contrib.gpu.t5.network.T5Config`). Both full names resolve
  // to it, through imports and by suffix, and a suffix both end with is not
  // ambiguous. Throws std::invalid_argument when `canonical` is not
  // registered, `full_name` is, or `full_name` does not end with the
  // configurable's own name (the last component of its full name).
  void add_alias(const std::string& full_name, const std::string& canonical);
  // The configurable registered (or aliased) under exactly this full name.
  const ConfigurableSpec* by_full_name(std::string_view full_name) const;
  // matches(name) less the needs_import configurables of modules not in
  // `loaded` (what a config that imported `loaded` can reach by suffix).
  std::vector<const ConfigurableSpec*> visible_matches(std::string_view name,
                                                       const std::vector<std::string>& loaded) const;
  // Whether `s` (or an alias of it) is in one of the `loaded` modules.
  bool is_loaded(const ConfigurableSpec& s, const std::vector<std::string>& loaded) const;
  // Marks a registered configurable needs_import.
  void require_import(const std::string& canonical);
  // For the C++ layers' own lookups: the configurable whose canonical name
  // is exactly `name`, else find(name) (a full name, a unique suffix).
  const ConfigurableSpec* by_name(std::string_view name) const;

  bool contains(std::string_view canonical_name) const;
  // The configurable whose canonical name is exactly `canonical_name`.
  const ConfigurableSpec* get(std::string_view canonical_name) const;
  size_t size() const { return specs_.size(); }
  std::vector<std::string> names() const;  // sorted

  // Resolves a name as written in gin text (see the header comment).
  // Returns nullptr when nothing matches; throws GinError at `where` when
  // several configurables match.
  const ConfigurableSpec* find(std::string_view name, const SourceLocation& where = {}) const;

  // Resolution under import statements (gin-config's dynamic registration):
  // a name whose first component is an imported name is expanded to its full
  // path (`moe_partitioning.MoePjitPartitioner` ->
  // `t5x.contrib.moe.partitioning.MoePjitPartitioner`), which must equal a
  // registered full name; any other name matches as find() above, except
  // that with `loaded` (the modules the config's texts have imported, e.g.
  // `t5x.examples.scalable_t5.network`) a needs_import configurable of a
  // module not loaded is not matched, and among several matches the one in
  // a loaded module is taken when it is the only one there: under dynamic
  // registration only imported modules' configurables are registered, so
  // t5x's `small.gin` (no import of its own) binds `network.T5Config` of the
  // network module its included `base.gin` imported.
  const ConfigurableSpec* find(std::string_view name, const Imports& imports, const SourceLocation& where = {},
                               const std::vector<std::string>* loaded = nullptr) const;
  // find(name, imports, where, loaded) that throws GinError at `where` for an
  // unknown name; for an expanded one the message gives the full path and
  // the hint the nearest registered full names.
  const ConfigurableSpec& lookup(std::string_view name, const Imports& imports, const SourceLocation& where,
                                 const std::vector<std::string>* loaded = nullptr) const;

  // Every configurable `name` matches under gin-config's rule (the header
  // comment), in full-name order, each once (an alias adds none); no error
  // for several.
  std::vector<const ConfigurableSpec*> matches(std::string_view name) const;

  // The shortest dotted suffix of `spec.full_name` that names `spec` alone
  // (gin-config's minimal_selector).
  std::string minimal_name(const ConfigurableSpec& spec) const;

  // find() that throws GinError at `where` for an unknown name, listing the
  // nearest registered names as the hint.
  const ConfigurableSpec& lookup(std::string_view name, const SourceLocation& where) const;

  // Throws GinError at `where` when `spec` has no parameter `param`,
  // suggesting the nearest parameter names.
  void check_param(const ConfigurableSpec& spec, std::string_view param,
                   const SourceLocation& where) const;

  // Up to `k` canonical names closest to `name` by edit distance
  // (case-insensitive, compared with the canonical name, the full name and,
  // on the last component, the configurable's own name).
  std::vector<std::string> nearest(std::string_view name, size_t k = 3) const;

  // For an import of `module` that names no module of a registered
  // configurable (nor a package above one), the known module it is one or two
  // letters away from (`t5x.modelz` -> `t5x.models`): most likely a typo, on
  // which Python gin fails with ModuleNotFoundError. nullopt for a known
  // module and for one far from every known module (a user's own task module,
  // which t5x.cpp cannot know and does not need).
  std::optional<std::string> misspelled_module(std::string_view module) const;

 private:
  // GinError "configurable name 'X' is ambiguous: ..." with the minimal names.
  [[noreturn]] void throw_ambiguous(std::string_view name, const std::vector<const ConfigurableSpec*>& m,
                                    const SourceLocation& where) const;
  std::map<std::string, ConfigurableSpec, std::less<>> specs_;      // by canonical name
  std::map<std::string, std::string, std::less<>> by_full_name_;   // full -> canonical
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
