#include "backend/cpu/small_gemm.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace t5x::cpu {
namespace {

#if defined(__AVX512F__)
// MR rows x up to 64 columns starting at column c0.
template <int MR>
inline void block(int64_t n_cols, int64_t k, const float* a, int64_t a_row, int64_t a_col,
                  const float* b, int64_t ldb, float* c, int64_t ldc) {
  __m512 acc[MR][4];
  __mmask16 mask[4];
  int nv = int((n_cols + 15) / 16);
  for (int v = 0; v < 4; ++v) {
    int64_t rem = n_cols - 16 * v;
    mask[v] = rem >= 16 ? __mmask16(0xffff) : rem <= 0 ? __mmask16(0) : __mmask16((1u << rem) - 1);
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_setzero_ps();
  if (nv == 4 && mask[3] == 0xffff) {
    for (int64_t p = 0; p < k; ++p) {
      const float* bp = b + p * ldb;
      __m512 b0 = _mm512_loadu_ps(bp), b1 = _mm512_loadu_ps(bp + 16),
             b2 = _mm512_loadu_ps(bp + 32), b3 = _mm512_loadu_ps(bp + 48);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        __m512 av = _mm512_set1_ps(a[r * a_row + p * a_col]);
        acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
        acc[r][2] = _mm512_fmadd_ps(av, b2, acc[r][2]);
        acc[r][3] = _mm512_fmadd_ps(av, b3, acc[r][3]);
      }
    }
  } else {
    for (int64_t p = 0; p < k; ++p) {
      const float* bp = b + p * ldb;
      __m512 bv[4];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], bp + 16 * v);
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        __m512 av = _mm512_set1_ps(a[r * a_row + p * a_col]);
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      if (!mask[v]) continue;
      float* cp = c + r * ldc + 16 * v;
      _mm512_mask_storeu_ps(cp, mask[v],
                            _mm512_add_ps(_mm512_maskz_loadu_ps(mask[v], cp), acc[r][v]));
    }
}
#endif

}  // namespace

void small_gemm_acc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row,
                    int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc) {
#if defined(__AVX512F__)
  for (int64_t c0 = 0; c0 < n; c0 += 64) {
    int64_t nc = n - c0 < 64 ? n - c0 : 64;
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
      block<4>(nc, k, a + i * a_row, a_row, a_col, b + c0, ldb, c + i * ldc + c0, ldc);
    const float* ai = a + i * a_row;
    float* ci = c + i * ldc + c0;
    switch (m - i) {
      case 3: block<3>(nc, k, ai, a_row, a_col, b + c0, ldb, ci, ldc); break;
      case 2: block<2>(nc, k, ai, a_row, a_col, b + c0, ldb, ci, ldc); break;
      case 1: block<1>(nc, k, ai, a_row, a_col, b + c0, ldb, ci, ldc); break;
      default: break;
    }
  }
#else
  for (int64_t i = 0; i < m; ++i)
    for (int64_t p = 0; p < k; ++p) {
      float av = a[i * a_row + p * a_col];
      const float* bp = b + p * ldb;
      float* ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j];
    }
#endif
}

}  // namespace t5x::cpu
