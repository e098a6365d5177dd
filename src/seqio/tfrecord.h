// TFRecord files and tf.train.Example records, without TensorFlow.
//
// TFRecord framing (tensorflow/core/lib/io/record_writer): per record
//   uint64 length (little endian) | uint32 masked_crc32c(length bytes)
//   | data[length] | uint32 masked_crc32c(data)
// masked_crc(x) = rotate_right(crc32c(x), 15) + 0xa282ead8.
//
// tf.train.Example is decoded/encoded by a small hand-written protobuf
// wire-format codec (example.proto / feature.proto field numbers), so the
// library needs no generated code:
//   Example{1: Features}  Features{1: map<string, Feature>}
//   Feature{1: BytesList{1: repeated bytes}, 2: FloatList{1: packed float},
//           3: Int64List{1: packed int64}}
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "seqio/example.h"

namespace seqio {

uint32_t crc32c(std::string_view data, uint32_t init = 0);
uint32_t masked_crc32c(std::string_view data);

class TFRecordWriter {
 public:
  // Throws DataError when the file cannot be created.
  explicit TFRecordWriter(const std::string& path);
  void write(std::string_view record);
  void close();  // flushes; throws DataError on a write failure

 private:
  std::string path_;
  std::ofstream out_;
};

class TFRecordReader {
 public:
  explicit TFRecordReader(const std::string& path);  // throws DataError if unreadable
  // Next record; false at a clean end of file. Truncated files and CRC
  // mismatches throw DataError naming the file and byte offset of the record.
  bool next(std::string& record);
  uint64_t offset() const { return offset_; }  // byte offset of the next record
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;  // of the file, to check record lengths before allocating
};

// One tf.train.Feature as decoded from the wire.
struct TFFeature {
  enum class Kind { kBytes, kFloat, kInt64 } kind = Kind::kBytes;
  std::vector<std::string> bytes;
  std::vector<float> floats;
  std::vector<int64_t> ints;
};
using TFExample = std::vector<std::pair<std::string, TFFeature>>;

// Throws std::runtime_error describing the malformed field (callers add the
// file/offset context).
TFExample parse_tf_example(std::string_view data);
std::string serialize_tf_example(const TFExample& ex);

// Example <-> tf.train.Example: Tokens -> int64 list, int64 -> one-element
// int64 list, double -> one-element float list (float precision), string ->
// one-element bytes list.
std::string example_to_tf_example(const Example& ex);

}  // namespace seqio
