// Fused gated-GELU, the T5.1.1 MLP inner product
// (t5x/flax `mlp_activations=('gelu', 'linear')`; Shazeer 2020, "GLU Variants
// Improve Transformer", eq. 5 "GEGLU"):
//   h0 = x . wi_0, h1 = x . wi_1    (computed by the caller's GEMMs)
//   out = gelu_tanh(h0) * h1
// with flax's default tanh approximation (Hendrycks & Gimpel 2016, §2):
//   gelu_tanh(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))
// Shapes: h0, h1, out, dout, dh0, dh1 are [rows, mlp] row-major f32, passed as
// n = rows * mlp contiguous elements.
// Backward: dh0 = dout * h1 * gelu_tanh'(h0), dh1 = dout * gelu_tanh(h0).
// out may alias h0 or h1; dh0/dh1 may alias dout (each element is read before
// it is written). Errors: std::invalid_argument("[gated_gelu] ...") if n < 0.
#pragma once
#include <cstdint>

#include "core/dtype_bf16.h"

namespace t5x::cpu {

float gelu_tanh(float u);
float gelu_tanh_grad(float u);  // d gelu_tanh / du

void gated_gelu_forward(int64_t n, const float* h0, const float* h1, float* out);

void gated_gelu_backward(int64_t n, const float* h0, const float* h1, const float* dout,
                         float* dh0, float* dh1);

// bf16 storage: widened on load, the same f32 arithmetic, rounded once on
// store (bit-identical to casting to f32, the f32 kernel, casting back).
void gated_gelu_forward_bf16(int64_t n, const bfloat16* h0, const bfloat16* h1, bfloat16* out);
void gated_gelu_backward_bf16(int64_t n, const bfloat16* h0, const bfloat16* h1, const bfloat16* dout,
                              bfloat16* dh0, bfloat16* dh1);

}  // namespace t5x::cpu
