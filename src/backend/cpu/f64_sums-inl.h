// Float64 sums of float32 values in a fixed order on every SIMD target
// (Highway, included once per target like simd-inl.h), shared by the
// optimizer kernels (adafactor.cpp, grad_utils.cpp).
//
// The sums run over 8 logical lanes whatever the vector width: value j of a
// run adds into lane j % 8, the run's last n % 8 values add one by one into
// a ninth scalar total, and total() adds them in one fixed tree. On AVX-512
// the 8 lanes are one vector of doubles, on AVX2 two, on SSE4 four, on the
// scalar fallback eight. Each float is widened exactly, so the bits depend
// on the run boundaries only.
#if defined(T5X_BACKEND_CPU_F64_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef T5X_BACKEND_CPU_F64_SUMS_INL_H_
#undef T5X_BACKEND_CPU_F64_SUMS_INL_H_
#else
#define T5X_BACKEND_CPU_F64_SUMS_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {
namespace f64sums {

inline constexpr size_t kGroup = 8;  // logical lanes of the float64 sums

// Doubles: 8 lanes at most (1, 2, 4 or 8 per vector). The float32 vectors
// are as wide as two of them on SSE4 / AVX2 (4 / 8 floats) and as one on
// AVX-512 (8 floats: one group) and the scalar fallback (1).
using DD = hn::CappedTag<double, kGroup>;
using VD = hn::Vec<DD>;
inline constexpr size_t kLd = hn::MaxLanes(DD());
using DH = hn::Rebind<float, DD>;
inline constexpr bool kSplit = kLd == 2 || kLd == 4;
using D8 = std::conditional_t<kSplit, hn::Twice<DH>, DH>;
inline constexpr size_t kN8 = hn::MaxLanes(D8());
static_assert(kGroup % kN8 == 0 && kN8 == (kSplit ? 2 : 1) * kLd, "float lanes must tile a group of 8");
using D1 = hn::CappedTag<float, 1>;  // the tail, one value at a time

using Vector = std::false_type;  // f(d, k, q, Vector{}): lanes q .. q + kN8 of a group
using Tail = std::true_type;     // f(d, k, 0, Tail{}): one value after the last group

// f over [0, n): the groups of 8 (kN8 values per call), then the tail.
template <class F>
HWY_INLINE void ForLanes(int64_t n, F&& f) {
  int64_t k = 0;
  for (; k + int64_t(kGroup) <= n; k += int64_t(kGroup))
    for (size_t q = 0; q < kGroup; q += kN8) f(D8(), k + int64_t(q), q, Vector{});
  for (; k < n; ++k) f(D1(), k, 0, Tail{});
}

// The float lanes of x (a Vec<D8>) widened exactly: Lo has them all or,
// where kSplit, the lower half and Hi the upper.
template <class V>
HWY_INLINE VD Lo(V x) {
  if constexpr (kSplit) return hn::PromoteTo(DD(), hn::LowerHalf(DH(), x));
  else return hn::PromoteTo(DD(), x);
}
#if HWY_TARGET != HWY_SCALAR  // (no halves there; nor kSplit)
template <class V>
HWY_INLINE VD Hi(V x) {
  return hn::PromoteTo(DD(), hn::UpperHalf(DH(), x));
}
#endif

// A float64 sum of float32 values over the 8 logical lanes plus the tail.
struct Acc {
  VD lanes[kGroup / kLd];
  double tail = 0;
  HWY_INLINE Acc() {
    for (auto& v : lanes) v = hn::Zero(DD());
  }
  // += double(x) per lane.
  template <class V>
  HWY_INLINE void add(size_t q, V x, Vector) {
    lanes[q / kLd] = hn::Add(lanes[q / kLd], Lo(x));
    if constexpr (kSplit) lanes[q / kLd + 1] = hn::Add(lanes[q / kLd + 1], Hi(x));
  }
  template <class V>
  HWY_INLINE void add(size_t, V x, Tail) {
    tail += double(hn::GetLane(x));
  }
  // += double(x) * double(x) per lane (exact squares of floats).
  template <class V>
  HWY_INLINE void add_square(size_t q, V x, Vector) {
    const VD lo = Lo(x);
    lanes[q / kLd] = hn::Add(lanes[q / kLd], hn::Mul(lo, lo));
    if constexpr (kSplit) {
      const VD hi = Hi(x);
      lanes[q / kLd + 1] = hn::Add(lanes[q / kLd + 1], hn::Mul(hi, hi));
    }
  }
  template <class V>
  HWY_INLINE void add_square(size_t, V x, Tail) {
    const double v = double(hn::GetLane(x));
    tail += v * v;
  }
  HWY_INLINE double total() const {
    HWY_ALIGN double l[kGroup];
    for (size_t i = 0; i < kGroup / kLd; ++i) hn::Store(lanes[i], DD(), l + i * kLd);
    return (((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))) + tail;
  }
};

// acc[k ..] += x, elementwise in float64.
template <class V>
HWY_INLINE void AddTo(double* acc, V x, Vector) {
  hn::StoreU(hn::Add(hn::LoadU(DD(), acc), Lo(x)), DD(), acc);
  if constexpr (kSplit) hn::StoreU(hn::Add(hn::LoadU(DD(), acc + kLd), Hi(x)), DD(), acc + kLd);
}
template <class V>
HWY_INLINE void AddTo(double* acc, V x, Tail) {
  *acc += double(hn::GetLane(x));
}

}  // namespace f64sums
}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#endif  // T5X_BACKEND_CPU_F64_SUMS_INL_H_
