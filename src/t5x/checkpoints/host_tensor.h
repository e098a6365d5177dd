// Neutral host-memory tensor used by the checkpoint storage layer.
//
// The checkpoint code does not depend on core::Array: the trainer adapts its
// arrays to HostTensor (a dtype name, a global or local shape, and C-order
// little-endian bytes). dtype names are numpy's (`np.dtype(x).name`), which is
// what flax writes into msgpack and what TensorStore specs use:
// "float32", "bfloat16", "float16", "float64", "int8", "int16", "int32",
// "int64", "uint8", "uint16", "uint32", "uint64", "bool".
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace t5x {

// Recoverable checkpoint failure (I/O, corrupt or truncated data, format
// mismatch). what() names the file (and offset where known) and gives a hint.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bytes per element of a numpy dtype name; throws std::invalid_argument
// "[checkpoint] unknown dtype ..." for names outside the list above.
size_t dtype_itemsize(std::string_view dtype);
bool dtype_is_known(std::string_view dtype);

// Bytes of an array of `shape` with `itemsize`-byte elements, or nullopt when
// a dimension is negative or the size exceeds 2^63 - 1. For shapes read from
// files, checked before anything multiplies or allocates with them.
std::optional<uint64_t> checked_nbytes(std::span<const int64_t> shape, size_t itemsize);

struct HostTensor {
  std::string dtype = "float32";
  std::vector<int64_t> shape;   // rank 0 = scalar (one element)
  std::vector<uint8_t> data;    // C order, little endian, size = numel * itemsize

  int64_t numel() const;
  size_t nbytes() const { return data.size(); }
  // Zero-filled tensor of the given dtype/shape.
  static HostTensor zeros(std::string dtype, std::vector<int64_t> shape);
  // Typed construction / access (T must match the dtype's size; bf16 data is
  // handled through t5x::bfloat16 from core/dtype_bf16.h).
  template <class T>
  static HostTensor from_values(std::string dtype, std::vector<int64_t> shape,
                                const std::vector<T>& values) {
    HostTensor t = zeros(std::move(dtype), std::move(shape));
    if (values.size() * sizeof(T) != t.data.size())
      throw std::invalid_argument("[HostTensor] value count does not match shape/dtype");
    std::memcpy(t.data.data(), values.data(), t.data.size());
    return t;
  }
  template <class T>
  std::vector<T> values() const {
    if (data.size() % sizeof(T) != 0)
      throw std::invalid_argument("[HostTensor] element size does not divide byte size");
    std::vector<T> v(data.size() / sizeof(T));
    std::memcpy(v.data(), data.data(), data.size());
    return v;
  }
  // "(4, 6)" style, numpy-like.
  std::string shape_string() const;
  bool operator==(const HostTensor& o) const {
    return dtype == o.dtype && shape == o.shape && data == o.data;
  }
};

// A box [start, stop) in every dimension of a global array: the slice one
// process owns (for writes) or wants (for reads). Rank 0 arrays use empty
// vectors.
struct IndexBox {
  std::vector<int64_t> start, stop;

  static IndexBox full(const std::vector<int64_t>& shape);
  std::vector<int64_t> extent() const;
  int64_t numel() const;
  std::string to_string() const;  // "[0:4, 2:6]"
};

// Copies the elements of `src_box` ∩ `dst_box` (global coordinates) from
// `src` (laid out over src_box, C order) into `dst` (laid out over dst_box).
// Element size in bytes is `itemsize`.
void copy_box(const uint8_t* src, const IndexBox& src_box, uint8_t* dst,
              const IndexBox& dst_box, size_t itemsize);

// Elementwise cast between float32, bfloat16 and float16 (round to nearest
// even, as JAX/ml_dtypes). Same dtype returns a copy. Other pairs throw
// std::invalid_argument "[cast] ...".
HostTensor cast_host_tensor(const HostTensor& t, std::string_view to_dtype);

}  // namespace t5x
