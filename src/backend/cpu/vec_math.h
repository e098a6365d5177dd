// Vectorised exp for the fused kernels. GCC 12 does not vectorise expf (nor
// our scalar polynomial: its clamps defeat if-conversion), and exp dominates
// softmax, cross-entropy and GELU, so the AVX-512 path is written with
// intrinsics; the scalar fast_exp computes the same formula elsewhere.
//
// exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 split in
// two, Cody & Waite 1980), exp(r) by its degree-6 Taylor polynomial on
// |r| <= ln2/2: relative error < 3e-7 (a few ulp). Inputs below -87.3 give 0
// (so exp(-inf) = 0); above 88.7 give +inf.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace t5x::cpu {

namespace vec_detail {
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.428606765330187e-06f;
inline constexpr float kLo = -87.3f, kHi = 88.7f;
}  // namespace vec_detail

inline float fast_exp(float x) {
  using namespace vec_detail;
  if (x < kLo) return 0.f;
  if (x > kHi) return INFINITY;
  if (x != x) return x;
  float n = std::nearbyint(x * kLog2e);
  float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  return p * std::bit_cast<float>(uint32_t(int32_t(n) + 127) << 23);
}

#if defined(__AVX512F__)
inline __m512 exp512(__m512 x) {
  using namespace vec_detail;
  __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kLo), _CMP_LT_OQ);
  __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(kLo)), _mm512_set1_ps(kHi));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(kLog2e)),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(1.f / 720.f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 120.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 24.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f / 6.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.f));
  __m512 y = _mm512_scalef_ps(p, n);  // p * 2^n
  y = _mm512_mask_mov_ps(y, under, _mm512_setzero_ps());
  __mmask16 over = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kHi), _CMP_GT_OQ);
  y = _mm512_mask_mov_ps(y, over, _mm512_set1_ps(INFINITY));
  // NaN stays NaN (min/max above would have replaced it).
  __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(y, nan, x);
}
#endif

// y[i] = exp(x[i] - shift) for i < n; returns sum_i y[i]. y may alias x.
inline float exp_shift_sum(const float* x, float* y, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0.f;
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps(), s = _mm512_set1_ps(shift);
  for (; i + 16 <= n; i += 16) {
    __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    _mm512_storeu_ps(y + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
    e = _mm512_maskz_mov_ps(m, e);
    _mm512_mask_storeu_ps(y + i, m, e);
    acc = _mm512_add_ps(acc, e);
    i = n;
  }
  sum = _mm512_reduce_add_ps(acc);
#endif
  for (; i < n; ++i) sum += (y[i] = fast_exp(x[i] - shift));
  return sum;
}

// sum_i exp(x[i] - shift), nothing stored.
inline float exp_sum(const float* x, int64_t n, float shift) {
  int64_t i = 0;
  float sum = 0.f;
#if defined(__AVX512F__)
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), s = _mm512_set1_ps(shift);
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_add_ps(acc0, exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)));
    acc1 = _mm512_add_ps(acc1, exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), s)));
  }
  for (; i + 16 <= n; i += 16)
    acc0 = _mm512_add_ps(acc0, exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)));
  sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#endif
  for (; i < n; ++i) sum += fast_exp(x[i] - shift);
  return sum;
}

// y[i] = a * exp(x[i] - shift) + b. y may alias x.
inline void exp_affine(const float* x, float* y, int64_t n, float shift, float a, float b) {
  int64_t i = 0;
#if defined(__AVX512F__)
  __m512 s = _mm512_set1_ps(shift), av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b);
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, exp512(_mm512_sub_ps(_mm512_loadu_ps(x + i), s)), bv));
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s));
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(av, e, bv));
    i = n;
  }
#endif
  for (; i < n; ++i) y[i] = a * fast_exp(x[i] - shift) + b;
}

// Largest element of x[0, n) (n >= 1).
inline float max_of(const float* x, int64_t n) {
  int64_t i = 0;
  float m = -INFINITY;
#if defined(__AVX512F__)
  __m512 acc = _mm512_set1_ps(-INFINITY);
  for (; i + 16 <= n; i += 16) acc = _mm512_max_ps(acc, _mm512_loadu_ps(x + i));
  m = _mm512_reduce_max_ps(acc);
#endif
  for (; i < n; ++i) m = std::fmax(m, x[i]);
  return m;
}

// tanh(z) = sign(z) (1 - e) / (1 + e), e = exp(-2|z|).
inline float fast_tanh(float z) {
  float e = fast_exp(-2.f * std::fabs(z));
  return std::copysign((1.f - e) / (1.f + e), z);
}

#if defined(__AVX512F__)
inline __m512 tanh512(__m512 z) {
  __m512 az = _mm512_abs_ps(z);
  __m512 e = exp512(_mm512_mul_ps(_mm512_set1_ps(-2.f), az));
  __m512 one = _mm512_set1_ps(1.f);
  __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  // copy the sign of z
  __m512i sign = _mm512_and_si512(_mm512_castps_si512(z), _mm512_set1_epi32(int32_t(0x80000000u)));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
}
#endif

}  // namespace t5x::cpu
