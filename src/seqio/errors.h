// Errors of the seqio data layer.
//
// DataError is a recoverable failure caused by the data or the environment
// (unreadable file, malformed record, bad config). Its message names the file
// and the line or byte offset, and gives a hint. API misuse throws
// std::invalid_argument with an "[op] " prefix instead.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

namespace seqio {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "FILE:LINE: WHAT"
inline DataError line_error(const std::string& file, int64_t line, const std::string& what) {
  return DataError(file + ":" + std::to_string(line) + ": " + what);
}
// "FILE@byte OFFSET: WHAT"
inline DataError offset_error(const std::string& file, uint64_t offset, const std::string& what) {
  return DataError(file + "@byte " + std::to_string(offset) + ": " + what);
}

}  // namespace seqio
