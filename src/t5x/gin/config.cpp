#include "t5x/gin/config.h"

#include <algorithm>
#include <cstdlib>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "t5x/gin/parser.h"

namespace t5x::gin {
namespace fs = std::filesystem;

static std::string key_of(std::string_view scope, std::string_view conf, std::string_view param) {
  std::string k(scope);
  k += '\x1f';
  k += conf;
  k += '\x1f';
  k += param;
  return k;
}

static std::string selector_str(std::string_view scope, std::string_view conf,
                                std::string_view param) {
  std::string s;
  if (!scope.empty()) s = std::string(scope) + "/";
  return s + std::string(conf) + "." + std::string(param);
}

static std::string flag_hint(const std::string& name) {
  return "pass --gin." + name + "=... on the command line, or bind `" + name +
         " = ...` in a gin file";
}

Config::Config(const Registry* registry) : registry_(registry) {}

std::optional<std::string> resolve_gin_path(const std::string& path,
                                            const std::string& including_file,
                                            const std::vector<std::string>& search_paths,
                                            std::vector<std::string>* tried) {
  std::vector<fs::path> candidates;
  const fs::path p(path);
  if (p.is_absolute()) {
    candidates.push_back(p);
  } else {
    candidates.push_back(p);
    for (const std::string& dir : search_paths) candidates.push_back(fs::path(dir) / p);
    if (!including_file.empty()) candidates.push_back(fs::path(including_file).parent_path() / p);
  }
  for (const fs::path& c : candidates) {
    if (tried) tried->push_back(c.string());
    std::error_code ec;
    if (fs::is_regular_file(c, ec)) return c.lexically_normal().string();
  }
  return std::nullopt;
}

void Config::parse_file(const std::string& path, const LoadOptions& options) {
  std::vector<std::string> stack;
  parse_path(path, "", SourceLocation{}, options, stack);
}

void Config::parse_string(std::string_view text, const std::string& origin,
                          const LoadOptions& options) {
  std::vector<std::string> stack;
  Imports imports;
  parse_text(text, origin, options, stack, imports);
}

void Config::parse_bindings(const std::vector<std::pair<std::string, std::string>>& bindings,
                            const LoadOptions& options) {
  Imports imports;
  for (const auto& [text, origin] : bindings) {
    std::vector<std::string> stack;
    parse_text(text, origin, options, stack, imports);
  }
}

// "did you mean 'x.gin'? " for .gin files next to the tried candidates.
static std::string similar_files(const std::vector<std::string>& tried) {
  std::vector<std::string> names;
  std::string dir_of_match;
  for (const std::string& t : tried) {
    const fs::path p(t);
    std::error_code ec;
    const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<std::string> here;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".gin") here.push_back(e.path().filename().string());
    const std::vector<std::string> near = nearest_names(p.filename().string(), here);
    if (!near.empty()) {
      std::string s = "did you mean ";
      for (size_t i = 0; i < near.size(); ++i)
        s += (i ? ", '" : "'") + (p.parent_path() / near[i]).string() + "'";
      return s + "? ";
    }
  }
  return {};
}

void Config::parse_path(const std::string& path, const std::string& including_file,
                        const SourceLocation& where, const LoadOptions& options,
                        std::vector<std::string>& stack) {
  std::vector<std::string> tried;
  const std::optional<std::string> found =
      resolve_gin_path(path, including_file, options.search_paths, &tried);
  if (!found) {
    if (path.empty()) throw GinError(where, "empty gin file name", "name a .gin file, e.g. --gin_file=train.gin");
    std::string list;
    for (const std::string& t : tried) list += (list.empty() ? "" : ", ") + t;
    for (const std::string& t : tried) {
      std::error_code dir_ec;
      if (fs::is_directory(t, dir_ec))
        throw GinError(where, "gin file '" + path + "' is a directory (" + t + ")",
                       "name a .gin file in it, e.g. " + (fs::path(t) / "train.gin").string());
      if (fs::exists(t, dir_ec))
        throw GinError(where, "gin file '" + path + "' is not a regular file (" + t + ")",
                       "name a .gin text file");
    }
    throw GinError(where, "cannot find gin file '" + path + "' (tried " + list + ")",
                   similar_files(tried) +
                       "check the path (t5x also searches the directories of --gin_search_paths=DIR)");
  }
  std::error_code ec;
  const std::string id = fs::weakly_canonical(*found, ec).string();
  if (std::find(stack.begin(), stack.end(), id) != stack.end()) {
    std::string chain;
    for (const std::string& s : stack) chain += s + " -> ";
    throw GinError(where, "include cycle: " + chain + id,
                   "remove one of the include statements in the cycle");
  }
  std::ifstream in(*found, std::ios::binary);
  if (!in) throw GinError(where, "cannot read gin file '" + *found + "'", "check its permissions");
  std::stringstream buf;
  buf << in.rdbuf();
  files_.push_back(*found);
  stack.push_back(id);
  Imports imports;  // a file starts with none of its includer's imports
  parse_text(buf.str(), *found, options, stack, imports);
  stack.pop_back();
}

void Config::parse_text(std::string_view text, const std::string& origin,
                        const LoadOptions& options, std::vector<std::string>& stack,
                        Imports& imports) {
  // Statements are applied in order so that an include lands where it is
  // written and later lines override it.
  const bool is_file = !stack.empty();
  for (Statement& s : parse_gin(text, origin)) {
    switch (s.kind) {
      case Statement::Kind::kImport:
        imports.add(s.module, s.is_from, s.alias, s.where);
        if (registry_)
          if (auto near = registry_->misspelled_module(s.module))
            warnings_.push_back(s.where.str() + ": import of '" + s.module + "': no module of that name is known; " +
                                "did you mean '" + *near + "'? (Python gin fails on a module it cannot import)");
        if (std::find(imports_.begin(), imports_.end(), s.text) == imports_.end())
          imports_.push_back(s.text);
        if (std::find(loaded_modules_.begin(), loaded_modules_.end(), s.module) == loaded_modules_.end())
          loaded_modules_.push_back(s.module);
        break;
      case Statement::Kind::kInclude:
        parse_path(s.text, is_file ? origin : "", s.where, options, stack);
        break;
      case Statement::Kind::kMacro:
        set_macro(s.name, resolve_references(s.value, imports, options.skip_unknown), s.where);
        break;
      case Statement::Kind::kBinding: {
        if (!registry_) {
          store(s.scope, s.configurable, s.name, std::move(s.value), s.where);
          break;
        }
        const std::string conf =
            resolve_name(s.configurable, imports, options.skip_unknown, false, s.where);
        if (const ConfigurableSpec* spec = registry_->get(conf))
          registry_->check_param(*spec, s.name, s.where);
        store(s.scope, conf, s.name, resolve_references(s.value, imports, options.skip_unknown),
              s.where);
        break;
      }
    }
  }
}

void Config::bind(const std::string& scope, const std::string& configurable,
                  const std::string& param, Value value, SourceLocation where, bool skip_unknown) {
  std::string conf = configurable;
  if (registry_) {
    const ConfigurableSpec* spec = registry_->find(configurable, Imports{}, where, &loaded_modules_);
    if (!spec && !skip_unknown) spec = &registry_->lookup(configurable, Imports{}, where, &loaded_modules_);  // throws
    if (spec) {
      registry_->check_param(*spec, param, where);
      conf = spec->name;
    }
  }
  if (!skip_unknown) check_references(value);
  store(scope, std::move(conf), param, std::move(value), std::move(where));
}

std::string Config::reference_name(const ConfigurableSpec& spec) const {
  const auto by_canonical = registry_->visible_matches(spec.name, loaded_modules_);
  return by_canonical.size() == 1 && by_canonical[0] == &spec ? spec.name : spec.full_name;
}

std::string Config::resolve_name(std::string_view name, const Imports& imports, bool skip_unknown,
                                 bool as_full, const SourceLocation& where) const {
  const ConfigurableSpec* spec = registry_->find(name, imports, where, &loaded_modules_);
  if (!spec && !skip_unknown) spec = &registry_->lookup(name, imports, where, &loaded_modules_);  // throws
  if (spec) {
    if (!as_full) return spec->name;
    // A reference keeps the canonical name when that alone names the same
    // configurable (what the C++ layers and the operative config show),
    // else its full name. (A scalable_t5 name this config has not imported
    // is no competitor: Registry::visible_matches.)
    return reference_name(*spec);
  }
  // Unknown and skipped: an imported name keeps its module path, so that it
  // cannot later be taken for a registered configurable with the same suffix.
  if (std::optional<std::string> full = imports.expand(name)) return *full;
  return std::string(name);
}

// `v` with `f` applied to each @reference (deeply).
template <class F>
static Value map_references(const Value& v, F&& f) {
  switch (v.kind()) {
    case ValueKind::kReference: {
      Reference r = v.as_reference();
      f(r, v.where());
      return Value::reference(std::move(r)).at(v.where());
    }
    case ValueKind::kList:
    case ValueKind::kTuple: {
      std::vector<Value> items;
      for (const Value& i : v.items()) items.push_back(map_references(i, f));
      return (v.kind() == ValueKind::kList ? Value::list(std::move(items))
                                           : Value::tuple(std::move(items))).at(v.where());
    }
    case ValueKind::kDict: {
      std::vector<std::pair<Value, Value>> entries;
      for (const auto& [k, x] : v.entries()) entries.emplace_back(map_references(k, f), map_references(x, f));
      return Value::dict(std::move(entries)).at(v.where());
    }
    default:
      return v;
  }
}

Value Config::resolve_references(const Value& v, const Imports& imports, bool skip_unknown) const {
  if (!registry_) return v;
  return map_references(v, [&](Reference& r, const SourceLocation& where) {
    if (imports.expand(r.name)) {
      r.name = resolve_name(r.name, imports, skip_unknown, true, where);
    } else if (registry_->matches(r.name).size() > 1) {
      // Several configurables end with it; this config reaches one
      // (Registry::find's `loaded`), kept under a name that names it alone.
      if (const ConfigurableSpec* spec = registry_->find(r.name, imports, where, &loaded_modules_))
        r.name = reference_name(*spec);
    } else if (!skip_unknown) {
      registry_->lookup(r.name, where);  // throws for an unknown name
    }
  });
}

void Config::store(const std::string& scope, std::string conf, const std::string& param,
                   Value value, SourceLocation where) {
  const std::string k = key_of(scope, conf, param);
  if (auto it = index_.find(k); it != index_.end()) {
    Binding& b = bindings_[it->second];
    b.value = std::move(value);
    b.where = std::move(where);
    return;
  }
  index_.emplace(k, bindings_.size());
  bindings_.push_back(Binding{scope, std::move(conf), param, std::move(value), std::move(where)});
}

void Config::check_references(const Value& v) const {
  if (!registry_) return;
  if (v.kind() == ValueKind::kReference)
    registry_->lookup(v.as_reference().name, Imports{}, v.where(), &loaded_modules_);
  for (const Value& i : v.items()) check_references(i);
  for (const auto& [k, x] : v.entries()) {
    check_references(k);
    check_references(x);
  }
}

void Config::set_macro(const std::string& name, Value value, SourceLocation where) {
  // A REQUIRED declaration only marks a macro that nothing has set yet, so
  // model and run files can be given in either order (deliberate extension:
  // gin would let the later `NAME = %gin.REQUIRED` win).
  if (value.kind() == ValueKind::kRequired)
    if (const Macro* m = find_macro(name); m && m->value.kind() != ValueKind::kRequired) return;
  macros_[name] = Macro{name, std::move(value), std::move(where)};
}

// The C++ layers ask by canonical name; gin text's names are resolved as gin does.
static const ConfigurableSpec* spec_of(const Registry* registry, std::string_view configurable) {
  if (!registry) return nullptr;
  return registry->by_name(configurable);
}

std::string Config::canonical(std::string_view configurable) const {
  if (const ConfigurableSpec* spec = spec_of(registry_, configurable)) return spec->name;
  return std::string(configurable);
}

const Binding* Config::find(std::string_view scope, std::string_view configurable,
                            std::string_view param) const {
  const std::string conf = canonical(configurable);
  std::string s(scope);
  while (true) {
    if (auto it = index_.find(key_of(s, conf, param)); it != index_.end())
      return &bindings_[it->second];
    if (s.empty()) return nullptr;
    const size_t slash = s.rfind('/');
    s = slash == std::string::npos ? std::string() : s.substr(0, slash);
  }
}

std::vector<std::string> Config::bound_params(std::string_view scope,
                                              std::string_view configurable) const {
  const std::string conf = canonical(configurable);
  const std::string sc(scope);
  std::vector<std::string> out;
  for (const Binding& b : bindings_) {
    const bool prefix = b.scope.empty() || b.scope == sc ||
                        (sc.size() > b.scope.size() && sc.starts_with(b.scope) &&
                         sc[b.scope.size()] == '/');
    if (b.configurable == conf && prefix &&
        std::find(out.begin(), out.end(), b.param) == out.end())
      out.push_back(b.param);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string reference_scope(std::string_view caller, std::string_view reference) {
  return std::string(reference.empty() ? caller : reference);
}

const Macro* Config::find_macro(std::string_view name) const {
  auto it = macros_.find(name);
  return it == macros_.end() ? nullptr : &it->second;
}

Value Config::resolve_impl(const Value& v, std::vector<std::string>& stack) const {
  switch (v.kind()) {
    case ValueKind::kMacro: {
      const std::string& name = v.macro_name();
      const Macro* m = find_macro(name);
      if (!m)
        throw GinError(v.where(), "macro '" + name + "' is not defined (used as %" + name + ")",
                       flag_hint(name));
      if (m->value.kind() == ValueKind::kRequired)
        throw GinError(v.where(),
                       "macro '" + name + "' is required but was not set (declared " +
                           "%gin.REQUIRED at " + m->where.str() + ")",
                       flag_hint(name));
      if (std::find(stack.begin(), stack.end(), name) != stack.end()) {
        std::string chain;
        for (const std::string& s : stack) chain += s + " -> ";
        throw GinError(v.where(), "macro cycle: " + chain + name,
                       "make one of these macros a value instead of a %reference");
      }
      stack.push_back(name);
      Value out = resolve_impl(m->value, stack);
      stack.pop_back();
      return out;
    }
    case ValueKind::kList:
    case ValueKind::kTuple: {
      std::vector<Value> items;
      for (const Value& i : v.items()) items.push_back(resolve_impl(i, stack));
      Value out = v.kind() == ValueKind::kList ? Value::list(std::move(items))
                                               : Value::tuple(std::move(items));
      return std::move(out).at(v.where());
    }
    case ValueKind::kDict: {
      std::vector<std::pair<Value, Value>> entries;
      for (const auto& [k, x] : v.entries())
        entries.emplace_back(resolve_impl(k, stack), resolve_impl(x, stack));
      return Value::dict(std::move(entries)).at(v.where());
    }
    default:
      return v;
  }
}

Value Config::resolve(const Value& v) const {
  std::vector<std::string> stack;
  return resolve_impl(v, stack);
}

Value Config::macro_value(std::string_view name) const {
  return resolve(Value::macro(std::string(name)));
}

Value Config::get_checked(std::string_view scope, std::string_view configurable,
                          std::string_view param, const Binding** binding) const {
  const Binding* b = find(scope, configurable, param);
  *binding = b;
  const std::string sel = selector_str(scope, canonical(configurable), param);
  if (!b) {
    if (const ConfigurableSpec* spec = spec_of(registry_, configurable))
      if (const ParamSpec* p = spec->param(param); p && p->default_value) return *p->default_value;
    throw GinError(SourceLocation{}, "no value bound for " + sel,
                   "bind it in a gin file (`" + sel + " = ...`) or pass --gin." + sel + "=...");
  }
  if (b->value.kind() == ValueKind::kRequired)
    throw GinError(b->where, sel + " is required (gin.REQUIRED) but was not set",
                   "pass --gin." + sel + "=... or bind it in a gin file");
  return resolve(b->value);
}

Value Config::get(std::string_view scope, std::string_view configurable,
                  std::string_view param) const {
  const Binding* b = nullptr;
  return get_checked(scope, configurable, param, &b);
}

std::optional<Value> Config::get_optional(std::string_view scope, std::string_view configurable,
                                          std::string_view param) const {
  if (!find(scope, configurable, param)) {
    if (const ConfigurableSpec* spec = spec_of(registry_, configurable))
      if (const ParamSpec* p = spec->param(param); p && p->default_value) return *p->default_value;
    return std::nullopt;
  }
  return get(scope, configurable, param);
}

template <class T, class F>
T Config::typed(std::string_view scope, std::string_view configurable, std::string_view param,
                const char* what, F&& convert) const {
  const Binding* b = nullptr;
  Value v = get_checked(scope, configurable, param, &b);
  try {
    return convert(v);
  } catch (const GinError& e) {
    const std::string sel = selector_str(scope, canonical(configurable), param);
    std::string msg = sel + ": expected " + what + ", got " + v.describe();
    // Name the macro when the value came through one (e.g. `= %BATCH_SIZE`).
    if (b && b->value.kind() == ValueKind::kMacro)
      msg += " (from %" + b->value.macro_name() + " at " + v.where().str() + ")";
    std::string hint = "bind " + sel + " to a value of type " + what;
    // --gin.X=false arrives as the string 'false' (a bare word on the
    // command line is quoted): gin's booleans are True and False.
    if (std::string_view(what) == "bool" && v.kind() == ValueKind::kString) {
      std::string low = v.as_string();
      for (char& ch : low) ch = char(std::tolower(static_cast<unsigned char>(ch)));
      if (low == "true" || low == "false") hint = "write " + std::string(low == "true" ? "True" : "False") + " (gin's booleans are capitalised)";
    }
    throw GinError(b ? b->where : v.where(), msg, hint);
  }
}

int64_t Config::get_int(std::string_view s, std::string_view c, std::string_view p) const {
  return typed<int64_t>(s, c, p, "int", [](const Value& v) { return v.as_int(); });
}
double Config::get_double(std::string_view s, std::string_view c, std::string_view p) const {
  return typed<double>(s, c, p, "float", [](const Value& v) { return v.as_double(); });
}
std::string Config::get_string(std::string_view s, std::string_view c, std::string_view p) const {
  return typed<std::string>(s, c, p, "string", [](const Value& v) { return v.as_string(); });
}
std::string Config::get_path(std::string_view s, std::string_view c, std::string_view p) const {
  const std::string raw = get_string(s, c, p);
  return expand_env(raw, get(s, c, p).where());  // the string's place, through any macro
}

std::string expand_env(const std::string& s, const SourceLocation& at) {
  // The functions that open a path stop at a NUL: 'a.tsv\x00junk' read a.tsv.
  if (s.find('\0') != std::string::npos)
    throw GinError(at, "the path contains a NUL character (\\x00), which no file name can hold",
                   "remove the \\x00 escape from the string");
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "${") != 0) {
      out += s[i++];
      continue;
    }
    const size_t end = s.find('}', i);
    if (end == std::string::npos) throw GinError(at, "unclosed '${' in '" + s + "'", "write ${NAME} or ${NAME:-default}");
    std::string body = s.substr(i + 2, end - i - 2), def;
    const size_t dash = body.find(":-");
    const bool has_def = dash != std::string::npos;
    if (has_def) {
      def = body.substr(dash + 2);
      body = body.substr(0, dash);
    }
    const char* env = std::getenv(body.c_str());
    if (env && *env) out += env;
    else if (has_def) out += def;
    else
      throw GinError(at, "environment variable " + body + " is not set (in '" + s + "')",
                     "set it, or give a default: ${" + body + ":-DIR}");
    i = end + 1;
  }
  return out;
}

bool Config::get_bool(std::string_view s, std::string_view c, std::string_view p) const {
  return typed<bool>(s, c, p, "bool", [](const Value& v) { return v.as_bool(); });
}
std::vector<Value> Config::get_list(std::string_view s, std::string_view c,
                                    std::string_view p) const {
  return typed<std::vector<Value>>(s, c, p, "list", [](const Value& v) { return v.as_list(); });
}
std::vector<std::pair<Value, Value>> Config::get_dict(std::string_view s, std::string_view c,
                                                      std::string_view p) const {
  return typed<std::vector<std::pair<Value, Value>>>(s, c, p, "dict",
                                                     [](const Value& v) { return v.as_dict(); });
}
Reference Config::get_reference(std::string_view s, std::string_view c, std::string_view p) const {
  return typed<Reference>(s, c, p, "configurable reference",
                          [](const Value& v) { return v.as_reference(); });
}
bool Config::is_none(std::string_view s, std::string_view c, std::string_view p) const {
  return get(s, c, p).is_none();
}

void Config::collect_missing(const Value& v, const std::string& needed_by, std::vector<std::string>& stack,
                             std::vector<MissingMacro>& out, bool cycles_throw) const {
  if (v.kind() == ValueKind::kMacro) {
    const std::string& name = v.macro_name();
    const Macro* m = find_macro(name);
    const auto seen = [&] {
      return std::any_of(out.begin(), out.end(), [&](const MissingMacro& x) { return x.name == name; });
    };
    if (!m || m->value.kind() == ValueKind::kRequired) {
      if (!seen())
        out.push_back(MissingMacro{name, m != nullptr, m ? m->where : SourceLocation{}, v.where(),
                                   needed_by});
      return;
    }
    if (std::find(stack.begin(), stack.end(), name) != stack.end()) {
      if (cycles_throw) resolve(v);  // throws "macro cycle: ..." at this use
      return;                        // else resolve() reports it when read
    }
    stack.push_back(name);
    collect_missing(m->value, needed_by, stack, out, cycles_throw);
    stack.pop_back();
    return;
  }
  for (const Value& i : v.items()) collect_missing(i, needed_by, stack, out, cycles_throw);
  for (const auto& [k, x] : v.entries()) {
    collect_missing(k, needed_by, stack, out, cycles_throw);
    collect_missing(x, needed_by, stack, out, cycles_throw);
  }
}

void Config::check_macro_cycles() const {
  std::vector<MissingMacro> missing;
  std::vector<std::string> stack;
  for (const Binding& b : bindings_)
    collect_missing(b.value, selector_str(b.scope, b.configurable, b.param), stack, missing, true);
}

std::vector<MissingMacro> Config::missing_macros() const {
  std::vector<MissingMacro> out;
  std::vector<std::string> stack;
  for (const Binding& b : bindings_)
    collect_missing(b.value, selector_str(b.scope, b.configurable, b.param), stack, out);
  std::sort(out.begin(), out.end(),
            [](const MissingMacro& a, const MissingMacro& b) { return a.name < b.name; });
  return out;
}

void Config::check_complete() const {
  const std::vector<MissingMacro> missing = missing_macros();
  if (missing.empty()) return;
  std::string msg = "missing required gin macro" + std::string(missing.size() > 1 ? "s" : "") + ":";
  std::string hint = "pass";
  for (const MissingMacro& m : missing) {
    msg += "\n  " + m.name + (m.required ? " (gin.REQUIRED at " + m.declared.str() + ")"
                                         : std::string(" (never defined)")) +
           ", needed by " + m.needed_by + " at " + m.used.str();
    hint += " --gin." + m.name + "=...";
  }
  throw GinError(missing.front().used, msg, hint);
}

// `v` with each reference named by its configurable's canonical name
// (`@t5x.utils.DatasetConfig` and `@utils.DatasetConfig` are the same value).
static Value canonical_references(const Value& v, const Registry* registry) {
  if (!registry) return v;
  return map_references(v, [&](Reference& r, const SourceLocation&) {
    try {
      if (const ConfigurableSpec* spec = registry->find(r.name)) r.name = spec->name;
    } catch (const GinError&) {
    }
  });
}

bool Config::equivalent(const Config& other) const {
  if (bindings_.size() != other.bindings_.size() || macros_.size() != other.macros_.size())
    return false;
  for (const Binding& b : bindings_) {
    auto it = other.index_.find(key_of(b.scope, b.configurable, b.param));
    if (it == other.index_.end() ||
        !(canonical_references(other.bindings_[it->second].value, registry_) ==
          canonical_references(b.value, registry_)))
      return false;
  }
  for (const auto& [name, m] : macros_) {
    const Macro* o = other.find_macro(name);
    if (!o || !(canonical_references(o->value, registry_) == canonical_references(m.value, registry_)))
      return false;
  }
  return true;
}

// The module gin-config's dynamic registration reaches a configurable
// through. A name registered under a module path (Module in
// t5x_configurables.cpp) is that path plus the name's first component
// (`t5x.` + `models.EncoderDecoderModel.predict_batch_with_aux` ->
// `t5x.models`); a name that is its own full name, or one the registry
// lacks, is all but its last component (`seqio.Evaluator` -> `seqio`,
// `t5.data.preprocessors.translate` -> `t5.data.preprocessors`). Empty: a
// name of one component, which no import can reach.
static std::string module_of(const std::string& name, const ConfigurableSpec* spec) {
  if (spec && spec->full_name != spec->name) {
    const size_t dot = spec->name.find('.');
    if (dot == std::string::npos) return "";
    return spec->full_name.substr(0, spec->full_name.size() - spec->name.size()) + spec->name.substr(0, dot);
  }
  const std::string& full = spec ? spec->full_name : name;
  const size_t dot = full.rfind('.');
  return dot == std::string::npos ? "" : full.substr(0, dot);
}

std::string Config::operative_config_str() const {
  // gin-config wants dynamic registration enabled before any other import.
  std::vector<std::string> import_lines;
  for (const std::string& i : imports_)
    if (i == "from __gin__ import dynamic_registration") import_lines.push_back(i);
  const bool dynamic = !import_lines.empty();
  for (const std::string& i : imports_)
    if (i != "from __gin__ import dynamic_registration") import_lines.push_back(i);
  // Read back, all these imports apply to every line: a name that they
  // would take to another module than the one it was resolved to (a file's
  // `from t5x.contrib.moe import models` against another file's
  // `models.EncoderDecoderModel`) is written as its full name.
  Imports merged;
  for (const std::string& i : import_lines)
    for (const Statement& st : parse_gin(i, "<operative config>"))
      if (st.kind == Statement::Kind::kImport) merged.add(st.module, st.is_from, st.alias, st.where);
  // Under dynamic registration gin-config resolves a name only through an
  // imported first component (`'t5x' was not provided by an import
  // statement` otherwise), so a full name, or a name from a file without
  // imports, gets an import of its module added after the files' own.
  std::vector<std::string> added;
  auto need_import = [&](const std::string& name, const ConfigurableSpec* spec) {
    const std::string module = module_of(name, spec);
    if (module.empty()) return;
    const std::string head = module.substr(0, module.find('.'));
    std::string line;
    if (module == "train_script" || module == "eval_script" || module == "infer_script") {
      line = "import __main__ as " + module;  // t5x's scripts, as its run files import them
    } else {
      if (auto bound = merged.bound().find(head); bound != merged.bound().end() && bound->second != head)
        return;  // `head` stands for another module here; nothing added can fix that
      line = "import " + module;
    }
    if (std::find(import_lines.begin(), import_lines.end(), line) == import_lines.end() &&
        std::find(added.begin(), added.end(), line) == added.end())
      added.push_back(line);
  };
  auto printable = [&](const std::string& name, const ConfigurableSpec* spec) {
    if (merged.empty()) return name;
    const std::optional<std::string> full = merged.expand(name);
    if (full && (!spec || *full == spec->full_name || registry_->by_full_name(*full) == spec)) return name;  // an alias too
    // Else through an import that reaches it (scalable_t5.network.T5Config
    // as `network.T5Config` after `from t5x.examples.scalable_t5 import network`).
    if (spec) {
      std::string best;
      for (const auto& [bound, module] : merged.bound()) {
        const std::string& f = spec->full_name;
        if (f.size() > module.size() && f.starts_with(module) && f[module.size()] == '.') {
          const std::string candidate = bound + f.substr(module.size());
          if (best.empty() || candidate.size() < best.size()) best = candidate;
        }
      }
      if (!best.empty()) return best;
    }
    if (!dynamic) return !full || !spec ? name : spec->full_name;  // gin's registry resolves the rest
    const std::string out = spec ? spec->full_name : name;
    need_import(out, spec);
    return out;
  };
  auto printable_value = [&](const Value& v) {
    if (!registry_ || merged.empty()) return v.to_gin();
    return map_references(v, [&](Reference& r, const SourceLocation&) {
      const ConfigurableSpec* spec = nullptr;
      try {
        spec = registry_->by_name(r.name);
      } catch (const GinError&) {
      }
      r.name = printable(r.name, spec);
    }).to_gin();
  };
  std::string body;
  const std::string rule = "# " + std::string(78, '=') + "\n";
  if (!macros_.empty()) {
    body += "# Macros:\n" + rule;
    for (const auto& [name, m] : macros_) body += name + " = " + printable_value(m.value) + "\n";
    body += "\n";
  }
  std::vector<const Binding*> sorted;
  for (const Binding& b : bindings_) sorted.push_back(&b);
  std::sort(sorted.begin(), sorted.end(), [](const Binding* a, const Binding* b) {
    return std::tie(a->configurable, a->scope, a->param) <
           std::tie(b->configurable, b->scope, b->param);
  });
  std::string section;
  for (const Binding* b : sorted) {
    const std::string head = (b->scope.empty() ? "" : b->scope + "/") + b->configurable;
    if (head != section) {
      if (!section.empty()) body += "\n";
      body += "# Parameters for " + head + ":\n" + rule;
      section = head;
    }
    const std::string conf = printable(b->configurable, registry_ ? registry_->get(b->configurable) : nullptr);
    body += selector_str(b->scope, conf, b->param) + " = " + printable_value(b->value) + "\n";
  }
  std::string out;
  for (const std::string& i : import_lines) out += i + "\n";
  for (const std::string& i : added) out += i + "\n";
  if (!import_lines.empty()) out += "\n";
  return out + body;
}

void Config::write_operative_config(const std::string& model_dir) const {
  // The run's output directory: MODEL_DIR (train), EVAL_OUTPUT_DIR or INFER_OUTPUT_DIR.
  const char* which = "check the run's output directory (MODEL_DIR, EVAL_OUTPUT_DIR or INFER_OUTPUT_DIR)";
  if (model_dir.empty()) throw GinError(SourceLocation{"<command line>"}, "the output directory is empty", which);
  std::error_code ec;
  fs::create_directories(model_dir, ec);
  if (ec)
    throw GinError(SourceLocation{model_dir}, "cannot create the output directory: " + ec.message(),
                   std::string(which) + " and its permissions");
  const fs::path path = fs::path(model_dir) / "config.gin";
  const fs::path tmp = fs::path(model_dir) / "config.gin.tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << operative_config_str();
    if (!out.flush()) {
      out.close();
      fs::remove(tmp, ec);  // no empty config.gin.tmp left behind (a full disk)
      throw GinError(SourceLocation{tmp.string()}, "cannot write the operative config",
                     "check free space and permissions of the output directory");
    }
  }
  fs::rename(tmp, path, ec);  // atomic: a reader never sees half a file
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    throw GinError(SourceLocation{path.string()}, "cannot write the operative config: " + why,
                   "check permissions of the output directory");
  }
}

Config parse_config_files_and_bindings(const std::vector<std::string>& files,
                                       const std::vector<std::string>& bindings,
                                       const LoadOptions& options, const Registry* registry) {
  Config config(registry);
  for (const std::string& f : files) config.parse_file(f, options);
  std::vector<std::pair<std::string, std::string>> texts;
  for (size_t i = 0; i < bindings.size(); ++i)
    texts.emplace_back(bindings[i], "<--gin_bindings #" + std::to_string(i + 1) + ">");
  config.parse_bindings(texts, options);
  return config;
}

}  // namespace t5x::gin
