#include "core/dtype.h"

namespace t5x {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::boolean: return "bool";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }
bool is_integer(DType t) { return t == DType::i32 || t == DType::i64; }

}  // namespace t5x
