#include "t5x/checkpoints/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "t5x/checkpoints/json_int.h"
#include "t5x/checkpoints/file_io.h"

namespace t5x {

using json = nlohmann::json;

namespace {
struct StDtype { const char* st; const char* np; };
constexpr StDtype kSt[] = {{"F32", "float32"}, {"BF16", "bfloat16"}, {"F16", "float16"},
                           {"F64", "float64"}, {"I8", "int8"},       {"I16", "int16"},
                           {"I32", "int32"},   {"I64", "int64"},     {"U8", "uint8"},
                           {"BOOL", "bool"}};
constexpr uint64_t kMaxHeader = uint64_t(100) << 20;  // same cap as the reference reader
}  // namespace

const HostTensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors) if (n == name) return &t;
  return nullptr;
}

std::string safetensors_dtype(const std::string& np) {
  for (const auto& d : kSt) if (np == d.np) return d.st;
  throw std::invalid_argument("[safetensors] dtype '" + np + "' has no safetensors code");
}

std::string numpy_dtype_from_safetensors(const std::string& st, const std::string& where) {
  for (const auto& d : kSt) if (st == d.st) return d.np;
  throw CheckpointError(where + ": unsupported safetensors dtype \"" + st + "\"");
}

std::vector<uint8_t> encode_safetensors(const NamedTensors& tensors,
                                        const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  std::set<std::string> names;
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__" || !names.insert(name).second)
      throw std::invalid_argument("[safetensors] duplicate or reserved tensor name '" + name + "'");
    if (t.data.size() != size_t(t.numel()) * dtype_itemsize(t.dtype))
      throw std::invalid_argument("[safetensors] '" + name + "' bytes do not match its shape");
    h[name] = {{"dtype", safetensors_dtype(t.dtype)}, {"shape", t.shape},
               {"data_offsets", {off, off + t.data.size()}}};
    off += t.data.size();
  }
  if (!metadata.empty()) h["__metadata__"] = metadata;
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8 + text.size() + off);
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* p = out.data() + 8 + text.size();
  for (const auto& [name, t] : tensors) {
    if (!t.data.empty()) std::memcpy(p, t.data.data(), t.data.size());  // empty: data() may be null
    p += t.data.size();
  }
  return out;
}

SafetensorsFile decode_safetensors(std::span<const uint8_t> bytes, const std::string& where) {
  if (bytes.size() < 8)
    throw CheckpointError(where + ": " + std::to_string(bytes.size()) +
                          " bytes is too short for a safetensors file (8-byte header length)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(bytes[i]) << (8 * i);
  if (n > kMaxHeader || n > bytes.size() - 8)
    throw CheckpointError(where + ": header length " + std::to_string(n) + " exceeds the file (" +
                          std::to_string(bytes.size()) + " bytes) or the 100 MiB limit; "
                          "not a safetensors file or truncated");
  std::string text(bytes.begin() + 8, bytes.begin() + 8 + n);
  if (text.empty() || text[0] != '{')
    throw CheckpointError(where + ": header does not start with '{' (offset 8)");
  json h;
  try { h = json::parse(text); } catch (const std::exception& e) {
    throw CheckpointError(where + ": invalid JSON header: " + e.what());
  }
  if (!h.is_object()) throw CheckpointError(where + ": header is not a JSON object");
  const uint64_t buf_size = bytes.size() - 8 - n;
  const uint8_t* buf = bytes.data() + 8 + n;
  SafetensorsFile f;
  struct Range { uint64_t b, e; std::string name; };
  std::vector<Range> ranges;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it.value().is_object()) throw CheckpointError(where + ": __metadata__ is not an object");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          throw CheckpointError(where + ": __metadata__[\"" + m.key() + "\"] is not a string");
        f.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tw = where + ": tensor '" + it.key() + "'";
    HostTensor t;
    uint64_t b = 0, e = 0;
    try {
      const json& v = it.value();
      t.dtype = numpy_dtype_from_safetensors(v.at("dtype").get<std::string>(), tw);
      t.shape = json_ints(v.at("shape"));
      const auto offs = json_ints(v.at("data_offsets"));
      if (offs.size() != 2) throw CheckpointError(tw + ": data_offsets must have 2 entries");
      if (offs[0] < 0 || offs[1] < 0) throw CheckpointError(tw + ": negative data_offsets");
      b = uint64_t(offs[0]);
      e = uint64_t(offs[1]);
    } catch (const json::exception& ex) {
      throw CheckpointError(tw + ": malformed entry (" + ex.what() + ")");
    }
    if (b > e || e > buf_size)
      throw CheckpointError(tw + ": data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                            ") out of range of the " + std::to_string(buf_size) + "-byte buffer");
    const auto want = checked_nbytes(t.shape, dtype_itemsize(t.dtype));
    if (!want)
      throw CheckpointError(tw + ": shape " + t.shape_string() + " has a negative dimension or over 2^63 bytes");
    if (e - b != *want)
      throw CheckpointError(tw + ": " + std::to_string(e - b) + " bytes for " + t.dtype +
                            t.shape_string() + ", expected " + std::to_string(*want));
    t.data.assign(buf + b, buf + e);
    ranges.push_back({b, e, it.key()});
    f.tensors.emplace_back(it.key(), std::move(t));
  }
  // Offsets must tile the buffer: sorted by begin, each starts where the last ended.
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(ranges[a].b, ranges[a].e) < std::tie(ranges[b].b, ranges[b].e);
  });
  uint64_t pos = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const Range& r = ranges[order[k]];
    if (r.b < pos)
      throw CheckpointError(where + ": tensor '" + r.name + "' [" + std::to_string(r.b) + ", " +
                            std::to_string(r.e) + ") overlaps '" + ranges[order[k - 1]].name + "'");
    if (r.b > pos)
      throw CheckpointError(where + ": gap in the byte buffer at [" + std::to_string(pos) + ", " +
                            std::to_string(r.b) + ") before tensor '" + r.name + "'");
    pos = r.e;
  }
  if (pos != buf_size)
    throw CheckpointError(where + ": byte buffer has " + std::to_string(buf_size - pos) +
                          " unused trailing bytes after offset " + std::to_string(pos));
  NamedTensors sorted;
  for (size_t k : order) {
    for (auto& nt : f.tensors)
      if (nt.first == ranges[k].name) { sorted.push_back(std::move(nt)); break; }
  }
  f.tensors = std::move(sorted);
  return f;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  fileio::write_file_atomic(path, encode_safetensors(tensors, metadata), true);
}

SafetensorsFile read_safetensors(const std::string& path) {
  return decode_safetensors(fileio::read_file(path), path);
}

}  // namespace t5x
