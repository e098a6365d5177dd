#include "t5x/checkpoints/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "t5x/checkpoints/host_tensor.h"

namespace t5x::fileio {

namespace fs = std::filesystem;

namespace {
// "No space left on device (ENOSPC)", plus a hint where one helps.
std::string errno_text(int e) {
  std::string s = std::strerror(e);
  if (const char* name = ::strerrorname_np(e)) s += " (" + std::string(name) + ")";
  if (e == ENOSPC || e == EDQUOT) s += "\n  hint: free space on that filesystem";
  return s;
}

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  const int e = errno;
  throw CheckpointError(what + " '" + path + "': " + errno_text(e));
}
}  // namespace

std::optional<std::vector<uint8_t>> read_file_if_exists(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail("cannot open", path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) { ::close(fd); fail("cannot stat", path); }
  std::vector<uint8_t> buf(size_t(st.st_size));
  size_t got = 0;
  while (got < buf.size()) {
    ssize_t r = ::read(fd, buf.data() + got, buf.size() - got);
    if (r < 0) { if (errno == EINTR) continue; ::close(fd); fail("cannot read", path); }
    if (r == 0) break;
    got += size_t(r);
  }
  ::close(fd);
  buf.resize(got);
  return buf;
}

std::vector<uint8_t> read_file(const std::string& path) {
  auto r = read_file_if_exists(path);
  if (!r) throw CheckpointError("missing file '" + path + "'");
  return std::move(*r);
}

std::string read_text(const std::string& path) {
  auto b = read_file(path);
  return std::string(b.begin(), b.end());
}

void write_file(const std::string& path, std::span<const uint8_t> bytes, bool durable) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("cannot create", path);
  size_t put = 0;
  while (put < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + put, bytes.size() - put);
    if (w < 0) { if (errno == EINTR) continue; ::close(fd); fail("cannot write", path); }
    put += size_t(w);
  }
  if (durable && ::fsync(fd) != 0) { ::close(fd); fail("cannot fsync", path); }
  if (::close(fd) != 0) fail("cannot close", path);
}

void write_text(const std::string& path, const std::string& text, bool durable) {
  write_file(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                            text.size()), durable);
}

void write_file_atomic(const std::string& path, std::span<const uint8_t> bytes, bool durable) {
  // pid + per-process counter: unique across processes and threads.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  // A failed write (a full disk) leaves neither `path` changed nor a part of
  // the temporary file behind.
  try {
    write_file(tmp, bytes, durable);
    if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename into", path);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("cannot open directory", dir);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) fail("cannot fsync directory", dir);
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CheckpointError("cannot create directory '" + dir + "': " + errno_text(ec.value()));
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

bool is_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

void require_regular_file(const std::string& path, const std::string& hint) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw CheckpointError(path + ": missing" + (hint.empty() ? "" : "\n  hint: " + hint));
  if (!fs::is_regular_file(st))
    throw CheckpointError(path + ": not a regular file (" +
                          (fs::is_directory(st) ? "a directory" : fs::is_fifo(st) ? "a FIFO" : "a special file") + ")" +
                          (hint.empty() ? "" : "\n  hint: " + hint));
}

void remove_all(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw CheckpointError("cannot remove '" + path + "': " + ec.message());
}

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (a.back() == '/') return a + b;
  return a + "/" + b;
}

}  // namespace t5x::fileio
