// Register-blocked accumulate-GEMM for small tiles inside fused kernels
// (attention). Too small for a oneDNN call to pay off; strides let the same
// routine read either operand transposed or straight from a strided tensor.
//
//   C[i * ldc + c] += sum_p A[i * a_row + p * a_col] * B[p * ldb + c]
//   for i < m, c < n, p < k.
//
// Register tiles of 4 rows x 4 vectors of C (AVX-512: 64 columns in 16 zmm
// accumulators) or 4 x 2 vectors on 16-register targets (AVX2, SSE4); the 1
// to 3 rows left over (a decode step's one query) in tiles as many vectors
// wide as the same registers hold; on the CPU's SIMD target
// (backend/cpu/simd.h). Each element's sum runs over p in order with fused
// multiply-adds from zero and is then added to C, so the result is bitwise
// the same on every target. No allocation, no threading.
#pragma once
#include <cstdint>

namespace t5x::cpu {

void small_gemm_acc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row,
                    int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace t5x::cpu
