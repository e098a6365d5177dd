// The checkpoint manifest: `manifest.t5xcpp.json` in a checkpoint directory
// lists every file of the save (zarr chunks and .zarray files, the msgpack
// `checkpoint`, the train_ds-*.json data positions) with its size and
// CRC-32C (crc32c.h), so that a truncated, missing or bit-flipped file is
// found before it is restored. t5x and TensorStore ignore the extra file.
//
//   {"format":"t5x.cpp checkpoint manifest","version":1,"checksum":"crc32c","files":{
//   "checkpoint":{"bytes":23544,"crc32c":"9ea04afc"},
//   "target.decoder.logits_dense.kernel/.zarray":{"bytes":172,"crc32c":"b757513f"},
//   "target.decoder.logits_dense.kernel/0.0":{"bytes":993,"crc32c":"b156971e"}
//   }}
//
// Paths are relative to the checkpoint directory, '/'-separated. The save
// writes it after the msgpack and before the rename that commits the
// checkpoint (checkpoint_dir.h), so every committed save of t5x.cpp has one;
// checkpoints written by t5x (or older t5x.cpp) have none and are checked by
// their structure alone. Files the manifest does not list (PINNED, files a
// user adds) are not checked.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

namespace t5x {

inline constexpr const char* kManifestFile = "manifest.t5xcpp.json";

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  bool operator==(const FileDigest&) const = default;
  static FileDigest of(std::span<const uint8_t> data);
};

struct CheckpointManifest {
  std::map<std::string, FileDigest> files;  // relative path -> size and CRC

  std::string to_json() const;
  // Throws CheckpointError "<where>: ..." for text that is not a manifest.
  static CheckpointManifest from_json(const std::string& text, const std::string& where);
};

// The manifest of `ckpt_dir`; nullopt when it has none. Throws CheckpointError
// naming the file when it cannot be read or parsed.
std::optional<CheckpointManifest> read_manifest(const std::string& ckpt_dir);
// The digest of a file on disk (read whole). Throws CheckpointError.
FileDigest digest_file(const std::string& path);

// How a file's digest `have` differs from the recorded `want`, naming the
// file (the size first, then the CRC, as verify_manifest reports them);
// nullopt when they are equal.
std::optional<std::string> digest_mismatch(const std::string& path, const FileDigest& have, const FileDigest& want);

// How much of a checkpoint to look at (validate_checkpoint, latest_valid_step).
enum class Verify {
  kSizes,      // every listed file exists with its recorded size, plus the structure checks
  kChecksums,  // kSizes and the CRC-32C of every listed file (reads the whole checkpoint);
               // without a manifest, every chunk decoded (its own gzip / zlib checksum)
  kDecode,     // kChecksums and every zarr chunk decoded
};
// Parses "sizes" / "checksums" / "decode"; nullopt for anything else.
std::optional<Verify> parse_verify(const std::string& s);

// Checks the files of `ckpt_dir` against `m` (CRCs with Verify::kChecksums or
// kDecode). Returns the first problem, naming the file, or nullopt:
//   "<dir>/<file> is missing (listed in manifest.t5xcpp.json)"
//   "<dir>/<file>: truncated or corrupt (100 bytes; the manifest records 4096)"
//   "<dir>/<file>: crc32c 0x... differs from the manifest's 0x... (the bytes changed after the save)"
std::optional<std::string> verify_manifest(const std::string& ckpt_dir, const CheckpointManifest& m, Verify level,
                                           int num_threads = 1);

}  // namespace t5x
