#include "backend/cpu/rms_norm.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/bf16_vec.h"
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

namespace {

// One row, f32: the same code serves f32 storage and (through row buffers)
// bf16 storage, so bf16 results equal cast -> f32 kernel -> cast.
inline float forward_row(const float* xr, const float* scale, int64_t embed, float eps, float* yr) {
  float s = row_rstd(xr, embed, eps);
#pragma omp simd
  for (int64_t j = 0; j < embed; ++j) yr[j] = xr[j] * s * scale[j];
  return s;
}

inline void backward_row(const float* xr, const float* dyr, const float* scale, float s, int64_t embed, float* ds,
                         float* dxr) {
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

inline void widen(const bfloat16* x, int64_t n, float* out) {
  int64_t j = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(out + j, bf16x16_load(x + j));
#endif
  for (; j < n; ++j) out[j] = float(x[j]);
}
inline void narrow(const float* x, int64_t n, bfloat16* out) {
  int64_t j = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  for (; j + 16 <= n; j += 16) bf16x16_store(out + j, _mm512_loadu_ps(x + j));
#endif
  for (; j < n; ++j) out[j] = bfloat16(x[j]);
}

void reduce_dscale(const std::vector<float>& partial, int64_t nc, int64_t embed, float* dscale) {
  for (int64_t j = 0; j < embed; ++j) dscale[j] = 0;
  for (int64_t c = 0; c < nc; ++c) {
    const float* p = partial.data() + c * embed;
#pragma omp simd
    for (int64_t j = 0; j < embed; ++j) dscale[j] += p[j];
  }
}

}  // namespace

void rms_norm_forward(int64_t rows, int64_t embed, const float* x, const float* scale,
                      float eps, float* y, float* rstd) {
  check(rows, embed, eps);
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(embed, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   float s = forward_row(x + r * embed, scale, embed, eps, y + r * embed);
                   if (rstd) rstd[r] = s;
                 }
               });
}

void rms_norm_forward_bf16(int64_t rows, int64_t embed, const bfloat16* x, const float* scale, float eps,
                           bfloat16* y, float* rstd) {
  check(rows, embed, eps);
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(embed, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<float> xr(static_cast<size_t>(embed)), yr(static_cast<size_t>(embed));
                 for (int64_t r = b; r < e; ++r) {
                   widen(x + r * embed, embed, xr.data());
                   float s = forward_row(xr.data(), scale, embed, eps, yr.data());
                   narrow(yr.data(), embed, y + r * embed);
                   if (rstd) rstd[r] = s;
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
      float s = rstd ? rstd[r] : row_rstd(xr, embed, eps);
      backward_row(xr, dy + r * embed, scale, s, embed, ds, dx + r * embed);
    }
  });
  reduce_dscale(partial, nc, embed, dscale);
}

void rms_norm_backward_bf16(int64_t rows, int64_t embed, const bfloat16* x, const float* scale, const float* rstd,
                            const bfloat16* dy, float eps, bfloat16* dx, float* dscale) {
  check(rows, embed, eps);
  int64_t nc = num_chunks(rows, kRowChunk);
  std::vector<float> partial(size_t(nc * embed), 0.0f);
  parallel_for_chunks(rows, kRowChunk, [&](int64_t c, int64_t b, int64_t e) {
    float* ds = partial.data() + c * embed;
    std::vector<float> xr(static_cast<size_t>(embed)), dyr(static_cast<size_t>(embed)), dxr(static_cast<size_t>(embed));
    for (int64_t r = b; r < e; ++r) {
      widen(x + r * embed, embed, xr.data());
      widen(dy + r * embed, embed, dyr.data());
      float s = rstd ? rstd[r] : row_rstd(xr.data(), embed, eps);
      backward_row(xr.data(), dyr.data(), scale, s, embed, ds, dxr.data());
      narrow(dxr.data(), embed, dx + r * embed);
    }
  });
  reduce_dscale(partial, nc, embed, dscale);
}

}  // namespace t5x::cpu
