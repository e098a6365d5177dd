#include "t5x/checkpoints/manifest.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "t5x/checkpoints/crc32c.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/checkpoints/parallel.h"

namespace t5x {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kFormat = "t5x.cpp checkpoint manifest";

std::string hex32(uint32_t v, bool prefix) {
  char b[16];
  std::snprintf(b, sizeof b, prefix ? "0x%08x" : "%08x", v);
  return b;
}

}  // namespace

FileDigest FileDigest::of(std::span<const uint8_t> data) {
  return {data.size(), checksum::crc32c(data.data(), data.size())};
}

std::string CheckpointManifest::to_json() const {
  // One file a line, so that the manifest reads and diffs well.
  std::string s = "{\"format\":" + json(kFormat).dump() + ",\"version\":1,\"checksum\":\"crc32c\",\"files\":{";
  const char* sep = "\n";
  for (const auto& [path, d] : files) {
    s += sep + json(path).dump() + ":{\"bytes\":" + std::to_string(d.bytes) + ",\"crc32c\":\"" +
         hex32(d.crc32c, false) + "\"}";
    sep = ",\n";
  }
  return s + "\n}}\n";
}

CheckpointManifest CheckpointManifest::from_json(const std::string& text, const std::string& where) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw CheckpointError(where + ": not valid JSON (truncated or corrupt)");
  // Fields of the wrong JSON type are a damaged manifest, not a type_error.
  auto field_is = [&](const char* key, const json& want) { return j.contains(key) && j[key] == want; };
  if (!field_is("format", kFormat) || !j.contains("files") || !j["files"].is_object())
    throw CheckpointError(where + ": not a t5x.cpp checkpoint manifest (no \"format\": \"" + kFormat +
                          "\" with \"files\")");
  if (!field_is("version", 1) || !field_is("checksum", "crc32c"))
    throw CheckpointError(where + ": manifest version " + j.value("version", json(0)).dump() + " with checksum " +
                          j.value("checksum", json("")).dump() + " is not supported (this build reads version 1, crc32c)");
  CheckpointManifest m;
  for (const auto& [path, e] : j["files"].items()) {
    const bool ok = e.is_object() && e.contains("bytes") && e["bytes"].is_number_unsigned() && e.contains("crc32c") &&
                    e["crc32c"].is_string() && e["crc32c"].get<std::string>().size() == 8;
    unsigned long crc = 0;
    size_t used = 0;
    if (ok) {
      try {
        crc = std::stoul(e["crc32c"].get<std::string>(), &used, 16);
      } catch (const std::exception&) {
        used = 0;
      }
    }
    if (!ok || used != 8 || path.empty() || path.front() == '/' || path.find("..") != std::string::npos)
      throw CheckpointError(where + ": bad entry for \"" + path + "\": " + e.dump() +
                            " (expected {\"bytes\": N, \"crc32c\": \"8 hex digits\"} under a relative path)");
    m.files[path] = {e["bytes"].get<uint64_t>(), uint32_t(crc)};
  }
  return m;
}

std::optional<CheckpointManifest> read_manifest(const std::string& ckpt_dir) {
  const std::string p = fileio::join(ckpt_dir, kManifestFile);
  auto bytes = fileio::read_file_if_exists(p);
  if (!bytes) return std::nullopt;
  return CheckpointManifest::from_json(std::string(bytes->begin(), bytes->end()), p);
}

FileDigest digest_file(const std::string& path) { return FileDigest::of(fileio::read_file(path)); }

std::optional<Verify> parse_verify(const std::string& s) {
  if (s == "sizes") return Verify::kSizes;
  if (s == "checksums") return Verify::kChecksums;
  if (s == "decode") return Verify::kDecode;
  return std::nullopt;
}

std::optional<std::string> digest_mismatch(const std::string& path, const FileDigest& have, const FileDigest& want) {
  if (have.bytes != want.bytes)
    return path + ": truncated or corrupt (" + std::to_string(have.bytes) + " bytes; the manifest records " +
           std::to_string(want.bytes) + ")";
  if (have.crc32c != want.crc32c)
    return path + ": crc32c " + hex32(have.crc32c, true) + " differs from the manifest's " +
           hex32(want.crc32c, true) + " (the bytes changed after the save: a disk, copy or memory error)";
  return std::nullopt;
}

std::optional<std::string> verify_manifest(const std::string& ckpt_dir, const CheckpointManifest& m, Verify level,
                                           int num_threads) {
  // Sizes first, all of them (stat only): the cheap check that finds
  // truncation and deletion before any file is read.
  for (const auto& [rel, d] : m.files) {
    const std::string p = fileio::join(ckpt_dir, rel);
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec) {
      // A second error_code: ec keeps the reason file_size failed.
      std::error_code ec2;
      if (!fs::exists(p, ec2)) return p + " is missing (listed in " + kManifestFile + ")";
      return "cannot stat " + p + ": " + ec.message();
    }
    if (size != d.bytes) return digest_mismatch(p, FileDigest{size, d.crc32c}, d);
  }
  if (level == Verify::kSizes) return std::nullopt;
  std::vector<const std::pair<const std::string, FileDigest>*> entries;
  for (const auto& e : m.files) entries.push_back(&e);
  std::vector<std::string> problems(entries.size());
  detail::parallel_for(int64_t(entries.size()), num_threads, [&](int64_t k) {
    const auto& [rel, want] = *entries[size_t(k)];
    const std::string p = fileio::join(ckpt_dir, rel);
    FileDigest have;
    try {
      have = digest_file(p);
    } catch (const CheckpointError& e) {
      problems[size_t(k)] = e.what();
      return;
    }
    if (auto bad = digest_mismatch(p, have, want)) problems[size_t(k)] = *bad;
  });
  for (const auto& p : problems)
    if (!p.empty()) return p;
  return std::nullopt;
}

}  // namespace t5x
