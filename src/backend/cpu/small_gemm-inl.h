// Per-target body of the register-tiled small GEMM (small_gemm.h is the API),
// shared by small_gemm.cpp and the attention tiles, which call it inline on
// the target they run on. Toggled guard: included once per target.
//
// Each C element is one sum over p in order: acc = fma(a[i, p], b[p, c], acc)
// from acc = 0, then C = acc or C += acc. That order depends neither on the
// vector width nor on the tile shape, so every target gives the same bits.
#if defined(T5X_BACKEND_CPU_SMALL_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef T5X_BACKEND_CPU_SMALL_GEMM_INL_H_
#undef T5X_BACKEND_CPU_SMALL_GEMM_INL_H_
#else
#define T5X_BACKEND_CPU_SMALL_GEMM_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

// A register tile is kSmallGemmRows rows x kSmallGemmVecs vectors of C: 4 x 4
// where there are 32 vector registers (AVX-512: 4 x 64 columns in 16 zmm
// accumulators; NEON), 6 x 2 where there are 16 (AVX2: 6 x 16, SSE4: 6 x 8;
// 12 accumulators, as the packed GEMM's tile: 8 chains of dependent FMAs did
// not cover two FMA pipes' latency).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
inline constexpr int kSmallGemmRows = 6;
inline constexpr size_t kSmallGemmVecs = 2;
inline constexpr size_t kSmallGemmMaxVecs = 8;  // one row's tile (as with 4 x 2)
#else
inline constexpr int kSmallGemmRows = 4;
inline constexpr size_t kSmallGemmVecs = 4;
inline constexpr size_t kSmallGemmMaxVecs = 16;
#endif

// Masked f32 loads and stores do not touch masked-off lanes on AVX-512 and on
// AVX2 (vmaskmovps suppresses their faults); elsewhere tails go through
// LoadPart / StorePart's padded copies. The same values either way.
#if !HWY_MEM_OPS_MIGHT_FAULT || HWY_TARGET == HWY_AVX2
#define T5X_SMALL_GEMM_MASKED 1
#else
#define T5X_SMALL_GEMM_MASKED 0
#endif

// x[0, valid) and zeros (valid <= lanes).
HWY_INLINE VF LoadFirst(const float* p, size_t valid) {
  const DF d;
#if !T5X_SMALL_GEMM_MASKED
  return valid ? LoadPart(d, p, valid) : hn::Zero(d);
#else
  return hn::MaskedLoad(hn::FirstN(d, valid), d, p);
#endif
}

// B's values widened on load: f32, or bf16 (exact, e.g. a bf16 decode cache).
HWY_INLINE VF LoadFirst(const bfloat16* p, size_t valid) {
  const DF d;
  return valid ? LoadPart(d, p, valid) : hn::Zero(d);
}

// Rows under kSmallGemmRows (a decode step's one query) take tiles as many
// vectors wide as the register budget allows: each accumulator is a chain of
// dependent FMAs, and one row x kSmallGemmVecs vectors kept too few of them
// in flight to cover the FMA latency.
template <int MR>
inline constexpr size_t kSmallGemmVecsFor = std::min(kSmallGemmMaxVecs, kSmallGemmRows * kSmallGemmVecs / MR);

// MR rows x up to NV vectors (ncols columns) of C.
template <int MR, bool kAccumulate, typename TB = float, size_t NV = kSmallGemmVecsFor<MR>>
HWY_INLINE void SmallGemmTile(int64_t ncols, int64_t k, const float* a, int64_t a_row, int64_t a_col,
                              const TB* b, int64_t ldb, float* c, int64_t ldc) {
  const DF d;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  VF acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (size_t v = 0; v < NV; ++v) acc[r][v] = hn::Zero(d);
  size_t valid[NV];
  for (size_t v = 0; v < NV; ++v) valid[v] = size_t(std::clamp<int64_t>(ncols - int64_t(v) * N, 0, N));
  const bool full = ncols == int64_t(NV) * N;
  if (full) {
    for (int64_t p = 0; p < k; ++p) {
      const TB* bp = b + p * ldb;
      VF bv[NV];
      for (size_t v = 0; v < NV; ++v) bv[v] = LoadF(d, bp + v * N);
      for (int r = 0; r < MR; ++r) {
        const VF av = hn::Set(d, a[r * a_row + p * a_col]);
        for (size_t v = 0; v < NV; ++v) acc[r][v] = Fma(d, av, bv[v], acc[r][v]);
      }
    }
  } else {
    for (int64_t p = 0; p < k; ++p) {
      const TB* bp = b + p * ldb;
      VF bv[NV];
      for (size_t v = 0; v < NV; ++v) bv[v] = LoadFirst(bp + v * N, valid[v]);
      for (int r = 0; r < MR; ++r) {
        const VF av = hn::Set(d, a[r * a_row + p * a_col]);
        for (size_t v = 0; v < NV; ++v) acc[r][v] = Fma(d, av, bv[v], acc[r][v]);
      }
    }
  }
  for (int r = 0; r < MR; ++r)
    for (size_t v = 0; v < NV; ++v) {
      if (!valid[v]) continue;
      float* cp = c + r * ldc + int64_t(v) * N;
      VF x = acc[r][v];
      if (full) {  // plain loads and stores: masked stores (vmaskmovps) are slow on AMD CPUs
        if (kAccumulate) x = hn::Add(hn::LoadU(d, cp), x);
        hn::StoreU(x, d, cp);
        continue;
      }
      if (kAccumulate) x = hn::Add(LoadFirst(cp, valid[v]), x);
#if !T5X_SMALL_GEMM_MASKED
      StorePart(d, x, cp, valid[v]);
#else
      hn::BlendedStore(x, hn::FirstN(d, valid[v]), d, cp);
#endif
    }
}

// MR rows x columns [c0, n): tiles of NV vectors while they are full, then
// the rest in tiles of NV / 2, NV / 4, ... vectors (a tile's vectors past n
// would be multiply-adds of zeros).
template <int MR, size_t NV, bool kAccumulate, typename TB>
HWY_INLINE void SmallGemmRowTiles(int64_t c0, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col,
                                  const TB* b, int64_t ldb, float* c, int64_t ldc) {
  constexpr int64_t N = int64_t(hn::MaxLanes(DF())), W = int64_t(NV) * N;
  if constexpr (NV > 1) {
    for (; c0 + W <= n; c0 += W)
      SmallGemmTile<MR, kAccumulate, TB, NV>(W, k, a, a_row, a_col, b + c0, ldb, c + c0, ldc);
    if (c0 < n) SmallGemmRowTiles<MR, NV / 2, kAccumulate, TB>(c0, n, k, a, a_row, a_col, b, ldb, c, ldc);
  } else {
    for (; c0 < n; c0 += N)
      SmallGemmTile<MR, kAccumulate, TB, 1>(std::min(N, n - c0), k, a, a_row, a_col, b + c0, ldb, c + c0, ldc);
  }
}

// C[i * ldc + c] (+)= sum_p A[i * a_row + p * a_col] * B[p * ldb + c] for
// i < m, c < n, p < k: += when kAccumulate, else C is overwritten. B is f32
// or bf16 (widened exactly as it is read: the same bits as a widened copy).
template <bool kAccumulate, typename TB = float>
HWY_INLINE void SmallGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col,
                          const TB* b, int64_t ldb, float* c, int64_t ldc) {
  constexpr int64_t MR = kSmallGemmRows;
  // The last m % MR rows over all columns.
  auto rest = [&](auto rows, int64_t i) {
    constexpr int R = decltype(rows)::value;
    SmallGemmRowTiles<R, kSmallGemmVecsFor<R>, kAccumulate, TB>(0, n, k, a + i * a_row, a_row, a_col, b, ldb,
                                                                c + i * ldc, ldc);
  };
  const int64_t full = m / MR * MR;
  if (full > 0) {
    constexpr int64_t W = int64_t(kSmallGemmVecs * hn::MaxLanes(DF()));
    for (int64_t c0 = 0; c0 < n; c0 += W) {
      const int64_t nc = std::min(W, n - c0);
      for (int64_t i = 0; i < full; i += MR)
        SmallGemmTile<MR, kAccumulate, TB>(nc, k, a + i * a_row, a_row, a_col, b + c0, ldb, c + i * ldc + c0, ldc);
    }
  }
  switch (m - full) {
    case 5: rest(std::integral_constant<int, 5>(), full); break;
    case 4: rest(std::integral_constant<int, 4>(), full); break;
    case 3: rest(std::integral_constant<int, 3>(), full); break;
    case 2: rest(std::integral_constant<int, 2>(), full); break;
    case 1: rest(std::integral_constant<int, 1>(), full); break;
    default: break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#undef T5X_SMALL_GEMM_MASKED
#endif  // T5X_BACKEND_CPU_SMALL_GEMM_INL_H_ toggle
