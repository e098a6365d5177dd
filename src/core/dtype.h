// Element types of an Array: f32, bf16, f16, i32, i64, bool.
//
// Dtype rules used by every op (see docs/core.md):
//  - binary ops need equal dtypes (no implicit promotion; cast explicitly);
//  - bf16 / f16 are storage types: kernels load them to f32, compute in f32
//    and round the result back (round to nearest even), as XLA:CPU does;
//  - transcendental ops (exp, log, tanh, ...) accept floating dtypes only;
//  - comparisons produce bool; bool arrays take part in where / cast / logic.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype_bf16.h"

namespace t5x {

enum class DType : uint8_t { f32, bf16, f16, i32, i64, boolean };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float32", "bfloat16", "float16", "int32", "int64", "bool"
bool is_floating(DType t);
bool is_integer(DType t);  // i32, i64 (not bool)

// Maps a C++ storage type to its DType (bool is stored as one byte, uint8_t 0/1).
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<float16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };

// Calls f(T{}) with T the storage type of `t` (bool -> uint8_t).
template <typename F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bfloat16{});
    case DType::f16: return f(float16{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::boolean: break;
  }
  return f(uint8_t{});
}

}  // namespace t5x
