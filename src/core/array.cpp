#include "core/array.h"

#include <cmath>
#include <sstream>

namespace t5x {

std::string Device::to_string() const {
  return std::string(kind == DeviceKind::cpu ? "cpu:" : "cuda:") + std::to_string(index);
}

Shape local_shape_of(const Shape& global, const Sharding& sharding) {
  if (!sharding.mesh || sharding.spec.dims.empty()) return global;
  const auto& spec = sharding.spec.dims;
  if (int(spec.size()) != global.rank())
    throw_invalid("Array", "PartitionSpec has " + std::to_string(spec.size()) + " entries for shape " +
                               global.to_string());
  std::vector<Dim> dims = global.dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t parts = 1;
    for (const std::string& ax : spec[i]) {
      int a = sharding.mesh->axis_index(ax);
      if (a < 0) throw_invalid("Array", "PartitionSpec names mesh axis '" + ax + "' absent from the mesh");
      parts *= sharding.mesh->axis_sizes[size_t(a)];
    }
    if (dims[i].size % parts != 0)
      throw_invalid("Array", "dim '" + dims[i].name + "' of size " + std::to_string(dims[i].size) +
                                 " is not divisible into " + std::to_string(parts) + " shards");
    dims[i].size /= parts;
  }
  return Shape(std::move(dims));
}

Array::Array(Shape shape, DType dtype, Sharding sharding, Device device, bool zero) {
  impl_ = std::make_shared<ArrayImpl>();
  impl_->dtype = dtype;
  impl_->local_shape = local_shape_of(shape, sharding);
  impl_->shape = std::move(shape);
  impl_->sharding = std::move(sharding);
  impl_->device = device;
  impl_->buffer = allocate_buffer(size_t(impl_->local_shape.numel()) * dtype_size(dtype), zero, device);
}

ArrayImpl& Array::impl() const {
  if (!impl_) throw_invalid("Array", "use of a null Array");
  return *impl_;
}

bool Array::is_fully_local() const {
  const Sharding& s = sharding();
  if (s.is_single_device()) return true;
  for (const auto& d : s.spec.dims)
    if (!d.empty()) return false;
  return true;
}

void Array::check_type_impl(DType want, bool is_byte) const {
  if (dtype() != want)
    throw_invalid("Array", std::string("typed access as ") + (is_byte ? "uint8/bool" : dtype_name(want)) +
                               " to an array of dtype " + dtype_name(dtype()));
}

Array Array::full(Shape shape, double value, DType dtype) {
  Array a(std::move(shape), dtype, {}, {}, false);
  int64_t n = a.local_size();
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    T v;
    if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) v = T(float(value));
    else v = T(value);
    T* p = static_cast<T*>(a.raw_data());
    for (int64_t i = 0; i < n; ++i) p[i] = v;
  });
  return a;
}

Array Array::from_floats(Shape shape, const std::vector<float>& values, DType dtype) {
  if (int64_t(values.size()) != shape.numel())
    throw_invalid("Array", "from_floats got " + std::to_string(values.size()) + " values for shape " +
                               shape.to_string());
  Array a(std::move(shape), dtype, {}, {}, false);
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(a.raw_data());
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<T, uint8_t>) p[i] = values[i] != 0.f;
      else p[i] = T(values[i]);
    }
  });
  return a;
}

Array Array::from_ints(Shape shape, const std::vector<int64_t>& values, DType dtype) {
  if (int64_t(values.size()) != shape.numel())
    throw_invalid("Array", "from_ints got " + std::to_string(values.size()) + " values for shape " +
                               shape.to_string());
  Array a(std::move(shape), dtype, {}, {}, false);
  dispatch_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    T* p = static_cast<T*>(a.raw_data());
    for (size_t i = 0; i < values.size(); ++i) {
      if constexpr (std::is_same_v<T, uint8_t>) p[i] = values[i] != 0;
      else if constexpr (std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>) p[i] = T(float(values[i]));
      else p[i] = T(values[i]);
    }
  });
  return a;
}

Array Array::to_host() const {
  const Buffer& b = *impl().buffer;
  if (b.device().kind == DeviceKind::cpu) return *this;
  Array r = alias();
  r.impl_->device = Device{};
  r.impl_->buffer = allocate_buffer(b.bytes(), false);
  b.copy_to_host(r.impl_->buffer->data(), b.bytes());
  return r;
}

std::vector<float> Array::to_floats() const {
  std::vector<float> r(static_cast<size_t>(local_size()));
  const Array h = to_host();
  dispatch_dtype(dtype(), [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(h.raw_data());
    for (size_t i = 0; i < r.size(); ++i) r[i] = float(p[i]);
  });
  return r;
}

std::vector<int64_t> Array::to_ints() const {
  std::vector<int64_t> r(static_cast<size_t>(local_size()));
  const Array h = to_host();
  dispatch_dtype(dtype(), [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(h.raw_data());
    for (size_t i = 0; i < r.size(); ++i) {
      if constexpr (std::is_integral_v<T>) r[i] = int64_t(p[i]);  // exact (not through float: 2^24 + 1)
      else r[i] = int64_t(float(p[i]));
    }
  });
  return r;
}

double Array::item() const {
  if (local_size() != 1) throw_invalid("Array", "item() on array of shape " + shape().to_string());
  return is_integer(dtype()) ? double(to_ints()[0]) : double(to_floats()[0]);
}

std::string Array::to_string(int64_t max_elements) const {
  if (!valid()) return "Array(null)";
  std::ostringstream os;
  os << dtype_name(dtype()) << shape().to_string() << " {";
  int64_t n = std::min(local_size(), max_elements);
  bool ints = !is_floating(dtype());
  std::vector<float> f;
  std::vector<int64_t> iv;
  if (ints) iv = to_ints(); else f = to_floats();
  for (int64_t i = 0; i < n; ++i) {
    if (i) os << ", ";
    if (ints) os << iv[size_t(i)]; else os << f[size_t(i)];
  }
  if (n < local_size()) os << ", ...";
  os << "}";
  return os.str();
}

Array Array::with_sharding(Sharding sharding) const {
  Shape local = local_shape_of(shape(), sharding);
  if (local.numel() != local_size())
    throw_invalid("Array", "with_sharding: local shape " + local.to_string() + " differs from the buffer's " +
                               local_shape().to_string());
  Array r;
  r.impl_ = std::make_shared<ArrayImpl>(impl());
  r.impl_->sharding = std::move(sharding);
  r.impl_->local_shape = std::move(local);
  r.impl_->tag = {};
  return r;
}

Array Array::alias() const {
  Array r;
  r.impl_ = std::make_shared<ArrayImpl>(impl());
  r.impl_->tag = {};
  return r;
}

Array Array::local_view() const {
  Array r;
  r.impl_ = std::make_shared<ArrayImpl>(impl());
  r.impl_->tag = {};
  r.impl_->sharding = {};
  r.impl_->shape = local_shape();
  return r;
}

Array Array::from_local(const Array& local, Shape global, Sharding sharding) {
  Shape ls = local_shape_of(global, sharding);
  if (ls != local.shape())
    throw_invalid("Array", "from_local: local array " + local.shape().to_string() + " is not the shard " +
                               ls.to_string() + " of " + global.to_string());
  Array r;
  r.impl_ = std::make_shared<ArrayImpl>(local.impl());
  r.impl_->tag = {};
  r.impl_->shape = std::move(global);
  r.impl_->sharding = std::move(sharding);
  r.impl_->local_shape = std::move(ls);
  return r;
}

Array Array::view_as(Shape shape) const {
  if (shape.numel() != size())
    throw_invalid("Array", "view_as " + shape.to_string() + " has " + std::to_string(shape.numel()) +
                               " elements but the array " + this->shape().to_string() + " has " + std::to_string(size()));
  if (!is_fully_local()) throw_invalid("Array", "view_as on a sharded array");
  Array r;
  r.impl_ = std::make_shared<ArrayImpl>(impl());
  r.impl_->tag = {};
  if (sharding().mesh) r.impl_->sharding.spec = PartitionSpec::replicated(size_t(shape.rank()));
  r.impl_->local_shape = shape;
  r.impl_->shape = std::move(shape);
  return r;
}

Array Array::copy() const {
  Array r(shape(), dtype(), sharding(), device(), false);
  if (nbytes()) std::memcpy(r.raw_data(), raw_data(), nbytes());
  return r;
}

bool array_equal(const Array& a, const Array& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

double max_abs_diff(const Array& a, const Array& b) {
  if (a.shape() != b.shape())
    throw_invalid("max_abs_diff", "shapes differ: " + a.shape().to_string() + " vs " + b.shape().to_string());
  auto x = a.to_floats(), y = b.to_floats();
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double d = std::fabs(double(x[i]) - double(y[i]));
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

bool allclose(const Array& a, const Array& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  auto x = a.to_floats(), y = b.to_floats();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return false;
    if (std::fabs(double(x[i]) - double(y[i])) > atol + rtol * std::fabs(double(y[i]))) return false;
  }
  return true;
}

}  // namespace t5x
