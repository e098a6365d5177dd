// f32 <-> bf16 array conversions on the CPU's best SIMD target, split over
// the OpenMP threads for long arrays.
//
// f32 -> bf16 rounds to nearest, ties to even, and turns NaN into a quiet NaN
// with the same rule as bfloat16::from_float (core/dtype_bf16.h), so results
// are bit-identical to the scalar conversion (unlike VCVTNEPS2BF16, which
// flushes denormals). bf16 -> f32 is exact.
#pragma once
#include <cstdint>

#include "core/dtype_bf16.h"

namespace t5x::cpu {

void convert_f32_to_bf16(const float* x, bfloat16* y, int64_t n);
void convert_bf16_to_f32(const bfloat16* x, float* y, int64_t n);

}  // namespace t5x::cpu
