// Checkpoint inspection behind `t5x ckpt info`: resolve a path to one
// checkpoint, list its arrays with dtypes, shapes (named by logical axes when
// MODEL_DIR/model-info.txt knows them), sizes and storage, and hash each
// array so two checkpoints can be compared bit for bit.
//
// The digest is FNV-1a (64 bit) over the dtype name, the shape and the
// C-order little-endian bytes of the whole array as read back (zarr chunks
// decoded, inline msgpack arrays as stored). It is a fingerprint for
// equality checks, not a cryptographic hash; equal digests of two arrays
// with the same dtype and shape mean equal bits up to that caveat.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/manifest.h"

namespace t5x {

// `path` is a checkpoint directory (holds the `checkpoint` msgpack, or
// `state/checkpoint`), a `checkpoint` file, or a MODEL_DIR: then the newest
// checkpoint_<N> that passes `verify` is taken (latest_valid_step), and
// `note` (if given) receives the lines about skipped damaged/half-written
// directories. A checkpoint directory named directly is not verified here.
// Throws CheckpointError naming the path and a hint when nothing usable is there.
std::string resolve_checkpoint_path(const std::string& path, std::string* note = nullptr,
                                    Verify verify = Verify::kSizes);

// Logical axis names per parameter from a model-info.txt ("Variable
// encoder/layers_0/mlp/wi_0/kernel size 2048 shape (embed=32, mlp=64) ...").
// Keys are parameter names without "target/". Missing or unparsable file: {}.
std::map<std::string, std::vector<std::string>> read_model_info_axes(const std::string& path);

struct ArrayInfo {
  std::string path;                        // "target/encoder/encoder_norm/scale"
  std::string dtype;                       // numpy name
  std::vector<int64_t> shape;
  std::vector<std::string> logical_axes;   // empty when unknown
  std::string storage;                     // "inline", "zarr/<compressor>" or "ocdbt/zarr/<compressor>" (Orbax)
  int64_t numel = 0;
  uint64_t nbytes = 0;                     // uncompressed
  uint64_t disk_bytes = 0;                 // zarr chunk files + .zarray; 0 for inline
  std::optional<uint64_t> digest;          // with InspectOptions::digest
};

struct CheckpointInventory {
  std::string dir;                         // the resolved checkpoint directory
  std::string note;                        // from resolve_checkpoint_path
  int version = 0;                         // of t5x's msgpack
  std::string format;                      // "" for the msgpack format, else e.g. "Orbax (OCDBT store, ...)"
  std::optional<int64_t> step;
  std::vector<ArrayInfo> arrays;           // target/ first, then state/, by path
  std::map<std::string, std::string> scalars;  // non-array leaves, as text
  std::vector<std::string> dataset_states;     // train_ds-*.json files present
  std::string verified;                        // what was verified, one line ("" when nothing)
};

struct InspectOptions {
  bool digest = false;     // read every array and hash it
  int num_threads = 1;     // chunk decode and CRC threads
  // validate_checkpoint level, for a checkpoint named directly and for the
  // choice in a MODEL_DIR alike; nullopt: none.
  std::optional<Verify> verify = Verify::kChecksums;
};

// Verifies the checkpoint (InspectOptions::verify), then reads the msgpack and
// the .zarray files (and every chunk with `digest`). Logical axes come from
// model-info.txt in the checkpoint's parent dir. Throws CheckpointError
// (naming the file) for a damaged or corrupt checkpoint.
CheckpointInventory inspect_checkpoint(const std::string& path, const InspectOptions& opt = {});

// FNV-1a 64 of dtype, shape and bytes (see above).
uint64_t tensor_digest(const HostTensor& t);
std::string digest_hex(uint64_t d);  // 16 lowercase hex digits

// Human-readable table plus totals (parameters, bytes, on disk), one array per
// line: "<path>  <dtype>  (embed=32, mlp=64)  <numel>  <bytes>  <storage>  [digest]".
std::string format_inventory(const CheckpointInventory& inv);
// "<path> <dtype> <shape> <digest>" per array, sorted by path: stable text to diff.
std::string format_digests(const CheckpointInventory& inv);

}  // namespace t5x
