#include "t5x/gin/registry.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>

#include "t5x/gin/parser.h"

namespace t5x::gin {

const ParamSpec* ConfigurableSpec::param(std::string_view p) const {
  for (const ParamSpec& s : params)
    if (s.name == p) return &s;
  return nullptr;
}

Registry& Registry::global() {
  static Registry registry = [] {
    Registry r;
    register_t5x_configurables(r);
    return r;
  }();
  return registry;
}

static bool dotted_suffix(std::string_view longer, std::string_view shorter) {
  return longer.size() > shorter.size() && longer.ends_with(shorter) &&
         longer[longer.size() - shorter.size() - 1] == '.';
}

void Registry::add(ConfigurableSpec spec) {
  if (spec.name.empty()) throw std::invalid_argument("[gin] configurable name is empty");
  if (spec.full_name.empty()) spec.full_name = spec.name;
  if (specs_.count(spec.name))
    throw std::invalid_argument("[gin] configurable '" + spec.name + "' is already registered");
  if (auto it = by_full_name_.find(spec.full_name); it != by_full_name_.end())
    throw std::invalid_argument("[gin] configurable '" + spec.name + "': full name '" + spec.full_name +
                                "' is already registered (by '" + it->second + "')");
  if (spec.full_name != spec.name && !dotted_suffix(spec.full_name, spec.name))
    throw std::invalid_argument("[gin] configurable '" + spec.name + "' is not a dotted suffix of its full name '" +
                                spec.full_name + "'");
  for (size_t i = 0; i < spec.params.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (spec.params[i].name == spec.params[j].name)
        throw std::invalid_argument("[gin] configurable '" + spec.name + "' lists parameter '" +
                                    spec.params[i].name + "' twice");
  by_full_name_.emplace(spec.full_name, spec.name);
  std::string name = spec.name;
  specs_.emplace(std::move(name), std::move(spec));
}

void Registry::add(const std::string& name,
                   const std::vector<std::pair<std::string, std::string>>& params,
                   const std::string& doc, const std::string& full_name) {
  ConfigurableSpec spec;
  spec.name = name;
  spec.full_name = full_name;
  spec.doc = doc;
  for (const auto& [p, text] : params) {
    ParamSpec ps;
    ps.name = p;
    if (!text.empty())
      ps.default_value = parse_value(text, SourceLocation{"<default of " + name + "." + p + ">", 1, 1});
    spec.params.push_back(std::move(ps));
  }
  add(std::move(spec));
}

void Registry::add_alias(const std::string& full_name, const std::string& canonical) {
  const ConfigurableSpec* spec = get(canonical);
  if (!spec) throw std::invalid_argument("[gin] alias '" + full_name + "': no configurable '" + canonical + "'");
  if (by_full_name_.count(full_name))
    throw std::invalid_argument("[gin] alias '" + full_name + "': that full name is already registered");
  const std::string_view own = std::string_view(spec->full_name).substr(spec->full_name.rfind('.') + 1);
  if (!full_name.ends_with("." + std::string(own)))
    throw std::invalid_argument("[gin] alias '" + full_name + "' does not end with '" + std::string(own) + "'");
  by_full_name_.emplace(full_name, canonical);
}

void Registry::require_import(const std::string& canonical) {
  auto it = specs_.find(canonical);
  if (it == specs_.end()) throw std::invalid_argument("[gin] require_import: no configurable '" + canonical + "'");
  it->second.needs_import = true;
}

const ConfigurableSpec* Registry::by_name(std::string_view name) const {
  if (const ConfigurableSpec* s = get(name)) return s;
  return find(name);
}

const ConfigurableSpec* Registry::by_full_name(std::string_view full_name) const {
  auto it = by_full_name_.find(full_name);
  return it == by_full_name_.end() ? nullptr : get(it->second);
}

bool Registry::contains(std::string_view canonical_name) const {
  return specs_.find(canonical_name) != specs_.end();
}

const ConfigurableSpec* Registry::get(std::string_view canonical_name) const {
  auto it = specs_.find(canonical_name);
  return it == specs_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [n, s] : specs_) out.push_back(n);
  return out;
}

// gin-config's SelectorMap.matching_selectors: a full name written out
// matches itself alone; otherwise every full name that ends with the name's
// dot-separated components matches.
std::vector<const ConfigurableSpec*> Registry::matches(std::string_view name) const {
  std::vector<const ConfigurableSpec*> out;
  if (auto it = by_full_name_.find(name); it != by_full_name_.end()) {
    out.push_back(get(it->second));
    return out;
  }
  for (const auto& [full, canonical] : by_full_name_)
    if (dotted_suffix(full, name)) {
      const ConfigurableSpec* s = get(canonical);
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
  // In the registered full names' order (an alias sorts elsewhere).
  std::sort(out.begin(), out.end(),
            [](const ConfigurableSpec* a, const ConfigurableSpec* b) { return a->full_name < b->full_name; });
  return out;
}

std::string Registry::minimal_name(const ConfigurableSpec& spec) const {
  const std::string_view full = spec.full_name;
  for (size_t dot = full.rfind('.'); dot != std::string_view::npos && dot > 0;
       dot = full.rfind('.', dot - 1)) {
    const std::string_view suffix = full.substr(dot + 1);
    const auto m = matches(suffix);
    if (m.size() == 1 && m[0] == &spec) return std::string(suffix);
  }
  return spec.full_name;
}

static std::string quoted_list(const std::vector<std::string>& names, const char* last_sep) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? last_sep : ", ") + std::string("'") + names[i] + "'";
  return out;
}

void Registry::throw_ambiguous(std::string_view name, const std::vector<const ConfigurableSpec*>& m,
                               const SourceLocation& where) const {
  std::string list;
  std::vector<std::string> minimal;
  for (const ConfigurableSpec* s : m) {
    list += (list.empty() ? "" : ", ") + s->full_name;
    minimal.push_back(minimal_name(*s));
  }
  throw GinError(where, "configurable name '" + std::string(name) + "' is ambiguous: " + list,
                 "write more of the module path, e.g. " + quoted_list(minimal, " or "));
}

const ConfigurableSpec* Registry::find(std::string_view name, const SourceLocation& where) const {
  const std::vector<const ConfigurableSpec*> m = matches(name);
  if (m.size() == 1) return m[0];
  if (m.empty()) return nullptr;
  throw_ambiguous(name, m, where);
}

// The full name with the canonical name when they differ: "'utils.DatasetConfig'
// (t5x.utils.DatasetConfig)".
static std::string shown(const ConfigurableSpec& s) {
  return "'" + s.name + "'" + (s.full_name == s.name ? "" : " (" + s.full_name + ")");
}

const ConfigurableSpec& Registry::lookup(std::string_view name, const SourceLocation& where) const {
  if (const ConfigurableSpec* s = find(name, where)) return *s;
  // A known name under a module path that is not its own
  // (`garbage.utils.DatasetConfig`): gin-config matches suffixes of the
  // registered path only, never a longer or different prefix.
  for (size_t dot = name.find('.'); dot != std::string_view::npos; dot = name.find('.', dot + 1)) {
    const std::vector<const ConfigurableSpec*> m = matches(name.substr(dot + 1));
    if (m.empty()) continue;
    std::string known;
    for (const ConfigurableSpec* s : m) known += (known.empty() ? "" : ", ") + shown(*s);
    throw GinError(where, "unknown configurable '" + std::string(name) + "'",
                   "no registered module path ends with '" + std::string(name) + "'; registered: " +
                       known + "; a name may leave out leading module components of the registered "
                       "path, not add or change them");
  }
  const std::vector<std::string> near = nearest(name);
  std::string hint;
  if (!near.empty()) {
    hint = "did you mean ";
    for (size_t i = 0; i < near.size(); ++i) hint += (i ? ", " : "") + std::string("'") + near[i] + "'";
    hint += "?";
  } else {
    hint = "no registered configurable has a similar name; check the spelling and the module "
           "prefix (t5x's names are listed in docs/gin.md)";
  }
  throw GinError(where, "unknown configurable '" + std::string(name) + "'", hint);
}

static std::string_view last_component(std::string_view s) {
  const size_t dot = s.rfind('.');
  return dot == std::string_view::npos ? s : s.substr(dot + 1);
}

void Registry::check_param(const ConfigurableSpec& spec, std::string_view param,
                           const SourceLocation& where) const {
  if (spec.param(param)) return;
  std::vector<std::string> all;
  for (const ParamSpec& p : spec.params) all.push_back(p.name);
  const std::vector<std::string> near = nearest_names(param, all);
  std::string hint;
  if (!near.empty()) {
    hint = "did you mean ";
    for (size_t i = 0; i < near.size(); ++i) hint += (i ? ", " : "") + std::string("'") + near[i] + "'";
    hint += "?";
  } else if (all.empty()) {
    hint = "'" + spec.name + "' takes no parameters";
  } else {
    hint = "known parameters:";
    for (const std::string& a : all) hint += " " + a;
  }
  // Another module's configurable of the same name has it (scan_layers: scalable_t5's T5Config).
  const std::string_view own = last_component(spec.full_name);
  for (const auto& [canonical, other] : specs_)
    if (&other != &spec && last_component(other.full_name) == own && other.param(param)) {
      const std::string module = other.full_name.substr(0, other.full_name.rfind('.'));
      const size_t dot = module.rfind('.');
      hint += "; '" + std::string(param) + "' is a parameter of " + other.full_name +
              (dot == std::string::npos ? "" : " (from " + module.substr(0, dot) + " import " + module.substr(dot + 1) + ")");
      break;
    }
  throw GinError(where, "configurable '" + spec.name + "' has no parameter '" +
                            std::string(param) + "'", hint);
}

std::optional<std::string> Registry::misspelled_module(std::string_view module) const {
  std::set<std::string, std::less<>> modules;  // every dotted prefix of a full name
  for (const auto& [full, canonical] : by_full_name_)
    for (size_t dot = full.find('.'); dot != std::string::npos; dot = full.find('.', dot + 1))
      modules.insert(full.substr(0, dot));
  if (modules.count(module)) return std::nullopt;
  std::optional<std::string> best;
  size_t best_d = 3;
  for (const std::string& m : modules)
    if (const size_t d = edit_distance(module, m); d < best_d) best_d = d, best = m;
  return best;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

static std::vector<std::string> closest(std::vector<std::pair<size_t, std::string>> scored,
                                        size_t k) {
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (size_t i = 0; i < scored.size() && out.size() < k; ++i) out.push_back(scored[i].second);
  return out;
}

std::vector<std::string> nearest_names(std::string_view word,
                                       const std::vector<std::string>& candidates, size_t k) {
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d <= limit) scored.emplace_back(d, c);
  }
  return closest(std::move(scored), k);
}

std::vector<std::string> Registry::nearest(std::string_view name, size_t k) const {
  const std::string_view tail = last_component(name);
  const size_t limit_full = std::max<size_t>(2, name.size() / 2);
  const size_t limit_tail = std::max<size_t>(2, tail.size() / 2);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& [n, s] : specs_) {
    const size_t full = std::min(edit_distance(name, n), edit_distance(name, s.full_name));
    const size_t part = edit_distance(tail, last_component(n));
    if (full <= limit_full || part <= limit_tail)
      scored.emplace_back(std::min(full, part), n);
  }
  return closest(std::move(scored), k);
}

void Imports::add(const std::string& module, bool is_from, const std::string& alias,
                   const SourceLocation& where) {
  if (module.starts_with("__gin__.")) {
    // gin-config: `from __gin__ import dynamic_registration` only.
    if (!is_from || module != "__gin__.dynamic_registration")
      throw GinError(where, "unknown __gin__ feature '" + module.substr(8) + "'",
                     "the only one is `from __gin__ import dynamic_registration`");
    if (!alias.empty())
      throw GinError(where, "__gin__ imports do not support `as` aliasing",
                     "write `from __gin__ import dynamic_registration`");
    return;
  }
  if (module == "__main__" || module.starts_with("__main__.")) return;
  std::string name;
  std::string path = module;
  if (!alias.empty()) {
    name = alias;
  } else if (is_from) {
    name = module.substr(module.rfind('.') + 1);
  } else {
    name = module.substr(0, module.find('.'));
    path = name;
  }
  if (name == "gin") return;  // gin's own symbol (gin.REQUIRED), never a module here
  bound_[name] = path;
}

std::optional<std::string> Imports::expand(std::string_view name) const {
  const size_t dot = name.find('.');
  const std::string_view head = name.substr(0, dot);
  auto it = bound_.find(head);
  if (it == bound_.end()) return std::nullopt;
  return it->second + std::string(dot == std::string_view::npos ? std::string_view() : name.substr(dot));
}

// Whether a configurable registered under `full` (or an alias of it) lives
// in one of the `loaded` modules.
static bool in_module(std::string_view full, const std::vector<std::string>& loaded) {
  for (const std::string& m : loaded)
    if (full.size() > m.size() && full.starts_with(m) && full[m.size()] == '.') return true;
  return false;
}

bool Registry::is_loaded(const ConfigurableSpec& s, const std::vector<std::string>& loaded) const {
  if (in_module(s.full_name, loaded)) return true;
  for (const auto& [f, canonical] : by_full_name_)  // its aliases
    if (canonical == s.name && in_module(f, loaded)) return true;
  return false;
}

std::vector<const ConfigurableSpec*> Registry::visible_matches(std::string_view name,
                                                               const std::vector<std::string>& loaded) const {
  std::vector<const ConfigurableSpec*> out;
  for (const ConfigurableSpec* s : matches(name))
    if (!s->needs_import || is_loaded(*s, loaded)) out.push_back(s);
  return out;
}

const ConfigurableSpec* Registry::find(std::string_view name, const Imports& imports, const SourceLocation& where,
                                       const std::vector<std::string>* loaded) const {
  const std::optional<std::string> full = imports.expand(name);
  if (full) {
    auto it = by_full_name_.find(*full);
    return it == by_full_name_.end() ? nullptr : get(it->second);
  }
  if (!loaded) return find(name, where);
  if (by_full_name_.count(name)) return find(name, where);  // a full name is itself
  const std::vector<const ConfigurableSpec*> visible = visible_matches(name, *loaded);
  std::vector<const ConfigurableSpec*> imported;
  for (const ConfigurableSpec* s : visible)
    if (is_loaded(*s, *loaded)) imported.push_back(s);
  if (visible.size() == 1) return visible[0];
  if (visible.empty()) return nullptr;
  if (imported.size() == 1) return imported[0];
  throw_ambiguous(name, visible, where);
}

const ConfigurableSpec& Registry::lookup(std::string_view name, const Imports& imports, const SourceLocation& where,
                                         const std::vector<std::string>* loaded) const {
  const std::optional<std::string> full = imports.expand(name);
  if (!full) {
    if (const ConfigurableSpec* s = find(name, imports, where, loaded)) return *s;
    if (loaded)
      for (const ConfigurableSpec* s : matches(name))
        if (s->needs_import) {
          const std::string module = s->full_name.substr(0, s->full_name.rfind('.'));
          const size_t dot = module.rfind('.');
          throw GinError(where,
                         "configurable '" + std::string(name) + "' (" + s->full_name +
                             ") is registered only once its module is imported, as gin's dynamic registration does",
                         "import it before this line, as t5x's files do: from " + module.substr(0, dot) +
                             " import " + module.substr(dot + 1));
        }
    return lookup(name, where);
  }
  if (const ConfigurableSpec* s = find(name, imports, where)) return *s;
  const std::string_view module = std::string_view(*full).substr(0, full->rfind('.'));
  bool module_known = false;
  for (const auto& [f, canonical] : by_full_name_)
    if (f.size() > module.size() && f.starts_with(module) && f[module.size()] == '.') module_known = true;
  // Nearest registered full names: the same last component first, then by
  // edit distance of the whole path.
  const std::string_view tail = last_component(*full);
  std::vector<std::pair<size_t, std::string>> scored;
  const size_t limit = std::max<size_t>(2, full->size() / 3);
  for (const auto& [f, canonical] : by_full_name_) {
    const size_t d = edit_distance(*full, f);
    if (last_component(f) == tail) scored.emplace_back(d, f);
    else if (d <= limit) scored.emplace_back(d + 1000, f);
  }
  const std::vector<std::string> near = closest(std::move(scored), 3);
  std::string hint = module_known
      ? "t5x.cpp registers no '" + std::string(tail) + "' in module '" + std::string(module) + "'"
      : "the configurables of module '" + std::string(module) + "' are not part of t5x.cpp";
  if (!near.empty()) hint += "; nearest registered: " + quoted_list(near, ", ");
  hint += "";
  throw GinError(where, "unknown configurable '" + std::string(name) + "' (imported as " + *full + ")", hint);
}

}  // namespace t5x::gin
