#include "t5x/checkpoints/ocdbt.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "t5x/checkpoints/crc32c.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/host_tensor.h"

namespace t5x {
namespace fs = std::filesystem;

namespace {

constexpr uint32_t kManifestMagic = 0x0cdb3a2a;
constexpr uint32_t kBtreeNodeMagic = 0x0cdb20de;
constexpr const char* kDamaged =
    "\n  hint: the store is damaged or was not written completely; restore another checkpoint";
// Bounds that keep a damaged file from asking for absurd work.
constexpr uint64_t kMaxManifestBytes = uint64_t(64) << 20;
constexpr int kMaxBtreeHeight = 32;

// Bytes [offset, offset + length) of `path`; throws naming the file when it
// is missing or too short.
std::vector<uint8_t> read_range(const std::string& path, uint64_t offset, uint64_t length, const std::string& what) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw CheckpointError(path + ": cannot open (" + std::strerror(errno) + "), needed for " + what + kDamaged);
  std::unique_ptr<int, void (*)(int*)> guard(&fd, [](int* f) { ::close(*f); });
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw CheckpointError(path + ": cannot stat (" + std::strerror(errno) + ")");
  const uint64_t size = uint64_t(st.st_size);
  if (offset > size || length > size - offset)
    throw CheckpointError(path + ": " + what + " at bytes [" + std::to_string(offset) + ", " +
                          std::to_string(offset + length) + ") is past the end of the file (" +
                          std::to_string(size) + " bytes; truncated)" + kDamaged);
  std::vector<uint8_t> out(length);
  uint64_t done = 0;
  while (done < length) {
    ssize_t n = ::pread(fd, out.data() + done, length - done, off_t(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw CheckpointError(path + ": read error (" + std::string(std::strerror(errno)) + ")");
    }
    if (n == 0) throw CheckpointError(path + ": unexpected end of file reading " + what + kDamaged);
    done += uint64_t(n);
  }
  return out;
}

// A cursor over decoded bytes; every error names `where`.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, std::string where) : p_(p), n_(n), where_(std::move(where)) {}
  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(where_ + ": " + what + " (at byte " + std::to_string(pos_) + " of " + std::to_string(n_) +
                          ")" + kDamaged);
  }
  void need(size_t k) const {
    if (k > n_ - pos_) fail("truncated: " + std::to_string(k) + " more bytes expected");
  }
  uint8_t u8() {
    need(1);
    return p_[pos_++];
  }
  uint32_t u32be() {
    need(4);
    uint32_t v = (uint32_t(p_[pos_]) << 24) | (uint32_t(p_[pos_ + 1]) << 16) | (uint32_t(p_[pos_ + 2]) << 8) |
                 uint32_t(p_[pos_ + 3]);
    pos_ += 4;
    return v;
  }
  uint64_t le(int bytes) {
    need(size_t(bytes));
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(p_[pos_ + size_t(i)]) << (8 * i);
    pos_ += size_t(bytes);
    return v;
  }
  // uleb128 (riegeli's varint64): at most 10 bytes.
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      const uint8_t b = u8();
      if (shift == 63 && b > 1) fail("varint overflows 64 bits");
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  std::string_view bytes(size_t k) {
    need(k);
    std::string_view s(reinterpret_cast<const char*>(p_ + pos_), k);
    pos_ += k;
    return s;
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }
  const uint8_t* here() const { return p_ + pos_; }
  const std::string& where() const { return where_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  std::string where_;
};

// Checks the outer header and the CRC and returns the (decompressed) body.
std::vector<uint8_t> decode_envelope(const std::vector<uint8_t>& enc, uint32_t magic, uint64_t max_body,
                                     const std::string& where) {
  Cursor c(enc.data(), enc.size(), where);
  if (enc.size() < 16) c.fail("shorter than the 16-byte header and footer");
  const uint32_t m = c.u32be();
  if (m != magic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "magic value 0x%08x, expected 0x%08x", m, magic);
    c.fail(std::string(buf) + " (not an OCDBT " + (magic == kManifestMagic ? "manifest" : "B+tree node") + ")");
  }
  const uint64_t length = c.le(8);
  if (length != enc.size())
    c.fail("the header's length " + std::to_string(length) + " differs from the " + std::to_string(enc.size()) +
           " bytes read");
  const uint32_t stored = uint32_t(enc[enc.size() - 4]) | (uint32_t(enc[enc.size() - 3]) << 8) |
                          (uint32_t(enc[enc.size() - 2]) << 16) | (uint32_t(enc[enc.size() - 1]) << 24);
  const uint32_t actual = checksum::crc32c(enc.data(), enc.size() - 4);
  if (stored != actual) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "CRC-32C mismatch (stored 0x%08x, computed 0x%08x)", stored, actual);
    c.fail(buf);
  }
  const uint64_t version = c.varint();
  if (version != 0) c.fail("format version " + std::to_string(version) + " (this reader knows version 0)");
  const uint64_t compression = c.varint();
  const uint8_t* body = c.here();
  const size_t body_n = enc.size() - 4 - c.pos();
  if (compression == 0) return std::vector<uint8_t>(body, body + body_n);
  if (compression != 1) c.fail("compression format " + std::to_string(compression) + " (0 none and 1 zstd are known)");
  // A zstd stream (riegeli's ZstdWriter: the decoded size is not always in
  // the frame header), decoded up to `max_body` bytes.
  std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> ds(ZSTD_createDStream(), ZSTD_freeDStream);
  ZSTD_initDStream(ds.get());
  std::vector<uint8_t> out;
  ZSTD_inBuffer in{body, body_n, 0};
  size_t ret = 1;
  while (true) {
    if (out.size() >= max_body) c.fail("decoded body exceeds " + std::to_string(max_body) + " bytes");
    const size_t before = out.size();
    out.resize(std::min<uint64_t>(max_body, std::max<size_t>(before * 2, 4096)));
    ZSTD_outBuffer ob{out.data() + before, out.size() - before, 0};
    ret = ZSTD_decompressStream(ds.get(), &ob, &in);
    out.resize(before + ob.pos);
    if (ZSTD_isError(ret)) c.fail(std::string("corrupt zstd body (") + ZSTD_getErrorName(ret) + ")");
    if (ret == 0 && in.pos == in.size) break;
    if (ret == 0 && in.pos < in.size) {
      ZSTD_initDStream(ds.get());  // a further frame
      continue;
    }
    if (in.pos == in.size && ob.pos < ob.size) c.fail("truncated zstd body");
  }
  return out;
}

struct DataFile {
  std::string path;       // full path, relative to the store's directory
  std::string base_path;  // transitive path for the nodes read through it
};

std::vector<DataFile> read_data_file_table(Cursor& c, const std::string& transitive) {
  const uint64_t n = c.varint();
  if (n > c.remaining()) c.fail("data file table claims " + std::to_string(n) + " files");
  std::vector<uint64_t> prefix(n, 0), suffix(n), base(n);
  for (uint64_t i = 1; i < n; ++i) prefix[i] = c.varint();
  for (uint64_t i = 0; i < n; ++i) suffix[i] = c.varint();
  for (uint64_t i = 0; i < n; ++i) base[i] = c.varint();
  std::vector<DataFile> out(n);
  std::string prev;
  for (uint64_t i = 0; i < n; ++i) {
    if (prefix[i] > prev.size()) c.fail("data file " + std::to_string(i) + "'s path prefix exceeds the previous path");
    std::string path = prev.substr(0, prefix[i]);
    path += c.bytes(suffix[i]);
    if (base[i] > path.size()) c.fail("data file " + std::to_string(i) + "'s base path exceeds its path");
    if (path.size() + transitive.size() > 65535) c.fail("data file path longer than 65535 bytes");
    // Paths stay inside the store: no absolute path, no "..".
    if (!path.empty() && path[0] == '/') c.fail("absolute data file path '" + path + "'");
    for (const auto& part : fs::path(path))
      if (part == "..") c.fail("data file path '" + path + "' leaves the store");
    out[i] = {transitive + path, transitive + path.substr(0, base[i])};
    prev = std::move(path);
  }
  return out;
}

uint64_t file_id(Cursor& c, const std::vector<DataFile>& table) {
  const uint64_t id = c.varint();
  if (id >= table.size())
    c.fail("data file id " + std::to_string(id) + " outside the table of " + std::to_string(table.size()));
  return id;
}

}  // namespace

struct OcdbtWalker {
  OcdbtStore& store;
  uint64_t max_node_bytes;
  size_t nodes = 0;

  void visit(const DataFile& f, uint64_t offset, uint64_t length, const std::string& key_prefix, int expect_height) {
    if (++nodes > (size_t(1) << 22)) throw CheckpointError(store.dir_ + ": more than 4M B+tree nodes" + kDamaged);
    const std::string file = fileio::join(store.dir_, f.path);
    const std::string where = "OCDBT B+tree node in " + file + " at offset " + std::to_string(offset);
    if (length > max_node_bytes + 4096)
      throw CheckpointError(where + ": node of " + std::to_string(length) + " bytes exceeds the store's limit" +
                            kDamaged);
    const auto enc = read_range(file, offset, length, "a B+tree node");
    const auto body = decode_envelope(enc, kBtreeNodeMagic, max_node_bytes, where);
    Cursor c(body.data(), body.size(), where);
    const int height = c.u8();
    if (expect_height >= 0 && height != expect_height)
      c.fail("height " + std::to_string(height) + ", its parent expects " + std::to_string(expect_height));
    if (height > kMaxBtreeHeight) c.fail("height " + std::to_string(height));
    const auto table = read_data_file_table(c, f.base_path);
    const uint64_t n = c.varint();
    if (n == 0 || n > c.remaining()) c.fail("node with " + std::to_string(n) + " entries");
    std::vector<uint64_t> pre(n, 0), suf(n), common(n, 0);
    for (uint64_t i = 1; i < n; ++i) pre[i] = c.varint();
    for (uint64_t i = 0; i < n; ++i) suf[i] = c.varint();
    if (height > 0)
      for (uint64_t i = 0; i < n; ++i) common[i] = c.varint();
    std::vector<std::string> keys(n);
    for (uint64_t i = 0; i < n; ++i) {
      if (i > 0 && pre[i] > keys[i - 1].size())
        c.fail("key " + std::to_string(i) + "'s prefix exceeds the previous key");
      keys[i] = i > 0 ? keys[i - 1].substr(0, pre[i]) : std::string();
      keys[i] += c.bytes(suf[i]);
      if (i > 0 && !(keys[i - 1] < keys[i])) c.fail("keys out of order");
      if (common[i] > keys[i].size()) c.fail("subtree prefix of child " + std::to_string(i) + " exceeds its key");
    }
    if (height > 0) {
      std::vector<uint64_t> ids(n), offs(n), lens(n);
      for (auto& v : ids) v = file_id(c, table);
      for (auto& v : offs) v = c.varint();
      for (auto& v : lens) v = c.varint();
      for (int stat = 0; stat < 3; ++stat)  // num_keys, num_tree_bytes, num_indirect_value_bytes
        for (uint64_t i = 0; i < n; ++i) c.varint();
      for (uint64_t i = 0; i < n; ++i)
        visit(table[ids[i]], offs[i], lens[i], key_prefix + keys[i].substr(0, common[i]), height - 1);
      return;
    }
    std::vector<uint64_t> lens(n);
    std::vector<uint8_t> kinds(n);
    for (auto& v : lens) v = c.varint();
    for (uint64_t i = 0; i < n; ++i) {
      kinds[i] = c.u8();
      if (kinds[i] > 1) c.fail("value kind " + std::to_string(kinds[i]) + " of entry " + std::to_string(i));
    }
    std::vector<uint64_t> ids(n), offs(n);
    for (uint64_t i = 0; i < n; ++i)
      if (kinds[i]) ids[i] = file_id(c, table);
    for (uint64_t i = 0; i < n; ++i)
      if (kinds[i]) offs[i] = c.varint();
    for (uint64_t i = 0; i < n; ++i) {
      OcdbtStore::Value v;
      if (kinds[i]) {
        v.indirect = true;
        v.file = table[ids[i]].path;
        v.offset = offs[i];
        v.length = lens[i];
      } else {
        auto b = c.bytes(lens[i]);
        v.bytes.assign(b.begin(), b.end());
      }
      std::string key = key_prefix + keys[i];
      if (!store.entries_.emplace(std::move(key), std::move(v)).second) c.fail("a key appears twice in the tree");
    }
  }
};

OcdbtStore OcdbtStore::open(const std::string& dir) {
  OcdbtStore s;
  s.dir_ = dir;
  std::string manifest = fileio::join(dir, "manifest.ocdbt");
  auto read_manifest = [&](const std::string& path) {
    fileio::require_regular_file(path, "an OCDBT store (Orbax's use_ocdbt=True) has its manifest there");
    const uint64_t size = fs::file_size(path);
    if (size > kMaxManifestBytes)
      throw CheckpointError(path + ": a manifest of " + std::to_string(size) + " bytes" + kDamaged);
    const auto enc = read_range(path, 0, size, "the manifest");
    return decode_envelope(enc, kManifestMagic, kMaxManifestBytes, "OCDBT manifest " + path);
  };
  auto body = read_manifest(manifest);
  // Configuration.
  auto read_config = [](Cursor& c, uint64_t& kind, uint64_t& max_node) {
    c.bytes(16);  // uuid
    kind = c.varint();
    if (kind > 1) c.fail("manifest kind " + std::to_string(kind) + " (0 single and 1 numbered are known)");
    c.varint();  // max_inline_value_bytes
    max_node = c.varint();
    c.u8();  // version_tree_arity_log2
    const uint64_t method = c.varint();
    if (method == 1) c.le(4);  // zstd level (used when writing)
    else if (method != 0) c.fail("compression method " + std::to_string(method));
  };
  uint64_t kind = 0, max_node = 0;
  Cursor c0(body.data(), body.size(), "OCDBT manifest " + manifest);
  read_config(c0, kind, max_node);
  std::optional<Cursor> cur;
  std::vector<uint8_t> numbered_body;
  if (kind == 1) {
    // Numbered kind: the version tree is in the newest manifest.<16 hex>.
    std::string best;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() == 25 && name.rfind("manifest.", 0) == 0 &&
          name.find_first_not_of("0123456789abcdef", 9) == std::string::npos && name > best)
        best = name;
    }
    if (best.empty())
      throw CheckpointError(manifest + ": a numbered manifest, but no manifest.<16 hex digits> beside it" + kDamaged);
    manifest = fileio::join(dir, best);
    numbered_body = read_manifest(manifest);
    Cursor c1(numbered_body.data(), numbered_body.size(), "OCDBT manifest " + manifest);
    uint64_t kind1 = 0, max_node1 = 0;
    read_config(c1, kind1, max_node1);
    if (kind1 != 0) c1.fail("a numbered manifest file that is not of the single kind");
    cur.emplace(c1);
  } else {
    cur.emplace(c0);
  }
  Cursor& c = *cur;
  // The configured node size is what a writer aims at; a node of one large
  // entry may exceed it, so the reader's bound is looser.
  max_node = std::clamp<uint64_t>(max_node * 4, uint64_t(16) << 20, uint64_t(1) << 30);
  const auto table = read_data_file_table(c, "");
  // Inline versions (the newest ones): take the last.
  const uint64_t nv = c.varint();
  if (nv > c.remaining()) c.fail(std::to_string(nv) + " inline versions");
  if (nv == 0) return s;  // a store with no version: empty
  std::vector<uint64_t> gen(nv), height(nv), ids(nv), offs(nv), lens(nv), num_keys(nv);
  for (auto& v : gen) v = c.varint();
  for (auto& v : height) v = c.u8();
  for (auto& v : ids) v = c.varint();
  for (auto& v : offs) v = c.varint();
  for (auto& v : lens) v = c.varint();
  for (auto& v : num_keys) v = c.varint();
  for (uint64_t i = 0; i < nv; ++i) c.varint();  // num_tree_bytes
  for (uint64_t i = 0; i < nv; ++i) c.varint();  // num_indirect_value_bytes
  for (uint64_t i = 0; i < nv; ++i) c.le(8);     // commit_time
  for (uint64_t i = 1; i < nv; ++i)
    if (gen[i] <= gen[i - 1]) c.fail("generation numbers not increasing");
  const uint64_t last = nv - 1;
  s.generation_ = gen[last];
  if (num_keys[last] == 0) return s;  // an empty tree has no root node
  if (ids[last] >= table.size()) c.fail("root node's data file id outside the table");
  OcdbtWalker w{s, max_node};
  w.visit(table[ids[last]], offs[last], lens[last], "", int(height[last]));
  if (s.entries_.size() != num_keys[last])
    throw CheckpointError(manifest + ": the B+tree holds " + std::to_string(s.entries_.size()) +
                          " keys, its manifest counts " + std::to_string(num_keys[last]) + kDamaged);
  return s;
}

std::vector<std::string> OcdbtStore::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [k, v] : entries_) out.push_back(k);
  return out;
}

std::optional<std::vector<uint8_t>> OcdbtStore::read(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  const Value& v = it->second;
  if (!v.indirect) return v.bytes;
  return read_range(fileio::join(dir_, v.file), v.offset, v.length, "the value of key '" + std::string(key) + "'");
}

uint64_t OcdbtStore::value_bytes(std::string_view prefix) const {
  uint64_t n = 0;
  for (auto it = entries_.lower_bound(prefix); it != entries_.end() && it->first.starts_with(prefix); ++it)
    n += it->second.indirect ? it->second.length : it->second.bytes.size();
  return n;
}

}  // namespace t5x
