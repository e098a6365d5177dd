// Chunk codecs of zarr v2 as TensorStore writes them for t5x:
//   "gzip" - RFC 1952 gzip stream (numcodecs/TensorStore "gzip", default level 1)
//   "zlib" - RFC 1950 zlib stream (read and write)
//   "zstd" - Zstandard frame (JAX array_serialization writes zstd level 1)
//   ""     - raw bytes (compressor null)
// Decoding checks that the output has exactly `expected_size` bytes.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace t5x {

struct ZarrCompressor {
  std::string id;   // "", "gzip", "zlib" or "zstd"
  int level = 1;
  bool operator==(const ZarrCompressor&) const = default;
};

std::vector<uint8_t> encode_chunk(const ZarrCompressor& c, std::span<const uint8_t> raw);
// Throws CheckpointError "<where>: ..." when the stream is corrupt, truncated or
// decodes to a size other than expected_size.
std::vector<uint8_t> decode_chunk(const ZarrCompressor& c, std::span<const uint8_t> encoded,
                                  size_t expected_size, const std::string& where);

// Cheap completeness check without decoding: raw size must equal
// expected_size; a zstd frame must be complete and declare expected_size; a
// gzip trailer's ISIZE must equal expected_size mod 2^32. Returns the problem
// or an empty string.
std::string quick_check_chunk(const ZarrCompressor& c, std::span<const uint8_t> encoded,
                              size_t expected_size);

}  // namespace t5x
