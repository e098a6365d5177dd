#include "t5x/optim/adafactor_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/parallel.h"

namespace t5x::optim_detail {
// Compiled twice (src/t5x/optim/CMakeLists.txt): for the baseline and for
// AVX2; adafactor_dispatch.cpp picks one. Same operations in the same order
// (explicit 8-lane vectors, no FMA contraction), so both give the same bits.
namespace T5X_ADAFACTOR_ISA {

namespace {

constexpr int64_t kBlock = 512;         // longest float32 partial sum along a row
constexpr int64_t kChunkRows = 32;      // rows per parallel chunk: longest float32 sum down a column
constexpr int64_t kChunkElems = 16384;  // elements per parallel chunk of an unfactored param

// jnp.maximum / jnp.minimum propagate NaN (std::max / std::min do not).
float nan_max(float a, float b) { return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::max(a, b); }
float nan_min(float a, float b) { return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::min(a, b); }

// Eight float lanes (GCC / Clang vector extension): explicit vectors keep
// the hot loops vectorised without -ffast-math and with accumulators in
// registers. Loop bodies are written once for T = V and T = float (tails).
using V = float __attribute__((vector_size(32)));
constexpr int64_t kW = 8;
template <typename T>
inline T ld(const float* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
inline void st(float* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
inline T splat(float x) {
  if constexpr (std::is_same_v<T, V>) {
    return V{x, x, x, x, x, x, x, x};
  } else {
    return x;
  }
}
// 1 / sqrt(v) in each lane (exact division and sqrt, no approximation).
inline float rsqrt_lanes(float v) { return 1.0f / std::sqrt(v); }
inline V rsqrt_lanes(V v) {
  for (int j = 0; j < int(kW); ++j) v[j] = rsqrt_lanes(v[j]);
  return v;
}
// `fresh` where it is a number, else `old` (skip_nan_updates).
inline float keep_old_if_nan(float fresh, float old) { return fresh != fresh ? old : fresh; }
inline V keep_old_if_nan(V fresh, V old) {
  for (int j = 0; j < int(kW); ++j) fresh[j] = keep_old_if_nan(fresh[j], old[j]);
  return fresh;
}
// f(T{}, k) over [0, n): vectors, then a scalar tail.
template <typename F>
inline void for_lanes(int64_t n, F&& f) {
  int64_t k = 0;
  for (; k + kW <= n; k += kW) f(V{}, k);
  for (; k < n; ++k) f(0.0f, k);
}
// Sums of squares in float64 lanes (each float32 term converted exactly),
// as the generic walk and a param split over processes sum them. The eight
// lanes are held as two vectors of four doubles (lanes 0-3, 4-7): a single
// 64-byte vector was split by GCC through the stack and general registers on
// AVX2 (pass 1 ran at a third of the memory bandwidth). Same lanes, same bits.
using VD = double __attribute__((vector_size(32)));
inline VD lo_d(V x) { return __builtin_convertvector(__builtin_shufflevector(x, x, 0, 1, 2, 3), VD); }
inline VD hi_d(V x) { return __builtin_convertvector(__builtin_shufflevector(x, x, 4, 5, 6, 7), VD); }
struct Acc {
  VD lo{}, hi{};
  double s = 0;
  void add(V x) {
    lo += lo_d(x);
    hi += hi_d(x);
  }
  void add(float x) { s += double(x); }
  double total() const { return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3])) + s; }
};
// acc[0..lanes) += x, in float64.
inline void add_to(double* acc, V x) {
  VD a, b;
  std::memcpy(&a, acc, sizeof(VD));
  std::memcpy(&b, acc + 4, sizeof(VD));
  a += lo_d(x);
  b += hi_d(x);
  std::memcpy(acc, &a, sizeof(VD));
  std::memcpy(acc + 4, &b, sizeof(VD));
}
inline void add_to(double* acc, float x) { *acc += double(x); }

// Reused between calls (apply_gradient runs on one thread at a time per
// optimizer; thread_local keeps concurrent optimizers apart).
struct Scratch {
  std::vector<float> rf, cf;
  std::vector<double> part, outer, inner, chunk;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

template <typename T>
T* sized(std::vector<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
  return v.data();
}

// lr * clip(max(eps2, RMS(p)), max_parameter_scale), or lr.
float param_scale(const AdafactorScalars& s, double psum, double n_avg) {
  if (!s.use_scale) return s.lr;
  float ps = std::sqrt(float(psum / n_avg));
  ps = nan_max(ps, s.eps2);
  if (s.has_max_parameter_scale) ps = nan_min(ps, s.max_parameter_scale);
  return s.lr * ps;
}

float clip_denom(const AdafactorScalars& s, double ysum, double n_avg) {
  return s.clip ? nan_max(1.0f, std::sqrt(float(ysum / n_avg)) / s.clipping_threshold) : 1.0f;
}

// Last pass over one contiguous run of n: y -> clip -> scale -> momentum ->
// weight decay -> param, with y = y_of(T{}, k). Same expressions as the
// generic path; skipped NaNs keep the old value.
template <bool kMomentum, bool kSkip, typename Y>
inline void apply_run(int64_t n, const AdafactorScalars& s, float denom, float scale, float* p, float* m,
                      Y&& y_of) {
  for_lanes(n, [&](auto t, int64_t k) {
    using T = decltype(t);
    T yv = y_of(t, k);
    if (s.clip) yv = yv / splat<T>(denom);
    T u = splat<T>(scale) * yv;
    if constexpr (kMomentum) {
      const T old = ld<T>(m + k);
      T nm = splat<T>(s.b1) * old + splat<T>(s.one_minus_b1) * u;
      u = nm;
      if constexpr (kSkip) nm = keep_old_if_nan(nm, old);
      st(m + k, nm);
    }
    const T pv = ld<T>(p + k);
    T np = splat<T>(s.keep_w) * pv - u;
    if constexpr (kSkip) np = keep_old_if_nan(np, pv);
    st(p + k, np);
  });
}

template <bool kMomentum, bool kSkip, bool kRowOuter>
void factored_impl(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad, float* v_row,
                   float* v_col, float* m) {
  Scratch& sc = scratch();
  const int64_t no = l.n_outer, ni = l.n_inner, per_b = no * ni;
  const int64_t nrows = kRowOuter ? no : ni, ncols = kRowOuter ? ni : no;
  const int64_t nc = cpu::num_chunks(no, kChunkRows);
  double* part = sized(sc.part, nc * ni);
  double* outer = sized(sc.outer, no);
  double* inner = sized(sc.inner, ni);
  double* chunk = sized(sc.chunk, nc);
  float* rf = sized(sc.rf, nrows);
  float* cf = sized(sc.cf, ncols);
  const float gs = s.grad_scale, eps1 = s.eps1;

  for (int64_t b = 0; b < l.nb; ++b) {
    float* pb = param + b * per_b;
    const float* gb = grad + b * per_b;
    float* mb = m ? m + b * per_b : nullptr;
    float* vr = v_row + b * nrows;
    float* vc = v_col + b * ncols;

    // Pass 1: sum p^2, and g^2 + eps1 along rows (outer) and down columns (inner).
    cpu::parallel_for_chunks(no, kChunkRows, [&](int64_t c, int64_t r0, int64_t r1) {
      double* ip = part + c * ni;
      std::fill(ip, ip + ni, 0.0);
      double ps = 0;
      for (int64_t r = r0; r < r1; ++r) {
        const float* pr = pb + r * ni;
        const float* gr = gb + r * ni;
        double gsum = 0;
        for (int64_t k0 = 0; k0 < ni; k0 += kBlock) {
          const int64_t len = std::min(ni - k0, kBlock);
          Acc sp, sg;
          for_lanes(len, [&](auto t, int64_t j) {
            using T = decltype(t);
            const int64_t k = k0 + j;
            const T pv = ld<T>(pr + k);
            sp.add(pv * pv);
            const T gv = ld<T>(gr + k) * splat<T>(gs);
            const T g2 = gv * gv + splat<T>(eps1);
            sg.add(g2);
            add_to(ip + k, g2);
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
    const double n_avg = double(per_b);
    const float scale = param_scale(s, psum, n_avg);

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
    // y = g * row_factor * col_factor, multiplied in that order.
    const float* fo = kRowOuter ? rf : cf;  // factor of the outer index
    const float* fi = kRowOuter ? cf : rf;  // of the inner index
    auto y_at = [&](auto t, const float* gr, float a, int64_t k) {
      using T = decltype(t);
      const T gv = ld<T>(gr + k) * splat<T>(gs);
      return kRowOuter ? gv * splat<T>(a) * ld<T>(fi + k) : gv * ld<T>(fi + k) * splat<T>(a);
    };

    // Pass 2: sum y^2 for update clipping.
    double ysum = 0;
    if (s.clip) {
      cpu::parallel_for_chunks(no, kChunkRows, [&](int64_t c, int64_t r0, int64_t r1) {
        double ys = 0;
        for (int64_t r = r0; r < r1; ++r) {
          const float* gr = gb + r * ni;
          const float a = fo[r];
          for (int64_t k0 = 0; k0 < ni; k0 += kBlock) {
            Acc sy;
            for_lanes(std::min(ni - k0, kBlock), [&](auto t, int64_t j) {
              const auto yv = y_at(t, gr, a, k0 + j);
              sy.add(yv * yv);
            });
            ys += sy.total();
          }
        }
        chunk[c] = ys;
      });
      for (int64_t c = 0; c < nc; ++c) ysum += chunk[c];
    }
    const float denom = clip_denom(s, ysum, n_avg);

    // Pass 3: apply.
    cpu::parallel_for_chunks(no, kChunkRows, [&](int64_t, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* gr = gb + r * ni;
        const float a = fo[r];
        apply_run<kMomentum, kSkip>(ni, s, denom, scale, pb + r * ni, kMomentum ? mb + r * ni : nullptr,
                                    [&](auto t, int64_t k) { return y_at(t, gr, a, k); });
      }
    });
  }
}

template <bool kMomentum, bool kSkip>
void unfactored_impl(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad, float* v,
                     float* m) {
  Scratch& sc = scratch();
  constexpr int64_t kChunk = kChunkElems;
  const int64_t nc = cpu::num_chunks(n, kChunk);
  double* chunk = sized(sc.chunk, 2 * nc);
  const float gs = s.grad_scale, eps1 = s.eps1, decay = s.decay, mixing = s.mixing;
  for (int64_t b = 0; b < nb; ++b) {
    float* pb = param + b * n;
    const float* gb = grad + b * n;
    float* vb = v + b * n;
    float* mb = m ? m + b * n : nullptr;
    // Pass 1: sum p^2, update v, sum y^2 with y = g / sqrt(v).
    cpu::parallel_for_chunks(n, kChunk, [&](int64_t c, int64_t i0, int64_t i1) {
      double ps = 0, ys = 0;
      for (int64_t k0 = i0; k0 < i1; k0 += kBlock) {
        const int64_t k1 = std::min(i1, k0 + kBlock);
        // Explicit 8-lane sums (not `omp simd reduction`, whose order would
        // follow the vector width the compiler picks), so every build and
        // CPU adds in the same order.
        Acc ap, ay;
        for_lanes(k1 - k0, [&](auto t, int64_t j) {
          using T = decltype(t);
          const int64_t i = k0 + j;
          const T pv = ld<T>(pb + i);
          ap.add(pv * pv);
          const T gv = ld<T>(gb + i) * splat<T>(gs);
          const T g2 = gv * gv + splat<T>(eps1);
          const T old = ld<T>(vb + i);
          T nv = splat<T>(decay) * old + splat<T>(mixing) * g2;
          if (kSkip) nv = keep_old_if_nan(nv, old);
          st<T>(vb + i, nv);
          const T yv = gv * rsqrt_lanes(nv);
          ay.add(yv * yv);
        });
        ps += ap.total();
        ys += ay.total();
      }
      chunk[2 * c] = ps;
      chunk[2 * c + 1] = ys;
    });
    double psum = 0, ysum = 0;
    for (int64_t c = 0; c < nc; ++c) {
      psum += chunk[2 * c];
      ysum += chunk[2 * c + 1];
    }
    const double n_avg = double(n);
    const float scale = param_scale(s, psum, n_avg);
    const float denom = clip_denom(s, ysum, n_avg);
    // Pass 2: apply.
    cpu::parallel_for_chunks(n, kChunk, [&](int64_t, int64_t i0, int64_t i1) {
      const float* gr = gb + i0;
      const float* vr = vb + i0;
      apply_run<kMomentum, kSkip>(i1 - i0, s, denom, scale, pb + i0, kMomentum ? mb + i0 : nullptr,
                                  [&](auto t, int64_t k) {
                                    using T = decltype(t);
                                    return (ld<T>(gr + k) * splat<T>(gs)) * rsqrt_lanes(ld<T>(vr + k));
                                  });
    });
  }
}

// Calls run(momentum, skip_nan) with each flag as std::true_type / false_type,
// so that the kernels are compiled once per combination.
template <class Run>
void with_flags(bool momentum, bool skip_nan, Run&& run) {
  using F = std::false_type;
  using T = std::true_type;
  if (momentum) {
    skip_nan ? run(T{}, T{}) : run(T{}, F{});
  } else {
    skip_nan ? run(F{}, T{}) : run(F{}, F{});
  }
}

}  // namespace

void adafactor_factored_update(const FactoredLayout& l, const AdafactorScalars& s, float* param, const float* grad,
                               float* v_row, float* v_col, float* m) {
  if (l.nb <= 0 || l.n_outer <= 0 || l.n_inner <= 0) return;
  with_flags(m != nullptr, s.skip_nan, [&](auto momentum, auto skip) {
    constexpr bool kM = decltype(momentum)::value, kS = decltype(skip)::value;
    l.row_outer ? factored_impl<kM, kS, true>(l, s, param, grad, v_row, v_col, m)
                : factored_impl<kM, kS, false>(l, s, param, grad, v_row, v_col, m);
  });
}

void adafactor_unfactored_update(int64_t nb, int64_t n, const AdafactorScalars& s, float* param, const float* grad,
                                 float* v, float* m) {
  if (nb <= 0 || n <= 0) return;
  with_flags(m != nullptr, s.skip_nan, [&](auto momentum, auto skip) {
    unfactored_impl<decltype(momentum)::value, decltype(skip)::value>(nb, n, s, param, grad, v, m);
  });
}

}  // namespace T5X_ADAFACTOR_ISA
}  // namespace t5x::optim_detail
