#include "backend/cpu/rms_norm.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/rms_norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

// The same f32 arithmetic for f32 and bf16 rows (bf16 widened on load,
// rounded once on store), so bf16 equals cast -> f32 kernel -> cast.
template <typename T>
HWY_INLINE float RowRstd(const T* x, int64_t embed, float eps) {
  const DF d;
  LaneSums<DF> ss(d);
  ForBlocks16(embed, [&](size_t k, int64_t i, size_t m) {
    const VF v = LoadPart(d, x + i, m);
    ss.add(k, hn::Mul(v, v));
  });
  return 1.0f / std::sqrt(ss.total(d) / float(embed) + eps);
}

template <typename T>
HWY_INLINE void ForwardRowsT(int64_t r0, int64_t r1, int64_t embed, const T* x, const float* scale, float eps,
                             T* y, float* rstd) {
  const DF d;
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * embed;
    T* yr = y + r * embed;
    const float s = RowRstd(xr, embed, eps);
    const VF sv = hn::Set(d, s);
    ForVectors(embed, [&](int64_t i, size_t m) {
      StorePart(d, hn::Mul(hn::Mul(LoadPart(d, xr + i, m), sv), LoadPart(d, scale + i, m)), yr + i, m);
    });
    if (rstd) rstd[r] = s;
  }
}

// Adds rows [r0, r1)'s dscale terms into ds[embed] and writes their dx.
template <typename T>
HWY_INLINE void BackwardRowsT(int64_t r0, int64_t r1, int64_t embed, const T* x, const float* scale,
                              const float* rstd, const T* dy, float eps, T* dx, float* ds) {
  const DF d;
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * embed;
    const T* dyr = dy + r * embed;
    T* dxr = dx + r * embed;
    const float s = rstd ? rstd[r] : RowRstd(xr, embed, eps);
    const VF sv = hn::Set(d, s);
    LaneSums<DF> dot(d);  // sum_e dy * scale * xhat
    ForBlocks16(embed, [&](size_t k, int64_t i, size_t m) {
      const VF xhat = hn::Mul(LoadPart(d, xr + i, m), sv);
      const VF g = LoadPart(d, dyr + i, m);
      if (m) StorePart(d, Fma(d, g, xhat, LoadPart(d, ds + i, m)), ds + i, m);
      dot.add(k, hn::Mul(hn::Mul(g, LoadPart(d, scale + i, m)), xhat));
    });
    const VF mean_dot = hn::Set(d, dot.total(d) / float(embed));
    ForVectors(embed, [&](int64_t i, size_t m) {
      const VF xhat = hn::Mul(LoadPart(d, xr + i, m), sv);
      const VF gs = hn::Mul(LoadPart(d, dyr + i, m), LoadPart(d, scale + i, m));
      StorePart(d, hn::Mul(sv, NegFma(d, xhat, mean_dot, gs)), dxr + i, m);
    });
  }
}

void ForwardRowsF32(int64_t r0, int64_t r1, int64_t embed, const float* x, const float* scale, float eps, float* y,
                    float* rstd) {
  ForwardRowsT(r0, r1, embed, x, scale, eps, y, rstd);
}
void ForwardRowsBf16(int64_t r0, int64_t r1, int64_t embed, const bfloat16* x, const float* scale, float eps,
                     bfloat16* y, float* rstd) {
  ForwardRowsT(r0, r1, embed, x, scale, eps, y, rstd);
}
void BackwardRowsF32(int64_t r0, int64_t r1, int64_t embed, const float* x, const float* scale, const float* rstd,
                     const float* dy, float eps, float* dx, float* ds) {
  BackwardRowsT(r0, r1, embed, x, scale, rstd, dy, eps, dx, ds);
}
void BackwardRowsBf16(int64_t r0, int64_t r1, int64_t embed, const bfloat16* x, const float* scale,
                      const float* rstd, const bfloat16* dy, float eps, bfloat16* dx, float* ds) {
  BackwardRowsT(r0, r1, embed, x, scale, rstd, dy, eps, dx, ds);
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {

void check(int64_t rows, int64_t embed, float eps) {
  if (rows < 0 || embed < 0 || (rows > 0 && embed == 0))
    throw std::invalid_argument("[rms_norm] bad shape rows=" + std::to_string(rows) +
                                " embed=" + std::to_string(embed));
  if (!(eps >= 0))
    throw std::invalid_argument("[rms_norm] eps must be >= 0, got " + std::to_string(eps));
}

constexpr int64_t kRowChunk = 64;  // fixed: dscale partials must not depend on threads

int64_t row_grain(int64_t embed) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(embed, 1)); }

void reduce_dscale(const std::vector<float>& partial, int64_t nc, int64_t embed, float* dscale) {
  for (int64_t j = 0; j < embed; ++j) dscale[j] = 0;
  for (int64_t c = 0; c < nc; ++c) {
    const float* p = partial.data() + c * embed;
    for (int64_t j = 0; j < embed; ++j) dscale[j] += p[j];
  }
}

template <typename T, typename Fn>
void backward(int64_t rows, int64_t embed, const T* x, const float* scale, const float* rstd, const T* dy, float eps,
              T* dx, float* dscale, Fn fn) {
  check(rows, embed, eps);
  simd_init();
  const int64_t nc = num_chunks(rows, kRowChunk);
  std::vector<float> partial(size_t(nc * embed), 0.0f);
  parallel_for_chunks(rows, kRowChunk, [&](int64_t c, int64_t b, int64_t e) {
    fn(b, e, embed, x, scale, rstd, dy, eps, dx, partial.data() + c * embed);
  });
  reduce_dscale(partial, nc, embed, dscale);
}

}  // namespace

HWY_EXPORT(ForwardRowsF32);
HWY_EXPORT(ForwardRowsBf16);
HWY_EXPORT(BackwardRowsF32);
HWY_EXPORT(BackwardRowsBf16);

void rms_norm_forward(int64_t rows, int64_t embed, const float* x, const float* scale, float eps, float* y,
                      float* rstd) {
  check(rows, embed, eps);
  simd_init();
  parallel_for(rows, row_grain(embed), [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(ForwardRowsF32)(b, e, embed, x, scale, eps, y, rstd);
  });
}

void rms_norm_forward_bf16(int64_t rows, int64_t embed, const bfloat16* x, const float* scale, float eps,
                           bfloat16* y, float* rstd) {
  check(rows, embed, eps);
  simd_init();
  parallel_for(rows, row_grain(embed), [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(ForwardRowsBf16)(b, e, embed, x, scale, eps, y, rstd);
  });
}

void rms_norm_backward(int64_t rows, int64_t embed, const float* x, const float* scale, const float* rstd,
                       const float* dy, float eps, float* dx, float* dscale) {
  backward(rows, embed, x, scale, rstd, dy, eps, dx, dscale, HWY_DYNAMIC_DISPATCH(BackwardRowsF32));
}

void rms_norm_backward_bf16(int64_t rows, int64_t embed, const bfloat16* x, const float* scale, const float* rstd,
                            const bfloat16* dy, float eps, bfloat16* dx, float* dscale) {
  backward(rows, embed, x, scale, rstd, dy, eps, dx, dscale, HWY_DYNAMIC_DISPATCH(BackwardRowsBf16));
}

}  // namespace t5x::cpu
#endif
