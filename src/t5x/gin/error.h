// Errors raised while reading or querying gin configuration.
//
// Config problems are user errors, not API misuse: they carry the place in the
// gin text (file, 1-based line and column) and a hint on how to fix them.
#pragma once

#include <stdexcept>
#include <string>

namespace t5x::gin {

// A place in gin text. `file` is the path as it was opened, or a pseudo name
// such as "<--gin_bindings #2>" for command-line bindings. line/column are
// 1-based; 0 means unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  // "file:line:column", "file:line" or "file"; empty when nothing is known.
  std::string str() const;
  bool known() const { return !file.empty(); }
};

// Thrown for malformed gin, unknown names, missing macros, type mismatches
// and include failures. what() reads "<file>:<line>:<col>: <message>" followed
// by "\n  hint: <hint>" when a hint is present.
class GinError : public std::runtime_error {
 public:
  GinError(SourceLocation where, std::string message, std::string hint = {});

  const SourceLocation& where() const { return where_; }
  const std::string& message() const { return message_; }
  const std::string& hint() const { return hint_; }

 private:
  SourceLocation where_;
  std::string message_;
  std::string hint_;
};

}  // namespace t5x::gin
