// Products with very few rows (decode steps: m = batch rows of one token)
// against a row-major, non-transposed B: C[m, n] = alpha * A[m, k] B[k, n]
// + beta * C. These are memory-bound (every B element is used m times), and
// oneDNN 2.6's f32 / bf16 matmul reaches only 2-5 GB/s on them; this kernel
// streams B from memory once for up to kSkinnyMaxRows rows of A, at close to
// the memory bandwidth.
//
// Sums run over k in blocks of kSkinnyKBlock steps: within a block in order,
// one fused multiply-add per step from zero; the block sums added in k order
// (the packed GEMM's order, packed_gemm.h); then alpha * sum (+ beta * C,
// fused). The blocks let threads split k (each streams a contiguous stretch
// of whole rows of B) as well as columns; the bits depend on neither the
// split nor the thread count, and are the same on every SIMD target
// (Highway, vectorised across columns; backend/cpu/simd.h). A and B are f32
// or bf16, with f32 accumulation; C is f32 or bf16 (rounded once at the end).
#pragma once
#include <cstdint>

#include "core/dtype_bf16.h"

namespace t5x::cpu {

// Rows up to which gemm_* route batch-1 products here (n >= 256; B as it is,
// or transposed to skinny_gemm_bt).
constexpr int64_t kSkinnyMaxRows = 8;

// Bytes of f32 accumulators per block of B's columns (2048 columns for one
// row of A, 512 for four); they stay in L1 while B streams past.
constexpr int64_t kSkinnyAccBytes = 8192;

// The sums over k run in blocks of this many steps (see above).
constexpr int64_t kSkinnyKBlock = 256;

template <typename TA, typename TB, typename TC>
void skinny_gemm(int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda, const TB* b, int64_t ldb,
                 float beta, TC* c, int64_t ldc);

// The same product with B stored transposed: bt [n, k] row-major, rows ldbt
// apart (a weight kept [out, in] for a decode, read as one stream: the
// logits kernel of BaseTransformerModel::decode_params). Each output is the
// same in-order sum over k, so the bits of skinny_gemm on B. Measured at
// AVX2, 2 threads, B cold, alternating in one process: the f32 logits shape
// [1x512]x[512x32128] 2.8-3.2 ms against 3.5-3.9 ms on B, [8x512]x[512x32128]
// 4.8-5.0 against 5.2-5.3 ms; not faster on the small bf16 layer kernels.
template <typename TA, typename TB, typename TC>
void skinny_gemm_bt(int64_t m, int64_t n, int64_t k, float alpha, const TA* a, int64_t lda, const TB* bt,
                    int64_t ldbt, float beta, TC* c, int64_t ldc);

}  // namespace t5x::cpu
