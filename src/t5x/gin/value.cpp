#include "t5x/gin/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace t5x::gin {

std::string SourceLocation::str() const {
  if (file.empty()) return {};
  std::string s = file;
  if (line > 0) {
    s += ":" + std::to_string(line);
    if (column > 0) s += ":" + std::to_string(column);
  }
  return s;
}

static std::string compose(const SourceLocation& where, const std::string& message,
                           const std::string& hint) {
  std::string s = where.known() ? where.str() + ": " + message : message;
  if (!hint.empty()) s += "\n  hint: " + hint;
  return s;
}

GinError::GinError(SourceLocation where, std::string message, std::string hint)
    : std::runtime_error(compose(where, message, hint)),
      where_(std::move(where)),
      message_(std::move(message)),
      hint_(std::move(hint)) {}

const char* kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kNone: return "None";
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt: return "int";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return "string";
    case ValueKind::kList: return "list";
    case ValueKind::kTuple: return "tuple";
    case ValueKind::kDict: return "dict";
    case ValueKind::kMacro: return "macro reference";
    case ValueKind::kReference: return "configurable reference";
    case ValueKind::kRequired: return "gin.REQUIRED";
  }
  return "?";
}

std::string Reference::str() const {
  std::string s = "@";
  if (!scope.empty()) s += scope + "/";
  s += name;
  if (call) s += "()";
  return s;
}

Value Value::none() { return Value(); }
Value Value::boolean(bool b) { Value v; v.kind_ = ValueKind::kBool; v.bool_ = b; return v; }
Value Value::integer(int64_t i) { Value v; v.kind_ = ValueKind::kInt; v.int_ = i; return v; }
Value Value::real(double d) { Value v; v.kind_ = ValueKind::kFloat; v.double_ = d; return v; }
Value Value::string(std::string s) {
  Value v; v.kind_ = ValueKind::kString; v.string_ = std::move(s); return v;
}
Value Value::list(std::vector<Value> items) {
  Value v; v.kind_ = ValueKind::kList; v.items_ = std::move(items); return v;
}
Value Value::tuple(std::vector<Value> items) {
  Value v; v.kind_ = ValueKind::kTuple; v.items_ = std::move(items); return v;
}
Value Value::dict(std::vector<std::pair<Value, Value>> entries) {
  Value v; v.kind_ = ValueKind::kDict; v.entries_ = std::move(entries); return v;
}
Value Value::macro(std::string name) {
  Value v; v.kind_ = ValueKind::kMacro; v.string_ = std::move(name); return v;
}
Value Value::reference(Reference ref) {
  Value v; v.kind_ = ValueKind::kReference; v.ref_ = std::move(ref); return v;
}
Value Value::required() { Value v; v.kind_ = ValueKind::kRequired; return v; }

void Value::type_error(const char* expected) const {
  throw GinError(where_, std::string("expected ") + expected + ", got " + describe(),
                 std::string("write a value of type ") + expected + " here");
}

bool Value::as_bool() const {
  if (kind_ != ValueKind::kBool) type_error("bool (True/False)");
  return bool_;
}
int64_t Value::as_int() const {
  if (kind_ != ValueKind::kInt) type_error("int");
  return int_;
}
double Value::as_double() const {
  if (kind_ == ValueKind::kInt) return static_cast<double>(int_);
  if (kind_ != ValueKind::kFloat) type_error("float");
  return double_;
}
const std::string& Value::as_string() const {
  if (kind_ != ValueKind::kString) type_error("string");
  return string_;
}
const std::vector<Value>& Value::as_list() const {
  if (!is_sequence()) type_error("list or tuple");
  return items_;
}
const std::vector<std::pair<Value, Value>>& Value::as_dict() const {
  if (kind_ != ValueKind::kDict) type_error("dict");
  return entries_;
}
const Reference& Value::as_reference() const {
  if (kind_ != ValueKind::kReference) type_error("configurable reference (@name or @name())");
  return ref_;
}
const std::string& Value::macro_name() const {
  if (kind_ != ValueKind::kMacro) type_error("macro reference (%NAME)");
  return string_;
}

std::string quote_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == static_cast<unsigned char>(q)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += q;
  return out;
}

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, then laid out the way Python's repr does:
  // positional for 1e-4 <= |d| < 1e16, scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') { sign = "-"; sci.erase(0, 1); }
  const size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(epos + 1));
  if (exp >= -5 + 1 && exp < 16) {
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    }
    return sign + out;
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + mant + ebuf;
}

static std::string join_values(const std::vector<Value>& items) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += ", ";
    s += items[i].to_gin();
  }
  return s;
}

std::string Value::to_gin() const {
  switch (kind_) {
    case ValueKind::kNone: return "None";
    case ValueKind::kBool: return bool_ ? "True" : "False";
    case ValueKind::kInt: return std::to_string(int_);
    case ValueKind::kFloat: return format_double(double_);
    case ValueKind::kString: return quote_string(string_);
    case ValueKind::kList: return "[" + join_values(items_) + "]";
    case ValueKind::kTuple:
      return items_.size() == 1 ? "(" + items_[0].to_gin() + ",)" : "(" + join_values(items_) + ")";
    case ValueKind::kDict: {
      std::string s = "{";
      for (size_t i = 0; i < entries_.size(); ++i) {
        if (i) s += ", ";
        s += entries_[i].first.to_gin() + ": " + entries_[i].second.to_gin();
      }
      return s + "}";
    }
    case ValueKind::kMacro: return "%" + string_;
    case ValueKind::kReference: return ref_.str();
    case ValueKind::kRequired: return "%gin.REQUIRED";
  }
  return {};
}

std::string Value::describe() const {
  if (kind_ == ValueKind::kNone) return "None";  // not "None None"
  std::string text = to_gin();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return std::string(kind_name(kind_)) + " " + text;
}

bool Value::operator==(const Value& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case ValueKind::kNone:
    case ValueKind::kRequired: return true;
    case ValueKind::kBool: return bool_ == o.bool_;
    case ValueKind::kInt: return int_ == o.int_;
    case ValueKind::kFloat:
      return double_ == o.double_ || (std::isnan(double_) && std::isnan(o.double_));
    case ValueKind::kString:
    case ValueKind::kMacro: return string_ == o.string_;
    case ValueKind::kList:
    case ValueKind::kTuple: return items_ == o.items_;
    case ValueKind::kDict: return entries_ == o.entries_;
    case ValueKind::kReference: return ref_ == o.ref_;
  }
  return false;
}

}  // namespace t5x::gin
