#include "t5x/checkpoints/host_tensor.h"

#include <sstream>

#include "core/dtype_bf16.h"

namespace t5x {

namespace {
struct DtypeInfo { std::string_view name; size_t size; };
constexpr DtypeInfo kDtypes[] = {
    {"float32", 4}, {"bfloat16", 2}, {"float16", 2}, {"float64", 8},
    {"int8", 1},    {"int16", 2},    {"int32", 4},   {"int64", 8},
    {"uint8", 1},   {"uint16", 2},   {"uint32", 4},  {"uint64", 8},
    {"bool", 1},
};
}  // namespace

bool dtype_is_known(std::string_view dtype) {
  for (const auto& d : kDtypes) if (d.name == dtype) return true;
  return false;
}

size_t dtype_itemsize(std::string_view dtype) {
  for (const auto& d : kDtypes) if (d.name == dtype) return d.size;
  throw std::invalid_argument("[checkpoint] unknown dtype '" + std::string(dtype) +
                              "' (expected a numpy dtype name such as float32, bfloat16, int32)");
}

std::optional<uint64_t> checked_nbytes(std::span<const int64_t> shape, size_t itemsize) {
  int64_t n = int64_t(itemsize);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return uint64_t(n);
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

HostTensor HostTensor::zeros(std::string dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = std::move(dtype);
  t.shape = std::move(shape);
  for (int64_t d : t.shape)
    if (d < 0) throw std::invalid_argument("[HostTensor] negative dimension");
  t.data.assign(size_t(t.numel()) * dtype_itemsize(t.dtype), 0);
  return t;
}

std::string HostTensor::shape_string() const {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) os << ",";
  os << ")";
  return os.str();
}

IndexBox IndexBox::full(const std::vector<int64_t>& shape) {
  return IndexBox{std::vector<int64_t>(shape.size(), 0), shape};
}

std::vector<int64_t> IndexBox::extent() const {
  std::vector<int64_t> e(start.size());
  for (size_t i = 0; i < start.size(); ++i) e[i] = stop[i] - start[i];
  return e;
}

int64_t IndexBox::numel() const {
  int64_t n = 1;
  for (size_t i = 0; i < start.size(); ++i) n *= std::max<int64_t>(0, stop[i] - start[i]);
  return n;
}

std::string IndexBox::to_string() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < start.size(); ++i) os << (i ? ", " : "") << start[i] << ":" << stop[i];
  os << "]";
  return os.str();
}

void copy_box(const uint8_t* src, const IndexBox& sb, uint8_t* dst, const IndexBox& db,
              size_t itemsize) {
  const size_t rank = sb.start.size();
  if (db.start.size() != rank || sb.stop.size() != rank || db.stop.size() != rank)
    throw std::invalid_argument("[copy_box] rank mismatch");
  if (rank == 0) { std::memcpy(dst, src, itemsize); return; }
  std::vector<int64_t> lo(rank), hi(rank);
  for (size_t i = 0; i < rank; ++i) {
    lo[i] = std::max(sb.start[i], db.start[i]);
    hi[i] = std::min(sb.stop[i], db.stop[i]);
    if (lo[i] >= hi[i]) return;  // empty intersection
  }
  // Strides (in elements) of both layouts.
  std::vector<int64_t> ss(rank), ds(rank);
  ss[rank - 1] = ds[rank - 1] = 1;
  for (size_t i = rank - 1; i > 0; --i) {
    ss[i - 1] = ss[i] * (sb.stop[i] - sb.start[i]);
    ds[i - 1] = ds[i] * (db.stop[i] - db.start[i]);
  }
  const size_t run = size_t(hi[rank - 1] - lo[rank - 1]) * itemsize;
  std::vector<int64_t> idx(lo);  // current position (outer dims), global coords
  while (true) {
    int64_t so = 0, dof = 0;
    for (size_t i = 0; i < rank; ++i) {
      so += (idx[i] - sb.start[i]) * ss[i];
      dof += (idx[i] - db.start[i]) * ds[i];
    }
    std::memcpy(dst + dof * itemsize, src + so * itemsize, run);
    // Advance the outer dims (all but the last) like an odometer.
    size_t d = rank - 1;
    while (d > 0) {
      --d;
      if (++idx[d] < hi[d]) break;
      idx[d] = lo[d];
      if (d == 0) return;
    }
    if (rank == 1) return;
  }
}

HostTensor cast_host_tensor(const HostTensor& t, std::string_view to) {
  if (t.dtype == to) return t;
  auto is_float = [](std::string_view d) {
    return d == "float32" || d == "bfloat16" || d == "float16";
  };
  if (!is_float(t.dtype) || !is_float(to))
    throw std::invalid_argument("[cast] only float32/bfloat16/float16 casts are supported, got " +
                                t.dtype + " -> " + std::string(to));
  const int64_t n = t.numel();
  if (n == 0) return HostTensor::zeros(std::string(to), t.shape);
  std::vector<float> f(static_cast<size_t>(n));
  if (t.dtype == "float32") {
    std::memcpy(f.data(), t.data.data(), size_t(n) * 4);
  } else {
    const uint16_t* s = reinterpret_cast<const uint16_t*>(t.data.data());
    for (int64_t i = 0; i < n; ++i)
      f[i] = t.dtype == "bfloat16" ? float(bfloat16::from_bits(s[i])) : float16::to_float(s[i]);
  }
  HostTensor out = HostTensor::zeros(std::string(to), t.shape);
  if (to == "float32") {
    std::memcpy(out.data.data(), f.data(), size_t(n) * 4);
  } else {
    uint16_t* d = reinterpret_cast<uint16_t*>(out.data.data());
    for (int64_t i = 0; i < n; ++i)
      d[i] = to == "bfloat16" ? bfloat16::from_float(f[i]) : float16::from_float(f[i]);
  }
  return out;
}

}  // namespace t5x
