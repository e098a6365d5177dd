#include "t5x/checkpoints/codec.h"

#include <zlib.h>
#include <zstd.h>

#include <stdexcept>

#include "t5x/checkpoints/host_tensor.h"

namespace t5x {

namespace {

std::vector<uint8_t> deflate_stream(std::span<const uint8_t> raw, int level, bool gzip) {
  z_stream zs{};
  // windowBits 15 (+16 selects the gzip wrapper), memLevel 8 as zlib's default.
  if (deflateInit2(&zs, level, Z_DEFLATED, gzip ? 15 + 16 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("[codec] deflateInit2 failed");
  std::vector<uint8_t> out(deflateBound(&zs, uLong(raw.size())) + 32);
  zs.next_in = const_cast<Bytef*>(raw.data());
  zs.avail_in = uInt(raw.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  int rc = deflate(&zs, Z_FINISH);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("[codec] deflate did not finish");
  out.resize(zs.total_out);
  return out;
}

std::vector<uint8_t> inflate_stream(std::span<const uint8_t> enc, size_t expected,
                                    const std::string& where) {
  z_stream zs{};
  // 15 + 32: accept both zlib and gzip headers.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw std::runtime_error("[codec] inflateInit2 failed");
  std::vector<uint8_t> out(expected + 1);  // one spare byte to detect oversize output
  zs.next_in = const_cast<Bytef*>(enc.data());
  zs.avail_in = uInt(enc.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  int rc = inflate(&zs, Z_FINISH);
  size_t produced = zs.total_out;
  std::string msg = zs.msg ? zs.msg : "";
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    if (rc == Z_BUF_ERROR && zs.avail_in == 0)
      throw CheckpointError(where + ": truncated compressed chunk (" + std::to_string(enc.size()) +
                            " bytes, stream ends early after " + std::to_string(produced) +
                            " of " + std::to_string(expected) +
                            " decoded bytes); the checkpoint was probably cut off while writing");
    throw CheckpointError(where + ": corrupt gzip/zlib chunk (" + (msg.empty() ? "inflate error " + std::to_string(rc) : msg) +
                          ", decoded " + std::to_string(produced) + " of " +
                          std::to_string(expected) + " bytes)");
  }
  if (produced != expected)
    throw CheckpointError(where + ": chunk decodes to " + std::to_string(produced) +
                          " bytes, expected " + std::to_string(expected) +
                          " (chunk shape x itemsize from .zarray)");
  out.resize(produced);
  return out;
}

}  // namespace

std::vector<uint8_t> encode_chunk(const ZarrCompressor& c, std::span<const uint8_t> raw) {
  if (c.id.empty()) return std::vector<uint8_t>(raw.begin(), raw.end());
  if (c.id == "gzip") return deflate_stream(raw, c.level, true);
  if (c.id == "zlib") return deflate_stream(raw, c.level, false);
  if (c.id == "zstd") {
    std::vector<uint8_t> out(ZSTD_compressBound(raw.size()));
    size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), c.level);
    if (ZSTD_isError(n)) throw std::runtime_error(std::string("[codec] zstd: ") + ZSTD_getErrorName(n));
    out.resize(n);
    return out;
  }
  throw std::invalid_argument("[codec] unsupported compressor id '" + c.id + "'");
}

std::vector<uint8_t> decode_chunk(const ZarrCompressor& c, std::span<const uint8_t> enc,
                                  size_t expected, const std::string& where) {
  if (c.id.empty()) {
    if (enc.size() != expected)
      throw CheckpointError(where + ": raw chunk has " + std::to_string(enc.size()) +
                            " bytes, expected " + std::to_string(expected) +
                            (enc.size() < expected ? " (truncated)" : ""));
    return std::vector<uint8_t>(enc.begin(), enc.end());
  }
  if (c.id == "gzip" || c.id == "zlib") return inflate_stream(enc, expected, where);
  if (c.id == "zstd") {
    std::vector<uint8_t> out(expected);
    unsigned long long content = ZSTD_getFrameContentSize(enc.data(), enc.size());
    if (content == ZSTD_CONTENTSIZE_ERROR)
      throw CheckpointError(where + ": not a zstd frame (" + std::to_string(enc.size()) +
                            " bytes); corrupt chunk");
    if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != expected)
      throw CheckpointError(where + ": zstd frame holds " + std::to_string(content) +
                            " bytes, expected " + std::to_string(expected));
    size_t n = ZSTD_decompress(out.data(), out.size(), enc.data(), enc.size());
    if (ZSTD_isError(n))
      throw CheckpointError(where + ": corrupt or truncated zstd chunk (" +
                            ZSTD_getErrorName(n) + ", " + std::to_string(enc.size()) +
                            " bytes on disk)");
    if (n != expected)
      throw CheckpointError(where + ": chunk decodes to " + std::to_string(n) +
                            " bytes, expected " + std::to_string(expected));
    return out;
  }
  throw CheckpointError(where + ": unsupported zarr compressor '" + c.id +
                        "' (t5x.cpp reads gzip, zlib, zstd and null)");
}

std::string quick_check_chunk(const ZarrCompressor& c, std::span<const uint8_t> enc,
                              size_t expected) {
  const std::string sz = std::to_string(enc.size()) + " bytes on disk";
  if (c.id.empty()) {
    if (enc.size() != expected)
      return "raw chunk has " + sz + ", expected " + std::to_string(expected);
    return {};
  }
  if (c.id == "zstd") {
    size_t n = ZSTD_findFrameCompressedSize(enc.data(), enc.size());
    if (ZSTD_isError(n) || n != enc.size()) return "incomplete zstd frame (" + sz + ")";
    unsigned long long content = ZSTD_getFrameContentSize(enc.data(), enc.size());
    if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != expected)
      return "zstd frame declares " + std::to_string(content) + " bytes, expected " +
             std::to_string(expected);
    return {};
  }
  if (c.id == "gzip") {
    if (enc.size() < 18 || enc[0] != 0x1f || enc[1] != 0x8b) return "not a gzip stream (" + sz + ")";
    const uint8_t* t = enc.data() + enc.size() - 4;
    uint32_t isize = uint32_t(t[0]) | uint32_t(t[1]) << 8 | uint32_t(t[2]) << 16 | uint32_t(t[3]) << 24;
    if (isize != uint32_t(expected))
      return "gzip trailer size " + std::to_string(isize) + " != expected " +
             std::to_string(expected) + " (truncated, " + sz + ")";
    return {};
  }
  if (c.id == "zlib") return enc.size() < 6 ? "zlib stream too short (" + sz + ")" : std::string();
  return "unsupported compressor '" + c.id + "'";
}

}  // namespace t5x
