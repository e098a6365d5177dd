// Values of gin's language: the Python literals gin accepts plus macro
// references (%NAME), configurable references (@scope/name, @name()) and
// gin.REQUIRED.
//
// A Value keeps where it was written so that type errors point at the text.
// Equality ignores locations (used by the operative-config round trip).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "t5x/gin/error.h"

namespace t5x::gin {

enum class ValueKind {
  kNone,       // None
  kBool,       // True / False
  kInt,        // 12, -3, 1_000_000, 0x10
  kFloat,      // 1.5, 1e-3, inf, nan
  kString,     // 'abc', "abc" (adjacent literals are concatenated)
  kList,       // [a, b]
  kTuple,      // (a, b), (a,), ()
  kDict,       // {k: v}
  kMacro,      // %NAME (NAME may be dotted)
  kReference,  // @name, @scope/name, @name()
  kRequired,   // %gin.REQUIRED
};

const char* kind_name(ValueKind kind);

// `@scope/name` (call=false) or `@scope/name()` (call=true). t5x passes
// classes with `@trainer.Trainer` and instances with `@utils.DatasetConfig()`.
struct Reference {
  std::string scope;  // "" or "a/b"
  std::string name;   // configurable name as written, e.g. "utils.DatasetConfig"
  bool call = false;

  std::string str() const;  // "@scope/name()" form
  bool operator==(const Reference&) const = default;
};

class Value {
 public:
  Value() = default;  // None

  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double d);
  static Value string(std::string s);
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value dict(std::vector<std::pair<Value, Value>> entries);
  static Value macro(std::string name);
  static Value reference(Reference ref);
  static Value required();

  ValueKind kind() const { return kind_; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_sequence() const { return kind_ == ValueKind::kList || kind_ == ValueKind::kTuple; }

  // Typed access. Each throws GinError at this value's location, naming the
  // expected and actual kinds, when the kind does not match. as_double also
  // accepts an int (Python promotes); nothing else converts.
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;
  const std::string& as_string() const;
  const std::vector<Value>& as_list() const;  // list or tuple
  const std::vector<std::pair<Value, Value>>& as_dict() const;
  const Reference& as_reference() const;
  const std::string& macro_name() const;  // kMacro only

  // Children of a list/tuple/dict (dict: keys and values interleaved
  // through entries()); empty for scalars.
  const std::vector<Value>& items() const { return items_; }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

  // Where the value was written (the first character of its text).
  const SourceLocation& where() const { return where_; }
  Value& at(SourceLocation where) & { where_ = std::move(where); return *this; }
  Value&& at(SourceLocation where) && { where_ = std::move(where); return std::move(*this); }

  // Gin text for this value, as gin's config_str prints it: Python repr for
  // literals (single-quoted strings, `1.0`, `(x,)`), `%NAME`, `@s/name()`.
  // parse_value(to_gin()) == *this for every value.
  std::string to_gin() const;

  // Short description for messages: kind plus a clipped rendering.
  std::string describe() const;

  bool operator==(const Value& other) const;

 private:
  ValueKind kind_ = ValueKind::kNone;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0.0;
  std::string string_;  // string payload or macro name
  std::vector<Value> items_;
  std::vector<std::pair<Value, Value>> entries_;
  Reference ref_;
  SourceLocation where_;

  [[noreturn]] void type_error(const char* expected) const;
};

// Python-repr quoting of a string: single quotes unless the text contains a
// single quote and no double quote; escapes \\, the quote, \n, \r, \t and
// control bytes as \xNN. Bytes >= 0x80 (UTF-8) pass through unchanged.
std::string quote_string(std::string_view s);

// Python repr of a float: shortest text that reads back to the same double,
// always with '.', 'e', "inf" or "nan" so it stays a float.
std::string format_double(double d);

}  // namespace t5x::gin
