// Fused RMSNorm (T5 "LayerNorm": no mean subtraction, no bias).
//
// Shapes: x, y, dy, dx [rows, embed] row-major f32; scale, dscale [embed];
// rstd [rows] (optional, may be null).
// Forward (t5x/flax T5.1.1 LayerNorm, computed in f32; Zhang & Sennrich 2019,
// "Root Mean Square Layer Normalization", eq. 4):
//   rstd[r] = 1 / sqrt(mean_e(x[r, e]^2) + eps)
//   y[r, e] = x[r, e] * rstd[r] * scale[e]
// Backward, with xhat = x * rstd:
//   dscale[e] = sum_r dy[r, e] * xhat[r, e]
//   dx[r, e]  = rstd[r] * (dy[r, e] * scale[e]
//                          - xhat[r, e] * mean_e(dy * scale * xhat)[r])
// dscale is summed over fixed row chunks, then the chunks in order, so it is
// bitwise identical for any thread count. y may alias x; dx may alias dy.
// Errors: std::invalid_argument("[rms_norm] ...") for negative sizes,
// embed == 0 with rows > 0, or eps < 0.
#pragma once
#include <cstdint>

#include "core/dtype_bf16.h"

namespace t5x::cpu {

inline constexpr float kRmsNormDefaultEps = 1e-6f;

void rms_norm_forward(int64_t rows, int64_t embed, const float* x, const float* scale,
                      float eps, float* y, float* rstd /* nullable */);

// rstd may be null (recomputed from x). dscale is overwritten, not accumulated.
void rms_norm_backward(int64_t rows, int64_t embed, const float* x, const float* scale,
                       const float* rstd /* nullable */, const float* dy, float eps,
                       float* dx, float* dscale);

// bf16 x / y / dy / dx (scale, rstd, dscale f32): rows widened to f32, the
// same f32 arithmetic, rounded once on store (bit-identical to casting to
// f32, the f32 kernel, casting back).
void rms_norm_forward_bf16(int64_t rows, int64_t embed, const bfloat16* x, const float* scale, float eps,
                           bfloat16* y, float* rstd);
void rms_norm_backward_bf16(int64_t rows, int64_t embed, const bfloat16* x, const float* scale, const float* rstd,
                            const bfloat16* dy, float eps, bfloat16* dx, float* dscale);

}  // namespace t5x::cpu
