#include "t5x/gin/flags.h"

#include "t5x/gin/parser.h"

namespace t5x::gin {

static const SourceLocation kCommandLine{"<command line>"};

std::string rewrite_gin_arg(std::string_view arg) {
  std::string_view body = arg;
  if (body.starts_with("--gin.")) body.remove_prefix(6);
  const size_t eq = body.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw GinError(kCommandLine, "malformed flag '" + std::string(arg) + "'",
                   "gin overrides read --gin.NAME=VALUE, e.g. --gin.TRAIN_STEPS=1000");
  const std::string name(body.substr(0, eq));
  std::string value(body.substr(eq + 1));
  const bool looks_like_gin =
      !value.empty() && std::string_view("[({'\"@%").find(value[0]) != std::string_view::npos;
  // A number stays a number even when it is malformed (too many digits): its
  // parse error names it, where quoting made it a string of the wrong type.
  const size_t digits = value.find_first_not_of("+-") == 1 ? 1 : 0;
  const bool numeral = value.size() > digits && value.find_first_not_of("0123456789_", digits) == std::string::npos;
  if (!looks_like_gin && !numeral && !is_value(value)) value = quote_string(value);
  return name + " = " + value;
}

GinFlags parse_gin_flags(const std::vector<std::string>& args, std::vector<std::string>* rest) {
  GinFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.starts_with("--gin.")) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(6, eq == std::string::npos ? std::string::npos : eq - 6);
      flags.bindings.push_back({rewrite_gin_arg(a), "<--gin." + name + ">"});
      continue;
    }
    bool matched = false;
    for (const char* f : {"--gin_file", "--gin_search_paths", "--gin_bindings"}) {
      const std::string flag(f);
      std::string value;
      if (a == flag) {
        if (i + 1 >= args.size())
          throw GinError(kCommandLine, flag + " needs a value", "write " + flag + "=VALUE");
        value = args[++i];
      } else if (a.starts_with(flag + "=")) {
        value = a.substr(flag.size() + 1);
      } else {
        continue;
      }
      matched = true;
      if (flag == "--gin_file") {
        flags.files.push_back(value);
      } else if (flag == "--gin_search_paths") {
        size_t start = 0;
        while (start <= value.size()) {
          const size_t comma = value.find(',', start);
          const std::string part = value.substr(start, comma == std::string::npos ? std::string::npos
                                                                                 : comma - start);
          if (!part.empty()) flags.search_paths.push_back(part);
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      } else {
        const size_t b = value.find_first_not_of(" \t\r\n");
        value = b == std::string::npos ? std::string() : value.substr(b);  // no stray indent
        flags.bindings.push_back(
            {value, "<--gin_bindings #" + std::to_string(flags.bindings.size() + 1) + ">"});
      }
      break;
    }
    if (!matched && rest) rest->push_back(a);
  }
  return flags;
}

Config load_gin_config(const GinFlags& flags, const Registry* registry, bool skip_unknown) {
  LoadOptions options;
  options.search_paths = flags.search_paths;
  options.skip_unknown = skip_unknown;
  Config config(registry);
  for (const std::string& f : flags.files) config.parse_file(f, options);
  std::vector<std::pair<std::string, std::string>> texts;
  for (const CommandLineBinding& b : flags.bindings) texts.emplace_back(b.text, b.origin);
  config.parse_bindings(texts, options);
  return config;
}

}  // namespace t5x::gin
