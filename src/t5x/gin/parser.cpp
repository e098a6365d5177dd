#include "t5x/gin/parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstdio>
#include <cmath>
#include <limits>

namespace t5x::gin {
namespace {

enum class Tok { kIdent, kNumber, kString, kPunct, kNewline, kEnd };

struct Token {
  Tok type = Tok::kEnd;
  std::string text;   // identifier / number text, decoded string, punct char
  int line = 1;
  int col = 1;
  size_t begin = 0;   // byte offsets into the source
  size_t end = 0;
};

const char* kValueHint =
    "a value is a number, 'string', True/False/None, [list], (tuple,), {dict}, "
    "@configurable, @configurable() or %MACRO";

// Splits gin text into tokens. Newlines inside brackets and after a trailing
// backslash are dropped, so the parser sees one NEWLINE per logical line.
class Lexer {
 public:
  Lexer(std::string_view src, std::string file, int line, int col)
      : src_(src), file_(std::move(file)), line_(line), col_(col) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == '\n') {
        if (brackets_.empty() && !out.empty() && out.back().type != Tok::kNewline)
          out.push_back(make(Tok::kNewline, "\n", pos_, pos_ + 1));
        advance();
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f') { advance(); continue; }
      if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
        continue;
      }
      if (c == '\\') {
        size_t p = pos_ + 1;
        while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t' || src_[p] == '\r')) ++p;
        if (p < src_.size() && src_[p] != '\n')
          fail("a backslash must end the line (line continuation)",
               "remove the stray '\\' or move the rest of the line down");
        while (pos_ <= p && pos_ < src_.size()) advance();
        continue;
      }
      if (is_ident_start(c)) {
        // String prefixes r'..', u'..', b'..' (and combinations like rb).
        size_t p = pos_;
        while (p < src_.size() && p - pos_ < 2 && std::string_view("rRuUbB").find(src_[p]) !=
                                                       std::string_view::npos)
          ++p;
        if (p > pos_ && p < src_.size() && (src_[p] == '\'' || src_[p] == '"')) {
          bool raw = false;
          for (size_t q = pos_; q < p; ++q) raw |= (src_[q] == 'r' || src_[q] == 'R');
          out.push_back(lex_string(raw));
          continue;
        }
        const size_t b = pos_;
        Token t = make(Tok::kIdent, "", b, b);
        while (pos_ < src_.size() && is_ident_char(src_[pos_])) advance();
        t.text = std::string(src_.substr(b, pos_ - b));
        t.end = pos_;
        out.push_back(std::move(t));
        continue;
      }
      if (is_digit(c) || (c == '.' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1]))) {
        out.push_back(lex_number());
        continue;
      }
      if (c == '\'' || c == '"') { out.push_back(lex_string(false)); continue; }
      if (std::string_view("/.=@%()[]{},:-+").find(c) != std::string_view::npos) {
        Token t = make(Tok::kPunct, std::string(1, c), pos_, pos_ + 1);
        if (c == '(' || c == '[' || c == '{') brackets_.push_back(t);
        if (c == ')' || c == ']' || c == '}') {
          if (brackets_.empty())
            fail(std::string("unmatched '") + c + "'", "remove it or add the opening bracket");
          const char open = brackets_.back().text[0];
          const char want = open == '(' ? ')' : open == '[' ? ']' : '}';
          if (c != want)
            fail(std::string("'") + c + "' does not match '" + open + "' opened at line " +
                     std::to_string(brackets_.back().line) + ":" +
                     std::to_string(brackets_.back().col),
                 std::string("close it with '") + want + "'");
          brackets_.pop_back();
        }
        advance();
        out.push_back(std::move(t));
        continue;
      }
      const unsigned char u = static_cast<unsigned char>(c);
      char shown[64];  // a control or non-ASCII byte by its value, not raw
      if (u >= 0x20 && u < 0x7f) std::snprintf(shown, sizeof shown, "character '%c'", c);
      else std::snprintf(shown, sizeof shown, "byte 0x%02x (%s)", u, u < 0x80 ? "a control character" : "not ASCII");
      fail(std::string("unexpected ") + shown,
           "gin accepts Python literals, @references, %macros and `name = value` lines; outside strings, ASCII only");
    }
    if (!brackets_.empty()) {
      const Token& t = brackets_.back();
      const char want = t.text[0] == '(' ? ')' : t.text[0] == '[' ? ']' : '}';
      throw GinError(SourceLocation{file_, t.line, t.col},
                     "'" + t.text + "' is never closed",
                     std::string("add the matching '") + want + "'");
    }
    if (!out.empty() && out.back().type != Tok::kNewline)
      out.push_back(make(Tok::kNewline, "\n", pos_, pos_));
    out.push_back(make(Tok::kEnd, "", pos_, pos_));
    return out;
  }

 private:
  std::string_view src_;
  std::string file_;
  size_t pos_ = 0;
  int line_;
  int col_;
  std::vector<Token> brackets_;

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_ident_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  static bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  Token make(Tok type, std::string text, size_t b, size_t e) const {
    Token t;
    t.type = type;
    t.text = std::move(text);
    t.line = line_;
    t.col = col_;
    t.begin = b;
    t.end = e;
    return t;
  }

  [[noreturn]] void fail(const std::string& msg, const std::string& hint) const {
    throw GinError(SourceLocation{file_, line_, col_}, msg, hint);
  }

  Token lex_number() {
    Token t = make(Tok::kNumber, "", pos_, pos_);
    const size_t b = pos_;
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      const bool exp_sign = (c == '+' || c == '-') && pos_ > b &&
                            (src_[pos_ - 1] == 'e' || src_[pos_ - 1] == 'E') &&
                            !(src_.substr(b, 2) == "0x" || src_.substr(b, 2) == "0X");
      if (is_ident_char(c) || c == '.' || exp_sign) advance();
      else break;
    }
    t.text = std::string(src_.substr(b, pos_ - b));
    t.end = pos_;
    return t;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t read_hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[pos_])))
        fail("bad escape: expected " + std::to_string(n) + " hex digits",
             "write e.g. \\x41 or \\u00e9");
      const char c = src_[pos_];
      v = v * 16 + static_cast<uint32_t>(is_digit(c) ? c - '0' : (std::tolower(c) - 'a' + 10));
      advance();
    }
    return v;
  }

  Token lex_string(bool raw) {
    Token t = make(Tok::kString, "", pos_, pos_);
    while (src_[pos_] != '\'' && src_[pos_] != '"') advance();  // prefix letters
    const char q = src_[pos_];
    const bool triple = src_.substr(pos_, 3) == std::string(3, q);
    for (int i = 0; i < (triple ? 3 : 1); ++i) advance();
    std::string out;
    while (true) {
      if (pos_ >= src_.size() || (!triple && src_[pos_] == '\n'))
        throw GinError(SourceLocation{file_, t.line, t.col}, "unterminated string",
                       std::string("close the string with ") + (triple ? std::string(3, q)
                                                                        : std::string(1, q)));
      const char c = src_[pos_];
      if (c == q && (!triple || src_.substr(pos_, 3) == std::string(3, q))) {
        for (int i = 0; i < (triple ? 3 : 1); ++i) advance();
        break;
      }
      if (c == '\\' && pos_ + 1 < src_.size()) {
        const char n = src_[pos_ + 1];
        if (raw) {
          out += c;
          out += n;
          advance();
          advance();
          continue;
        }
        advance();
        advance();
        switch (n) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
            // Python's \ooo: one to three octal digits.
            uint32_t v = uint32_t(n - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
              v = v * 8 + uint32_t(src_[pos_] - '0');
              advance();
            }
            append_utf8(out, v);
            break;
          }
          case 'N':
            fail("\\N{...} escapes (Unicode names) are not supported", "write the character itself, or \\uXXXX");
          case 'a': out += '\a'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case '\\': out += '\\'; break;
          case '\'': out += '\''; break;
          case '"': out += '"'; break;
          case '\n': break;  // escaped newline joins the lines
          case 'x': append_utf8(out, read_hex(2)); break;
          case 'u': append_utf8(out, read_hex(4)); break;
          case 'U': append_utf8(out, read_hex(8)); break;
          default: out += '\\'; out += n;  // Python keeps unknown escapes
        }
        continue;
      }
      out += c;
      advance();
    }
    t.text = std::move(out);
    t.end = pos_;
    return t;
  }
};

class Parser {
 public:
  Parser(std::string_view src, std::vector<Token> toks, std::string file)
      : src_(src), toks_(std::move(toks)), file_(std::move(file)) {}

  std::vector<Statement> statements() {
    std::vector<Statement> out;
    bool in_block = false;
    std::string block_scope, block_conf;
    int block_col = 1;
    while (peek().type != Tok::kEnd) {
      if (peek().type == Tok::kNewline) { ++i_; continue; }
      const Token& first = peek();
      // Lines indented past a `configurable:` header are its block; other
      // indentation means nothing (gin-config reads such lines as any other).
      if (in_block && first.col > block_col) {
        Statement s;
        s.kind = Statement::Kind::kBinding;
        s.where = loc(first);
        s.scope = block_scope;
        s.configurable = block_conf;
        const Token& name = expect_ident("a parameter name");
        if (peek().type == Tok::kPunct && peek().text == ".")
          fail(peek(), "a block line binds one parameter of `" + block_conf + "`",
               "write `param = value` inside the block, or unindent the line");
        s.name = name.text;
        expect_punct("=", "`" + name.text + "`", "a block line reads `param = value`");
        s.value = value();
        end_of_line();
        out.push_back(std::move(s));
        continue;
      }
      in_block = false;
      block_col = first.col;
      // `import a.b [as c]` or `from a.b import c [as d]`, as gin-config
      // reads them; `from/f.x = 1` is a binding in scope 'from'.
      if (first.type == Tok::kIdent && (first.text == "import" || first.text == "from") &&
          peek(1).type == Tok::kIdent) {
        Statement s;
        s.kind = Statement::Kind::kImport;
        s.where = loc(first);
        const size_t b = first.begin;
        ++i_;
        const char* form = first.text == "import" ? "import a.b.c [as name]" : "from a.b import c [as name]";
        auto dotted = [&] {
          s.module = expect_ident("a module name", std::string("write ") + form).text;
          while (is_punct(".")) {
            ++i_;
            s.module += "." + expect_ident("a module name after '.'", std::string("write ") + form).text;
          }
        };
        dotted();
        if (first.text == "from") {
          if (!(peek().type == Tok::kIdent && peek().text == "import"))
            fail(peek(), "expected 'import' in a from-import, found " + show(peek()), std::string("write ") + form);
          ++i_;
          s.is_from = true;
          s.module += "." + expect_ident("the name imported", std::string("write ") + form).text;
        }
        if (peek().type == Tok::kIdent && peek().text == "as") {
          ++i_;
          s.alias = expect_ident("a name after 'as'", std::string("write ") + form).text;
        }
        const size_t e = toks_[i_ - 1].end;
        if (peek().type != Tok::kNewline && peek().type != Tok::kEnd)
          fail(peek(), "unexpected " + show(peek()) + " in an import line", std::string("write ") + form);
        s.text = std::string(src_.substr(b, e - b));
        out.push_back(std::move(s));
        continue;
      }
      if (first.type == Tok::kIdent && (first.text == "import" || first.text == "from") &&
          !(peek(1).type == Tok::kPunct && std::string_view("./=:").find(peek(1).text[0]) != std::string_view::npos))
        fail(peek(1), first.text + " needs a module name, found " + show(peek(1)),
             first.text == "import" ? "write import a.b.c" : "write from a.b import c");
      if (first.type == Tok::kIdent && first.text == "include" &&
          peek(1).type == Tok::kString) {
        Statement s;
        s.kind = Statement::Kind::kInclude;
        s.where = loc(first);
        ++i_;
        s.text = next().text;
        while (peek().type == Tok::kString) s.text += next().text;
        end_of_line();
        out.push_back(std::move(s));
        continue;
      }
      if (first.type == Tok::kIdent && first.text == "include" &&
          !(peek(1).type == Tok::kPunct && std::string_view("./=:").find(peek(1).text[0]) !=
                                                std::string_view::npos))
        fail(peek(1), "include needs a quoted path, found " + show(peek(1)),
             "write include 'configs/models/t5_1_1/base.gin'");
      if (first.type != Tok::kIdent)
        fail(first, "expected a binding, macro, include or import, found " + show(first),
             "lines read `configurable.param = value`, `MACRO = value` or `include 'f.gin'`");
      std::vector<std::string> parts = selector();
      const std::string full = parts.back();
      parts.pop_back();
      std::string scope = join(parts, "/");
      if (peek().type == Tok::kPunct && peek().text == ":") {
        ++i_;
        if (peek().type != Tok::kNewline)
          fail(peek(), "a block header `" + full + ":` must end its line",
               "put each `param = value` on its own indented line below");
        end_of_line();
        if (peek().type == Tok::kEnd || peek().col <= first.col) {
          fail(first, "block `" + full + ":` has no indented parameter lines",
               "indent the `param = value` lines under the header");
        }
        in_block = true;
        block_scope = scope;
        block_conf = full;
        continue;
      }
      expect_punct("=", "`" + (scope.empty() ? full : scope + "/" + full) + "`",
                   "a binding reads `configurable.param = value`; a block header ends "
                   "with ':'");
      Statement s;
      s.where = loc(first);
      const size_t dot = full.rfind('.');
      if (dot == std::string::npos) {
        if (!scope.empty())
          fail(first, "macro `" + full + "` cannot have a scope",
               "bind `configurable.param` in a scope, or define the macro without `" + scope +
                   "/`");
        s.kind = Statement::Kind::kMacro;
        s.name = full;
      } else {
        s.kind = Statement::Kind::kBinding;
        s.scope = scope;
        s.configurable = full.substr(0, dot);
        s.name = full.substr(dot + 1);
      }
      s.value = value();
      end_of_line();
      out.push_back(std::move(s));
    }
    return out;
  }

  Value single_value() {
    while (peek().type == Tok::kNewline) ++i_;
    if (peek().type == Tok::kEnd) fail(peek(), "expected a value, found nothing", kValueHint);
    Value v = value();
    while (peek().type == Tok::kNewline) ++i_;
    if (peek().type != Tok::kEnd)
      fail(peek(), "unexpected " + show(peek()) + " after the value",
           "a binding holds exactly one value; wrap several in [ ] or ( )");
    return v;
  }

 private:
  std::string_view src_;
  std::vector<Token> toks_;
  std::string file_;
  size_t i_ = 0;
  int depth_ = 0;  // brackets open in value()

  const Token& peek(size_t k = 0) const {
    return toks_[std::min(i_ + k, toks_.size() - 1)];
  }
  const Token& next() { const Token& t = peek(); if (i_ < toks_.size() - 1) ++i_; return t; }
  SourceLocation loc(const Token& t) const { return SourceLocation{file_, t.line, t.col}; }

  static std::string show(const Token& t) {
    switch (t.type) {
      case Tok::kEnd: return "end of input";
      case Tok::kNewline: return "end of line";
      case Tok::kString: return "string " + quote_string(t.text);
      default: return "'" + t.text + "'";
    }
  }
  static std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
    return s;
  }

  [[noreturn]] void fail(const Token& t, const std::string& msg, const std::string& hint) const {
    throw GinError(loc(t), msg, hint);
  }

  bool is_punct(const char* p) const { return peek().type == Tok::kPunct && peek().text == p; }

  const Token& expect_ident(const std::string& what,
                            const std::string& hint = "names are identifiers like `emb_dim` or `utils.DatasetConfig`") {
    if (peek().type != Tok::kIdent) fail(peek(), "expected " + what + ", found " + show(peek()), hint);
    return next();
  }
  void expect_punct(const char* p, const std::string& after, const std::string& hint) {
    if (!is_punct(p))
      fail(peek(), std::string("expected '") + p + "' after " + after + ", found " + show(peek()),
           hint);
    ++i_;
  }
  void end_of_line() {
    if (peek().type == Tok::kNewline) { ++i_; return; }
    if (peek().type == Tok::kEnd) return;
    fail(peek(), "unexpected " + show(peek()) + " at the end of the statement",
         "one statement per line; wrap several values in [ ] or ( )");
  }

  std::string dotted() {
    std::string s = expect_ident("a name").text;
    while (is_punct(".")) {
      ++i_;
      s += "." + expect_ident("a name after '.'").text;
    }
    return s;
  }
  // scope/scope/dotted.name -> {"scope", "scope", "dotted.name"}
  std::vector<std::string> selector() {
    std::vector<std::string> parts{dotted()};
    while (is_punct("/")) {
      ++i_;
      parts.push_back(dotted());
    }
    return parts;
  }

  Value number(const Token& t, bool negate) {
    // Python puts an underscore only between two digits (after a base
    // prefix too: 0x_1f): `1__0` and `1_` are syntax errors there.
    for (size_t k = 0; k < t.text.size(); ++k)
      if (t.text[k] == '_' && (k + 1 == t.text.size() || !std::isxdigit(static_cast<unsigned char>(t.text[k + 1])) ||
                               k == 0 || !std::isalnum(static_cast<unsigned char>(t.text[k - 1]))))
        fail(t, "malformed number '" + t.text + "'", "an underscore goes between two digits, e.g. 1_000");
    std::string s;
    for (char c : t.text)
      if (c != '_') s += c;
    const bool hexish = s.size() > 1 && s[0] == '0' &&
                        std::string_view("xXoObB").find(s[1]) != std::string_view::npos;
    const bool is_float = !hexish && s.find_first_of(".eE") != std::string::npos;
    if (is_float) {
      double d = 0;
      auto r = std::from_chars(s.data(), s.data() + s.size(), d);
      if (r.ec == std::errc::result_out_of_range && r.ptr == s.data() + s.size())
        d = std::strtod(s.c_str(), nullptr);  // Python's float(): 1e400 -> inf, 1e-400 -> 0.0, subnormals kept
      else if (r.ec != std::errc() || r.ptr != s.data() + s.size())
        fail(t, "malformed number '" + t.text + "'", "write e.g. 0.5, 1e-3 or 1_000");
      return Value::real(negate ? -d : d).at(loc(t));
    }
    int base = 10;
    size_t off = 0;
    if (hexish) {
      base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : 2;
      off = 2;
    } else if (s.size() > 1 && s[0] == '0' && s.find_first_not_of('0') != std::string::npos) {
      fail(t, "leading zeros are not allowed in '" + t.text + "'",
           "write the number without leading zeros (Python 3 rule)");
    }
    uint64_t u = 0;
    auto r = std::from_chars(s.data() + off, s.data() + s.size(), u, base);
    if (r.ec == std::errc::result_out_of_range ||
        u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negate ? 1 : 0))
      fail(t, "integer '" + t.text + "' does not fit in 64 bits", "use a smaller value or a float");
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || off == s.size())
      fail(t, "malformed number '" + t.text + "'", "write e.g. 12, 0x1f, 1.5 or 1e-3");
    const int64_t i = negate ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
    return Value::integer(i).at(loc(t));
  }

  std::vector<Value> items_until(const char* close, const char* what) {
    std::vector<Value> items;
    while (!is_punct(close)) {
      items.push_back(value());
      if (is_punct(",")) { ++i_; continue; }
      if (!is_punct(close))
        fail(peek(), std::string("expected ',' or '") + close + "' in " + what + ", found " +
                         show(peek()),
             "separate items with commas");
    }
    ++i_;
    return items;
  }

  // Brackets nest at most this deep: the parser recurses per level, and a
  // real config nests a handful (Python's gin stops at its recursion limit).
  static constexpr int kMaxNesting = 256;

  Value value() {
    const Token& t = peek();
    const SourceLocation where = loc(t);
    if (t.type == Tok::kPunct && (t.text == "-" || t.text == "+")) {
      ++i_;
      const Token& n = peek();
      if (n.type == Tok::kNumber) { ++i_; return number(n, t.text == "-").at(where); }
      if (n.type == Tok::kIdent && (n.text == "inf" || n.text == "nan")) {
        ++i_;
        const double d = n.text == "inf" ? std::numeric_limits<double>::infinity()
                                         : std::numeric_limits<double>::quiet_NaN();
        return Value::real(t.text == "-" ? -d : d).at(where);
      }
      fail(n, "expected a number after '" + t.text + "', found " + show(n), kValueHint);
    }
    switch (t.type) {
      case Tok::kNumber: ++i_; return number(t, false);
      case Tok::kString: {
        std::string s;
        while (peek().type == Tok::kString) s += next().text;
        return Value::string(std::move(s)).at(where);
      }
      case Tok::kIdent: {
        ++i_;
        if (t.text == "True") return Value::boolean(true).at(where);
        if (t.text == "False") return Value::boolean(false).at(where);
        if (t.text == "None") return Value::none().at(where);
        if (t.text == "inf") return Value::real(std::numeric_limits<double>::infinity()).at(where);
        if (t.text == "nan") return Value::real(std::numeric_limits<double>::quiet_NaN()).at(where);
        fail(t, "expected a value, found bare name '" + t.text + "'",
             "quote strings ('" + t.text + "'), reference configurables with @" + t.text +
                 " and macros with %" + t.text);
      }
      case Tok::kPunct: break;
      default: fail(t, "expected a value, found " + show(t), kValueHint);
    }
    const char c = t.text[0];
    struct Depth {  // brackets open around this one
      int& d;
      explicit Depth(int& x) : d(++x) {}
      ~Depth() { --d; }
    } depth(depth_);
    if (depth_ > kMaxNesting && (c == '[' || c == '(' || c == '{'))
      fail(t, "values nest deeper than " + std::to_string(kMaxNesting) + " brackets",
           "flatten the value; a config needs no more than a few levels of [ ], ( ) or { }");
    ++i_;
    if (c == '[') return Value::list(items_until("]", "list")).at(where);
    if (c == '(') {
      if (is_punct(")")) { ++i_; return Value::tuple({}).at(where); }
      Value first = value();
      if (is_punct(")")) { ++i_; return first; }  // parenthesised value
      if (!is_punct(","))
        fail(peek(), "expected ',' or ')' in tuple, found " + show(peek()),
             "separate items with commas; a 1-tuple is written (x,)");
      ++i_;
      std::vector<Value> items{std::move(first)};
      for (Value& v : items_until(")", "tuple")) items.push_back(std::move(v));
      return Value::tuple(std::move(items)).at(where);
    }
    if (c == '{') {
      std::vector<std::pair<Value, Value>> entries;
      while (!is_punct("}")) {
        Value k = value();
        if (!is_punct(":"))
          fail(peek(), "expected ':' after dict key, found " + show(peek()),
               "dict entries read `key: value`");
        ++i_;
        Value v = value();
        // A repeated key keeps its first place and takes the later value, as
        // a Python dict literal does.
        auto same = std::find_if(entries.begin(), entries.end(), [&](const auto& e) { return e.first == k; });
        if (same != entries.end()) same->second = std::move(v);
        else entries.emplace_back(std::move(k), std::move(v));
        if (is_punct(",")) { ++i_; continue; }
        if (!is_punct("}"))
          fail(peek(), "expected ',' or '}' in dict, found " + show(peek()),
               "separate entries with commas");
      }
      ++i_;
      return Value::dict(std::move(entries)).at(where);
    }
    if (c == '@') {
      std::vector<std::string> parts = selector();
      Reference ref;
      ref.name = parts.back();
      parts.pop_back();
      ref.scope = join(parts, "/");
      if (is_punct("(")) {
        ++i_;
        if (!is_punct(")"))
          fail(peek(), "arguments are not allowed in `@" + ref.name + "(...)`",
               "write @" + ref.name + "() and bind its parameters with `" + ref.name +
                   ".param = value`");
        ++i_;
        ref.call = true;
      }
      return Value::reference(std::move(ref)).at(where);
    }
    if (c == '%') {
      const std::string name = dotted();
      if (is_punct("/"))
        fail(peek(), "scoped macros (%scope/NAME) are not supported",
             "define a macro of its own for the scope's value, e.g. TRAIN_" + name + " = ...");
      if (name == "gin.REQUIRED") return Value::required().at(where);
      return Value::macro(name).at(where);
    }
    fail(t, "expected a value, found " + show(t), kValueHint);
  }
};

}  // namespace

std::vector<Statement> parse_gin(std::string_view text, const std::string& file) {
  // A UTF-8 byte order mark (some Windows editors write one) is not text.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  Lexer lexer(text, file, 1, 1);
  Parser parser(text, lexer.run(), file);
  return parser.statements();
}

Value parse_value(std::string_view text, const SourceLocation& where) {
  Lexer lexer(text, where.file, where.line > 0 ? where.line : 1,
              where.column > 0 ? where.column : 1);
  Parser parser(text, lexer.run(), where.file);
  return parser.single_value();
}

bool is_value(std::string_view text) {
  try {
    parse_value(text);
    return true;
  } catch (const GinError&) {
    return false;
  }
}

}  // namespace t5x::gin
