// Transcendental elementwise functions over contiguous f32 arrays, on the
// CPU's best SIMD target (the formulas of simd-inl.h; bitwise the same on
// every target), split over the OpenMP threads for long arrays.
//   exp, tanh, sigmoid = 1 / (1 + exp(-x)),
//   gelu (tanh form, flax's default) and its derivative gelu_grad.
// y may alias x. n >= 0.
#pragma once
#include <cstdint>

namespace t5x::cpu {

enum class UnaryKernel { Exp, Tanh, Sigmoid, Gelu, GeluGrad };

void unary_f32(UnaryKernel op, const float* x, float* y, int64_t n);

}  // namespace t5x::cpu
