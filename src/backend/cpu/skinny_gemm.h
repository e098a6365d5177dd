// Products with very few rows (decode steps: m = batch rows of one token)
// against a row-major, non-transposed B: C[m, n] = alpha * A[m, k] B[k, n]
// + beta * C. These are memory-bound (every B element is used m times), and
// oneDNN 2.6's f32 / bf16 matmul reaches only 2-5 GB/s on them; this kernel
// streams B from memory once for up to kSkinnyMaxRows rows of A, at close to
// the memory bandwidth.
//
// Sums run over k in order for each output, one fused multiply-add per step
// from zero, then alpha * sum (+ beta * C, fused): deterministic for any
// thread count (columns are split over threads) and bitwise the same on every
// SIMD target (Highway, vectorised across columns; backend/cpu/simd.h). A and B are f32 or bf16, with f32
// accumulation; C is f32 or bf16 (rounded once at the end).
#pragma once
#include <cstdint>

#include "core/dtype_bf16.h"

namespace t5x::cpu {

// Rows up to which gemm_* route non-transposed, batch-1 products here.
constexpr int64_t kSkinnyMaxRows = 8;

// Columns of B per block: the accumulators (up to 4
// rows x 512 f32, 8 KiB) stay in L1 while each step over k streams one
// contiguous strip of a B row.
constexpr int64_t kSkinnyBlockCols = 512;

template <typename TA, typename TB, typename TC>
void skinny_gemm(int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda, const TB* b, int64_t ldb,
                 float beta, TC* c, int64_t ldc);

}  // namespace t5x::cpu
