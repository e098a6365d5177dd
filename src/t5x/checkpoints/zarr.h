// zarr v2 arrays as TensorStore's "zarr" driver writes them for t5x.
//
// Layout (t5x.md §3.2): a directory holding `.zarray` (compact JSON, sorted
// keys) and one file per chunk, named by the chunk's grid indices joined with
// the dimension separator "." ("0.1"; "0" for a rank-0 array). Chunks are
// always full-size (edge chunks padded with fill_value), C order, little
// endian; bfloat16 uses TensorStore's dtype string "bfloat16".
//
// Writers: each process writes only the chunks inside the box it owns; the box
// must be aligned to the chunk grid. Readers: any box of any chunking, gzip /
// zlib / zstd / raw; a missing chunk reads as fill_value (0 when null).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "t5x/checkpoints/codec.h"
#include "t5x/checkpoints/host_tensor.h"

namespace t5x {

struct ZarrMetadata {
  std::vector<int64_t> shape;    // global array shape
  std::vector<int64_t> chunks;   // chunk shape, same rank, each >= 1
  std::string dtype = "float32"; // numpy name (see host_tensor.h)
  ZarrCompressor compressor{"gzip", 1};
  std::optional<double> fill_value;  // null in t5x files => 0
  std::string dimension_separator = ".";
  bool big_endian = false;       // only ever true for files read from elsewhere

  // The `.zarray` text exactly as TensorStore writes it, e.g.
  // {"chunks":[2,3],"compressor":{"id":"gzip","level":1},"dimension_separator":".",
  //  "dtype":"<f4","fill_value":null,"filters":null,"order":"C","shape":[4,6],"zarr_format":2}
  std::string to_json() const;
  // Parses `.zarray`; `where` (the file path) prefixes every error.
  static ZarrMetadata from_json(const std::string& text, const std::string& where);

  size_t itemsize() const;
  size_t chunk_nbytes() const;              // prod(chunks) * itemsize
  std::vector<int64_t> grid_shape() const;  // ceil(shape / chunks)
  std::string chunk_key(const std::vector<int64_t>& grid_index) const;
  std::vector<std::string> chunk_keys() const;  // every chunk's key, in C order of the grid
};

// "<f4", "<i4", "bfloat16", "|b1", ... for a numpy dtype name.
std::string zarr_dtype_code(const std::string& numpy_name);

// t5x's host-numpy chunk rule: start from the write shape and repeatedly step
// the currently largest dimension down to its next smaller divisor until the
// chunk holds at most max_bytes (default 64 MiB, _DESIRED_CHUNK_SIZE_BYTES).
std::vector<int64_t> t5x_chunk_shape(const std::vector<int64_t>& write_shape, size_t itemsize,
                                     size_t max_bytes = size_t(64) << 20);

struct ZarrWriteOptions {
  bool durable = true;  // fsync every chunk file
  int num_threads = 1;  // chunks are encoded and written in parallel
  // Called with each chunk's file name ("0.1") and encoded bytes once it is
  // written, from the writing thread (several at once with num_threads > 1).
  std::function<void(const std::string& chunk_key, std::span<const uint8_t> bytes)> on_chunk = {};
};

// Creates `dir` and writes `.zarray` (atomic replace; every process may call it).
void zarr_write_metadata(const std::string& dir, const ZarrMetadata& meta, bool durable = true);
ZarrMetadata zarr_read_metadata(const std::string& dir);

// Writes the chunks covering `box` from `local` (dtype = meta.dtype, shape =
// box extent). Throws std::invalid_argument "[zarr] ..." when the box is not
// aligned to the chunk grid (start % chunk == 0 and stop % chunk == 0 or
// stop == shape) or shapes/dtypes disagree. Returns the bytes written.
uint64_t zarr_write_box(const std::string& dir, const ZarrMetadata& meta, const HostTensor& local,
                    const IndexBox& box, const ZarrWriteOptions& opt = {});

// Called with each chunk's file name ("0.1") and encoded bytes as read (null
// for a chunk file that is absent), from the reading thread, before it is
// decoded; it may throw to refuse the chunk (the reader's manifest check).
using ZarrChunkCheck = std::function<void(const std::string& chunk_key, const std::vector<uint8_t>* bytes)>;

// Reads `box` (any box inside the array). Throws CheckpointError naming the
// chunk file for truncated/corrupt chunks and for a missing/invalid .zarray.
HostTensor zarr_read_box(const std::string& dir, const ZarrMetadata& meta, const IndexBox& box,
                         int num_threads = 1, const ZarrChunkCheck& check = {});
HostTensor zarr_read(const std::string& dir);  // whole array

// A zarr array whose files live in a key-value store (Orbax's OCDBT store,
// ocdbt.h): `get(name)` returns the bytes of the array's file `name` (a chunk
// key, "0.1") or nullopt when it is absent (read as fill_value). `where` names
// the array in errors ("<store>: <param name>").
using ZarrChunkSource = std::function<std::optional<std::vector<uint8_t>>(const std::string& name)>;
HostTensor zarr_read_box(const ZarrChunkSource& get, const std::string& where, const ZarrMetadata& meta,
                         const IndexBox& box, int num_threads = 1);

}  // namespace t5x
