// Register-blocked accumulate-GEMM for small tiles inside fused kernels
// (attention). Too small for a oneDNN call to pay off; strides let the same
// routine read either operand transposed or straight from a strided tensor.
//
//   C[i * ldc + c] += sum_p A[i * a_row + p * a_col] * B[p * ldb + c]
//   for i < m, c < n, p < k.
//
// AVX-512 path: 4 rows x 64 columns of C in 16 zmm accumulators; a portable
// loop otherwise. No allocation, no threading.
#pragma once
#include <cstdint>

namespace t5x::cpu {

void small_gemm_acc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row,
                    int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc);

}  // namespace t5x::cpu
