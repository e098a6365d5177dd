// Row primitives of softmax, cross-entropy and the attention tiles, on the
// CPU's best SIMD target (backend/cpu/simd.h). exp is the one formula of
// simd-inl.h (relative error < 3e-7; exp(-inf) = 0, x > 88.7 gives +inf,
// NaN stays NaN); sums run in the fixed 16-lane order, so every result is
// bitwise the same on every target.
#pragma once
#include <cstdint>

namespace t5x::cpu {

// exp / tanh of one value: bitwise the vector lanes' result.
float fast_exp(float x);
float fast_tanh(float x);

// y[i] = exp(x[i] - shift) for i < n; returns sum_i y[i]. y may alias x.
float exp_shift_sum(const float* x, float* y, int64_t n, float shift);

// sum_i exp(x[i] - shift), nothing stored.
float exp_sum(const float* x, int64_t n, float shift);

// y[i] = a * exp(x[i] - shift) + b (fused multiply-add). y may alias x.
void exp_affine(const float* x, float* y, int64_t n, float shift, float a, float b);

// Largest element of x[0, n) (n >= 1); -inf for an all -inf row.
float max_of(const float* x, int64_t n);

// sum_i x[i] in the fixed 16-lane order.
float sum_of(const float* x, int64_t n);

}  // namespace t5x::cpu
