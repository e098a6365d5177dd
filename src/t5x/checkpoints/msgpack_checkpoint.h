// The `checkpoint` msgpack file of t5x's legacy native format (VERSION 3),
// as written by flax.serialization.to_bytes (t5x.md §3.2):
//
//   {"version": 3, "optimizer": {"target": {...params...},
//                                "state": {"step": ..., "param_states": {...}}}}
//
// Leaves are either
//   * inline arrays: msgpack ext type 1 (ndarray) whose payload is the msgpack
//     array [shape, dtype_name, C-order bytes] (ext 3 = numpy scalar, same
//     payload, read only). Arrays larger than 2^30 bytes are split as flax does:
//     {"__msgpack_chunked_array__": true, "shape": {"0": d0, ...},
//      "chunks": {"0": <1-D ndarray>, ...}};
//   * TensorStore spec dicts for partitioned leaves, e.g.
//     {"driver":"zarr","dtype":"float32","kvstore":{"driver":"file",
//      "path":"target.encoder.layers_0.attention.query.kernel/"},
//      "metadata":{"chunks":[768,768],"compressor":{"id":"gzip","level":1},
//                  "shape":[768,768]}}
//     The path is relative to the checkpoint directory: the '/'-joined state
//     path with '/' replaced by '.' (t5x `name.replace('/', '.')`).
//   * plain msgpack scalars (ints, floats, bool, nil, strings) and empty dicts.
//
// The flat view keys leaves by their '/'-joined path below "optimizer", e.g.
// "target/encoder/layers_0/attention/query/kernel", "state/step",
// "state/param_states/encoder/layers_0/attention/query/kernel/v_row".
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "t5x/checkpoints/codec.h"
#include "t5x/checkpoints/host_tensor.h"

namespace t5x {

struct TensorStoreSpec {
  std::string driver = "zarr";
  std::string dtype = "float32";        // numpy name of the stored array
  std::string kvstore_driver = "file";  // "file", "gfile" or "gcs"
  std::string path;                     // relative array dir, no trailing '/'
  std::string bucket;                   // gcs only ("t5x-dummy-bucket" in t5x)
  std::vector<int64_t> shape, chunks;
  ZarrCompressor compressor{"gzip", 1};
  // Whether the spec read named its dtype (older layouts may not; then
  // `dtype` is the default and the .zarray's is the only one).
  bool dtype_given = false;

  // Spec as TensorStore's Spec.to_json() writes it (kvstore path gets a '/').
  nlohmann::json to_json() const;
  // Accepts the current layout and the older ones (path at the top level,
  // gfile/gcs drivers, missing chunks/compressor). `where` prefixes errors.
  static TensorStoreSpec from_json(const nlohmann::json& j, const std::string& where);
  // The spec's fields (dtype_given, a fact about the text read, aside).
  bool operator==(const TensorStoreSpec& o) const {
    return driver == o.driver && dtype == o.dtype && kvstore_driver == o.kvstore_driver && path == o.path &&
           bucket == o.bucket && shape == o.shape && chunks == o.chunks && compressor == o.compressor;
  }
};

// '/'-joined state path -> zarr directory name ("target/a/b" -> "target.a.b").
std::string ts_dir_name(const std::string& state_path);

struct EmptyDict { bool operator==(const EmptyDict&) const = default; };
struct MsgpackNil { bool operator==(const MsgpackNil&) const = default; };

using CheckpointLeaf = std::variant<HostTensor, TensorStoreSpec, int64_t, double, bool,
                                    std::string, MsgpackNil, EmptyDict>;
using FlatState = std::map<std::string, CheckpointLeaf>;

struct MsgpackWriteOptions {
  // flax MAX_CHUNK_SIZE: inline arrays above this many bytes are chunked.
  size_t max_inline_chunk_bytes = size_t(1) << 30;
};

// Encodes {"version": version, "optimizer": nested(state)}. Throws
// std::invalid_argument "[msgpack] ..." on conflicting paths ("a" and "a/b").
std::vector<uint8_t> encode_checkpoint_msgpack(const FlatState& state, int version = 3,
                                               const MsgpackWriteOptions& opt = {});

struct DecodedCheckpoint {
  int version = 0;   // 0 = plain flax file without the {"version","optimizer"} wrapper
  FlatState leaves;
};

// Decodes a checkpoint file's bytes. Throws CheckpointError naming `where`
// (the file path), the byte size and the offending state path for truncated
// or corrupt data.
DecodedCheckpoint decode_checkpoint_msgpack(std::span<const uint8_t> bytes,
                                            const std::string& where);

// Builds an inline-array leaf's ext payload / parses one (exposed for tests).
std::vector<uint8_t> pack_ndarray_payload(const HostTensor& t);
HostTensor unpack_ndarray_payload(std::span<const uint8_t> payload, const std::string& where);

}  // namespace t5x
