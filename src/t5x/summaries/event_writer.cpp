#include "t5x/summaries/event_writer.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "t5x/summaries/crc32c.h"

namespace t5x {

namespace pb {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) { out.push_back(char(uint8_t(v) | 0x80)); v >>= 7; }
  out.push_back(char(v));
}
void put_tag(std::string& out, int field, int wire) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
void put_bytes(std::string& out, int field, const std::string& b) {
  put_tag(out, field, 2);
  put_varint(out, b.size());
  out += b;
}
void put_double(std::string& out, int field, double v) {
  put_tag(out, field, 1);
  char b[8];
  std::memcpy(b, &v, 8);
  out.append(b, 8);
}
void put_float(std::string& out, int field, float v) {
  put_tag(out, field, 5);
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}
void put_int64(std::string& out, int field, int64_t v) {
  put_tag(out, field, 0);
  put_varint(out, uint64_t(v));
}

}  // namespace pb

namespace {

// Event fields: wall_time=1 (double), step=2 (int64), file_version=3, summary=5.
// Summary.value=1; Value: tag=1, simple_value=2 (float), tensor=8, metadata=9.
std::string event_header(double wall_time, int64_t step) {
  std::string e;
  pb::put_double(e, 1, wall_time);
  if (step != 0) pb::put_int64(e, 2, step);
  return e;
}

std::string scalar_value(const std::string& tag, float v) {
  std::string val;
  pb::put_bytes(val, 1, tag);
  pb::put_float(val, 2, v);
  return val;
}

std::string text_value(const std::string& tag, const std::string& text) {
  std::string plugin, meta, shape, tensor, val;
  pb::put_bytes(plugin, 1, "text");          // PluginData.plugin_name
  pb::put_bytes(meta, 1, plugin);            // SummaryMetadata.plugin_data
  pb::put_tag(tensor, 1, 0);                 // TensorProto.dtype = DT_STRING (7)
  pb::put_varint(tensor, 7);
  pb::put_bytes(tensor, 2, shape);           // tensor_shape: scalar (no dims)
  pb::put_bytes(tensor, 8, text);            // string_val
  pb::put_bytes(val, 1, tag);
  pb::put_bytes(val, 8, tensor);
  pb::put_bytes(val, 9, meta);
  return val;
}

struct Reader {
  const std::string& s;
  size_t pos = 0;
  bool done() const { return pos >= s.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= s.size()) throw SummaryError("protobuf: truncated varint");
      uint8_t b = uint8_t(s[pos++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw SummaryError("protobuf: varint too long");
  }
  std::string bytes() {
    uint64_t n = varint();
    if (pos + n > s.size()) throw SummaryError("protobuf: truncated length-delimited field");
    std::string out = s.substr(pos, n);
    pos += n;
    return out;
  }
  template <class T> T fixed() {
    if (pos + sizeof(T) > s.size()) throw SummaryError("protobuf: truncated fixed field");
    T v;
    std::memcpy(&v, s.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  void skip(int wire) {
    if (wire == 0) varint();
    else if (wire == 1) fixed<uint64_t>();
    else if (wire == 2) bytes();
    else if (wire == 5) fixed<uint32_t>();
    else throw SummaryError("protobuf: unsupported wire type " + std::to_string(wire));
  }
};

}  // namespace

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string summary_dir(const std::string& model_dir, SummaryKind kind, const std::string& task) {
  namespace fs = std::filesystem;
  switch (kind) {
    case SummaryKind::kTrain: return (fs::path(model_dir) / "train").string();
    case SummaryKind::kTrainingEval:
      if (task.empty()) throw std::invalid_argument("[summary_dir] training_eval needs a task name");
      return (fs::path(model_dir) / "training_eval" / task).string();
    case SummaryKind::kInferenceEval: return (fs::path(model_dir) / "inference_eval").string();
  }
  return model_dir;
}

EventFileWriter::EventFileWriter(const std::string& log_dir, const std::string& suffix) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) throw SummaryError("cannot create summary directory '" + log_dir + "': " + ec.message());
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double now = wall_time_now();
  path_ = (std::filesystem::path(log_dir) /
           ("events.out.tfevents." + std::to_string(int64_t(now)) + "." + host + suffix)).string();
  f_ = std::fopen(path_.c_str(), "ab");
  if (!f_) throw SummaryError("cannot create event file '" + path_ + "': " + std::strerror(errno));
  std::string e = event_header(now, 0);
  pb::put_bytes(e, 3, "brain.Event:2");
  write_record(e);
  flush();
}

EventFileWriter::~EventFileWriter() {
  if (f_) std::fclose(f_);
}

void EventFileWriter::write_record(const std::string& data) {
  if (!f_) throw SummaryError("event file '" + path_ + "' is closed");
  char hdr[12];
  uint64_t n = data.size();
  for (int i = 0; i < 8; ++i) hdr[i] = char(uint8_t(n >> (8 * i)));
  uint32_t lc = mask_crc32c(crc32c(hdr, 8));
  for (int i = 0; i < 4; ++i) hdr[8 + i] = char(uint8_t(lc >> (8 * i)));
  uint32_t dc = mask_crc32c(crc32c(data.data(), data.size()));
  char tail[4];
  for (int i = 0; i < 4; ++i) tail[i] = char(uint8_t(dc >> (8 * i)));
  if (std::fwrite(hdr, 1, 12, f_) != 12 || std::fwrite(data.data(), 1, data.size(), f_) != data.size() ||
      std::fwrite(tail, 1, 4, f_) != 4)
    throw SummaryError("cannot write event file '" + path_ + "': " + std::strerror(errno));
}

void EventFileWriter::add_scalar(const std::string& tag, float value, int64_t step, double wt) {
  std::string summary;
  pb::put_bytes(summary, 1, scalar_value(tag, value));
  std::string e = event_header(wt < 0 ? wall_time_now() : wt, step);
  pb::put_bytes(e, 5, summary);
  write_record(e);
}

void EventFileWriter::add_scalars(const std::map<std::string, double>& values, int64_t step, double wt) {
  std::string summary;
  for (const auto& [tag, v] : values) pb::put_bytes(summary, 1, scalar_value(tag, float(v)));
  std::string e = event_header(wt < 0 ? wall_time_now() : wt, step);
  pb::put_bytes(e, 5, summary);
  write_record(e);
}

void EventFileWriter::add_text(const std::string& tag, const std::string& text, int64_t step, double wt) {
  std::string summary;
  pb::put_bytes(summary, 1, text_value(tag, text));
  std::string e = event_header(wt < 0 ? wall_time_now() : wt, step);
  pb::put_bytes(e, 5, summary);
  write_record(e);
}

void EventFileWriter::flush() {
  if (!f_) return;
  std::fflush(f_);
  ::fsync(::fileno(f_));
}

void EventFileWriter::close() {
  if (!f_) return;
  flush();
  std::fclose(f_);
  f_ = nullptr;
}

std::vector<std::string> read_tfrecords(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw SummaryError("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<std::string> out;
  uint64_t off = 0;
  while (true) {
    unsigned char hdr[12];
    size_t got = std::fread(hdr, 1, 12, f);
    if (got == 0) break;
    if (got != 12) {
      std::fclose(f);
      throw SummaryError(path + ": truncated record header at offset " + std::to_string(off));
    }
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(hdr[i]) << (8 * i);
    uint32_t lc = uint32_t(hdr[8]) | uint32_t(hdr[9]) << 8 | uint32_t(hdr[10]) << 16 | uint32_t(hdr[11]) << 24;
    if (lc != mask_crc32c(crc32c(hdr, 8))) {
      std::fclose(f);
      throw SummaryError(path + ": length CRC mismatch at offset " + std::to_string(off));
    }
    std::string data(n, '\0');
    unsigned char tail[4];
    if (std::fread(data.data(), 1, n, f) != n || std::fread(tail, 1, 4, f) != 4) {
      std::fclose(f);
      throw SummaryError(path + ": truncated record at offset " + std::to_string(off));
    }
    uint32_t dc = uint32_t(tail[0]) | uint32_t(tail[1]) << 8 | uint32_t(tail[2]) << 16 | uint32_t(tail[3]) << 24;
    if (dc != mask_crc32c(crc32c(data.data(), n))) {
      std::fclose(f);
      throw SummaryError(path + ": data CRC mismatch in record at offset " + std::to_string(off));
    }
    out.push_back(std::move(data));
    off += 16 + n;
  }
  std::fclose(f);
  return out;
}

ParsedEvent parse_event(const std::string& bytes) {
  ParsedEvent ev;
  Reader r{bytes};
  while (!r.done()) {
    uint64_t key = r.varint();
    int field = int(key >> 3), wire = int(key & 7);
    if (field == 1 && wire == 1) ev.wall_time = r.fixed<double>();
    else if (field == 2 && wire == 0) ev.step = int64_t(r.varint());
    else if (field == 3 && wire == 2) ev.file_version = r.bytes();
    else if (field == 5 && wire == 2) {
      std::string summary = r.bytes();
      Reader rs{summary};
      while (!rs.done()) {
        uint64_t k = rs.varint();
        if ((k >> 3) != 1 || (k & 7) != 2) { rs.skip(int(k & 7)); continue; }
        std::string val = rs.bytes();
        Reader rv{val};
        std::string tag, text;
        bool has_scalar = false, has_text = false;
        float sv = 0;
        while (!rv.done()) {
          uint64_t kv = rv.varint();
          int fv = int(kv >> 3), wv = int(kv & 7);
          if (fv == 1 && wv == 2) tag = rv.bytes();
          else if (fv == 2 && wv == 5) { sv = rv.fixed<float>(); has_scalar = true; }
          else if (fv == 8 && wv == 2) {
            std::string tensor = rv.bytes();
            Reader rt{tensor};
            while (!rt.done()) {
              uint64_t kt = rt.varint();
              if ((kt >> 3) == 8 && (kt & 7) == 2) { text = rt.bytes(); has_text = true; }
              else rt.skip(int(kt & 7));
            }
          } else rv.skip(wv);
        }
        if (has_scalar) ev.scalars.emplace_back(tag, sv);
        if (has_text) ev.texts.emplace_back(tag, text);
      }
    } else r.skip(wire);
  }
  return ev;
}

}  // namespace t5x
