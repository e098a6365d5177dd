#include "t5x/checkpoints/tf_bundle.h"

#include <leveldb/env.h>
#include <leveldb/iterator.h>
#include <leveldb/options.h>
#include <leveldb/table.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>

#include "t5x/checkpoints/crc32c.h"
#include "t5x/checkpoints/file_io.h"

namespace t5x::tf {

namespace {

std::string hex32(uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

// ordered_code WriteSignedNumIncreasing: one byte 0x80^v for -64 <= v < 64,
// else the sign-extended big-endian value in L = bits/7 + 1 bytes (at most
// 10) whose first one or two bytes carry L in unary (1s, then a 0).
void put_signed_increasing(std::string* out, int64_t v) {
  const uint64_t x = v < 0 ? ~uint64_t(v) : uint64_t(v);
  if (x < 64) {
    out->push_back(char(uint8_t(0x80) ^ uint8_t(v)));
    return;
  }
  int bits = 0;
  for (uint64_t y = x; y; y >>= 1) ++bits;
  const int len = bits >= 63 ? 10 : bits / 7 + 1;
  uint8_t buf[10];
  const uint8_t sign = v < 0 ? 0xff : 0x00;
  buf[0] = buf[1] = sign;
  for (int i = 0; i < 8; ++i) buf[2 + i] = uint8_t(uint64_t(v) >> (8 * (7 - i)));
  uint8_t* b = buf + 10 - len;
  // Header bits (kLengthToHeaderBits): len ones then a zero over b[0] (and b[1]).
  if (len <= 8) {
    b[0] ^= uint8_t(0xff00u >> len);
  } else {
    b[0] ^= 0xff;
    b[1] ^= uint8_t(0xff00u >> (len - 8));
  }
  out->append(reinterpret_cast<const char*>(b), size_t(len));
}

// A leveldb file over bytes in memory that remembers each block it handed
// out, so that errors can name the offset and snappy blocks can be counted.
class MemFile : public leveldb::RandomAccessFile {
 public:
  explicit MemFile(std::vector<uint8_t> b) : bytes_(std::move(b)) {}
  leveldb::Status Read(uint64_t offset, size_t n, leveldb::Slice* result, char*) const override {
    if (offset > bytes_.size()) return leveldb::Status::IOError("read past the end");
    n = std::min<size_t>(n, bytes_.size() - offset);
    last_offset = offset;
    last_n = n;
    if (!(n == 48 && offset + 48 == bytes_.size())) reads.insert({offset, n});
    *result = leveldb::Slice(reinterpret_cast<const char*>(bytes_.data() + offset), n);
    return leveldb::Status::OK();
  }
  size_t size() const { return bytes_.size(); }
  uint8_t at(size_t i) const { return bytes_[i]; }
  // leveldb allocates the size a block handle states before it reads the
  // block, and the footer's two handles carry no checksum: a corrupt footer
  // must fail here, not allocate gigabytes. Returns the problem, or "" (also
  // when the magic number is wrong: leveldb's own message says so).
  std::string footer_problem() const {
    constexpr size_t kFooter = 48, kTrailer = 5;  // leveldb/table/format.h
    if (bytes_.size() < kFooter) return "";
    const size_t end = bytes_.size() - kFooter;
    uint64_t magic = 0;
    for (int i = 0; i < 8; ++i) magic |= uint64_t(bytes_[bytes_.size() - 8 + size_t(i)]) << (8 * i);
    if (magic != 0xdb4775248b80fb57ull) return "";
    size_t p = end;
    auto varint = [&](uint64_t& v) {
      v = 0;
      for (int shift = 0; shift < 64 && p < bytes_.size() - 8; shift += 7) {
        const uint8_t c = bytes_[p++];
        v |= uint64_t(c & 0x7f) << shift;
        if (!(c & 0x80)) return true;
      }
      return false;
    };
    for (const char* what : {"metaindex", "index"}) {
      uint64_t offset = 0, size = 0;
      if (!varint(offset) || !varint(size)) return std::string("the ") + what + " block handle is malformed";
      if (offset > end || size > end - offset || end - offset - size < kTrailer)
        return std::string("the ") + what + " block handle [" + std::to_string(offset) + ", +" + std::to_string(size) +
               ") lies outside the " + std::to_string(end) + " bytes before the footer";
    }
    return "";
  }
  mutable uint64_t last_offset = 0;
  mutable size_t last_n = 0;
  mutable std::set<std::pair<uint64_t, size_t>> reads;

 private:
  std::vector<uint8_t> bytes_;
};


// ---- The index's protobuf messages (tf_bundle.proto), by hand ----
// libprotobuf cannot be linked into the t5x binary: Debian's libsentencepiece
// carries its own protobuf-lite 3.14 runtime under the same symbol names, and
// the two abort at start-up ("compiled against version 3.14.0 ... installed
// version 3.21.12"). So, as src/t5x/summaries does for event files, the few
// fields are decoded here (and encoded in tf_bundle_writer.cpp);
// tf_bundle.proto is their schema.

struct Wire {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (p >= end) break;
      const uint8_t b = *p++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  uint32_t fixed32() {
    if (end - p < 4) { ok = false; return 0; }
    uint32_t v = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    p += 4;
    return v;
  }
  Wire sub() {
    const uint64_t n = varint();
    if (!ok || n > uint64_t(end - p)) { ok = false; return {p, p}; }
    Wire w{p, p + n};
    p += n;
    return w;
  }
  // Calls f(field, wire_type) for each field; f consumes known ones and
  // returns false for the rest, which are skipped.
  template <class F>
  bool fields(F f) {
    while (ok && p < end) {
      const uint64_t tag = varint();
      const int field = int(tag >> 3), type = int(tag & 7);
      if (!ok || field == 0) return false;
      if (f(field, type)) continue;
      if (type == 0) varint();
      else if (type == 1) { if (end - p < 8) return false; p += 8; }
      else if (type == 2) sub();
      else if (type == 5) fixed32();
      else return false;
    }
    return ok;
  }
};

struct Header {
  int64_t num_shards = 0, endianness = 0, min_consumer = 0;
};

bool parse_header(const uint8_t* d, size_t n, Header* h) {
  Wire w{d, d + n};
  return w.fields([&](int f, int t) {
    if (f == 1 && t == 0) return h->num_shards = int64_t(w.varint()), true;
    if (f == 2 && t == 0) return h->endianness = int64_t(w.varint()), true;
    if (f == 3 && t == 2) {
      Wire v = w.sub();
      bool good = v.fields([&](int g, int u) {
        if (g == 2 && u == 0) return h->min_consumer = int64_t(v.varint()), true;
        return false;
      });
      w.ok = w.ok && good;
      return true;
    }
    return false;
  });
}

bool parse_entry(const uint8_t* d, size_t n, TfEntry* e) {
  Wire w{d, d + n};
  return w.fields([&](int f, int t) {
    if (t == 0 && f == 1) return e->tf_dtype = int(w.varint()), true;
    if (t == 0 && f == 3) return e->shard_id = int(int32_t(w.varint())), true;
    if (t == 0 && f == 4) return e->offset = int64_t(w.varint()), true;
    if (t == 0 && f == 5) return e->size = int64_t(w.varint()), true;
    if (t == 5 && f == 6) return e->masked_crc = w.fixed32(), true;
    if (t == 2 && f == 2) {  // TensorShapeProto
      Wire s = w.sub();
      w.ok = w.ok && s.fields([&](int g, int u) {
        if (g != 2 || u != 2) return false;
        Wire dim = s.sub();
        int64_t size = 0;
        s.ok = s.ok && dim.fields([&](int h, int x) { return h == 1 && x == 0 ? (size = int64_t(dim.varint()), true) : false; });
        e->shape.push_back(size);
        return true;
      });
      return true;
    }
    if (t == 2 && f == 7) {  // TensorSliceProto
      Wire s = w.sub();
      TensorSlice slice;
      w.ok = w.ok && s.fields([&](int g, int u) {
        if (g != 1 || u != 2) return false;
        Wire x = s.sub();
        SliceExtent ext;
        bool has_length = false;
        s.ok = s.ok && x.fields([&](int h, int v) {
          if (h == 1 && v == 0) return ext.start = int64_t(x.varint()), true;
          if (h == 2 && v == 0) return ext.length = int64_t(x.varint()), has_length = true, true;
          return false;
        });
        if (!has_length) ext = {0, -1};
        slice.push_back(ext);
        return true;
      });
      e->slices.push_back(slice);
      return true;
    }
    return false;
  });
}

std::string shape_str(const std::vector<int64_t>& s) {
  HostTensor t;
  t.shape = s;
  return t.shape_string();
}

// The tensor name inside a slice key (ordered_code string: 00 ff is a 0x00
// byte, ff 00 a 0xff byte, 00 01 ends it), for messages.
std::string slice_key_name(const std::string& key) {
  std::string n;
  for (size_t i = 1; i + 1 < key.size(); ++i) {
    const char c = key[i], next = key[i + 1];
    if (c == '\0' && next == '\x01') break;
    n += c;
    if ((c == '\0' && next == '\xff') || (c == '\xff' && next == '\0')) ++i;
  }
  return n;
}

std::string at_block(int64_t offset) { return " (index block at offset " + std::to_string(offset) + "): "; }

}  // namespace

uint32_t crc32c(const uint8_t* data, size_t n, uint32_t crc) {
  return checksum::crc32c(data, n, crc);
}

uint32_t crc_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint32_t crc_unmask(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

std::string slice_key(const std::string& name, const TensorSlice& slice) {
  std::string k(1, '\0');  // WriteNumIncreasing(0)
  for (char c : name) {
    if (c == '\0') k += std::string("\0\xff", 2);
    else if (c == '\xff') k += std::string("\xff\0", 2);
    else k += c;
  }
  k += std::string("\0\x01", 2);
  // WriteNumIncreasing(rank): a length byte, then the big-endian bytes.
  uint64_t r = slice.size();
  std::string be;
  for (; r; r >>= 8) be.insert(be.begin(), char(r & 0xff));
  k += char(be.size());
  k += be;
  for (const auto& e : slice) {
    put_signed_increasing(&k, e.length < 0 ? 0 : e.start);
    put_signed_increasing(&k, e.length < 0 ? -1 : e.length);
  }
  return k;
}

std::string slice_string(const TensorSlice& slice) {
  std::string s = "[";
  for (size_t i = 0; i < slice.size(); ++i) {
    if (i) s += ", ";
    if (slice[i].length < 0) s += ":";
    else s += std::to_string(slice[i].start) + ":" + std::to_string(slice[i].start + slice[i].length);
  }
  return s + "]";
}

int tf_dtype_number(const std::string& n) {
  static const std::map<std::string, int> m = {{"float32", 1}, {"float64", 2}, {"int32", 3}, {"uint8", 4},
                                               {"int16", 5},   {"int8", 6},     {"int64", 9}, {"bool", 10},
                                               {"bfloat16", 14}, {"uint16", 17}, {"float16", 19}};
  auto it = m.find(n);
  return it == m.end() ? 0 : it->second;
}

std::string tf_dtype_name(int d) {
  switch (d) {
    case 1: return "float32";
    case 2: return "float64";
    case 3: return "int32";
    case 4: return "uint8";
    case 5: return "int16";
    case 6: return "int8";
    case 9: return "int64";
    case 10: return "bool";
    case 14: return "bfloat16";
    case 17: return "uint16";
    case 19: return "float16";
    default: return "";
  }
}

int64_t TfEntry::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

bool is_tf_checkpoint(const std::string& prefix) {
  return !prefix.empty() && fileio::exists(prefix + ".index") && !fileio::is_dir(prefix + ".index");
}

std::optional<std::string> tf_checkpoint_prefix(const std::string& path) {
  if (is_tf_checkpoint(path)) return path;
  if (path.empty() || !fileio::is_dir(path)) return std::nullopt;
  const std::string state = fileio::join(path, "checkpoint");
  if (fileio::is_dir(state)) return std::nullopt;
  static const std::string kKey = "model_checkpoint_path";
  {
    // Only the first bytes: a t5x msgpack `checkpoint` can be large.
    std::ifstream in(state, std::ios::binary);
    std::string head(kKey.size(), '\0');
    if (!in || !in.read(head.data(), std::streamsize(head.size())) || head != kKey) return std::nullopt;
  }
  auto bytes = fileio::read_file_if_exists(state);
  if (!bytes) return std::nullopt;
  // model_checkpoint_path: "model.ckpt-1000" (text format: C escapes).
  const std::string text(bytes->begin(), bytes->end());
  size_t i = kKey.size();
  while (i < text.size() && (text[i] == ' ' || text[i] == ':')) ++i;
  const size_t value_at = i;
  std::string value;
  bool closed = false;
  if (i < text.size() && (text[i] == '"' || text[i] == '\'')) {
    const char q = text[i++];
    for (; i < text.size() && text[i] != '\n'; ++i) {
      char c = text[i];
      if (c == q) {
        closed = true;
        break;
      }
      if (c == '\\' && i + 1 < text.size()) {
        c = text[++i];
        if (c >= '0' && c <= '7') {  // \ooo
          int v = 0;
          for (int k = 0; k < 3 && i < text.size() && text[i] >= '0' && text[i] <= '7'; ++k, ++i) v = v * 8 + (text[i] - '0');
          --i;
          c = char(v);
        } else if (c == 'n') {
          c = '\n';
        } else if (c == 't') {
          c = '\t';
        }
      }
      value += c;
    }
  }
  if (!closed || value.empty())
    throw CheckpointError(state + ": TensorFlow checkpoint state file: expected a quoted, non-empty "
                          "model_checkpoint_path at offset " + std::to_string(value_at));
  const bool absolute = value[0] == '/' || value.find("://") != std::string::npos;
  std::string prefix = absolute ? value : fileio::join(path, value);
  if (!is_tf_checkpoint(prefix) && absolute) {
    const std::string here = fileio::join(path, value.substr(value.find_last_of('/') + 1));
    if (is_tf_checkpoint(here)) prefix = here;
  }
  if (!is_tf_checkpoint(prefix))
    throw CheckpointError(state + ": model_checkpoint_path \"" + value + "\" names " + prefix + ", but " + prefix +
                          ".index is missing\n  hint: the newest checkpoint's files are not in " + path);
  return prefix;
}

TfBundleReader::~TfBundleReader() = default;
TfBundleReader::TfBundleReader(TfBundleReader&&) noexcept = default;
TfBundleReader& TfBundleReader::operator=(TfBundleReader&&) noexcept = default;

std::string TfBundleReader::data_file(int shard) const {
  char b[40];
  std::snprintf(b, sizeof b, ".data-%05d-of-%05d", shard, num_shards_);
  return prefix_ + b;
}

TfBundleReader TfBundleReader::open(const std::string& prefix) {
  TfBundleReader r;
  r.prefix_ = prefix;
  const std::string index = r.index_file();
  auto bytes = fileio::read_file_if_exists(index);
  if (!bytes)
    throw CheckpointError(index + ": missing\n  hint: a TensorFlow checkpoint PREFIX has PREFIX.index and "
                          "PREFIX.data-*-of-*; give the prefix, e.g. .../model.ckpt-1000000");
  const size_t file_size = bytes->size();
  MemFile file(std::move(*bytes));
  leveldb::Options lo;
  lo.paranoid_checks = true;  // the index block's CRC is checked too
  if (const std::string bad = file.footer_problem(); !bad.empty())
    throw CheckpointError(index + ": corrupt footer at offset " + std::to_string(file_size - 48) + ": " + bad +
                          "\n  hint: the index is truncated or corrupt; copy the checkpoint again");
  leveldb::Table* raw = nullptr;
  leveldb::Status st = leveldb::Table::Open(lo, &file, file_size, &raw);
  auto fail = [&](const leveldb::Status& s, const std::string& where) {
    return CheckpointError(index + ": " + s.ToString() + " (" + where + ", file size " + std::to_string(file_size) +
                           " bytes)\n  hint: the index is truncated or corrupt; copy the checkpoint again");
  };
  if (!st.ok()) {
    const bool footer = file.last_n == 48 || file_size < 48;
    throw fail(st, footer ? "footer at offset " + std::to_string(file_size < 48 ? 0 : file_size - 48)
                          : "index block at offset " + std::to_string(file.last_offset));
  }
  std::unique_ptr<leveldb::Table> table(raw);
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  ro.fill_cache = false;
  std::unique_ptr<leveldb::Iterator> it(table->NewIterator(ro));
  bool have_header = false;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string key = it->key().ToString();
    const leveldb::Slice v = it->value();
    const int64_t block = int64_t(file.last_offset);  // the data block being iterated
    if (key.empty()) {
      Header h;
      const std::string where = index + ": header entry" + at_block(block);
      if (!parse_header(reinterpret_cast<const uint8_t*>(v.data()), v.size(), &h))
        throw CheckpointError(where + "not a BundleHeaderProto");
      if (h.endianness != 0)
        throw CheckpointError(where + "big-endian tensor data is not supported (endianness " +
                              std::to_string(h.endianness) + ")");
      if (h.min_consumer > 1)
        throw CheckpointError(where + "bundle version needs a reader of version >= " +
                              std::to_string(h.min_consumer) + " (this reads version 1)");
      if (h.num_shards < 1 || h.num_shards > 1000000)
        throw CheckpointError(where + "num_shards " + std::to_string(h.num_shards));
      r.num_shards_ = int(h.num_shards);
      have_header = true;
      continue;
    }
    const bool is_slice = key[0] == '\0';
    TfEntry e;
    if (!parse_entry(reinterpret_cast<const uint8_t*>(v.data()), v.size(), &e))
      throw CheckpointError(index + ": tensor '" + (is_slice ? slice_key_name(key) + "' (a slice's entry)" : key + "'") +
                            at_block(block) + "not a BundleEntryProto (" + std::to_string(v.size()) + " bytes)");
    e.name = key;
    e.index_block = block;
    e.dtype = tf_dtype_name(e.tf_dtype);
    (is_slice ? r.slice_entries_ : r.entries_).emplace(key, std::move(e));
  }
  if (!it->status().ok()) throw fail(it->status(), "data block at offset " + std::to_string(file.last_offset));
  if (!have_header) throw CheckpointError(index + ": no header entry (key \"\"); not a TensorBundle index");
  for (const auto& [off, n] : file.reads) {
    ++r.num_blocks_;
    if (n >= 5 && file.at(off + n - 5) == 1) ++r.snappy_blocks_;
  }
  // Sizes, offsets and slice bounds are checked here, once, so that nothing
  // later multiplies or adds numbers that overflow.
  auto check_numbers = [&](const TfEntry& e, const std::string& where) {
    if (!checked_nbytes(e.shape, e.dtype.empty() ? 1 : dtype_itemsize(e.dtype)))
      throw CheckpointError(where + "shape " + shape_str(e.shape) + " has a negative dimension or over 2^63 bytes");
    if (e.offset < 0 || e.size < 0 || e.offset > INT64_MAX - e.size)
      throw CheckpointError(where + "offset " + std::to_string(e.offset) + " and size " + std::to_string(e.size) +
                            " are out of range");
    for (const auto& sl : e.slices)
      for (const auto& x : sl)
        if (x.start < 0 || x.length < -1 || (x.length > 0 && x.start > INT64_MAX - x.length))
          throw CheckpointError(where + "slice " + slice_string(sl) + " has a negative or overflowing extent");
  };
  for (const auto& [key, e] : r.slice_entries_)
    check_numbers(e, index + ": tensor '" + slice_key_name(key) + "' (a slice's entry)" + at_block(e.index_block));
  for (const auto& [name, e] : r.entries_) {
    const std::string where = index + ": tensor '" + name + "'" + at_block(e.index_block);
    check_numbers(e, where);
    if (e.shard_id < 0 || e.shard_id >= r.num_shards_)
      throw CheckpointError(where + "in shard " + std::to_string(e.shard_id) + " but the header says " +
                            std::to_string(r.num_shards_) + " shard(s)");
    for (const auto& s : e.slices) {
      if (s.size() != e.shape.size())
        throw CheckpointError(where + "slice " + slice_string(s) + " has rank " + std::to_string(s.size()) +
                              " but the shape " + shape_str(e.shape) + " has rank " + std::to_string(e.shape.size()));
      if (!r.slice_entries_.count(slice_key(name, s)))
        throw CheckpointError(where + "lists slice " + slice_string(s) + " but the index has no entry for it");
    }
  }
  return r;
}

std::vector<std::string> TfBundleReader::names() const {
  std::vector<std::string> v;
  for (const auto& [k, e] : entries_) v.push_back(k);
  return v;
}

const TfEntry& TfBundleReader::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw CheckpointError(index_file() + ": no tensor '" + name + "'");
  return it->second;
}

const TfEntry* TfBundleReader::slice_entry(const std::string& name, const TensorSlice& slice) const {
  auto it = slice_entries_.find(slice_key(name, slice));
  return it == slice_entries_.end() ? nullptr : &it->second;
}

HostTensor TfBundleReader::read_stored(const TfEntry& e, const std::string& tensor) const {
  const std::string where = index_file() + ": tensor " + tensor + at_block(e.index_block);
  if (e.dtype.empty())
    throw CheckpointError(where + "TF dtype " + std::to_string(e.tf_dtype) + " is not supported (float32, bfloat16, "
                          "float16, float64, int8/16/32/64, uint8, uint16, bool)");
  const int64_t want = int64_t(*checked_nbytes(e.shape, dtype_itemsize(e.dtype)));  // checked by open()
  const std::string file = data_file(e.shard_id);
  if (e.size != want)
    throw CheckpointError(where + e.dtype + shape_str(e.shape) + " has size " + std::to_string(e.size) +
                          " bytes, expected " + std::to_string(want));
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f)
    throw CheckpointError(file + ": missing (needed for tensor " + tensor + ")\n  hint: every PREFIX.data-*-of-" +
                          std::to_string(num_shards_) + " file belongs to the checkpoint");
  std::fseek(f, 0, SEEK_END);
  const int64_t fsize = std::ftell(f);
  if (e.offset < 0 || e.offset + e.size > fsize) {
    std::fclose(f);
    throw CheckpointError(file + ": truncated: tensor " + tensor + " needs bytes [" + std::to_string(e.offset) +
                          ", " + std::to_string(e.offset + e.size) + ") but the file has " + std::to_string(fsize) +
                          " bytes");
  }
  HostTensor t = HostTensor::zeros(e.dtype, e.shape);
  std::fseek(f, long(e.offset), SEEK_SET);
  const size_t got = t.data.empty() ? 0 : std::fread(t.data.data(), 1, t.data.size(), f);
  std::fclose(f);
  if (got != t.data.size())
    throw CheckpointError(file + ": read error at offset " + std::to_string(e.offset) + " (tensor " + tensor + ")");
  const uint32_t have = crc32c(t.data.data(), t.data.size());
  if (have != crc_unmask(e.masked_crc))
    throw CheckpointError(file + ": tensor " + tensor + " at offset " + std::to_string(e.offset) + " (" +
                          std::to_string(e.size) + " bytes): crc32c mismatch (stored " +
                          hex32(crc_unmask(e.masked_crc)) + ", computed " + hex32(have) +
                          ")\n  hint: the data file is corrupt; copy the checkpoint again");
  return t;
}

HostTensor TfBundleReader::read(const std::string& name) const {
  const TfEntry& e = entry(name);
  if (e.slices.empty()) return read_stored(e, "'" + name + "'");
  if (e.dtype.empty()) return read_stored(e, "'" + name + "'");  // throws the dtype message
  const std::string where = index_file() + ": tensor '" + name + "'" + at_block(e.index_block);
  // The slices must tile the shape: each inside it, no two overlapping, and
  // together as many elements as the shape (so no gaps).
  std::vector<IndexBox> boxes;
  int64_t covered = 0;
  for (const auto& s : e.slices) {
    IndexBox box;
    for (size_t d = 0; d < s.size(); ++d) {
      const int64_t start = s[d].length < 0 ? 0 : s[d].start;
      const int64_t stop = s[d].length < 0 ? e.shape[d] : s[d].start + s[d].length;
      if (start < 0 || stop > e.shape[d] || start > stop)
        throw CheckpointError(where + "slice " + slice_string(s) + " lies outside its shape " + shape_str(e.shape));
      box.start.push_back(start);
      box.stop.push_back(stop);
    }
    for (size_t j = 0; j < boxes.size(); ++j) {
      bool meet = box.numel() > 0 && boxes[j].numel() > 0;
      for (size_t d = 0; meet && d < s.size(); ++d)
        meet = std::max(box.start[d], boxes[j].start[d]) < std::min(box.stop[d], boxes[j].stop[d]);
      if (meet)
        throw CheckpointError(where + "slices " + slice_string(e.slices[j]) + " and " + slice_string(s) + " overlap");
    }
    covered += box.numel();
    boxes.push_back(std::move(box));
  }
  if (covered != e.numel())
    throw CheckpointError(where + "its slices cover " + std::to_string(covered) + " of its " +
                          std::to_string(e.numel()) + " elements");
  HostTensor full = HostTensor::zeros(e.dtype, e.shape);
  const IndexBox full_box = IndexBox::full(e.shape);
  for (size_t i = 0; i < e.slices.size(); ++i) {
    const std::string what = "'" + name + "' slice " + slice_string(e.slices[i]);
    const TfEntry& se = slice_entries_.at(slice_key(name, e.slices[i]));
    if (se.shape != boxes[i].extent() || se.tf_dtype != e.tf_dtype)
      throw CheckpointError(index_file() + ": tensor " + what + at_block(se.index_block) + "stored as " +
                            (se.dtype.empty() ? "TF dtype " + std::to_string(se.tf_dtype) : se.dtype) +
                            shape_str(se.shape) + ", expected " + e.dtype + shape_str(boxes[i].extent()));
    HostTensor part = read_stored(se, what);
    copy_box(part.data.data(), boxes[i], full.data.data(), full_box, dtype_itemsize(e.dtype));
  }
  return full;
}

std::optional<std::string> TfBundleReader::verify(const std::string& name) const {
  try {
    (void)read(name);
    return std::nullopt;
  } catch (const CheckpointError& e) {
    return std::string(e.what());
  }
}

}  // namespace t5x::tf
