// TensorFlow TensorBundle checkpoints (TF v2 "model.ckpt-N" prefixes) read and
// written without TensorFlow. Format: ../shared/reference/meshtf-checkpoints.md
// §1-3 and TensorFlow's tensorflow/core/util/tensor_bundle/tensor_bundle.{h,cc}.
//
//   PREFIX.index                  a LevelDB table (no filter blocks): key "" holds
//                                 BundleHeaderProto, every other key a tensor
//                                 name -> BundleEntryProto (tf_bundle.proto)
//   PREFIX.data-SSSSS-of-NNNNN    raw tensor bytes (little endian, row major),
//                                 back to back; an entry gives shard, offset,
//                                 size and the masked crc32c of its bytes
//
// The table layer is Debian's libleveldb (leveldb::Table / TableBuilder read and
// write a single .table file with the bytewise comparator TF uses; snappy
// blocks come through leveldb's own snappy). Every block CRC is checked
// (verify_checksums, paranoid_checks). Hand-written here, because no library
// on the machine offers them: the crc32c (crc32c.h) with TF's mask, and the
// slice keys of partitioned variables (TF's ordered_code,
// saved_tensor_slice_util.cc EncodeTensorNameSlice).
//
// The protobuf entries are coded by hand (tf_bundle.cpp explains why; the
// schema is tf_bundle.proto).
//
// dtypes: float32, bfloat16, float16, float64, int32, int64, int8, uint8, bool
// (numpy names, as HostTensor). Sliced (partitioned) variables are listed
// under their full name and shape and reassembled by read().
//
// Errors: CheckpointError naming the file, the byte offset and the tensor, e.g.
//   "m.ckpt.data-00001-of-00002: tensor 'encoder/block_000/layer_000/SelfAttention/q'
//    at offset 64 (1536 bytes): crc32c mismatch (stored 0x..., computed 0x...)"
// and, for a bad index entry, the offset of the index block that holds it:
//   "m.ckpt.index: tensor 'x' (index block at offset 0): TF dtype 7 is not supported ..."
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "t5x/checkpoints/host_tensor.h"

namespace t5x::tf {

// checksum::crc32c (crc32c.h), kept under this name for the TF code.
uint32_t crc32c(const uint8_t* data, size_t n, uint32_t crc = 0);
// TF/LevelDB's stored form: rotate right 15 bits, add 0xa282ead8.
uint32_t crc_mask(uint32_t crc);
uint32_t crc_unmask(uint32_t masked);

// One dimension of a stored slice: [start, start + length); length -1 = the
// whole dimension (TF's kFullExtent).
struct SliceExtent {
  int64_t start = 0;
  int64_t length = -1;
  bool operator==(const SliceExtent&) const = default;
};
using TensorSlice = std::vector<SliceExtent>;  // one extent per dimension

// The key under which BundleWriter::AddSlice stores one slice of `name`
// (ordered_code: 0x00, escaped name + 00 01, rank, then start and length of
// every dimension as signed increasing numbers).
std::string slice_key(const std::string& name, const TensorSlice& slice);
// "name [0:576, :]" style, for messages.
std::string slice_string(const TensorSlice& slice);

// TF DataType number <-> numpy name; 0 / "" when unsupported.
int tf_dtype_number(const std::string& numpy_name);
std::string tf_dtype_name(int tf_dtype);

struct TfEntry {
  std::string name;
  int tf_dtype = 0;
  std::string dtype;            // numpy name ("" when the TF dtype is unsupported)
  std::vector<int64_t> shape;   // the full shape (for a sliced variable too)
  int shard_id = 0;
  int64_t offset = 0, size = 0;
  uint32_t masked_crc = 0;
  std::vector<TensorSlice> slices;  // non-empty: a partitioned variable
  int64_t index_block = 0;          // offset in PREFIX.index of the data block holding the entry

  int64_t numel() const;
};

class TfBundleReader {
 public:
  // Reads PREFIX.index and checks it: the footer, every block's CRC, the
  // header (num_shards, little endian, version), every entry's proto and that
  // each slice of a partitioned variable has its entry. Data files are opened
  // only by read()/verify().
  static TfBundleReader open(const std::string& prefix);
  ~TfBundleReader();
  TfBundleReader(TfBundleReader&&) noexcept;
  TfBundleReader& operator=(TfBundleReader&&) noexcept;

  const std::string& prefix() const { return prefix_; }
  std::string index_file() const { return prefix_ + ".index"; }
  std::string data_file(int shard) const;  // PREFIX.data-%05d-of-%05d
  int num_shards() const { return num_shards_; }
  // True when the index had a snappy-compressed block.
  bool had_snappy_block() const { return snappy_blocks_ > 0; }
  int num_blocks() const { return num_blocks_; }

  // Tensor names in key order; slice keys are hidden (as TF's CheckpointReader).
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return entries_.count(name) != 0; }
  const TfEntry& entry(const std::string& name) const;  // throws CheckpointError if absent
  // The stored entry of one slice of a partitioned variable (shape = the
  // slice's), or nullptr.
  const TfEntry* slice_entry(const std::string& name, const TensorSlice& slice) const;

  // The whole tensor: bytes read, size and crc32c checked, slices copied into
  // place. Throws CheckpointError (file, offset, tensor) for a missing or
  // truncated data file, a CRC or size mismatch, an unsupported dtype, or
  // slices that do not tile the shape (outside it, overlapping, or leaving gaps).
  HostTensor read(const std::string& name) const;
  // nullopt when read(name) would succeed, else its error message.
  std::optional<std::string> verify(const std::string& name) const;

 private:
  TfBundleReader() = default;
  HostTensor read_stored(const TfEntry& e, const std::string& tensor) const;
  std::string prefix_;
  int num_shards_ = 1;
  int snappy_blocks_ = 0, num_blocks_ = 0;
  std::map<std::string, TfEntry> entries_;        // by name
  std::map<std::string, TfEntry> slice_entries_;  // by slice key
};

// ---- Writer (test fixtures, and the snappy index TensorFlow never writes) ----

struct TfWriteTensor {
  std::string name;
  HostTensor data;   // the whole tensor, or the slice's values
  int shard = 0;
  // For a slice of a partitioned variable: the full shape and this slice
  // (several TfWriteTensors with the same name, one per slice).
  std::vector<int64_t> full_shape;
  TensorSlice slice;
};

struct TfWriteOptions {
  bool snappy = true;           // snappy-compress index blocks (TF writes none)
  int block_size = 262144;      // TF's table_options.h defaults
  int block_restart_interval = 16;
  int num_shards = 0;           // 0: 1 + the largest shard used
};

// Writes PREFIX.index and PREFIX.data-*-of-* (as BundleWriter + MergeBundles:
// tensors in each shard in the given order, alignment 1). Throws
// CheckpointError for I/O failures, std::invalid_argument for bad input.
void write_tf_bundle(const std::string& prefix, const std::vector<TfWriteTensor>& tensors,
                     const TfWriteOptions& opt = {});

// True when PREFIX.index exists (t5x utils: a TF checkpoint is a path P with
// P + '.index').
bool is_tf_checkpoint(const std::string& prefix);

// The TF checkpoint that PATH names, wherever a prefix is accepted:
//   - PATH itself when PATH.index exists;
//   - for a directory holding TensorFlow's `checkpoint` state file (a
//     CheckpointState text proto, recognized as t5x's detect_checkpoint_type
//     does by its first 21 bytes, "model_checkpoint_path"): the newest
//     prefix, its `model_checkpoint_path`, taken relative to the directory
//     unless absolute. An absolute or remote path (gs://...) that is not
//     here falls back to its last component in the directory, for copies.
//   - nullopt otherwise (a t5x checkpoint's msgpack `checkpoint` file is not a
//     state file).
// Throws CheckpointError naming the state file when it is malformed or the
// prefix it names has no .index.
std::optional<std::string> tf_checkpoint_prefix(const std::string& path);

}  // namespace t5x::tf
