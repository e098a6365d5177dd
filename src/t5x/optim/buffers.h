// Internal helpers: float views of an Array's local buffer (no copy for f32,
// a converted copy for bf16 / f16 that commit() writes back, rounding to the
// array's dtype as t5x's `.astype(param.dtype)`).
#pragma once
#include <cstdint>
#include <vector>

#include "core/array.h"
#include "core/dtype.h"

namespace t5x::optim_detail {

class FloatView {
 public:
  explicit FloatView(Array a) : a_(std::move(a)) {
    if (a_.dtype() == DType::f32) {
      ptr_ = a_.data<float>();
    } else {
      tmp_ = a_.to_floats();
      ptr_ = tmp_.data();
    }
  }
  float* data() { return ptr_; }
  const float* data() const { return ptr_; }
  int64_t size() const { return a_.local_size(); }
  // Writes the values back when the array is not f32.
  void commit() {
    if (a_.dtype() == DType::f32) return;
    dispatch_dtype(a_.dtype(), [&](auto t) {
      using T = decltype(t);
      if constexpr (std::is_floating_point_v<T> || std::is_class_v<T>) {
        T* p = static_cast<T*>(a_.raw_data());
        for (size_t i = 0; i < tmp_.size(); ++i) p[i] = T(tmp_[i]);
      }
    });
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
      tmp_ = a.to_floats();
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
