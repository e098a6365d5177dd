// Random-number transforms of kernels::cpu (backend/kernels.h): from the
// counter-based bits of core/random.h to jax.random's distributions.
#include <algorithm>
#include <cmath>

#include "backend/cpu/loops.h"
#include "backend/kernels.h"
#include "core/random.h"

namespace t5x::kernels::cpu {
using t5x::cpu::kParallelThreshold;

void uniform_from_bits(const uint32_t* bits, int64_t n, float lo, float hi, float* out) {
  const float range = hi - lo;
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    float f = bits_to_unit_float(bits[i]);
    // Fused multiply-add, as XLA:CPU emits it: bit-exact with jax in every build type.
    float v = std::fma(f, range, lo);
    out[i] = v < lo ? lo : v;
  }
}

void normal_from_uniform(float* u, int64_t n) {
  const float sqrt2 = float(std::sqrt(2.0));
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) u[i] = sqrt2 * erf_inv_f32(u[i]);
}

void truncated_normal_from_uniform(float* u, int64_t n, float clip_lo, float clip_hi) {
  const float sqrt2 = float(std::sqrt(2.0));
#pragma omp parallel for schedule(static) if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) u[i] = std::clamp(sqrt2 * erf_inv_f32(u[i]), clip_lo, clip_hi);
}

void gumbel_from_uniform(float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) u[i] = -std::log(-std::log(u[i]));
}

}  // namespace t5x::kernels::cpu
