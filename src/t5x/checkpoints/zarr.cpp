#include "t5x/checkpoints/zarr.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/dtype_bf16.h"
#include "t5x/checkpoints/json_int.h"
#include "t5x/checkpoints/file_io.h"
#include "t5x/checkpoints/parallel.h"

namespace t5x {

using json = nlohmann::json;

namespace {

struct CodeEntry { const char* numpy; const char* code; };
// Little-endian codes as TensorStore writes them; bool and 1-byte ints use '|'.
constexpr CodeEntry kCodes[] = {
    {"float32", "<f4"}, {"float16", "<f2"}, {"float64", "<f8"}, {"bfloat16", "bfloat16"},
    {"int8", "|i1"},    {"int16", "<i2"},   {"int32", "<i4"},   {"int64", "<i8"},
    {"uint8", "|u1"},   {"uint16", "<u2"},  {"uint32", "<u4"},  {"uint64", "<u8"},
    {"bool", "|b1"},
};

std::string numpy_from_code(const std::string& code, const std::string& where, bool* big) {
  *big = false;
  if (code == "bfloat16") return "bfloat16";
  if (code.size() == 3 && (code[0] == '<' || code[0] == '>' || code[0] == '|')) {
    std::string le = code;
    if (code[0] == '>') { *big = code[2] != '1'; le[0] = '<'; }
    if (code[2] == '1') le[0] = '|';
    for (const auto& e : kCodes) if (le == e.code) return e.numpy;
    if (le[0] == '|') {  // "<i1"-style spellings of 1-byte types
      le[0] = '<';
      for (const auto& e : kCodes) if (le == e.code) return e.numpy;
    }
  }
  throw CheckpointError(where + ": unsupported zarr dtype \"" + code +
                        "\" (supported: <f4 <f2 <f8 bfloat16 <i1..<i8 <u1..<u8 |b1)");
}

std::vector<uint8_t> fill_bytes(const ZarrMetadata& m) {
  const size_t n = m.itemsize();
  std::vector<uint8_t> b(n, 0);
  if (!m.fill_value || *m.fill_value == 0.0) {
    if (!m.fill_value || !std::signbit(*m.fill_value)) return b;
  }
  const double v = *m.fill_value;
  auto put = [&](auto x) { std::memcpy(b.data(), &x, sizeof(x)); };
  const std::string& d = m.dtype;
  if (d == "float32") put(float(v));
  else if (d == "float64") put(v);
  else if (d == "bfloat16") put(bfloat16::from_float(float(v)));
  else if (d == "float16") put(float16::from_float(float(v)));
  else if (d == "int8") put(int8_t(v));
  else if (d == "int16") put(int16_t(v));
  else if (d == "int32") put(int32_t(v));
  else if (d == "int64") put(int64_t(v));
  else if (d == "uint8") put(uint8_t(v));
  else if (d == "uint16") put(uint16_t(v));
  else if (d == "uint32") put(uint32_t(v));
  else if (d == "uint64") put(uint64_t(v));
  else if (d == "bool") put(uint8_t(v != 0));
  return b;
}

void fill_buffer(std::vector<uint8_t>& buf, const std::vector<uint8_t>& pattern) {
  bool zero = std::all_of(pattern.begin(), pattern.end(), [](uint8_t x) { return x == 0; });
  if (zero) { std::fill(buf.begin(), buf.end(), 0); return; }
  for (size_t i = 0; i + pattern.size() <= buf.size(); i += pattern.size())
    std::memcpy(buf.data() + i, pattern.data(), pattern.size());
}

void byteswap_inplace(std::vector<uint8_t>& b, size_t itemsize) {
  for (size_t i = 0; i + itemsize <= b.size(); i += itemsize)
    std::reverse(b.begin() + i, b.begin() + i + itemsize);
}

// All grid indices of chunks that intersect `box`, in C order.
std::vector<std::vector<int64_t>> chunks_in_box(const ZarrMetadata& m, const IndexBox& box) {
  const size_t rank = m.shape.size();
  std::vector<std::vector<int64_t>> out;
  if (rank == 0) { out.push_back({}); return out; }
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (box.stop[i] <= box.start[i]) return out;
    lo[i] = box.start[i] / m.chunks[i];
    hi[i] = (box.stop[i] + m.chunks[i] - 1) / m.chunks[i];
  }
  std::vector<int64_t> idx(lo);
  while (true) {
    out.push_back(idx);
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++idx[d] < hi[d]) break;
      idx[d] = lo[d];
      if (d == 0) return out;
    }
  }
}

IndexBox chunk_box(const ZarrMetadata& m, const std::vector<int64_t>& g) {
  IndexBox b;
  for (size_t i = 0; i < g.size(); ++i) {
    b.start.push_back(g[i] * m.chunks[i]);
    b.stop.push_back((g[i] + 1) * m.chunks[i]);  // full chunk, may pass the edge
  }
  return b;
}

void check_box(const ZarrMetadata& m, const IndexBox& box, const char* op) {
  if (box.start.size() != m.shape.size() || box.stop.size() != m.shape.size())
    throw std::invalid_argument(std::string("[") + op + "] box rank " +
                                std::to_string(box.start.size()) + " != array rank " +
                                std::to_string(m.shape.size()));
  for (size_t i = 0; i < m.shape.size(); ++i)
    if (box.start[i] < 0 || box.stop[i] > m.shape[i] || box.start[i] > box.stop[i])
      throw std::invalid_argument(std::string("[") + op + "] box " + box.to_string() +
                                  " is outside the array shape");
}

}  // namespace

std::string zarr_dtype_code(const std::string& numpy_name) {
  for (const auto& e : kCodes) if (numpy_name == e.numpy) return e.code;
  throw std::invalid_argument("[zarr] no zarr dtype for '" + numpy_name + "'");
}

size_t ZarrMetadata::itemsize() const { return dtype_itemsize(dtype); }

size_t ZarrMetadata::chunk_nbytes() const {
  size_t n = itemsize();
  for (int64_t c : chunks) n *= size_t(c);
  return n;
}

std::vector<int64_t> ZarrMetadata::grid_shape() const {
  std::vector<int64_t> g(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) g[i] = shape[i] / chunks[i] + (shape[i] % chunks[i] != 0);
  return g;
}

std::string ZarrMetadata::chunk_key(const std::vector<int64_t>& g) const {
  if (g.empty()) return "0";
  std::string k;
  for (size_t i = 0; i < g.size(); ++i) {
    if (i) k += dimension_separator;
    k += std::to_string(g[i]);
  }
  return k;
}

std::vector<std::string> ZarrMetadata::chunk_keys() const {
  const auto grid = grid_shape();
  int64_t n = 1;
  for (auto g : grid) n *= g;
  std::vector<std::string> keys;
  keys.reserve(size_t(std::min<int64_t>(n, 1 << 20)));
  std::vector<int64_t> idx(grid.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k;
    for (size_t i = grid.size(); i-- > 0;) {
      idx[i] = rem % grid[i];
      rem /= grid[i];
    }
    keys.push_back(chunk_key(idx));
  }
  return keys;
}

std::string ZarrMetadata::to_json() const {
  json j;  // nlohmann's object keeps keys sorted, as TensorStore writes them
  j["chunks"] = chunks;
  if (compressor.id.empty()) j["compressor"] = nullptr;
  else j["compressor"] = {{"id", compressor.id}, {"level", compressor.level}};
  j["dimension_separator"] = dimension_separator;
  j["dtype"] = zarr_dtype_code(dtype);
  if (!fill_value) j["fill_value"] = nullptr;
  else if (std::isnan(*fill_value)) j["fill_value"] = "NaN";
  else if (std::isinf(*fill_value)) j["fill_value"] = *fill_value > 0 ? "Infinity" : "-Infinity";
  else j["fill_value"] = *fill_value;
  j["filters"] = nullptr;
  j["order"] = "C";
  j["shape"] = shape;
  j["zarr_format"] = 2;
  return j.dump();
}

ZarrMetadata ZarrMetadata::from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw CheckpointError(where + ": invalid JSON in .zarray (" + e.what() +
                          "); the file may be truncated");
  }
  auto need = [&](const char* k) -> const json& {
    if (!j.contains(k)) throw CheckpointError(where + ": .zarray lacks \"" + std::string(k) + "\"");
    return j.at(k);
  };
  ZarrMetadata m;
  std::string field;  // the one being read, for the message of a wrongly typed value
  auto at = [&](const char* k) -> const json& {
    field = k;
    return need(k);
  };
  try {
    if (json_int(at("zarr_format")) != 2)
      throw CheckpointError(where + ": zarr_format " + j["zarr_format"].dump() + ", expected 2");
    m.shape = json_ints(at("shape"));
    m.chunks = json_ints(at("chunks"));
    m.dtype = numpy_from_code(at("dtype").get<std::string>(), where, &m.big_endian);
    field = "order";
    if (j.contains("order") && j["order"] != "C")
      throw CheckpointError(where + ": order " + j["order"].dump() + " is not supported (only \"C\")");
    if (j.contains("filters") && !j["filters"].is_null() && !j["filters"].empty())
      throw CheckpointError(where + ": zarr filters are not supported: " + j["filters"].dump());
    const json& c = at("compressor");
    if (!c.is_null()) {
      m.compressor.id = c.at("id").get<std::string>();
      m.compressor.level = c.contains("level") ? int(json_int(c["level"])) : 1;
    } else {
      m.compressor.id.clear();
    }
    field = "dimension_separator";
    if (j.contains("dimension_separator")) m.dimension_separator = j["dimension_separator"];
    field = "fill_value";
    const json& f = j.contains("fill_value") ? j["fill_value"] : json(nullptr);
    if (f.is_number()) m.fill_value = f.get<double>();
    else if (f.is_boolean()) m.fill_value = f.get<bool>() ? 1.0 : 0.0;
    else if (f.is_string()) {
      std::string s = f;
      if (s == "NaN") m.fill_value = std::numeric_limits<double>::quiet_NaN();
      else if (s == "Infinity") m.fill_value = std::numeric_limits<double>::infinity();
      else if (s == "-Infinity") m.fill_value = -std::numeric_limits<double>::infinity();
      else throw CheckpointError(where + ": unsupported fill_value " + f.dump());
    }
  } catch (const json::exception& e) {
    // nlohmann's text without its "[json.exception.type_error.302] " tag.
    std::string why = e.what();
    if (why.rfind("[json.exception.", 0) == 0 && why.find("] ") != std::string::npos) why.erase(0, why.find("] ") + 2);
    throw CheckpointError(where + ": malformed .zarray: \"" + field + "\": " + why +
                          " (a t5x .zarray: {\"chunks\": [..], \"compressor\": {\"id\": \"gzip\", ...}, \"dtype\": \"<f4\", ...})");
  }
  if (m.shape.size() != m.chunks.size())
    throw CheckpointError(where + ": shape and chunks have different ranks");
  for (size_t i = 0; i < m.chunks.size(); ++i)
    if (m.chunks[i] < 1 || m.shape[i] < 0)
      throw CheckpointError(where + ": invalid chunk/shape in dimension " + std::to_string(i));
  const auto array_bytes = checked_nbytes(m.shape, m.itemsize()), chunk_bytes = checked_nbytes(m.chunks, m.itemsize());
  if (!array_bytes || !chunk_bytes) throw CheckpointError(where + ": shape or chunks of over 2^63 bytes");
  // A chunk is decoded whole: one far larger than the array it tiles is a
  // damaged .zarray, not something to allocate.
  if (*chunk_bytes > std::max<uint64_t>(uint64_t(*array_bytes), uint64_t(1) << 20))
    throw CheckpointError(where + ": chunks " + json(m.chunks).dump() + " make a chunk of " +
                          std::to_string(*chunk_bytes) + " bytes, more than the whole array " + json(m.shape).dump() +
                          " (" + std::to_string(*array_bytes) + " bytes); the .zarray is damaged");
  // Chunk keys become file names: only zarr v2's two separators.
  if (m.dimension_separator != "." && m.dimension_separator != "/")
    throw CheckpointError(where + ": dimension_separator " + json(m.dimension_separator).dump() +
                          " is not \".\" or \"/\"");
  return m;
}

std::vector<int64_t> t5x_chunk_shape(const std::vector<int64_t>& write_shape, size_t itemsize,
                                     size_t max_bytes) {
  int64_t target = std::max<int64_t>(1, int64_t(max_bytes / itemsize));
  std::vector<std::vector<int64_t>> divs(write_shape.size());
  for (size_t i = 0; i < write_shape.size(); ++i) {
    int64_t d = std::max<int64_t>(1, write_shape[i]);
    for (int64_t k = 1; k * k <= d; ++k)
      if (d % k == 0) { divs[i].push_back(k); if (k != d / k) divs[i].push_back(d / k); }
    std::sort(divs[i].begin(), divs[i].end());
  }
  auto total = [&] {
    int64_t t = 1;
    for (auto& v : divs) t *= v.back();
    return t;
  };
  while (total() > target) {
    size_t best = 0;
    int64_t best_size = 1;
    for (size_t i = 0; i < divs.size(); ++i)
      if (divs[i].back() > best_size) { best_size = divs[i].back(); best = i; }
    divs[best].pop_back();
  }
  std::vector<int64_t> out;
  for (auto& v : divs) out.push_back(v.back());
  return out;
}

void zarr_write_metadata(const std::string& dir, const ZarrMetadata& meta, bool durable) {
  fileio::make_dirs(dir);
  std::string text = meta.to_json();
  fileio::write_file_atomic(fileio::join(dir, ".zarray"),
                            {reinterpret_cast<const uint8_t*>(text.data()), text.size()}, durable);
}

ZarrMetadata zarr_read_metadata(const std::string& dir) {
  const std::string p = fileio::join(dir, ".zarray");
  auto bytes = fileio::read_file_if_exists(p);
  if (!bytes)
    throw CheckpointError("missing zarr metadata '" + p +
                          "': the array directory is absent or was not fully written");
  return ZarrMetadata::from_json(std::string(bytes->begin(), bytes->end()), p);
}

uint64_t zarr_write_box(const std::string& dir, const ZarrMetadata& m, const HostTensor& local,
                    const IndexBox& box, const ZarrWriteOptions& opt) {
  check_box(m, box, "zarr_write_box");
  if (local.dtype != m.dtype)
    throw std::invalid_argument("[zarr_write_box] tensor dtype " + local.dtype +
                                " != array dtype " + m.dtype);
  if (local.shape != box.extent())
    throw std::invalid_argument("[zarr_write_box] tensor shape " + local.shape_string() +
                                " != box extent " + box.to_string());
  for (size_t i = 0; i < m.shape.size(); ++i) {
    bool ok = box.start[i] % m.chunks[i] == 0 &&
              (box.stop[i] % m.chunks[i] == 0 || box.stop[i] == m.shape[i]);
    if (!ok)
      throw std::invalid_argument("[zarr_write_box] box " + box.to_string() +
                                  " is not aligned to chunks; choose chunks that divide each "
                                  "process's slice (e.g. the per-shard shape)");
  }
  const auto pattern = fill_bytes(m);
  const auto grid = chunks_in_box(m, box);
  const size_t isz = m.itemsize();
  std::atomic<uint64_t> written{0};
  detail::parallel_for(int64_t(grid.size()), opt.num_threads, [&](int64_t k) {
    const auto& g = grid[size_t(k)];
    std::vector<uint8_t> buf(m.chunk_nbytes());
    IndexBox cb = chunk_box(m, g);
    bool edge = false;
    for (size_t i = 0; i < g.size(); ++i) edge |= cb.stop[i] > m.shape[i];
    if (edge) fill_buffer(buf, pattern);
    copy_box(local.data.data(), box, buf.data(), cb, isz);
    auto enc = encode_chunk(m.compressor, buf);
    const std::string key = m.chunk_key(g);
    fileio::write_file(fileio::join(dir, key), enc, opt.durable);
    if (opt.on_chunk) opt.on_chunk(key, enc);
    written += enc.size();
  });
  return written.load();
}

namespace {
std::string chunk_desc(const ZarrMetadata& m) {
  std::string s;
  for (auto c : m.chunks) s += (s.empty() ? "" : "x") + std::to_string(c);
  return " (chunk shape " + (s.empty() ? std::string("scalar") : s) + ", dtype " + m.dtype + ")";
}

template <typename Get>
HostTensor read_box_from(const Get& get, const std::function<std::string(const std::string&)>& name_of,
                         const ZarrMetadata& m, const IndexBox& box, int num_threads) {
  check_box(m, box, "zarr_read_box");
  HostTensor out = HostTensor::zeros(m.dtype, box.extent());
  const auto pattern = fill_bytes(m);
  fill_buffer(out.data, pattern);
  const auto grid = chunks_in_box(m, box);
  const size_t isz = m.itemsize();
  detail::parallel_for(int64_t(grid.size()), num_threads, [&](int64_t k) {
    const auto& g = grid[size_t(k)];
    const std::string key = m.chunk_key(g);
    auto enc = get(key);
    if (!enc) return;  // missing chunk == fill_value
    auto raw = decode_chunk(m.compressor, *enc, m.chunk_nbytes(), "chunk '" + name_of(key) + "'" + chunk_desc(m));
    if (m.big_endian) byteswap_inplace(raw, isz);
    copy_box(raw.data(), chunk_box(m, g), out.data.data(), box, isz);
  });
  return out;
}
}  // namespace

HostTensor zarr_read_box(const std::string& dir, const ZarrMetadata& m, const IndexBox& box,
                         int num_threads, const ZarrChunkCheck& check) {
  return read_box_from(
      [&](const std::string& key) {
        auto enc = fileio::read_file_if_exists(fileio::join(dir, key));
        if (check) check(key, enc ? &*enc : nullptr);
        return enc;
      },
      [&](const std::string& key) { return fileio::join(dir, key); }, m, box, num_threads);
}

HostTensor zarr_read_box(const ZarrChunkSource& get, const std::string& where, const ZarrMetadata& m,
                         const IndexBox& box, int num_threads) {
  return read_box_from(get, [&](const std::string& key) { return where + "/" + key; }, m, box, num_threads);
}

HostTensor zarr_read(const std::string& dir) {
  ZarrMetadata m = zarr_read_metadata(dir);
  return zarr_read_box(dir, m, IndexBox::full(m.shape));
}

}  // namespace t5x
