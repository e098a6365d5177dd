// AVX-512 loads / stores of 16 bf16 values as f32 lanes. The store rounds to
// nearest even and quiets NaNs exactly as bfloat16::from_float (integer
// arithmetic, not VCVTNEPS2BF16, which flushes denormals).
#pragma once
#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>

#include "core/dtype_bf16.h"

namespace t5x::cpu {

inline __m512 bf16x16_load(const bfloat16* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

inline __m256i bf16x16_round(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

inline void bf16x16_store(bfloat16* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), bf16x16_round(v));
}

inline void bf16x16_store_masked(bfloat16* p, __m512 v, __mmask16 mk) {
  _mm256_mask_storeu_epi16(p, mk, bf16x16_round(v));
}

}  // namespace t5x::cpu
#endif
