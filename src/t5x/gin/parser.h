// Parser for gin-config's language as t5x's .gin files use it.
//
// Statements (one per logical line; brackets and a trailing backslash
// continue a line, `#` starts a comment):
//   import a.b [as c]             kept verbatim; binds a name (registry.h, Imports)
//   from a.b import c [as d]      kept verbatim; binds a name (registry.h, Imports)
//   include 'path.gin'            resolved by the loader (config.h)
//   NAME = value                  macro (no '.' and no scope in NAME)
//   [scope/...]configurable.param = value
//   [scope/...]configurable:      block: the indented lines that follow are
//     param = value               `param = value` for that configurable
// The configurable is everything before the last '.', e.g.
// `network.T5Config.emb_dim` binds param `emb_dim` of `network.T5Config`, and
// `models.EncoderDecoderModel.predict_batch_with_aux.num_decodes` binds
// `num_decodes` of `models.EncoderDecoderModel.predict_batch_with_aux`.
//
// Values: see value.h. Errors are GinError with file:line:column and a hint.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "t5x/gin/error.h"
#include "t5x/gin/value.h"

namespace t5x::gin {

struct Statement {
  enum class Kind { kImport, kInclude, kMacro, kBinding };
  Kind kind = Kind::kBinding;
  SourceLocation where;     // start of the statement (for blocks: of the param)
  std::string text;         // kImport: the whole line; kInclude: the path
  std::string scope;        // kBinding: "" or "a/b"
  std::string configurable; // kBinding: e.g. "utils.DatasetConfig"
  std::string name;         // kBinding: param name; kMacro: macro name
  Value value;              // kMacro / kBinding
  // kImport, as gin-config's ImportStatement: the whole dotted module path
  // ("a.b.c" for `from a.b import c`), whether it is a from-import, and the
  // `as` name (empty without one).
  std::string module;
  bool is_from = false;
  std::string alias;
};

// Parses a whole gin file. `file` names the text in locations and errors.
std::vector<Statement> parse_gin(std::string_view text, const std::string& file);

// Parses a single value (e.g. a registry default or a command-line value).
// The whole text must be one value; `where` gives the location of its first
// character (column offsets are added to it).
Value parse_value(std::string_view text, const SourceLocation& where = {});

// True when `text` is exactly one well-formed value.
bool is_value(std::string_view text);

}  // namespace t5x::gin
