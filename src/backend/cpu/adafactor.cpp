// Adafactor's fused update (kernels::cpu::adafactor_*_update, backend/kernels.h
// has the contract), written once in Google Highway and compiled per target.
//
// Bits on every target: each float32 expression is a chain of IEEE
// operations (multiply, add, divide, sqrt; no FMA, no approximate
// reciprocal), so a lane gives the same value at any width. The float64 sums
// behind the means run in f64_sums-inl.h's fixed order (8 logical lanes plus
// a tail, whatever the vector width). That is also the order the kernels used
// before they moved here (GCC 8-lane vector extensions), so checkpoints
// trained before train on to the same bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/parallel.h"
#include "backend/kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/adafactor.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/f64_sums-inl.h"
#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {
namespace {

using kernels::AdafactorScalars;
using kernels::FactoredLayout;

constexpr int64_t kBlock = 512;         // longest float64 lane sum along a row
constexpr int64_t kChunkRows = 32;      // rows per parallel chunk: longest sum down a column
constexpr int64_t kChunkElems = 16384;  // elements per parallel chunk of an unfactored param

using namespace f64sums;  // NOLINT: Acc, ForLanes, AddTo, Vector, Tail

// 1 / sqrt(v): IEEE division and square root on every target.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V RsqrtExact(D d, V v) {
  return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(v));
}
// `fresh` where it is a number, else `old` (skip_nan_updates).
template <class V>
HWY_INLINE V KeepOldIfNan(V fresh, V old) {
  return hn::IfThenElse(hn::IsNaN(fresh), old, fresh);
}

// jnp.maximum / jnp.minimum propagate NaN (std::max / std::min do not).
float NanMax(float a, float b) { return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::max(a, b); }
float NanMin(float a, float b) { return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::min(a, b); }

// lr * clip(max(eps2, RMS(p)), max_parameter_scale), or lr.
float ParamScale(const AdafactorScalars& s, double psum, double n_avg) {
  if (!s.use_scale) return s.lr;
  float ps = std::sqrt(float(psum / n_avg));
  ps = NanMax(ps, s.eps2);
  if (s.has_max_parameter_scale) ps = NanMin(ps, s.max_parameter_scale);
  return s.lr * ps;
}

float ClipDenom(const AdafactorScalars& s, double ysum, double n_avg) {
  return s.clip ? NanMax(1.0f, std::sqrt(float(ysum / n_avg)) / s.clipping_threshold) : 1.0f;
}

// Reused between calls (the optimizer updates one param at a time per
// thread; thread_local keeps concurrent optimizers apart).
struct Scratch {
  std::vector<float> rf, cf;
  std::vector<double> part, outer, inner, chunk;
  std::vector<uint8_t> zero;
};
Scratch& GetScratch() {
  thread_local Scratch s;
  return s;
}
template <typename T>
T* Sized(std::vector<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
  return v.data();
}

// The last pass over one contiguous run of n: y -> clip -> scale ->
// momentum -> weight decay -> param, with y = y_of(d, k). Skipped NaNs keep
// the old value.
template <bool kMomentum, bool kSkip, class Y>
HWY_INLINE void ApplyRun(int64_t n, const AdafactorScalars& s, float denom, float scale, float* p, float* m,
                         Y&& y_of) {
  ForLanes(n, [&](auto d, int64_t k, size_t, auto) {
    auto y = y_of(d, k);
    if (s.clip) y = hn::Div(y, hn::Set(d, denom));
    auto u = hn::Mul(hn::Set(d, scale), y);
    if constexpr (kMomentum) {
      const auto old = hn::LoadU(d, m + k);
      auto nm = hn::Add(hn::Mul(hn::Set(d, s.b1), old), hn::Mul(hn::Set(d, s.one_minus_b1), u));
      u = nm;
      if constexpr (kSkip) nm = KeepOldIfNan(nm, old);
      hn::StoreU(nm, d, m + k);
    }
    const auto pv = hn::LoadU(d, p + k);
    auto np = hn::Sub(hn::Mul(hn::Set(d, s.keep_w), pv), u);
    if constexpr (kSkip) np = KeepOldIfNan(np, pv);
    hn::StoreU(np, d, p + k);
  });
}

// Whether all of g[0, n) is +0.0, every bit clear: the gradient of an
// embedding row no token of the batch looked up.
HWY_INLINE bool AllPositiveZero(const float* g, int64_t n) {
  const DF d;
  const hn::RebindToUnsigned<DF> du;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t k = 0;
  for (; k + N <= n; k += N)
    if (!hn::AllTrue(du, hn::Eq(hn::BitCast(du, hn::LoadU(d, g + k)), hn::Zero(du)))) return false;
  for (; k < n; ++k) {
    uint32_t bits;
    std::memcpy(&bits, g + k, sizeof(bits));
    if (bits != 0) return false;
  }
  return true;
}

// Pass 1 of a factored param over one [no, ni] batch slice: returns sum p^2;
// outer[r] = sum along row r and inner[k] = sum down column k of
// (g * grad_scale)^2 + eps1; zero[r] (where given) whether row r of g is all
// +0.0 (AllPositiveZero).
double FactoredStatsSlice(int64_t no, int64_t ni, const AdafactorScalars& s, const float* pb, const float* gb,
                          double* outer, double* inner, uint8_t* zero = nullptr) {
  Scratch& sc = GetScratch();
  const int64_t nc = num_chunks(no, kChunkRows);
  double* part = Sized(sc.part, nc * ni);
  double* chunk = Sized(sc.chunk, nc);
  const float gs = s.grad_scale, eps1 = s.eps1;
  parallel_for_chunks(no, kChunkRows, [&](int64_t c, int64_t r0, int64_t r1) {
    double* ip = part + c * ni;
    std::fill(ip, ip + ni, 0.0);
    double ps = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const float* pr = pb + r * ni;
      const float* gr = gb + r * ni;
      if (zero) zero[r] = AllPositiveZero(gr, ni);
      double gsum = 0;
      for (int64_t k0 = 0; k0 < ni; k0 += kBlock) {
        Acc sp, sg;
        ForLanes(std::min(ni - k0, kBlock), [&](auto d, int64_t j, size_t q, auto kind) {
          const int64_t k = k0 + j;
          const auto pv = hn::LoadU(d, pr + k);
          sp.add(q, hn::Mul(pv, pv), kind);
          const auto gv = hn::Mul(hn::LoadU(d, gr + k), hn::Set(d, gs));
          const auto g2 = hn::Add(hn::Mul(gv, gv), hn::Set(d, eps1));
          sg.add(q, g2, kind);
          AddTo(ip + k, g2, kind);
        });
        ps += sp.total();
        gsum += sg.total();
      }
      outer[r] = gsum;
    }
    chunk[c] = ps;
  });
  std::fill(inner, inner + ni, 0.0);
  double psum = 0;
  for (int64_t c = 0; c < nc; ++c) {
    const double* ip = part + c * ni;
    for (int64_t k = 0; k < ni; ++k) inner[k] += ip[k];
    psum += chunk[c];
  }
  return psum;
}

// y = (g * grad_scale) * row_factor * col_factor, multiplied in that order;
// fo is the factor of the outer index (a: its value at this row), fi of the
// inner one.
template <bool kRowOuter, class D>
HWY_INLINE hn::Vec<D> FactoredY(D d, const AdafactorScalars& s, const float* gr, float a, const float* fi,
                                int64_t k) {
  const auto gv = hn::Mul(hn::LoadU(d, gr + k), hn::Set(d, s.grad_scale));
  const auto f = hn::LoadU(d, fi + k);
  return kRowOuter ? hn::Mul(hn::Mul(gv, hn::Set(d, a)), f) : hn::Mul(hn::Mul(gv, f), hn::Set(d, a));
}

// Pass 2 (update clipping) over one batch slice: sum y^2. Rows flagged in
// `skip` (may be null) add y^2 = +0 and are not read (SkipZeroRows).
template <bool kRowOuter>
double FactoredClipSumSlice(int64_t no, int64_t ni, const AdafactorScalars& s, const float* gb, const float* fo,
                            const float* fi, const uint8_t* skip = nullptr) {
  Scratch& sc = GetScratch();
  const int64_t nc = num_chunks(no, kChunkRows);
  double* chunk = Sized(sc.chunk, nc);
  parallel_for_chunks(no, kChunkRows, [&](int64_t c, int64_t r0, int64_t r1) {
    double ys = 0;
    for (int64_t r = r0; r < r1; ++r) {
      if (skip && skip[r]) continue;
      const float* gr = gb + r * ni;
      const float a = fo[r];
      for (int64_t k0 = 0; k0 < ni; k0 += kBlock) {
        Acc sy;
        ForLanes(std::min(ni - k0, kBlock), [&](auto d, int64_t j, size_t q, auto kind) {
          const auto y = FactoredY<kRowOuter>(d, s, gr, a, fi, k0 + j);
          sy.add(q, hn::Mul(y, y), kind);
        });
        ys += sy.total();
      }
    }
    chunk[c] = ys;
  });
  double ysum = 0;
  for (int64_t c = 0; c < nc; ++c) ysum += chunk[c];
  return ysum;
}

// Pass 3 over one batch slice: apply. Rows flagged in `skip` (may be null)
// would be written back unchanged and are not touched (SkipZeroRows).
template <bool kMomentum, bool kSkip, bool kRowOuter>
void FactoredApplySlice(int64_t no, int64_t ni, const AdafactorScalars& s, float denom, float scale, float* pb,
                        const float* gb, float* mb, const float* fo, const float* fi, const uint8_t* skip = nullptr) {
  parallel_for_chunks(no, kChunkRows, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (skip && skip[r]) continue;
      const float* gr = gb + r * ni;
      const float a = fo[r];
      ApplyRun<kMomentum, kSkip>(ni, s, denom, scale, pb + r * ni, kMomentum ? mb + r * ni : nullptr,
                                 [&](auto d, int64_t k) { return FactoredY<kRowOuter>(d, s, gr, a, fi, k); });
    }
  });
}

// Which rows of g the clip and apply passes may pass over, bit for bit.
// A row of g that is all +0.0 (an embedding row no token looked up: most of
// a 32128-row vocabulary in a T5.1.1 step) gives y = +0 or -0 wherever the
// grad scale and both factors are finite, so y^2 = +0 adds nothing to the
// clip sum; and where also the grad scale, the factors and the param scale
// have no sign bit and denom is finite, u = +0 exactly, so without momentum
// or weight decay the new param is p * 1 - (+0) = p, bit for bit (NaN and
// -0.0 included). Such rows are flagged (rows with a non-finite or negative
// factor are not); the passes then skip them: for T5.1.1 small's embedding
// that is most of 4 of its 6 trips to memory (the clip pass reads g; the
// apply pass reads p and g and writes p). Returns null where nothing
// may be skipped.
HWY_INLINE const uint8_t* SkipZeroRows(int64_t no, int64_t ni, const AdafactorScalars& s, const float* fo,
                                       const float* fi, uint8_t* zero, bool momentum) {
  auto plain = [](float x) { return std::isfinite(x) && !std::signbit(x); };
  if (momentum || s.keep_w != 1.0f || !plain(s.grad_scale)) return nullptr;
  for (int64_t k = 0; k < ni; ++k)
    if (!plain(fi[k])) return nullptr;
  bool any = false;
  for (int64_t r = 0; r < no; ++r) {
    zero[r] = zero[r] && plain(fo[r]);
    any = any || zero[r];
  }
  return any ? zero : nullptr;
}

template <bool kMomentum, bool kSkip, bool kRowOuter>
void Factored(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad, float* v_row,
              float* v_col, float* m) {
  Scratch& sc = GetScratch();
  const int64_t no = l.n_outer, ni = l.n_inner, per_b = no * ni;
  const int64_t nrows = kRowOuter ? no : ni, ncols = kRowOuter ? ni : no;
  double* outer = Sized(sc.outer, no);
  double* inner = Sized(sc.inner, ni);
  float* rf = Sized(sc.rf, nrows);
  float* cf = Sized(sc.cf, ncols);
  uint8_t* zero = Sized(sc.zero, no);

  for (int64_t b = 0; b < l.nb; ++b) {
    float* pb = param + b * per_b;
    const float* gb = grad + b * per_b;
    float* mb = m ? m + b * per_b : nullptr;
    float* vr = v_row + b * nrows;
    float* vc = v_col + b * ncols;

    const double psum = FactoredStatsSlice(no, ni, s, pb, gb, outer, inner, zero);
    const double n_avg = double(per_b);
    const float scale = ParamScale(s, psum, n_avg);

    // v_row / v_col moving averages and the factors.
    const double* rsum = kRowOuter ? outer : inner;
    const double* csum = kRowOuter ? inner : outer;
    auto ema = [&](float& v, double mean) {
      const float nv = s.decay * v + s.mixing * float(mean);
      if (!(kSkip && std::isnan(nv))) v = nv;
    };
    for (int64_t i = 0; i < nrows; ++i) ema(vr[i], rsum[i] / double(ncols));
    for (int64_t j = 0; j < ncols; ++j) ema(vc[j], csum[j] / double(nrows));
    double rcs = 0;
    for (int64_t i = 0; i < nrows; ++i) rcs += double(vr[i]);
    const float rc_mean = float(rcs / double(nrows));
    for (int64_t i = 0; i < nrows; ++i) rf[i] = 1.0f / std::sqrt(vr[i] / rc_mean);
    for (int64_t j = 0; j < ncols; ++j) cf[j] = 1.0f / std::sqrt(vc[j]);
    const float* fo = kRowOuter ? rf : cf;
    const float* fi = kRowOuter ? cf : rf;

    const uint8_t* skip = SkipZeroRows(no, ni, s, fo, fi, zero, kMomentum);
    const double ysum = s.clip ? FactoredClipSumSlice<kRowOuter>(no, ni, s, gb, fo, fi, skip) : 0.0;
    const float denom = ClipDenom(s, ysum, n_avg);
    const bool same = std::isfinite(denom) && std::isfinite(scale) && !std::signbit(scale);
    FactoredApplySlice<kMomentum, kSkip, kRowOuter>(no, ni, s, denom, scale, pb, gb, mb, fo, fi,
                                                    same ? skip : nullptr);
  }
}

// Pass 1 of an unfactored param over one batch slice of n: updates v;
// psum = sum p^2, ysum = sum y^2 with y = g / sqrt(v).
template <bool kSkip>
void UnfactoredStatsSlice(int64_t n, const AdafactorScalars& s, const float* pb, const float* gb, float* vb,
                          double* psum, double* ysum) {
  Scratch& sc = GetScratch();
  const int64_t nc = num_chunks(n, kChunkElems);
  double* chunk = Sized(sc.chunk, 2 * nc);
  const float gs = s.grad_scale, eps1 = s.eps1, decay = s.decay, mixing = s.mixing;
  parallel_for_chunks(n, kChunkElems, [&](int64_t c, int64_t i0, int64_t i1) {
    double ps = 0, ys = 0;
    for (int64_t k0 = i0; k0 < i1; k0 += kBlock) {
      Acc ap, ay;
      ForLanes(std::min(i1, k0 + kBlock) - k0, [&](auto d, int64_t j, size_t q, auto kind) {
        const int64_t i = k0 + j;
        const auto pv = hn::LoadU(d, pb + i);
        ap.add(q, hn::Mul(pv, pv), kind);
        const auto gv = hn::Mul(hn::LoadU(d, gb + i), hn::Set(d, gs));
        const auto g2 = hn::Add(hn::Mul(gv, gv), hn::Set(d, eps1));
        const auto old = hn::LoadU(d, vb + i);
        auto nv = hn::Add(hn::Mul(hn::Set(d, decay), old), hn::Mul(hn::Set(d, mixing), g2));
        if constexpr (kSkip) nv = KeepOldIfNan(nv, old);
        hn::StoreU(nv, d, vb + i);
        const auto y = hn::Mul(gv, RsqrtExact(d, nv));
        ay.add(q, hn::Mul(y, y), kind);
      });
      ps += ap.total();
      ys += ay.total();
    }
    chunk[2 * c] = ps;
    chunk[2 * c + 1] = ys;
  });
  *psum = 0;
  *ysum = 0;
  for (int64_t c = 0; c < nc; ++c) {
    *psum += chunk[2 * c];
    *ysum += chunk[2 * c + 1];
  }
}

// Pass 2 of an unfactored param over one batch slice: apply.
template <bool kMomentum, bool kSkip>
void UnfactoredApplySlice(int64_t n, const AdafactorScalars& s, float denom, float scale, float* pb,
                          const float* gb, const float* vb, float* mb) {
  parallel_for_chunks(n, kChunkElems, [&](int64_t, int64_t i0, int64_t i1) {
    const float* gr = gb + i0;
    const float* vr = vb + i0;
    ApplyRun<kMomentum, kSkip>(i1 - i0, s, denom, scale, pb + i0, kMomentum ? mb + i0 : nullptr,
                               [&](auto d, int64_t k) {
                                 const auto gv = hn::Mul(hn::LoadU(d, gr + k), hn::Set(d, s.grad_scale));
                                 return hn::Mul(gv, RsqrtExact(d, hn::LoadU(d, vr + k)));
                               });
  });
}

template <bool kMomentum, bool kSkip>
void Unfactored(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad, float* v,
                float* m) {
  for (int64_t b = 0; b < nb; ++b) {
    double psum = 0, ysum = 0;
    UnfactoredStatsSlice<kSkip>(n, s, param + b * n, grad + b * n, v + b * n, &psum, &ysum);
    const double n_avg = double(n);
    UnfactoredApplySlice<kMomentum, kSkip>(n, s, ClipDenom(s, ysum, n_avg), ParamScale(s, psum, n_avg),
                                           param + b * n, grad + b * n, v + b * n, m ? m + b * n : nullptr);
  }
}

// run(momentum, skip_nan) with each flag as std::true_type / false_type, so
// that the kernels are compiled once per combination.
template <class Run>
void WithFlags(bool momentum, bool skip_nan, Run&& run) {
  using F = std::false_type;
  using T = std::true_type;
  if (momentum) {
    skip_nan ? run(T{}, T{}) : run(T{}, F{});
  } else {
    skip_nan ? run(F{}, T{}) : run(F{}, F{});
  }
}

}  // namespace

void AdafactorFactored(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad,
                       float* v_row, float* v_col, float* m) {
  WithFlags(m != nullptr, s.skip_nan, [&](auto momentum, auto skip) {
    constexpr bool kM = decltype(momentum)::value, kS = decltype(skip)::value;
    l.row_outer ? Factored<kM, kS, true>(l, s, param, grad, v_row, v_col, m)
                : Factored<kM, kS, false>(l, s, param, grad, v_row, v_col, m);
  });
}

void AdafactorUnfactored(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad,
                         float* v, float* m) {
  WithFlags(m != nullptr, s.skip_nan, [&](auto momentum, auto skip) {
    Unfactored<decltype(momentum)::value, decltype(skip)::value>(nb, n, s, param, grad, v, m);
  });
}

// The phases of a param split across processes (kernels.h): the same slice
// passes, the statistics exchanged between them by the caller.
void AdafactorFactoredStats(const FactoredLayout& l, const AdafactorScalars& s, const float* param,
                            const float* grad, double* psum, double* row_sums, double* col_sums) {
  const int64_t no = l.n_outer, ni = l.n_inner, per_b = no * ni;
  for (int64_t b = 0; b < l.nb; ++b) {
    double* rs = row_sums + b * (l.row_outer ? no : ni);
    double* cs = col_sums + b * (l.row_outer ? ni : no);
    psum[b] = FactoredStatsSlice(no, ni, s, param + b * per_b, grad + b * per_b, l.row_outer ? rs : cs,
                                 l.row_outer ? cs : rs);
  }
}

void AdafactorFactoredClipSums(const FactoredLayout& l, const AdafactorScalars& s, const float* grad,
                               const float* row_factor, const float* col_factor, double* ysum) {
  const int64_t no = l.n_outer, ni = l.n_inner, per_b = no * ni;
  const int64_t nrows = l.row_outer ? no : ni, ncols = l.row_outer ? ni : no;
  for (int64_t b = 0; b < l.nb; ++b) {
    const float* rf = row_factor + b * nrows;
    const float* cf = col_factor + b * ncols;
    ysum[b] = l.row_outer ? FactoredClipSumSlice<true>(no, ni, s, grad + b * per_b, rf, cf)
                          : FactoredClipSumSlice<false>(no, ni, s, grad + b * per_b, cf, rf);
  }
}

void AdafactorFactoredApply(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad,
                            const float* row_factor, const float* col_factor, const float* scale,
                            const float* denom, float* m) {
  const int64_t no = l.n_outer, ni = l.n_inner, per_b = no * ni;
  const int64_t nrows = l.row_outer ? no : ni, ncols = l.row_outer ? ni : no;
  WithFlags(m != nullptr, s.skip_nan, [&](auto momentum, auto skip) {
    constexpr bool kM = decltype(momentum)::value, kS = decltype(skip)::value;
    for (int64_t b = 0; b < l.nb; ++b) {
      const float* rf = row_factor + b * nrows;
      const float* cf = col_factor + b * ncols;
      float* pb = param + b * per_b;
      const float* gb = grad + b * per_b;
      float* mb = m ? m + b * per_b : nullptr;
      if (l.row_outer) FactoredApplySlice<kM, kS, true>(no, ni, s, denom[b], scale[b], pb, gb, mb, rf, cf);
      else FactoredApplySlice<kM, kS, false>(no, ni, s, denom[b], scale[b], pb, gb, mb, cf, rf);
    }
  });
}

void AdafactorUnfactoredStats(int64_t nb, int64_t n, const AdafactorScalars& s, const float* param,
                              const float* grad, float* v, double* psum, double* ysum) {
  for (int64_t b = 0; b < nb; ++b) {
    if (s.skip_nan) UnfactoredStatsSlice<true>(n, s, param + b * n, grad + b * n, v + b * n, psum + b, ysum + b);
    else UnfactoredStatsSlice<false>(n, s, param + b * n, grad + b * n, v + b * n, psum + b, ysum + b);
  }
}

void AdafactorUnfactoredApply(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad,
                              const float* v, const float* scale, const float* denom, float* m) {
  WithFlags(m != nullptr, s.skip_nan, [&](auto momentum, auto skip) {
    constexpr bool kM = decltype(momentum)::value, kS = decltype(skip)::value;
    for (int64_t b = 0; b < nb; ++b)
      UnfactoredApplySlice<kM, kS>(n, s, denom[b], scale[b], param + b * n, grad + b * n, v + b * n,
                                   m ? m + b * n : nullptr);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {
HWY_EXPORT(AdafactorFactored);
HWY_EXPORT(AdafactorUnfactored);
HWY_EXPORT(AdafactorFactoredStats);
HWY_EXPORT(AdafactorFactoredClipSums);
HWY_EXPORT(AdafactorFactoredApply);
HWY_EXPORT(AdafactorUnfactoredStats);
HWY_EXPORT(AdafactorUnfactoredApply);

void adafactor_factored(const kernels::FactoredLayout& l, const kernels::AdafactorScalars& s, float* param,
                        const float* grad, float* v_row, float* v_col, float* m) {
  T5X_DISPATCH(AdafactorFactored)(l, s, param, grad, v_row, v_col, m);
}
void adafactor_unfactored(int64_t nb, int64_t n, const kernels::AdafactorScalars& s, float* param,
                          const float* grad, float* v, float* m) {
  T5X_DISPATCH(AdafactorUnfactored)(nb, n, s, param, grad, v, m);
}
}  // namespace
}  // namespace t5x::cpu

namespace t5x::kernels::cpu {
// T5X_DISPATCH names the per-target namespaces (N_AVX2::, or on a one-target
// build such as aarch64's N_NEON:: alone) unqualified: they live in t5x::cpu.
using namespace ::t5x::cpu;  // NOLINT(google-build-using-namespace)

void adafactor_factored_update(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad,
                               float* v_row, float* v_col, float* m) {
  if (l.nb <= 0 || l.n_outer <= 0 || l.n_inner <= 0) return;
  t5x::cpu::adafactor_factored(l, s, param, grad, v_row, v_col, m);
}

void adafactor_unfactored_update(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad,
                                 float* v, float* m) {
  if (nb <= 0 || n <= 0) return;
  t5x::cpu::adafactor_unfactored(nb, n, s, param, grad, v, m);
}

void adafactor_factored_stats(const FactoredLayout& l, const AdafactorScalars& s, const float* param,
                              const float* grad, double* psum, double* row_sums, double* col_sums) {
  if (l.nb <= 0 || l.n_outer <= 0 || l.n_inner <= 0) return;
  T5X_DISPATCH(AdafactorFactoredStats)(l, s, param, grad, psum, row_sums, col_sums);
}

void adafactor_factored_clip_sums(const FactoredLayout& l, const AdafactorScalars& s, const float* grad,
                                  const float* row_factor, const float* col_factor, double* ysum) {
  if (l.nb <= 0 || l.n_outer <= 0 || l.n_inner <= 0) return;
  T5X_DISPATCH(AdafactorFactoredClipSums)(l, s, grad, row_factor, col_factor, ysum);
}

void adafactor_factored_apply(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad,
                              const float* row_factor, const float* col_factor, const float* scale,
                              const float* denom, float* m) {
  if (l.nb <= 0 || l.n_outer <= 0 || l.n_inner <= 0) return;
  T5X_DISPATCH(AdafactorFactoredApply)(l, s, param, grad, row_factor, col_factor, scale, denom, m);
}

void adafactor_unfactored_stats(int64_t nb, int64_t n, const AdafactorScalars& s, const float* param,
                                const float* grad, float* v, double* psum, double* ysum) {
  if (nb <= 0 || n <= 0) return;
  T5X_DISPATCH(AdafactorUnfactoredStats)(nb, n, s, param, grad, v, psum, ysum);
}

void adafactor_unfactored_apply(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad,
                                const float* v, const float* scale, const float* denom, float* m) {
  if (nb <= 0 || n <= 0) return;
  T5X_DISPATCH(AdafactorUnfactoredApply)(nb, n, s, param, grad, v, scale, denom, m);
}

}  // namespace t5x::kernels::cpu
#endif  // HWY_ONCE
