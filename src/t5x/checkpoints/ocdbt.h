// OCDBT key-value stores, read only: the store in which Orbax keeps a
// checkpoint's arrays. t5x checkpoints through Orbax by default (train.py's
// `use_orbax = True`; OrbaxCheckpointManagerInterface saves the train state
// with `PyTreeCheckpointHandler(use_ocdbt=True)`), so a t5x run today writes
//
//   MODEL_DIR/checkpoint_<step>/state/
//     _METADATA            JSON: the state's tree (key tuples, value types)
//     manifest.ocdbt       the store's manifest (this file's format)
//     d/<32 hex>           data files: B+tree nodes and values
//     ocdbt.process_<i>/   each process's own store, whose data files the
//                          top-level manifest references
//
// and every array is a zarr v2 array inside the store, under the keys
// `<param name>/.zarray` and `<param name>/<chunk key>` (the param name is the
// tree path joined with '.', "target.encoder.layers_0.mlp.wi.kernel").
//
// Format: TensorStore's `kvstore/ocdbt/index.rst` ("Storage format"). Every
// encoded manifest, version tree node and B+tree node is
//   magic (uint32be) | length (uint64le) | version (varint, 0) |
//   compression (varint: 0 none, 1 zstd) | body | CRC-32C (uint32le)
// with the CRC over everything before it. The reader takes the newest version
// (the last of the manifest's inline versions; the numbered manifest kind
// reads the highest `manifest.<16 hex>`), walks its B+tree once and keeps
// every key's value reference; values are read from the data files on demand.
// Data file paths are `transitive path + base path + relative path`, the
// transitive path growing by a node's base path on the way down.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace t5x {

class OcdbtStore {
 public:
  // Reads `dir`/manifest.ocdbt and the newest version's B+tree. Throws
  // CheckpointError naming the file (and the byte offset of a node) for a
  // missing manifest, a wrong magic value, length or CRC-32C, an unknown
  // version or compression, a truncated node or data file, and keys out of
  // order.
  static OcdbtStore open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  uint64_t generation() const { return generation_; }  // of the version read
  size_t size() const { return entries_.size(); }
  std::vector<std::string> keys() const;              // ascending (byte order)
  bool has(std::string_view key) const { return entries_.count(key) != 0; }
  // The value's bytes; nullopt when the key is absent. Throws CheckpointError
  // naming the data file when it is missing or shorter than the reference.
  std::optional<std::vector<uint8_t>> read(std::string_view key) const;
  // Stored bytes of the values whose keys start with `prefix`.
  uint64_t value_bytes(std::string_view prefix) const;

 private:
  struct Value {
    bool indirect = false;
    std::vector<uint8_t> bytes;  // inline value
    std::string file;            // indirect: data file, relative to dir_
    uint64_t offset = 0, length = 0;
  };
  friend struct OcdbtWalker;
  std::string dir_;
  uint64_t generation_ = 0;
  std::map<std::string, Value, std::less<>> entries_;
};

}  // namespace t5x
