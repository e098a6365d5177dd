#include "backend/cpu/convert.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include "backend/cpu/parallel.h"

namespace t5x::cpu {

namespace {

constexpr int64_t kGrain = 1 << 16;  // elements per thread at least

void f32_to_bf16_range(const float* x, bfloat16* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  const __m512i quiet = _mm512_set1_epi32(0x40);
  for (; i + 16 <= n; i += 16) {
    __m512i u = _mm512_loadu_si512(x + i);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, lsb)), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs_mask), inf);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtepi32_epi16(r));
  }
#endif
  for (; i < n; ++i) y[i] = bfloat16(x[i]);
}

void bf16_to_f32_range(const bfloat16* x, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  for (; i + 16 <= n; i += 16) {
    __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    _mm512_storeu_si512(y + i, _mm512_slli_epi32(h, 16));
  }
#endif
  for (; i < n; ++i) y[i] = float(x[i]);
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
inline __m512 load_bf16(const bfloat16* p) {
  __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}
inline void store_bf16(bfloat16* p, __m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
}
inline __m512 vop(int op, __m512 a, __m512 b) {
  return op == 0 ? _mm512_add_ps(a, b) : op == 1 ? _mm512_sub_ps(a, b) : _mm512_mul_ps(a, b);
}
#endif
inline float sop(int op, float a, float b) { return op == 0 ? a + b : op == 1 ? a - b : a * b; }

void binary_f32_range(int op, const float* x, const float* y, float* z, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(z + i, vop(op, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#endif
  for (; i < n; ++i) z[i] = sop(op, x[i], y[i]);
}

void binary_bf16_range(int op, const bfloat16* x, const bfloat16* y, bfloat16* z, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  for (; i + 16 <= n; i += 16) store_bf16(z + i, vop(op, load_bf16(x + i), load_bf16(y + i)));
#endif
  for (; i < n; ++i) z[i] = bfloat16(sop(op, float(x[i]), float(y[i])));
}

}  // namespace

void binary_f32(int op, const float* x, const float* y, float* z, int64_t n) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { binary_f32_range(op, x + b, y + b, z + b, e - b); });
}

void binary_bf16(int op, const bfloat16* x, const bfloat16* y, bfloat16* z, int64_t n) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { binary_bf16_range(op, x + b, y + b, z + b, e - b); });
}

void convert_f32_to_bf16(const float* x, bfloat16* y, int64_t n) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { f32_to_bf16_range(x + b, y + b, e - b); });
}

void convert_bf16_to_f32(const bfloat16* x, float* y, int64_t n) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { bf16_to_f32_range(x + b, y + b, e - b); });
}

}  // namespace t5x::cpu
