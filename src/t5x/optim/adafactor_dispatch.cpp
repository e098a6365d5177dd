// Picks the Adafactor kernels' build at run time: the AVX2 one where the
// SIMD dispatch runs AVX2 or better (so T5X_CPU_ISA caps it too), else the
// baseline one. Both add in the same order and give the same bits; the
// baseline build splits each 8-lane vector into two SSE halves and is slower.
#include <string>

#include "backend/cpu/simd.h"
#include "t5x/optim/adafactor_kernels.h"

namespace t5x::optim_detail {

#define T5X_DECLARE_ADAFACTOR_KERNELS(ISA)                                                                    \
  namespace ISA {                                                                                             \
  void adafactor_factored_update(const FactoredLayout& l, const AdafactorScalars& s, float* param,            \
                                 const float* grad, float* v_row, float* v_col, float* m);                    \
  void adafactor_unfactored_update(int64_t nb, int64_t n, const AdafactorScalars& s, float* param,            \
                                   const float* grad, float* v, float* m);                                    \
  }
T5X_DECLARE_ADAFACTOR_KERNELS(base)
#if T5X_ADAFACTOR_HAVE_AVX2
T5X_DECLARE_ADAFACTOR_KERNELS(avx2)
#endif
#undef T5X_DECLARE_ADAFACTOR_KERNELS

namespace {
bool use_avx2() {
#if T5X_ADAFACTOR_HAVE_AVX2
  const std::string t = cpu::simd_target();
  return t == "AVX2" || t == "AVX3" || t == "AVX3_DL";
#else
  return false;
#endif
}
}  // namespace

void adafactor_factored_update(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad,
                               float* v_row, float* v_col, float* m) {
#if T5X_ADAFACTOR_HAVE_AVX2
  if (use_avx2()) return avx2::adafactor_factored_update(l, s, param, grad, v_row, v_col, m);
#endif
  base::adafactor_factored_update(l, s, param, grad, v_row, v_col, m);
}

void adafactor_unfactored_update(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad,
                                 float* v, float* m) {
#if T5X_ADAFACTOR_HAVE_AVX2
  if (use_avx2()) return avx2::adafactor_unfactored_update(nb, n, s, param, grad, v, m);
#endif
  base::adafactor_unfactored_update(nb, n, s, param, grad, v, m);
}

}  // namespace t5x::optim_detail
