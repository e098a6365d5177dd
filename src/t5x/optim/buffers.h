// Internal helpers: float views of an Array's local buffer (no copy for f32,
// a converted copy for bf16 / f16 (the backend's cast kernels) that commit()
// writes back, rounding to the array's dtype as t5x's `.astype(param.dtype)`).
#pragma once
#include <cstdint>
#include <vector>

#include "backend/kernels.h"
#include "core/array.h"
#include "core/dtype.h"

namespace t5x::optim_detail {

// A float32 copy of a's local values: bf16 / f16 through the backend's cast
// kernel, other dtypes through Array::to_floats.
inline std::vector<float> float_copy(const Array& a) {
  if (a.dtype() != DType::bf16 && a.dtype() != DType::f16) return a.to_floats();
  std::vector<float> v(size_t(a.local_size()));
  kernels::cpu::cast(a.dtype(), DType::f32, a.raw_data(), v.data(), a.local_size());
  return v;
}

class FloatView {
 public:
  explicit FloatView(Array a) : a_(std::move(a)) {
    if (a_.dtype() == DType::f32) {
      ptr_ = a_.data<float>();
    } else {
      tmp_ = float_copy(a_);
      ptr_ = tmp_.data();
    }
  }
  float* data() { return ptr_; }
  const float* data() const { return ptr_; }
  int64_t size() const { return a_.local_size(); }
  // Writes the values back when the array is bf16 or f16, rounded once (as
  // bfloat16 / float16 from float: nearest, ties to even).
  void commit() {
    if (a_.dtype() == DType::bf16 || a_.dtype() == DType::f16)
      kernels::cpu::cast(DType::f32, a_.dtype(), tmp_.data(), a_.raw_data(), a_.local_size());
  }

 private:
  Array a_;
  float* ptr_ = nullptr;
  std::vector<float> tmp_;
};

// Read-only float values of the local shard (no copy for f32).
class ConstFloatView {
 public:
  explicit ConstFloatView(const Array& a) {
    if (a.dtype() == DType::f32) {
      ptr_ = a.data<float>();
    } else {
      tmp_ = float_copy(a);
      ptr_ = tmp_.data();
    }
  }
  const float* data() const { return ptr_; }

 private:
  const float* ptr_ = nullptr;
  std::vector<float> tmp_;
};

// An f32 array with `like`'s shape and sharding (a slot sharded like its
// param), or replicated on like's mesh when `replicated`.
inline Array zeros_like_sharded(const Shape& shape, const Array& like, bool replicated, DType dtype = DType::f32) {
  Sharding s;
  if (like.sharding().mesh) {
    s.mesh = like.sharding().mesh;
    s.spec = replicated ? PartitionSpec::replicated(size_t(shape.rank())) : like.sharding().spec;
  }
  return Array(shape, dtype, s);
}

}  // namespace t5x::optim_detail
