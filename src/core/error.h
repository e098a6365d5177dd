// Errors.
//
// Two kinds, as in ARCHITECTURE.md:
//  - API misuse (wrong dims, dtypes, sizes) throws std::invalid_argument whose
//    message starts with "[op] " and names the offending dims / dtypes;
//  - recoverable failures (I/O, config, data, checkpoints) are returned as a
//    Status or Result<T> carrying a code and a message with context and a hint.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace t5x {

// Throws std::invalid_argument("[op] msg").
[[noreturn]] void throw_invalid(const std::string& op, const std::string& msg);

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad config value, malformed input
  kNotFound,         // missing file / key
  kAlreadyExists,
  kDataLoss,         // corrupt or truncated data
  kFailedPrecondition,
  kOutOfRange,       // end of data
  kUnimplemented,
  kInternal,
  kIoError,
};

const char* status_code_name(StatusCode c);

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "NOT_FOUND: <message>" or "OK".
  std::string to_string() const;
  // Throws std::runtime_error(to_string()) when not ok; for callers that cannot recover.
  void throw_if_error() const;
  bool operator==(const Status& o) const { return code_ == o.code_ && message_ == o.message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }

// A value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                     // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {                // NOLINT
    if (std::get<Status>(v_).ok())
      v_ = Status(StatusCode::kInternal, "Result constructed from an OK status without a value");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK status when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }
  // Value access; throws std::runtime_error with the status text when not ok.
  T& value() & { check(); return std::get<T>(v_); }
  const T& value() const& { check(); return std::get<T>(v_); }
  T&& value() && { check(); return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check() const { if (!ok()) std::get<Status>(v_).throw_if_error(); }
  std::variant<T, Status> v_;
};

// Propagates a non-OK Status from the current function.
#define T5X_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::t5x::Status _t5x_st = (expr);            \
    if (!_t5x_st.ok()) return _t5x_st;         \
  } while (0)

}  // namespace t5x
