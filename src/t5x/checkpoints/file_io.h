// Small POSIX file helpers shared by the checkpoint writers: whole-file reads,
// durable writes (write + fsync), directory fsync, recursive removal.
// All failures throw t5x::CheckpointError naming the path, the errno text and
// its name ("No space left on device (ENOSPC)", with a hint for a full disk).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace t5x::fileio {

std::vector<uint8_t> read_file(const std::string& path);
// nullopt when the file does not exist (other errors throw).
std::optional<std::vector<uint8_t>> read_file_if_exists(const std::string& path);
std::string read_text(const std::string& path);
// Writes bytes to `path` (truncating). With `durable`, fsyncs the file.
void write_file(const std::string& path, std::span<const uint8_t> bytes, bool durable);
void write_text(const std::string& path, const std::string& text, bool durable);
// Writes to `path.tmp-<pid>-<n>` then renames over `path` (atomic replace).
void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes, bool durable);
void fsync_dir(const std::string& dir);
void make_dirs(const std::string& dir);
bool exists(const std::string& path);
bool is_dir(const std::string& path);
// Throws CheckpointError "<path>: missing" / "not a regular file (a FIFO)" (+ hint):
// reading a FIFO would block, a directory or device fail obscurely.
void require_regular_file(const std::string& path, const std::string& hint = "");
void remove_all(const std::string& path);
std::string join(const std::string& a, const std::string& b);

}  // namespace t5x::fileio
