#include "seqio/tfrecord.h"

#include <array>
#include <cstring>
#include <stdexcept>

#include "seqio/errors.h"

namespace seqio {

// ---------------------------------------------------------------- CRC32C

namespace {
std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // Castagnoli, reflected
    t[i] = c;
  }
  return t;
}
const std::array<uint32_t, 256> kCrcTable = make_crc_table();
}  // namespace

uint32_t crc32c(std::string_view data, uint32_t init) {
  uint32_t c = ~init;
  for (unsigned char b : data) c = kCrcTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return ~c;
}

uint32_t masked_crc32c(std::string_view data) {
  uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

// ---------------------------------------------------------------- framing

namespace {
void put_le(std::string& s, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
}  // namespace

TFRecordWriter::TFRecordWriter(const std::string& path) : path_(path), out_(path, std::ios::binary) {
  if (!out_) throw DataError(path + ": cannot create file (hint: does the directory exist and is it writable?)");
}

void TFRecordWriter::write(std::string_view record) {
  std::string head;
  put_le(head, record.size(), 8);
  put_le(head, masked_crc32c(head), 4);
  std::string tail;
  put_le(tail, masked_crc32c(record), 4);
  out_.write(head.data(), head.size());
  out_.write(record.data(), record.size());
  out_.write(tail.data(), tail.size());
}

void TFRecordWriter::close() {
  out_.close();
  if (out_.fail()) throw DataError(path_ + ": write failed (hint: is the disk full?)");
}

TFRecordReader::TFRecordReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) throw DataError(path + ": cannot open TFRecord file");
  in_.seekg(0, std::ios::end);
  size_ = uint64_t(in_.tellg());
  in_.seekg(0);
}

bool TFRecordReader::next(std::string& record) {
  char head[12];
  in_.read(head, 12);
  const auto got = in_.gcount();
  if (got == 0) return false;
  if (got < 12) throw offset_error(path_, offset_, "truncated TFRecord header (file cut short?)");
  if (get_le(head + 8, 4) != masked_crc32c(std::string_view(head, 8)))
    throw offset_error(path_, offset_, "TFRecord length CRC mismatch (corrupted file)");
  const uint64_t len = get_le(head, 8);
  // A corrupt length must not allocate: the record and its CRC have to fit
  // in what is left of the file.
  if (len > size_ - offset_ - 12 || size_ - offset_ - 12 - len < 4)
    throw offset_error(path_, offset_, "TFRecord length " + std::to_string(len) + " runs past the end of the file (" +
                                           std::to_string(size_ - offset_ - 12) +
                                           " bytes left after the header; truncated or corrupt file)");
  record.resize(len);
  in_.read(record.data(), static_cast<std::streamsize>(len));
  char crc[4];
  in_.read(crc, 4);
  if (!in_) throw offset_error(path_, offset_, "truncated TFRecord data (file cut short?)");
  if (get_le(crc, 4) != masked_crc32c(record))
    throw offset_error(path_, offset_, "TFRecord data CRC mismatch (corrupted record)");
  offset_ += 12 + len + 4;
  return true;
}

// ---------------------------------------------------------------- protobuf wire format

namespace {
struct Wire {
  std::string_view s;
  size_t p = 0;
  bool done() const { return p >= s.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= s.size()) throw std::runtime_error("truncated varint");
      uint8_t b = static_cast<uint8_t>(s[p++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint too long");
  }
  std::string_view bytes() {
    uint64_t n = varint();
    if (n > s.size() - p) throw std::runtime_error("length-delimited field overruns its message");
    auto r = s.substr(p, n);
    p += n;
    return r;
  }
  void skip(int wt) {
    switch (wt) {
      case 0: varint(); break;
      case 1: p += 8; break;
      case 2: bytes(); break;
      case 5: p += 4; break;
      default: throw std::runtime_error("unsupported wire type " + std::to_string(wt));
    }
    if (p > s.size()) throw std::runtime_error("truncated field");
  }
};

void put_varint(std::string& s, uint64_t v) {
  while (v >= 0x80) {
    s.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}
void put_bytes(std::string& s, int field, std::string_view b) {
  put_varint(s, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(s, b.size());
  s.append(b);
}

TFFeature parse_feature(std::string_view data) {
  TFFeature f;
  Wire w{data};
  while (!w.done()) {
    uint64_t tag = w.varint();
    int field = static_cast<int>(tag >> 3), wt = static_cast<int>(tag & 7);
    if (wt != 2 || field < 1 || field > 3) {
      w.skip(wt);
      continue;
    }
    Wire list{w.bytes()};
    f.kind = field == 1 ? TFFeature::Kind::kBytes : field == 2 ? TFFeature::Kind::kFloat : TFFeature::Kind::kInt64;
    while (!list.done()) {
      uint64_t t = list.varint();
      int lf = static_cast<int>(t >> 3), lwt = static_cast<int>(t & 7);
      if (lf != 1) {
        list.skip(lwt);
        continue;
      }
      if (field == 1 && lwt == 2) {
        f.bytes.emplace_back(list.bytes());
      } else if (field == 2 && lwt == 2) {  // packed floats
        auto b = list.bytes();
        if (b.size() % 4) throw std::runtime_error("packed float list of odd size");
        for (size_t i = 0; i < b.size(); i += 4) {
          uint32_t u = static_cast<uint32_t>(get_le(b.data() + i, 4));
          float x;
          std::memcpy(&x, &u, 4);
          f.floats.push_back(x);
        }
      } else if (field == 2 && lwt == 5) {
        if (list.p + 4 > list.s.size()) throw std::runtime_error("truncated float");
        uint32_t u = static_cast<uint32_t>(get_le(list.s.data() + list.p, 4));
        list.p += 4;
        float x;
        std::memcpy(&x, &u, 4);
        f.floats.push_back(x);
      } else if (field == 3 && lwt == 2) {  // packed int64
        Wire packed{list.bytes()};
        while (!packed.done()) f.ints.push_back(static_cast<int64_t>(packed.varint()));
      } else if (field == 3 && lwt == 0) {
        f.ints.push_back(static_cast<int64_t>(list.varint()));
      } else {
        throw std::runtime_error("unexpected wire type in feature list");
      }
    }
  }
  return f;
}
}  // namespace

TFExample parse_tf_example(std::string_view data) {
  TFExample out;
  Wire ex{data};
  while (!ex.done()) {
    uint64_t tag = ex.varint();
    if ((tag >> 3) != 1 || (tag & 7) != 2) {
      ex.skip(static_cast<int>(tag & 7));
      continue;
    }
    Wire features{ex.bytes()};
    while (!features.done()) {
      uint64_t t = features.varint();
      if ((t >> 3) != 1 || (t & 7) != 2) {
        features.skip(static_cast<int>(t & 7));
        continue;
      }
      Wire entry{features.bytes()};  // map entry: 1 key, 2 value
      std::string key;
      TFFeature value;
      while (!entry.done()) {
        uint64_t et = entry.varint();
        if ((et >> 3) == 1 && (et & 7) == 2) {
          key = std::string(entry.bytes());
        } else if ((et >> 3) == 2 && (et & 7) == 2) {
          value = parse_feature(entry.bytes());
        } else {
          entry.skip(static_cast<int>(et & 7));
        }
      }
      out.emplace_back(std::move(key), std::move(value));
    }
  }
  return out;
}

std::string serialize_tf_example(const TFExample& ex) {
  std::string features;
  for (const auto& [key, f] : ex) {
    std::string list;
    int field = 1;
    if (f.kind == TFFeature::Kind::kBytes) {
      for (const auto& b : f.bytes) put_bytes(list, 1, b);
    } else if (f.kind == TFFeature::Kind::kFloat) {
      field = 2;
      std::string packed;
      for (float x : f.floats) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        put_le(packed, u, 4);
      }
      if (!f.floats.empty()) put_bytes(list, 1, packed);
    } else {
      field = 3;
      std::string packed;
      for (int64_t v : f.ints) put_varint(packed, static_cast<uint64_t>(v));
      if (!f.ints.empty()) put_bytes(list, 1, packed);
    }
    std::string feature;
    put_bytes(feature, field, list);
    std::string entry;
    put_bytes(entry, 1, key);
    put_bytes(entry, 2, feature);
    put_bytes(features, 1, entry);
  }
  std::string out;
  put_bytes(out, 1, features);
  return out;
}

std::string example_to_tf_example(const Example& ex) {
  TFExample tf;
  for (const auto& [key, v] : ex) {
    TFFeature f;
    if (auto* s = std::get_if<std::string>(&v)) {
      f.kind = TFFeature::Kind::kBytes;
      f.bytes.push_back(*s);
    } else if (auto* t = std::get_if<Tokens>(&v)) {
      f.kind = TFFeature::Kind::kInt64;
      f.ints.assign(t->begin(), t->end());
    } else if (auto* i = std::get_if<int64_t>(&v)) {
      f.kind = TFFeature::Kind::kInt64;
      f.ints.push_back(*i);
    } else {
      f.kind = TFFeature::Kind::kFloat;
      f.floats.push_back(static_cast<float>(std::get<double>(v)));
    }
    tf.emplace_back(key, std::move(f));
  }
  return serialize_tf_example(tf);
}

}  // namespace seqio
