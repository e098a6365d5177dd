// Array: a named-dimension, typed, possibly sharded n-d array (cheap value handle).
//
// An Array holds
//   - dtype (core/dtype.h) and the GLOBAL named Shape, e.g. [batch=8, length=128, embed=512];
//   - a Sharding (core/sharding.h): null mesh = single device; otherwise the
//     PartitionSpec splits global dims over mesh axes;
//   - the LOCAL shard buffer: contiguous row-major over local_shape(), 64-byte aligned;
//   - the Device holding that buffer (its Allocator made the buffer).
// A single-device array is the one-device case of this same type: local_shape()
// == shape(). Copying an Array copies the handle, not the data. Ops never
// modify an input buffer; they return new Arrays (value semantics).
//
// Errors: misuse throws std::invalid_argument("[Array] ...").
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/sharding.h"

namespace t5x {

// Bookkeeping the autodiff tape attaches to arrays it tracks (ops/autodiff.h).
struct AutodiffTag {
  uint64_t tape = 0;  // generation id of the tape tracking this array; 0 = untracked
  int64_t slot = -1;  // value slot on that tape
};

struct ArrayImpl {
  DType dtype = DType::f32;
  Shape shape;        // global
  Sharding sharding;  // null mesh: single device
  Device device;
  Shape local_shape;  // shape of the local shard
  std::shared_ptr<Buffer> buffer;
  AutodiffTag tag;
};

// Local shard shape of `global` under `sharding`; throws "[Array] ..." when a
// dim is not divisible by its mesh axes or the spec rank is wrong.
Shape local_shape_of(const Shape& global, const Sharding& sharding);

class Array {
 public:
  Array() = default;  // null handle; valid() == false
  // Zero-filled array (zero = false leaves the contents unspecified).
  Array(Shape shape, DType dtype, Sharding sharding = {}, Device device = {}, bool zero = true);

  static Array zeros(Shape shape, DType dtype = DType::f32) { return Array(std::move(shape), dtype); }
  static Array full(Shape shape, double value, DType dtype = DType::f32);
  static Array ones(Shape shape, DType dtype = DType::f32) { return full(std::move(shape), 1.0, dtype); }
  static Array scalar(double value, DType dtype = DType::f32) { return full(Shape{}, value, dtype); }
  // Typed construction: T in {float, bfloat16, float16, int32_t, int64_t, bool};
  // values.size() must equal shape.numel().
  template <typename T>
  static Array from_vector(Shape shape, const std::vector<T>& values);
  // Converting construction from floats / integers into any dtype.
  static Array from_floats(Shape shape, const std::vector<float>& values, DType dtype = DType::f32);
  static Array from_ints(Shape shape, const std::vector<int64_t>& values, DType dtype = DType::i32);

  bool valid() const { return impl_ != nullptr; }
  DType dtype() const { return impl().dtype; }
  const Shape& shape() const { return impl().shape; }
  int rank() const { return shape().rank(); }
  int64_t size() const { return shape().numel(); }  // global element count
  int64_t dim(const std::string& name) const { return shape().size(name); }
  bool has_dim(const std::string& name) const { return shape().has(name); }
  std::vector<std::string> names() const { return shape().names(); }
  const Sharding& sharding() const { return impl().sharding; }
  const Device& device() const { return impl().device; }
  const Shape& local_shape() const { return impl().local_shape; }
  int64_t local_size() const { return local_shape().numel(); }
  // True when the local shard is the whole array (one device, or fully replicated).
  bool is_fully_local() const;

  size_t nbytes() const { return size_t(local_size()) * dtype_size(dtype()); }
  // The local shard's address in its device's memory (a host pointer only
  // when device() is the CPU): for kernels, not for host reads (to_host()).
  void* raw_data() { return impl().buffer->data(); }
  const void* raw_data() const { return impl().buffer->data(); }
  // Typed pointer to the local shard; T must match dtype (uint8_t or bool for bool arrays).
  template <typename T> T* data() { check_type<T>(); return static_cast<T*>(raw_data()); }
  template <typename T> const T* data() const { check_type<T>(); return static_cast<const T*>(raw_data()); }

  // Host reads. to_host(): the array itself when its buffer is host memory,
  // else a copy on the CPU (a device-to-host copy through the buffer's
  // Allocator, core/allocator.h): the one path by which data leaves a device.
  // to_floats / to_ints / item / to_string are copies to the host built on it:
  // the local shard converted to float / int64 (bool -> 0/1), the value of a
  // one-element array as double.
  Array to_host() const;
  std::vector<float> to_floats() const;
  std::vector<int64_t> to_ints() const;
  double item() const;
  // "float32[batch=2, embed=3] {0.5, 1, ...}" with at most max_elements values.
  std::string to_string(int64_t max_elements = 32) const;

  // New handle to the same buffer with other metadata (no copy). The sharding
  // must give the same local shape.
  Array with_sharding(Sharding sharding) const;
  // New handle to the same buffer and metadata, with no autodiff tag.
  Array alias() const;
  // Deep copy of the buffer.
  Array copy() const;
  // The local shard as a single-device array of shape local_shape() (same
  // buffer, no autodiff tag): what a sharded lowering computes on.
  Array local_view() const;
  // Wraps `local` (its shape must equal local_shape_of(global, sharding)) as
  // the local shard of a global array (same buffer).
  static Array from_local(const Array& local, Shape global, Sharding sharding);
  // New handle to the same buffer viewed with another global shape of equal
  // element count (row-major reinterpretation); fully local arrays only.
  Array view_as(Shape shape) const;

  // For ops/ and backends: the shared descriptor.
  ArrayImpl& impl() const;
  bool same_buffer(const Array& o) const { return impl().buffer == o.impl().buffer; }
  // True when this handle is the only one to its descriptor and no other
  // descriptor (alias, view) shares its buffer: an op may then write its
  // result over it (donation; the backward's gradient sums do).
  bool is_sole_owner() const { return impl_ && impl_.use_count() == 1 && impl_->buffer.use_count() == 1; }

 private:
  template <typename T> void check_type() const;
  void check_type_impl(DType want, bool is_byte) const;
  std::shared_ptr<ArrayImpl> impl_;
};

template <typename T>
void Array::check_type() const {
  if constexpr (std::is_same_v<T, uint8_t>) check_type_impl(DType::boolean, true);
  else if constexpr (std::is_same_v<T, bool>) check_type_impl(DType::boolean, true);
  else if constexpr (std::is_same_v<T, void>) {}
  else check_type_impl(dtype_of<T>::value, false);
}

template <typename T>
Array Array::from_vector(Shape shape, const std::vector<T>& values) {
  DType dt = dtype_of<T>::value;
  if (int64_t(values.size()) != shape.numel())
    throw_invalid("Array", "from_vector got " + std::to_string(values.size()) + " values for shape " +
                               shape.to_string() + " (" + std::to_string(shape.numel()) + " elements)");
  Array a(std::move(shape), dt, {}, {}, false);
  if constexpr (std::is_same_v<T, bool>) {
    auto* p = static_cast<uint8_t*>(a.raw_data());
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i] ? 1 : 0;
  } else {
    if (!values.empty()) std::memcpy(a.raw_data(), values.data(), values.size() * sizeof(T));
  }
  return a;
}

// Test helpers: exact equality (shape, dtype and values), largest absolute
// difference of the float values (shapes must match), and numpy-style allclose.
bool array_equal(const Array& a, const Array& b);
double max_abs_diff(const Array& a, const Array& b);
bool allclose(const Array& a, const Array& b, double rtol = 1e-5, double atol = 1e-6);

}  // namespace t5x
