// Our own packed GEMM (the Goto / BLIS loop nest) for the products oneDNN
// does not serve well: bf16 operands on CPUs without a bf16 matmul in oneDNN
// 2.6 (AVX2: oneDNN would need them widened to f32 in a separate pass first).
// Here the packing widens bf16 exactly as it copies, so a bf16 product costs
// what an f32 product does, and reads half the bytes.
//
//   C[m, n] = alpha * sum_k op(A)[m, k] * op(B)[k, n] + beta * C[m, n]
//
// with the shapes, transposes, leading dims and batch strides of gemm.h
// (stride 0 broadcasts an operand over the batch).
//
// Loop nest (Goto & van de Geijn 2008, "Anatomy of high-performance matrix
// multiplication", sec. 4; BLIS's five loops): k in blocks of kPackedGemmKc;
// op(B)'s block packed into panels of NR columns, op(A)'s into panels of MR
// rows; a register tile of MR x NR accumulators runs over the block's k.
// MR x NR = 6 x 16 on AVX2 (12 of the 16 ymm registers), 6 x 32 on AVX-512.
//
// Numerics: each C element is acc = fma(a[i,p], b[p,j], acc) over the p of
// one k block in order from acc = 0, and the blocks' sums are added to C in
// k order (the first block applies beta; a bf16 C is rounded once, after the
// last block). That order depends only on kPackedGemmKc: not on the SIMD
// target, the tile shape, the rows and columns computed alongside, nor the
// thread count. So every target gives the same bits, and a product's row or
// column block gives the same bits as the whole product (mesh invariance).
//
// Threads: the batch, or else the longer of m and n, is split over the
// OpenMP threads (threads = 1 inside a parallel region); each thread packs
// what its part of C reads. No allocation after the first calls (scratch per
// thread). Errors: none beyond gemm.h's checks, which its callers make.
#pragma once
#include <cstdint>

#include "backend/cpu/gemm.h"
#include "core/dtype_bf16.h"

namespace t5x::cpu {

// The k block: part of the numeric contract above (changing it changes bits).
inline constexpr int64_t kPackedGemmKc = 256;
// The column block (B's block is kPackedGemmKc x this); speed only.
inline constexpr int64_t kPackedGemmNc = 512;

// Whether the SIMD target in use has fused multiply-add (AVX2, AVX-512,
// NEON): without it (SSE4, the portable fallback) each FMA is emulated
// exactly, far too slowly for a product, and gemm.h keeps oneDNN.
bool packed_gemm_fast();

// An operand stored f32 and taken as bf16: each value is rounded to nearest
// even (bfloat16::from_float) as the packing reads it, so the product is the
// one of the cast operand, bitwise, without a cast pass or a bf16 copy (flax's
// float32 params cast to a bfloat16 module dtype, ops/einsum.h).
struct F32AsBf16 {
  float value;
};

// lda / ldb / ldc of `s` must be resolved (non-zero); `threads` >= 1.
void packed_gemm(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha,
                 const float* a, const float* b, float beta, float* c, int threads);
void packed_gemm(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha,
                 const bfloat16* a, const bfloat16* b, float beta, float* c, int threads);
void packed_gemm(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha,
                 const bfloat16* a, const bfloat16* b, float beta, bfloat16* c, int threads);
// One operand rounded as it is packed (F32AsBf16), the other bf16.
void packed_gemm(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha,
                 const bfloat16* a, const F32AsBf16* b, float beta, float* c, int threads);
void packed_gemm(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha,
                 const bfloat16* a, const F32AsBf16* b, float beta, bfloat16* c, int threads);
void packed_gemm(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha,
                 const F32AsBf16* a, const bfloat16* b, float beta, float* c, int threads);
void packed_gemm(const GemmShape& s, int64_t batch, int64_t sa, int64_t sb, int64_t sc, float alpha,
                 const F32AsBf16* a, const bfloat16* b, float beta, bfloat16* c, int threads);

}  // namespace t5x::cpu
