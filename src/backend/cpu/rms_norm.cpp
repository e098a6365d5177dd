#include "backend/cpu/rms_norm.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/parallel.h"

namespace t5x::cpu {
namespace {

void check(int64_t rows, int64_t embed, float eps) {
  if (rows < 0 || embed < 0 || (rows > 0 && embed == 0))
    throw std::invalid_argument("[rms_norm] bad shape rows=" + std::to_string(rows) +
                                " embed=" + std::to_string(embed));
  if (!(eps >= 0))
    throw std::invalid_argument("[rms_norm] eps must be >= 0, got " + std::to_string(eps));
}

float row_rstd(const float* x, int64_t embed, float eps) {
  float ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t e = 0; e < embed; ++e) ss += x[e] * x[e];
  return 1.0f / std::sqrt(ss / float(embed) + eps);
}

constexpr int64_t kRowChunk = 64;  // fixed: dscale partials must not depend on threads

}  // namespace

void rms_norm_forward(int64_t rows, int64_t embed, const float* x, const float* scale,
                      float eps, float* y, float* rstd) {
  check(rows, embed, eps);
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(embed, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const float* xr = x + r * embed;
                   float* yr = y + r * embed;
                   float s = row_rstd(xr, embed, eps);
                   if (rstd) rstd[r] = s;
#pragma omp simd
                   for (int64_t j = 0; j < embed; ++j) yr[j] = xr[j] * s * scale[j];
                 }
               });
}

void rms_norm_backward(int64_t rows, int64_t embed, const float* x, const float* scale,
                       const float* rstd, const float* dy, float eps, float* dx,
                       float* dscale) {
  check(rows, embed, eps);
  int64_t nc = num_chunks(rows, kRowChunk);
  std::vector<float> partial(size_t(nc * embed), 0.0f);
  parallel_for_chunks(rows, kRowChunk, [&](int64_t c, int64_t b, int64_t e) {
    float* ds = partial.data() + c * embed;
    for (int64_t r = b; r < e; ++r) {
      const float* xr = x + r * embed;
      const float* dyr = dy + r * embed;
      float* dxr = dx + r * embed;
      float s = rstd ? rstd[r] : row_rstd(xr, embed, eps);
      float dot = 0;  // sum_e dy * scale * xhat
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < embed; ++j) {
        float xhat = xr[j] * s;
        ds[j] += dyr[j] * xhat;
        dot += dyr[j] * scale[j] * xhat;
      }
      float mean_dot = dot / float(embed);
#pragma omp simd
      for (int64_t j = 0; j < embed; ++j) {
        float xhat = xr[j] * s;
        dxr[j] = s * (dyr[j] * scale[j] - xhat * mean_dot);
      }
    }
  });
  for (int64_t j = 0; j < embed; ++j) dscale[j] = 0;
  for (int64_t c = 0; c < nc; ++c) {
    const float* p = partial.data() + c * embed;
#pragma omp simd
    for (int64_t j = 0; j < embed; ++j) dscale[j] += p[j];
  }
}

}  // namespace t5x::cpu
