// Same-shape elementwise add / sub / mul over contiguous arrays (residual
// adds, gradient accumulation) on the CPU's best SIMD target. bf16 operands
// are widened, combined in f32 and rounded once, as the scalar ops do.
// z may alias x or y. n >= 0.
#pragma once
#include <cstdint>

#include "core/dtype_bf16.h"

namespace t5x::cpu {

enum class BinaryKernel { Add, Sub, Mul };

void binary_f32(BinaryKernel op, const float* x, const float* y, float* z, int64_t n);
void binary_bf16(BinaryKernel op, const bfloat16* x, const bfloat16* y, bfloat16* z, int64_t n);

}  // namespace t5x::cpu
