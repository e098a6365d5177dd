// A parsed gin configuration: bindings, macros and imports, with gin's
// override order and scope resolution, typed getters and the operative
// config that t5x writes to MODEL_DIR/config.gin.
//
// Behaviour reproduced from gin-config as t5x drives it
// (gin.parse_config_files_and_bindings, t5x/gin_utils.py):
// - files are read in order, then command-line bindings; a later binding of
//   the same (scope, configurable, param) replaces the earlier one;
// - `include` inlines a file at that point (see resolve_gin_path for where
//   it is looked for); cycles are an error;
// - a query in scope "a/b" sees bindings of scope "a/b", then "a", then ""
//   (most specific wins);
// - `NAME = %gin.REQUIRED` does not replace a value set earlier (so model and
//   run files may come in either order); any other later value replaces it;
// - macros are resolved lazily, when a value is read, so a macro may be
//   defined after its use or on the command line.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "t5x/gin/error.h"
#include "t5x/gin/registry.h"
#include "t5x/gin/value.h"

namespace t5x::gin {

struct Binding {
  std::string scope;         // "" or "a/b"
  std::string configurable;  // canonical registry name when a registry is used
  std::string param;
  Value value;               // as written (macros unresolved)
  SourceLocation where;      // the binding's line
};

struct Macro {
  std::string name;
  Value value;
  SourceLocation where;
};

struct LoadOptions {
  // Directories tried for relative paths, in order (--gin_search_paths).
  std::vector<std::string> search_paths;
  // Keep bindings of unregistered configurables and @references to them
  // instead of failing (gin's skip_unknown). Unknown parameters of known
  // configurables still fail.
  bool skip_unknown = false;
};

// A macro that some binding needs but that has no usable value.
struct MissingMacro {
  std::string name;
  bool required = false;     // declared `NAME = %gin.REQUIRED` (else undefined)
  SourceLocation declared;   // where REQUIRED was written (required only)
  SourceLocation used;       // where %NAME was written
  std::string needed_by;     // "scope/configurable.param" of the binding
};

class Config {
 public:
  // `registry` checks names while parsing (unknown configurable, unknown
  // parameter or unknown @reference -> GinError with the nearest names) and
  // supplies defaults to get(). With
  // nullptr nothing is checked and names are kept exactly as written.
  explicit Config(const Registry* registry = &Registry::global());

  // ---- loading -----------------------------------------------------------
  // Reads a gin file (resolved with resolve_gin_path from the working
  // directory) and everything it includes.
  void parse_file(const std::string& path, const LoadOptions& options = {});
  // Reads gin text; `origin` names it in errors ("<--gin.MODEL_DIR>", ...).
  // Includes are resolved against the search paths and the working directory.
  // Import lines bind names for the rest of the text they are written in
  // (see Imports in registry.h), as each gin.parse_config call has its own
  // parse context: a file's imports do not reach the files it includes nor
  // the file that includes it, and each parse_string call starts with none.
  void parse_string(std::string_view text, const std::string& origin,
                    const LoadOptions& options = {});
  // Reads command-line bindings in order, each {text, origin}. As
  // gin.parse_config_files_and_bindings parses the joined --gin_bindings
  // once, an import in one binding applies to those after it.
  void parse_bindings(const std::vector<std::pair<std::string, std::string>>& bindings,
                      const LoadOptions& options = {});
  // Adds one binding / macro directly (checked against the registry).
  void bind(const std::string& scope, const std::string& configurable, const std::string& param,
            Value value, SourceLocation where = {}, bool skip_unknown = false);
  void set_macro(const std::string& name, Value value, SourceLocation where = {});

  // ---- queries -----------------------------------------------------------
  // The binding seen from `scope` (most specific scope wins), or nullptr.
  // `configurable` may use any name form the registry accepts.
  const Binding* find(std::string_view scope, std::string_view configurable,
                      std::string_view param) const;
  bool has(std::string_view scope, std::string_view configurable, std::string_view param) const {
    return find(scope, configurable, param) != nullptr;
  }

  // The value with all macros resolved (deeply). Without a binding the
  // registry default is used; with neither, or when a needed macro is
  // missing or REQUIRED, throws GinError (location of the binding or of the
  // %MACRO use; the hint names the --gin.NAME=... flag to pass).
  Value get(std::string_view scope, std::string_view configurable, std::string_view param) const;
  // Like get() but nullopt when there is neither a binding nor a default.
  std::optional<Value> get_optional(std::string_view scope, std::string_view configurable,
                                    std::string_view param) const;

  // Typed getters. A kind mismatch throws GinError at the binding's
  // file:line naming the parameter, the expected and the actual kind (and
  // the macro the value came through, if any). get_double accepts ints;
  // get_list accepts lists and tuples.
  int64_t get_int(std::string_view scope, std::string_view configurable, std::string_view param) const;
  double get_double(std::string_view scope, std::string_view configurable, std::string_view param) const;
  std::string get_string(std::string_view scope, std::string_view configurable, std::string_view param) const;
  bool get_bool(std::string_view scope, std::string_view configurable, std::string_view param) const;
  std::vector<Value> get_list(std::string_view scope, std::string_view configurable, std::string_view param) const;
  std::vector<std::pair<Value, Value>> get_dict(std::string_view scope, std::string_view configurable,
                                                std::string_view param) const;
  Reference get_reference(std::string_view scope, std::string_view configurable, std::string_view param) const;
  // get_string with ${VAR} and ${VAR:-default} taken from the environment
  // (expand_env), for paths such as '${T5X_DATA_DIR:-data}/vocab/x.model'.
  std::string get_path(std::string_view scope, std::string_view configurable, std::string_view param) const;
  // True when the parameter resolves to None (or is unbound with default None).
  bool is_none(std::string_view scope, std::string_view configurable, std::string_view param) const;

  // Names of the parameters bound for `configurable` as seen from `scope`
  // (bindings of the scope and its prefixes), sorted.
  std::vector<std::string> bound_params(std::string_view scope,
                                        std::string_view configurable) const;

  // Resolves every %MACRO in `v` (deeply). Throws GinError for an undefined
  // or REQUIRED macro (at the %NAME use) and for macro cycles.
  Value resolve(const Value& v) const;
  // A macro's resolved value; throws like resolve() when missing.
  Value macro_value(std::string_view name) const;
  const Macro* find_macro(std::string_view name) const;

  // Every missing or REQUIRED macro reachable from the bindings, sorted by
  // name (one entry per macro, first use). check_complete() throws one
  // GinError listing them all, with the --gin.NAME=... hint.
  std::vector<MissingMacro> missing_macros() const;
  void check_complete() const;
  // Throws the GinError resolve() throws for the first macro cycle reachable
  // from the bindings (`A = %B` with `B = %A`), missing macros aside: what
  // `t5x config` checks, as it resolves nothing else.
  void check_macro_cycles() const;

  // ---- contents ----------------------------------------------------------
  const std::vector<Binding>& bindings() const { return bindings_; }  // first-bound order
  const std::map<std::string, Macro, std::less<>>& macros() const { return macros_; }
  const std::vector<std::string>& imports() const { return imports_; }  // deduplicated
  // What loading noticed but accepted, one line each with its place: an
  // import one or two letters from a known module (Registry::misspelled_module).
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::vector<std::string>& files() const { return files_; }      // in parse order
  const Registry* registry() const { return registry_; }

  // Same bindings and macros (values compared, locations ignored; a
  // reference compares by the configurable it names).
  bool equivalent(const Config& other) const;

  // The effective configuration as gin text: imports, macros (sorted, kept
  // as written, e.g. `%gin.REQUIRED`), then one section per scoped
  // configurable (sorted) with `scope/configurable.param = value` lines.
  // Parsing it gives an equivalent() Config.
  std::string operative_config_str() const;
  // Writes operative_config_str() to `<model_dir>/config.gin`, creating the
  // directory. Throws GinError on I/O failure.
  void write_operative_config(const std::string& model_dir) const;

 private:
  const Registry* registry_;
  std::vector<Binding> bindings_;
  std::map<std::string, size_t, std::less<>> index_;  // key -> bindings_ slot
  std::map<std::string, Macro, std::less<>> macros_;
  std::vector<std::string> imports_;
  std::vector<std::string> warnings_;
  std::vector<std::string> files_;
  // The module paths imported so far, by any text: what gin's dynamic
  // registration would have registered (Registry::find's `loaded`).
  std::vector<std::string> loaded_modules_;

  void parse_text(std::string_view text, const std::string& origin, const LoadOptions& options,
                  std::vector<std::string>& include_stack, Imports& imports);
  // The registry name a binding or reference written as `name` is stored
  // under: the canonical name of the configurable it resolves to under
  // `imports` (`as_full`, for references: the canonical name if that alone
  // finds it without imports, else its full name); an unknown name with skip_unknown
  // as written, or expanded when it goes through an import; else throws.
  std::string resolve_name(std::string_view name, const Imports& imports, bool skip_unknown,
                           bool as_full, const SourceLocation& where) const;
  // `v` with every @reference written through an import resolved by
  // resolve_name (as_full); others are only checked, unless skip_unknown.
  Value resolve_references(const Value& v, const Imports& imports, bool skip_unknown) const;
  void store(const std::string& scope, std::string conf, const std::string& param, Value value,
             SourceLocation where);
  void parse_path(const std::string& path, const std::string& including_file,
                  const SourceLocation& where, const LoadOptions& options,
                  std::vector<std::string>& include_stack);
  std::string canonical(std::string_view configurable) const;
  void check_references(const Value& v) const;  // @names must be registered
  // A reference's stored name: the canonical name when that alone reaches
  // `spec` in this config (Registry::visible_matches), else the full name.
  std::string reference_name(const ConfigurableSpec& spec) const;
  Value resolve_impl(const Value& v, std::vector<std::string>& stack) const;
  Value get_checked(std::string_view scope, std::string_view configurable, std::string_view param,
                    const Binding** binding) const;
  template <class T, class F>
  T typed(std::string_view scope, std::string_view configurable, std::string_view param,
          const char* what, F&& convert) const;
  // With `cycles_throw`, a cycle throws as resolve() does; else it is skipped.
  void collect_missing(const Value& v, const std::string& needed_by, std::vector<std::string>& stack,
                       std::vector<MissingMacro>& out, bool cycles_throw = false) const;
};

// The scope a referenced configurable runs in, as gin-config evaluates a
// reference (config.py, _decorate_with_scope): an unscoped `@f()` bound in
// scope "outer" runs in "outer" (it inherits the caller's scope); a scoped
// `@train/f()` runs in "train" alone, whatever the caller's scope (gin enters
// the reference's own scope list, replacing the active one). Write
// `@outer/train/f()` for the nested scope.
std::string reference_scope(std::string_view caller, std::string_view reference);

// Where a gin path is found: absolute paths as they are; a relative path is
// tried (1) against the working directory (gin's default "" search path),
// (2) against each search path in order, as gin-config does, then (3) next
// to `including_file` when given (an addition: where gin would fail). Returns
// the first existing file, or nullopt; `tried` lists the candidates in order.
std::optional<std::string> resolve_gin_path(const std::string& path,
                                            const std::string& including_file,
                                            const std::vector<std::string>& search_paths,
                                            std::vector<std::string>* tried = nullptr);

// Parses `files` in order, then `bindings` (each a piece of gin text, named
// "<origin>" in errors), as gin.parse_config_files_and_bindings.
Config parse_config_files_and_bindings(const std::vector<std::string>& files,
                                       const std::vector<std::string>& bindings,
                                       const LoadOptions& options = {},
                                       const Registry* registry = &Registry::global());

// ${VAR} and ${VAR:-default} in `s` from the environment (an empty VAR
// counts as unset). An unset VAR without a default throws GinError at `at`
// (a typo should not read the wrong directory), as does an unclosed '${' or
// a NUL character (a path cannot hold one).
// The same rule as the task files' paths (docs/seqio.md).
std::string expand_env(const std::string& s, const SourceLocation& at);

}  // namespace t5x::gin
