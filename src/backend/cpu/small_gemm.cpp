#include "backend/cpu/small_gemm.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/small_gemm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/small_gemm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

void SmallGemmAcc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                  int64_t ldb, float* c, int64_t ldc) {
  SmallGemm<true>(m, n, k, a, a_row, a_col, b, ldb, c, ldc);
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/simd.h"

namespace t5x::cpu {

HWY_EXPORT(SmallGemmAcc);

void small_gemm_acc(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col, const float* b,
                    int64_t ldb, float* c, int64_t ldc) {
  T5X_DISPATCH(SmallGemmAcc)(m, n, k, a, a_row, a_col, b, ldb, c, ldc);
}

}  // namespace t5x::cpu
#endif
