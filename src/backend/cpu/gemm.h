// Dense matrix products on the CPU: oneDNN's matmul primitive, or our own
// packed GEMM (packed_gemm.h) where oneDNN has no fast kernel.
//
// All matrices are row-major. For one problem:
//   C[m, n] = alpha * sum_k op(A)[m, k] * op(B)[k, n] + beta * C[m, n]
// where op(A) = A ([m, k], leading dim lda) or A^T (A stored [k, m]) when
// trans_a, and likewise for B. The batched form repeats this over `batch`
// problems whose operands start `stride_*` elements apart (stride_a or
// stride_b of 0 broadcasts that operand over the batch; C needs its own
// slice per problem).
//
// Which implementation (gemm_kernel): oneDNN where it runs AVX-512 (f32) or
// has a native bf16 matmul (AVX512-BF16 / AMX, ~4x f32 here); the packed
// GEMM for f32 where oneDNN runs AVX2 (there ours measured level with it on
// the training step's products, and ~1.5x on transposed-A ones) and for bf16
// where oneDNN has none (AVX2: oneDNN 2.6 needs AVX-512), widening bf16 as it
// packs. Without FMA in the SIMD target (SSE4) oneDNN runs everything, bf16
// widened to f32 first. T5X_GEMM_KERNEL=packed|onednn forces one (tests,
// benchmarks); rows up to kSkinnyMaxRows take the streaming kernel
// (skinny_gemm.h) either way.
//
// Threads: uses every OpenMP thread, except products under 16 MFLOP (decode
// steps), which run on the calling thread (env T5X_GEMM_SMALL_FLOPS sets the
// cut-off; 0 disables it). Results are deterministic for a given thread count
// and shape. The packed GEMM's sums do not depend on the threads nor on the
// rows and columns computed alongside (its fixed k blocks: packed_gemm.h), so
// its products are block-invariant. oneDNN 2.6's AVX-512 products are so for
// small k (tests GemmBlocks.*: k <= 512); with k >= 1024 (A transposed) or
// k >= 2048 its order over k changes with the row count and the threads,
// measured on 256 x {256, 1024} products. Callable from several threads at
// once. oneDNN primitives are cached per (dtype, shape, transposes, leading
// dims, batch strides, alpha, beta, threads).
// Errors: throws std::invalid_argument("[gemm] ...") for negative sizes,
// leading dims smaller than the row length, stride_c == 0 with batch > 1, a
// problem oneDNN rejects, or an unknown T5X_GEMM_KERNEL. k == 0 gives
// C = beta * C.
#pragma once
#include <cstdint>

#include "core/dtype_bf16.h"

namespace t5x::cpu {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  int64_t lda = 0, ldb = 0, ldc = 0;  // 0 means densely packed
};

void gemm_f32(const GemmShape& s, float alpha, const float* a, const float* b,
              float beta, float* c);

void gemm_batched_f32(const GemmShape& s, int64_t batch, int64_t stride_a,
                      int64_t stride_b, int64_t stride_c, float alpha,
                      const float* a, const float* b, float beta, float* c);

// bf16 operands, f32 accumulation and f32 output.
void gemm_batched_bf16(const GemmShape& s, int64_t batch, int64_t stride_a,
                       int64_t stride_b, int64_t stride_c, float alpha,
                       const bfloat16* a, const bfloat16* b, float beta,
                       float* c);

// bf16 operands and bf16 output (f32 accumulation, one rounding at the end,
// as XLA's bf16 dot): for bf16 activations without a separate cast pass.
void gemm_batched_bf16_out_bf16(const GemmShape& s, int64_t batch, int64_t stride_a,
                                int64_t stride_b, int64_t stride_c, float alpha,
                                const bfloat16* a, const bfloat16* b, float beta,
                                bfloat16* c);

// bf16 products on operands stored f32 (a_f32, b_f32) or bf16: an f32
// operand is taken as cast(operand, bf16), rounded to nearest even. The
// packed GEMM rounds it as it packs (no cast pass, no bf16 copy: flax's
// float32 params in a bfloat16 module, ops/einsum.h); elsewhere (oneDNN, the
// skinny kernel, both operands f32) it is cast into a per-thread scratch
// first. Either way the result is bitwise the bf16 product of the cast
// operands. c is bf16 (c_bf16) or f32.
void gemm_batched_as_bf16(const GemmShape& s, int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                          float alpha, const void* a, bool a_f32, const void* b, bool b_f32, float beta, void* c,
                          bool c_bf16);

// True when oneDNN runs bf16 products natively here; false when it has no
// bf16 matmul at its effective ISA (or T5X_BF16_GEMM=f32 says to act so):
// then the packed GEMM runs them, or oneDNN on widened operands (gemm_kernel).
bool gemm_bf16_native();

// The implementation products of this dtype run on here: "packed" (our own,
// packed_gemm.h), "oneDNN", or "oneDNN via f32" (bf16 widened first).
const char* gemm_kernel(bool bf16);

// Whether an output element's bits here do not depend on the rows and
// columns computed with it nor on the thread count, as probed once on a few
// small f32 and bf16 products (row and column halves, 1 and all threads).
// Mesh-invariant lowering (spmd/context.h) is bitwise one process's only where
// this holds: the packed GEMM's products keep it always, oneDNN 2.6's AVX-512
// products on the shapes of GemmBlocks.*; its AVX2 and SSE products do not
// (their order over k follows the block shape), so there the same runs agree
// to rounding, not bit for bit.
bool gemm_block_invariant();

// OpenMP threads a call with this shape and batch would use (1 below the
// small-product cut-off, else omp_get_max_threads()).
int gemm_threads_for(const GemmShape& s, int64_t batch);

}  // namespace t5x::cpu
