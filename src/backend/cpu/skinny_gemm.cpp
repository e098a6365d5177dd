#include "backend/cpu/skinny_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/bf16_vec.h"
#include "backend/cpu/parallel.h"

namespace t5x::cpu {

namespace {

#if defined(__AVX512F__) && defined(__AVX512BW__)
inline __m512 load16(const float* p, __mmask16 mk) { return _mm512_maskz_loadu_ps(mk, p); }
inline __m512 load16(const bfloat16* p, __mmask16 mk) {
  __m256i h = _mm256_maskz_loadu_epi16(mk, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline void store16(float* p, __m512 v, __mmask16 mk) { _mm512_mask_storeu_ps(p, mk, v); }
inline void store16(bfloat16* p, __m512 v, __mmask16 mk) { bf16x16_store_masked(p, v, mk); }

// MR rows of A x up to kCols columns of B. Each step over k reads one
// contiguous strip of a B row (hardware prefetch friendly); the accumulators
// stay in L1.
constexpr int64_t kCols = 512;
template <int MR, typename TA, typename TB, typename TC>
void block(int64_t k, int64_t cols, float alpha, const TA* a, int64_t lda, const TB* b, int64_t ldb, float beta,
           TC* c, int64_t ldc) {
  alignas(64) float acc[MR][kCols];
  const int64_t nv = (cols + 15) / 16;
  __mmask16 last = __mmask16((1u << (cols - 16 * (nv - 1))) - 1u);
  for (int i = 0; i < MR; ++i)
    for (int64_t v = 0; v < nv; ++v) _mm512_store_ps(acc[i] + 16 * v, _mm512_setzero_ps());
  for (int64_t p = 0; p < k; ++p) {
    const TB* row = b + p * ldb;
    __m512 av[MR];
    for (int i = 0; i < MR; ++i) av[i] = _mm512_set1_ps(float(a[i * lda + p]));
    for (int64_t v = 0; v < nv; ++v) {
      __m512 bv = load16(row + 16 * v, v + 1 == nv ? last : __mmask16(0xffff));
      for (int i = 0; i < MR; ++i)
        _mm512_store_ps(acc[i] + 16 * v, _mm512_fmadd_ps(av[i], bv, _mm512_load_ps(acc[i] + 16 * v)));
    }
  }
  const __m512 al = _mm512_set1_ps(alpha), be = _mm512_set1_ps(beta);
  for (int i = 0; i < MR; ++i)
    for (int64_t v = 0; v < nv; ++v) {
      __mmask16 mk = v + 1 == nv ? last : __mmask16(0xffff);
      __m512 r = _mm512_mul_ps(al, _mm512_load_ps(acc[i] + 16 * v));
      if (beta != 0.0f) r = _mm512_fmadd_ps(be, load16(c + i * ldc + 16 * v, mk), r);
      store16(c + i * ldc + 16 * v, r, mk);
    }
}
#else
// The same kernel in plain C++ for other targets (AVX2 builds: GCC vectorises
// the inner loops): the same order over k and, with FMA, the same single
// rounding per step as the AVX-512 kernel, so the same bits.
constexpr int64_t kCols = 512;
inline float fmadd(float x, float y, float z) {
#if defined(__FMA__)
  return std::fma(x, y, z);
#else
  return x * y + z;
#endif
}
template <int MR, typename TA, typename TB, typename TC>
void block(int64_t k, int64_t cols, float alpha, const TA* a, int64_t lda, const TB* b, int64_t ldb, float beta,
           TC* c, int64_t ldc) {
  alignas(64) float acc[MR][kCols] = {};
  for (int64_t p = 0; p < k; ++p) {
    const TB* row = b + p * ldb;
    for (int i = 0; i < MR; ++i) {
      const float av = float(a[i * lda + p]);
      float* ai = acc[i];
      for (int64_t j = 0; j < cols; ++j) ai[j] = fmadd(av, float(row[j]), ai[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float r = alpha * acc[i][j];
      if (beta != 0.0f) r = fmadd(beta, float(c[i * ldc + j]), r);
      c[i * ldc + j] = TC(r);
    }
}
#endif

}  // namespace

template <typename TA, typename TB, typename TC>
void skinny_gemm(int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda, const TB* b, int64_t ldb,
                 float beta, TC* c, int64_t ldc) {
  const int64_t nblocks = (n + kCols - 1) / kCols;
  // Threads only when each gets at least 4M B elements (the logits kernel of a
  // decode step): waking a team for a 1 MiB layer kernel costs more than it
  // saves, and stalls when the machine is shared.
  const int64_t grain = std::max<int64_t>(1, (int64_t(4) << 20) / std::max<int64_t>(1, k * kCols));
  parallel_for(nblocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t j = blk * kCols, cols = std::min(kCols, n - j);
      for (int64_t i = 0; i < m; i += 4) {
        const TA* ai = a + i * lda;
        TC* ci = c + i * ldc + j;
        switch (std::min<int64_t>(4, m - i)) {
          case 4: block<4>(k, cols, alpha, ai, lda, b + j, ldb, beta, ci, ldc); break;
          case 3: block<3>(k, cols, alpha, ai, lda, b + j, ldb, beta, ci, ldc); break;
          case 2: block<2>(k, cols, alpha, ai, lda, b + j, ldb, beta, ci, ldc); break;
          default: block<1>(k, cols, alpha, ai, lda, b + j, ldb, beta, ci, ldc); break;
        }
      }
    }
  });
}

template void skinny_gemm<float, float, float>(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                               int64_t, float, float*, int64_t);
template void skinny_gemm<bfloat16, bfloat16, float>(int64_t, int64_t, int64_t, float, const bfloat16*, int64_t,
                                                     const bfloat16*, int64_t, float, float*, int64_t);
template void skinny_gemm<bfloat16, bfloat16, bfloat16>(int64_t, int64_t, int64_t, float, const bfloat16*, int64_t,
                                                        const bfloat16*, int64_t, float, bfloat16*, int64_t);

}  // namespace t5x::cpu
