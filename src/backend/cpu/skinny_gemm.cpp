#include "backend/cpu/skinny_gemm.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/skinny_gemm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

// Columns of B per block for MR rows of A: the accumulators (MR x cols f32,
// kSkinnyAccBytes) stay in L1 while each step over k reads one strip of a B
// row. One row of A takes up to 2048 columns, so a batch-1 decode step reads
// its layer kernels (n <= 1024) whole rows at a time, one sequential stream
// (in blocks of 512 columns the [512, 1024] kernels were read as 1 KiB strips
// 2 KiB apart: one token's layer products 4.8 against 3.6 ms, one thread).
template <int MR>
constexpr int64_t BlockCols() {
  return kSkinnyAccBytes / int64_t(sizeof(float)) / MR / 64 * 64;
}

// tot += acc (a k block's sums) for MR rows x cols.
template <int MR, int64_t AC>
HWY_INLINE void AddBlock(int64_t cols, const float (*acc)[AC], float (*tot)[AC]) {
  const DF d;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  for (int i = 0; i < MR; ++i)
    for (int64_t j = 0; j < cols; j += N) {
      hn::StoreU(hn::Add(hn::LoadU(d, tot[i] + j), hn::LoadU(d, acc[i] + j)), d, tot[i] + j);
    }
}

template <int MR, int64_t AC>
HWY_INLINE void ZeroRows(int64_t cols, float (*acc)[AC]) {
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  const int64_t padded = (cols + N - 1) / N * N;
  for (int i = 0; i < MR; ++i) std::fill(acc[i], acc[i] + padded, 0.0f);
}

// Each step prefetches its strip of the B row this many rows ahead, one
// prefetch per cache line. The strips of a block lie ldb apart, one per page
// for wide B, where the hardware prefetcher restarts every row. Measured on
// decode-step products with B cold in cache (AVX2, one thread): 1.36x on
// [1x512]x[512x1024] bf16, 1.23x on [1x512]x[512x384], 1.03x on the f32
// logits product; 2 to 8 rows ahead were equal, 16 slower. With k split over
// two threads (whole rows), one token's batch-1 layer products took 2.43 and
// 2.46 ms 3 rows ahead against 2.56 and 2.59 4 rows ahead (two runs, the
// variants alternating in one process, AVX2; 2 rows 2.50 and 2.55); batch 8
// was the same 3 or 4 rows ahead and 4% slower 2 rows ahead.
constexpr int64_t kPrefetchRows = 3;

// Where the prefetches bring B (PrefetchTo, simd-inl.h). Up to 4 rows of A
// use each line of B once and take the outer-cache hint: one token's
// batch-1 layer products took 1.97-2.48 ms against 2.79-3.21 ms with the L1
// hint (2 threads, five runs alternating in one process, AVX2, AMD Zen 4;
// one thread 3.50 against 4.66; native 2.23 against 2.80). The 5-to-8-row
// blocks read each chunk of B twice, the second time from L1, and were 8-24%
// slower with the outer hint (batch 8), so they keep the L1 one.
// Steps over k unrolled per pass over the accumulators: KU rows of B are read
// side by side and each accumulator is loaded and stored once per KU steps
// (the sum still runs over k in order). Sized so that MR x KU broadcasts of A,
// KU vectors of B and one accumulator fit the target's vector registers.
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
inline constexpr int kSkinnyUnroll = 2;
#else
inline constexpr int kSkinnyUnroll = 4;
#endif

// acc[i][j] = fma(a[i, p + u], b[p + u, j], acc[i][j]) for u < KU, i < MR,
// j < cols, in that order over u.
template <int MR, int KU, PrefetchTo kPrefetch, typename TA, typename TB, int64_t AC>
HWY_INLINE void SkinnySteps(int64_t p, int64_t k, int64_t cols, const TA* a, int64_t lda, const TB* b, int64_t ldb,
                            float (*acc)[AC]) {
  const DF d;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  VF av[KU][MR];
  const TB* row[KU];
  for (int u = 0; u < KU; ++u) {
    row[u] = b + (p + u) * ldb;
    for (int i = 0; i < MR; ++i) av[u][i] = hn::Set(d, float(a[i * lda + p + u]));
    if (kPrefetch != PrefetchTo::kNone && p + u + kPrefetchRows < k) {
      const TB* ahead = row[u] + kPrefetchRows * ldb;
      for (int64_t j = 0; j < cols; j += 64 / int64_t(sizeof(TB))) PrefetchLine<kPrefetch>(ahead + j);
    }
  }
  const int64_t full = cols / N * N;
  for (int64_t j = 0; j < full; j += N) {
    VF bv[KU];
    for (int u = 0; u < KU; ++u) bv[u] = LoadF(d, row[u] + j);
    for (int i = 0; i < MR; ++i) {
      VF s = hn::LoadU(d, acc[i] + j);
      for (int u = 0; u < KU; ++u) s = Fma(d, av[u][i], bv[u], s);
      hn::StoreU(s, d, acc[i] + j);
    }
  }
  if (full < cols) {
    VF bv[KU];
    for (int u = 0; u < KU; ++u) bv[u] = LoadPart(d, row[u] + full, size_t(cols - full));
    for (int i = 0; i < MR; ++i) {
      VF s = hn::LoadU(d, acc[i] + full);
      for (int u = 0; u < KU; ++u) s = Fma(d, av[u][i], bv[u], s);
      hn::StoreU(s, d, acc[i] + full);
    }
  }
}

// Sums over [p0, p1) for MR rows, KU steps at a time, in order over k.
template <int MR, PrefetchTo kPrefetch, typename TA, typename TB, int64_t AC>
HWY_INLINE void SkinnyRange(int64_t p0, int64_t p1, int64_t k, int64_t cols, const TA* a, int64_t lda, const TB* b,
                            int64_t ldb, float (*acc)[AC]) {
  constexpr int KU = kSkinnyUnroll;
  int64_t p = p0;
  for (; p + KU <= p1; p += KU) SkinnySteps<MR, KU, kPrefetch>(p, k, cols, a, lda, b, ldb, acc);
  for (; p < p1; ++p) SkinnySteps<MR, 1, kPrefetch>(p, k, cols, a, lda, b, ldb, acc);
}

// C = alpha * acc + beta * C for MR rows x cols.
template <int MR, typename TC, int64_t AC>
HWY_INLINE void SkinnyStore(int64_t cols, const float (*acc)[AC], float alpha, float beta, TC* c, int64_t ldc) {
  const DF d;
  const VF al = hn::Set(d, alpha), be = hn::Set(d, beta);
  for (int i = 0; i < MR; ++i) {
    TC* ci = c + i * ldc;
    ForVectors(cols, [&](int64_t j, size_t valid) {
      VF r = hn::Mul(al, hn::LoadU(d, acc[i] + j));
      if (beta != 0.0f) r = Fma(d, be, LoadPart(d, ci + j, valid), r);
      StorePart(d, r, ci + j, valid);
    });
  }
}

// MR rows of A x cols (<= BlockCols<MR>()) columns of B: each k block of
// kSkinnyKBlock summed from zero, the block sums added in k order, then
// C = alpha * sum + beta * C.
template <int MR, typename TA, typename TB, typename TC>
HWY_INLINE void SkinnyBlock(int64_t k, int64_t cols, float alpha, const TA* a, int64_t lda, const TB* b,
                            int64_t ldb, float beta, TC* c, int64_t ldc) {
  constexpr int64_t BC = BlockCols<MR>();
  HWY_ALIGN float tot[MR][BC];
  HWY_ALIGN float acc[MR][BC];
  for (int64_t q0 = 0; q0 < k; q0 += kSkinnyKBlock) {
    float(*dst)[BC] = q0 == 0 ? tot : acc;
    ZeroRows<MR>(cols, dst);
    SkinnyRange<MR, PrefetchTo::kOuter>(q0, std::min(k, q0 + kSkinnyKBlock), k, cols, a, lda, b, ldb, dst);
    if (q0 > 0) AddBlock<MR>(cols, acc, tot);
  }
  SkinnyStore<MR>(cols, tot, alpha, beta, c, ldc);
}

// 4 + MR2 rows (5 to 8) x cols (<= kEightRowCols) columns of B, which is read
// from memory once: the rows of A go in two groups over each chunk of
// kEightRowSteps rows of B, the second group finding the chunk in L1
// (accumulators 8 x 256 f32 = 8 KiB, the chunk at most 16 KiB). Summing the
// two groups one after the other over all of k (4 rows at a time, as above)
// would read B twice, the second time from L3 for f32 B with k = 512 (the
// block is 1 MiB, L2's size on the CPUs measured). Same sums, same bits.
// Measured at AVX2, 2 threads, AMD Zen 4, 3 interleaved pairs: the f32 logits
// product [8x512]x[512x32128] 3.3-3.6 ms against 4.2-4.6 ms; in batch-8
// greedy decodes of T5.1.1 small, the 8-row products took 1146 and 1295 ms
// over 5 decodes against 1555 and 1556 ms (bf16 decoder kernels and f32
// logits alike).
constexpr int64_t kEightRowCols = 256, kEightRowSteps = 16;

template <int MR2, typename TA, typename TB, typename TC>
HWY_INLINE void SkinnyBlockTwoGroups(int64_t k, int64_t cols, float alpha, const TA* a, int64_t lda, const TB* b,
                                     int64_t ldb, float beta, TC* c, int64_t ldc) {
  HWY_ALIGN float tot[4 + MR2][kEightRowCols];
  HWY_ALIGN float acc[4 + MR2][kEightRowCols];
  for (int64_t q0 = 0; q0 < k; q0 += kSkinnyKBlock) {
    const int64_t q1 = std::min(k, q0 + kSkinnyKBlock);
    float(*dst)[kEightRowCols] = q0 == 0 ? tot : acc;
    ZeroRows<4 + MR2>(cols, dst);
    for (int64_t p0 = q0; p0 < q1; p0 += kEightRowSteps) {
      const int64_t p1 = std::min(q1, p0 + kEightRowSteps);
      SkinnyRange<4, PrefetchTo::kL1>(p0, p1, k, cols, a, lda, b, ldb, dst);
      SkinnyRange<MR2, PrefetchTo::kNone>(p0, p1, k, cols, a + 4 * lda, lda, b, ldb, dst + 4);
    }
    if (q0 > 0) AddBlock<4 + MR2>(cols, acc, tot);
  }
  SkinnyStore<4>(cols, tot, alpha, beta, c, ldc);
  SkinnyStore<MR2>(cols, tot + 4, alpha, beta, c + 4 * ldc, ldc);
}

// Columns [j0, j1): up to 4 rows in blocks as wide as their accumulators
// allow; 5 to 8 rows in narrower blocks that read B once.
template <typename TA, typename TB, typename TC>
HWY_INLINE void SkinnyBlocks(int64_t j0, int64_t j1, int64_t m, int64_t k, float alpha, const TA* a, int64_t lda,
                             const TB* b, int64_t ldb, float beta, TC* c, int64_t ldc) {
  if (m > 4 && m <= 8) {
    for (int64_t j = j0; j < j1; j += kEightRowCols) {
      const int64_t cols = std::min(kEightRowCols, j1 - j);
      switch (m) {
        case 8: SkinnyBlockTwoGroups<4>(k, cols, alpha, a, lda, b + j, ldb, beta, c + j, ldc); break;
        case 7: SkinnyBlockTwoGroups<3>(k, cols, alpha, a, lda, b + j, ldb, beta, c + j, ldc); break;
        case 6: SkinnyBlockTwoGroups<2>(k, cols, alpha, a, lda, b + j, ldb, beta, c + j, ldc); break;
        default: SkinnyBlockTwoGroups<1>(k, cols, alpha, a, lda, b + j, ldb, beta, c + j, ldc); break;
      }
    }
    return;
  }
  auto blocks = [&](auto mr) {
    constexpr int MR = decltype(mr)::value;
    for (int64_t j = j0; j < j1; j += BlockCols<MR>()) {
      const int64_t cols = std::min(BlockCols<MR>(), j1 - j);
      SkinnyBlock<MR>(k, cols, alpha, a, lda, b + j, ldb, beta, c + j, ldc);
    }
  };
  switch (m) {
    case 4: blocks(std::integral_constant<int, 4>()); break;
    case 3: blocks(std::integral_constant<int, 3>()); break;
    case 2: blocks(std::integral_constant<int, 2>()); break;
    default: blocks(std::integral_constant<int, 1>()); break;
  }
}

// B stored transposed (bt [n, k] row-major, ldbt apart): columns [j0, j1)
// of C, N at a time (N = the vector's lanes). Each N x N block of bt is
// transposed in registers, so vector u holds B[p + u, j .. j + N) and the
// sums run over k in order from zero, as in SkinnySteps: the same bits as the
// product on B itself. The thread's columns are N consecutive rows of bt at a
// time, one sequential stream, where a wide row-major B is read in strips one
// row stride apart.
// Rows of bt prefetched ahead, into the outer caches only: 32 rows are four
// 8-row panels of 16 KiB (f32, k = 512) beyond the one being read, more than
// L1 holds, so lines prefetched into L1 were evicted before their use.
// Measured natively and at AVX2, 2 threads, cold, 30 alternating calls per
// binary, min over each:
// the f32 logits product [1x512]x[512x32128] 2.77-2.94 -> 2.09-2.18 ms,
// [4x512]x... 2.61-2.77 -> 2.24-2.29, [8x512]x... 3.16-3.77 -> 2.60-3.27.
constexpr int64_t kAhead = 32;

template <int MR, typename TA, typename TB, typename TC>
HWY_INLINE void SkinnyPanelBt(int64_t j, int64_t cols, int64_t k, float alpha, const TA* a, int64_t lda,
                              const TB* bt, int64_t ldbt, float beta, TC* c, int64_t ldc) {
  const DF d;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  VF acc[MR];
  for (int i = 0; i < MR; ++i) acc[i] = hn::Zero(d);
  HWY_ALIGN float tot[MR][N];  // the k blocks' sums so far (skinny_gemm's order)
  constexpr int64_t kLine = 64 / int64_t(sizeof(TB));
  for (int64_t p = 0; p < k; p += N) {
    if (p > 0 && p % kSkinnyKBlock == 0)
      for (int i = 0; i < MR; ++i) {
        hn::Store(p == kSkinnyKBlock ? acc[i] : hn::Add(hn::Load(d, tot[i]), acc[i]), d, tot[i]);
        acc[i] = hn::Zero(d);
      }
    const size_t kn = size_t(std::min(N, k - p));
    if (p % kLine == 0)  // the same line of the next panel's rows
      for (int64_t jj = 0; jj < N; ++jj) PrefetchLine<PrefetchTo::kOuter>(bt + (j + kAhead + jj) * ldbt + p);
    VF r[N];
    for (int64_t jj = 0; jj < N; ++jj)
      r[jj] = jj < cols ? LoadPart(d, bt + (j + jj) * ldbt + p, kn) : hn::Zero(d);
    TransposeSquare(d, r);
    for (size_t u = 0; u < kn; ++u)
      for (int i = 0; i < MR; ++i) acc[i] = Fma(d, hn::Set(d, float(a[i * lda + p + int64_t(u)])), r[u], acc[i]);
  }
  if (k > kSkinnyKBlock)
    for (int i = 0; i < MR; ++i) acc[i] = hn::Add(hn::Load(d, tot[i]), acc[i]);
  const VF al = hn::Set(d, alpha), be = hn::Set(d, beta);
  for (int i = 0; i < MR; ++i) {
    TC* ci = c + i * ldc + j;
    VF out = hn::Mul(al, acc[i]);
    if (beta != 0.0f) out = Fma(d, be, LoadPart(d, ci, size_t(cols)), out);
    StorePart(d, out, ci, size_t(cols));
  }
}

template <typename TA, typename TB, typename TC>
HWY_INLINE void SkinnyBlocksBt(int64_t j0, int64_t j1, int64_t m, int64_t k, float alpha, const TA* a, int64_t lda,
                               const TB* bt, int64_t ldbt, float beta, TC* c, int64_t ldc) {
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  for (int64_t j = j0; j < j1; j += N) {
    const int64_t cols = std::min(N, j1 - j);
    // Up to 8 rows per pass (all of a decode's): each block of bt is loaded
    // and transposed once for all of them.
    for (int64_t i = 0; i < m; i += 8) {
      const TA* ai = a + i * lda;
      TC* ci = c + i * ldc;
      switch (std::min<int64_t>(8, m - i)) {
        case 8: SkinnyPanelBt<8>(j, cols, k, alpha, ai, lda, bt, ldbt, beta, ci, ldc); break;
        case 7: SkinnyPanelBt<7>(j, cols, k, alpha, ai, lda, bt, ldbt, beta, ci, ldc); break;
        case 6: SkinnyPanelBt<6>(j, cols, k, alpha, ai, lda, bt, ldbt, beta, ci, ldc); break;
        case 5: SkinnyPanelBt<5>(j, cols, k, alpha, ai, lda, bt, ldbt, beta, ci, ldc); break;
        case 4: SkinnyPanelBt<4>(j, cols, k, alpha, ai, lda, bt, ldbt, beta, ci, ldc); break;
        case 3: SkinnyPanelBt<3>(j, cols, k, alpha, ai, lda, bt, ldbt, beta, ci, ldc); break;
        case 2: SkinnyPanelBt<2>(j, cols, k, alpha, ai, lda, bt, ldbt, beta, ci, ldc); break;
        default: SkinnyPanelBt<1>(j, cols, k, alpha, ai, lda, bt, ldbt, beta, ci, ldc); break;
      }
    }
  }
}

void SkinnyBtF32(int64_t j0, int64_t j1, int64_t m, int64_t k, float alpha, const float* a, int64_t lda,
                 const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  SkinnyBlocksBt(j0, j1, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void SkinnyBtBf16F32(int64_t j0, int64_t j1, int64_t m, int64_t k, float alpha, const bfloat16* a, int64_t lda,
                     const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  SkinnyBlocksBt(j0, j1, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void SkinnyBtBf16(int64_t j0, int64_t j1, int64_t m, int64_t k, float alpha, const bfloat16* a, int64_t lda,
                  const bfloat16* b, int64_t ldb, float beta, bfloat16* c, int64_t ldc) {
  SkinnyBlocksBt(j0, j1, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// C = alpha * (sum of the k blocks' sums in k order) + beta * C from the
// blocks' sums part[q][m][n] (run_b): a vector of columns at a time, the
// arithmetic of SkinnyStore (so the kernel's bits on one thread).
template <typename TC>
HWY_INLINE void AddBlockSums(int64_t m, int64_t n, int64_t blocks, const float* part, float alpha, float beta, TC* c,
                             int64_t ldc) {
  const DF d;
  const VF al = hn::Set(d, alpha), be = hn::Set(d, beta);
  for (int64_t i = 0; i < m; ++i) {
    TC* ci = c + i * ldc;
    ForVectors(n, [&](int64_t j, size_t valid) {
      const float* pj = part + i * n + j;
      VF sum = LoadPart(d, pj, valid);
      for (int64_t q = 1; q < blocks; ++q) sum = hn::Add(sum, LoadPart(d, pj + q * m * n, valid));
      VF r = hn::Mul(al, sum);
      if (beta != 0.0f) r = Fma(d, be, LoadPart(d, ci + j, valid), r);
      StorePart(d, r, ci + j, valid);
    });
  }
}
void SkinnyBlockSumsF32(int64_t m, int64_t n, int64_t blocks, const float* part, float alpha, float beta, float* c,
                        int64_t ldc) {
  AddBlockSums(m, n, blocks, part, alpha, beta, c, ldc);
}
void SkinnyBlockSumsBf16(int64_t m, int64_t n, int64_t blocks, const float* part, float alpha, float beta,
                         bfloat16* c, int64_t ldc) {
  AddBlockSums(m, n, blocks, part, alpha, beta, c, ldc);
}

void SkinnyF32(int64_t j0, int64_t j1, int64_t m, int64_t k, float alpha, const float* a,
               int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  SkinnyBlocks(j0, j1, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void SkinnyBf16F32(int64_t j0, int64_t j1, int64_t m, int64_t k, float alpha, const bfloat16* a,
                   int64_t lda, const bfloat16* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  SkinnyBlocks(j0, j1, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void SkinnyBf16(int64_t j0, int64_t j1, int64_t m, int64_t k, float alpha, const bfloat16* a,
                int64_t lda, const bfloat16* b, int64_t ldb, float beta, bfloat16* c, int64_t ldc) {
  SkinnyBlocks(j0, j1, m, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {

HWY_EXPORT(SkinnyF32);
HWY_EXPORT(SkinnyBf16F32);
HWY_EXPORT(SkinnyBf16);
HWY_EXPORT(SkinnyBtF32);
HWY_EXPORT(SkinnyBtBf16F32);
HWY_EXPORT(SkinnyBtBf16);
HWY_EXPORT(SkinnyBlockSumsF32);
HWY_EXPORT(SkinnyBlockSumsBf16);

// The per-target kernel of each type combination.
auto kernel(const float*, const float*, float*) { return T5X_DISPATCH(SkinnyF32); }
auto kernel(const bfloat16*, const bfloat16*, float*) { return T5X_DISPATCH(SkinnyBf16F32); }
auto kernel(const bfloat16*, const bfloat16*, bfloat16*) { return T5X_DISPATCH(SkinnyBf16); }
auto kernel_bt(const float*, const float*, float*) { return T5X_DISPATCH(SkinnyBtF32); }
auto kernel_bt(const bfloat16*, const bfloat16*, float*) { return T5X_DISPATCH(SkinnyBtBf16F32); }
auto kernel_bt(const bfloat16*, const bfloat16*, bfloat16*) { return T5X_DISPATCH(SkinnyBtBf16); }
auto block_sums(float*) { return T5X_DISPATCH(SkinnyBlockSumsF32); }
auto block_sums(bfloat16*) { return T5X_DISPATCH(SkinnyBlockSumsBf16); }

// Columns split over threads in ranges of 64 (whole cache lines of B and C),
// each thread given at least kMinPerThread elements of B.
template <typename TA, typename TB, typename TC, typename Fn>
void run(Fn fn, int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda, const TB* b, int64_t ldb,
         float beta, TC* c, int64_t ldc) {
  constexpr int64_t kAlign = 64, kMinPerThread = int64_t(1) << 17;
  const int64_t units = (n + kAlign - 1) / kAlign;
  const int64_t grain = std::max<int64_t>(1, kMinPerThread / std::max<int64_t>(1, k * kAlign));
  parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
    fn(u0 * kAlign, std::min(n, u1 * kAlign), m, k, alpha, a, lda, b, ldb, beta, c, ldc);
  });
}

// B as it is, over threads: split by columns, each thread reads every row of
// B in part (strips one row stride apart); split by k blocks, each reads a
// contiguous stretch of whole rows. So with two or more k blocks the threads
// take whole blocks: each block's sums (from zero, all columns) go to a
// buffer of their own, then are added in k order, alpha and beta applied as
// the kernel's store does: the kernel's bits on one thread. One token's bf16
// layer products of T5.1.1 small (B cold, AVX2, two threads, one process; a
// harness row kernel split either way): 2.9 against 4.0 ms split by columns;
// in profiled batch-1 decodes the layer products' medians went from 501-709
// to 485-499 ms per 5 decodes (docs/performance.md, session 42). 5 to 8 rows
// keep the column split: split by k, batch-8 decodes were slower. Where k
// ends in a short block (k = 384, attention's output kernel: 256 and 128
// rows), equal shares of (block x 64 columns) units, the first block's
// columns split between the threads, were slower than the 2:1 split by
// blocks (cold, AVX2, 2 threads: 36-44 against 30-31 us): whole rows read
// in one stream matter more here than the balance.
template <typename TA, typename TB, typename TC, typename Fn, typename FnF32>
void run_b(Fn fn, FnF32 fn_f32, int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda, const TB* b,
           int64_t ldb, float beta, TC* c, int64_t ldc) {
  const int64_t blocks = (k + kSkinnyKBlock - 1) / kSkinnyKBlock;
  if (blocks < 2 || m > 4 || num_threads() < 2) return run(fn, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  thread_local std::vector<float> buffer;  // the caller's; the workers get its data pointer
  buffer.resize(size_t(blocks * m * n));
  float* const part = buffer.data();
  parallel_for_chunks(blocks, 1, [&](int64_t q, int64_t, int64_t) {
    const int64_t p0 = q * kSkinnyKBlock, kq = std::min(kSkinnyKBlock, k - p0);
    fn_f32(0, n, m, kq, 1.0f, a + p0, lda, b + p0 * ldb, ldb, 0.0f, part + q * m * n, n);
  });
  block_sums(c)(m, n, blocks, part, alpha, beta, c, ldc);
}

}  // namespace

template <typename TA, typename TB, typename TC>
void skinny_gemm(int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda, const TB* b, int64_t ldb,
                 float beta, TC* c, int64_t ldc) {
  run_b(kernel(a, b, c), kernel(a, b, static_cast<float*>(nullptr)), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename TA, typename TB, typename TC>
void skinny_gemm_bt(int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda, const TB* bt,
                    int64_t ldbt, float beta, TC* c, int64_t ldc) {
  run(kernel_bt(a, bt, c), m, n, k, alpha, a, lda, bt, ldbt, beta, c, ldc);
}

template void skinny_gemm_bt<float, float, float>(int64_t, int64_t, int64_t, float, const float*, int64_t,
                                                  const float*, int64_t, float, float*, int64_t);
template void skinny_gemm_bt<bfloat16, bfloat16, float>(int64_t, int64_t, int64_t, float, const bfloat16*, int64_t,
                                                        const bfloat16*, int64_t, float, float*, int64_t);
template void skinny_gemm_bt<bfloat16, bfloat16, bfloat16>(int64_t, int64_t, int64_t, float, const bfloat16*,
                                                           int64_t, const bfloat16*, int64_t, float, bfloat16*,
                                                           int64_t);

template void skinny_gemm<float, float, float>(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                               int64_t, float, float*, int64_t);
template void skinny_gemm<bfloat16, bfloat16, float>(int64_t, int64_t, int64_t, float, const bfloat16*, int64_t,
                                                     const bfloat16*, int64_t, float, float*, int64_t);
template void skinny_gemm<bfloat16, bfloat16, bfloat16>(int64_t, int64_t, int64_t, float, const bfloat16*, int64_t,
                                                        const bfloat16*, int64_t, float, bfloat16*, int64_t);

}  // namespace t5x::cpu
#endif
