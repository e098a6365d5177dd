// Per-target building blocks of the CPU kernels (Google Highway).
//
// Included by each kernel file once per SIMD target through
// hwy/foreach_target.h, hence the toggled guard instead of #pragma once.
// Everything here is written so that a kernel gives the same bits on every
// target (determinism across machines is a product feature):
//   - Fma is a fused multiply-add everywhere: the instruction where the
//     target has one (AVX2, AVX-512, NEON), else std::fma per lane (exact,
//     slow: SSSE3/SSE4/EMU128 CPUs are a fallback, not a fast path).
//   - exp, tanh and GELU exist once, below, and serve the whole vector, the
//     tail and the one-value calls (a one-lane vector).
//   - Sums run over 16 logical lanes whatever the vector width (LaneSums),
//     then add the 16 lane totals in a fixed tree.
//   - No approximate reciprocals; division and sqrt are IEEE on every target.
#if defined(T5X_BACKEND_CPU_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef T5X_BACKEND_CPU_SIMD_INL_H_
#undef T5X_BACKEND_CPU_SIMD_INL_H_
#else
#define T5X_BACKEND_CPU_SIMD_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <hwy/highway.h>

#include "backend/kernels.h"
#include "core/dtype_bf16.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The float tag of every kernel: at most 16 lanes, so that LaneSums' fixed
// 16-lane order maps onto 1, 2, 4 or 16 vectors.
inline constexpr size_t kSumLanes = 16;
using DF = hn::CappedTag<float, kSumLanes>;
using VF = hn::Vec<DF>;

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Fma(D d, V a, V b, V c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(a, b, c);
#else
  constexpr size_t N = hn::MaxLanes(D());
  HWY_ALIGN float fa[N], fb[N], fc[N];
  hn::Store(a, d, fa);
  hn::Store(b, d, fb);
  hn::Store(c, d, fc);
  for (size_t i = 0; i < N; ++i) fa[i] = std::fma(fa[i], fb[i], fc[i]);
  return hn::Load(d, fa);
#endif
}

// c - a * b, fused.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V NegFma(D d, V a, V b, V c) {
  return Fma(d, hn::Neg(a), b, c);
}

// ---- bf16 storage: widened exactly on load, rounded once on store ---------
// The store rounds to nearest, ties to even, and quiets NaN, the rule of
// bfloat16::from_float (core/dtype_bf16.h), so vector and scalar agree.

template <class D>
HWY_INLINE hn::Vec<D> LoadF(D d, const float* p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE hn::Vec<D> LoadF(D d, const bfloat16* p) {
  const hn::RebindToUnsigned<D> du;
  const hn::Rebind<uint16_t, D> d16;
  const auto h = hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p));
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, h)));
}
template <class D>
HWY_INLINE void StoreF(D d, hn::Vec<D> v, float* p) {
  hn::StoreU(v, d, p);
}
// The bf16 bits of each lane of v (in the low 16 bits of a u32 lane).
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> Bf16Bits(D, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  const auto u = hn::BitCast(du, v);
  const auto hi = hn::ShiftRight<16>(u);
  const auto r = hn::ShiftRight<16>(hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), hn::And(hi, hn::Set(du, 1u)))));
  const auto nan = hn::Gt(hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu))), hn::Set(di, 0x7f800000));
  return hn::IfThenElse(hn::RebindMask(du, nan), hn::Or(hi, hn::Set(du, 0x40u)), r);
}
template <class D>
HWY_INLINE void StoreF(D d, hn::Vec<D> v, bfloat16* p) {
  const hn::RebindToSigned<D> di;
  const hn::Rebind<uint16_t, D> d16;
  // Values fit in 16 bits, so the saturating signed->unsigned narrowing is exact.
  hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, Bf16Bits(d, v))), d16, reinterpret_cast<uint16_t*>(p));
}
// v rounded to bf16 and widened back: what a bf16 store and load give.
template <class D>
HWY_INLINE hn::Vec<D> RoundBf16(D d, hn::Vec<D> v) {
  return hn::BitCast(d, hn::ShiftLeft<16>(Bf16Bits(d, v)));
}

// ---- software prefetch ---------------------------------------------------
// kL1 brings the line into every level (prefetcht0 on x86); kOuter into the
// outer caches only (prefetcht2), for a stream whose lines are used once:
// bringing them into L1 only crowds out the data that is reused there
// (decode-step weights and keys / values: docs/performance.md, session 43).
enum class PrefetchTo { kNone, kL1, kOuter };

template <PrefetchTo kTo>
HWY_INLINE void PrefetchLine(const void* p) {
  if constexpr (kTo == PrefetchTo::kL1) __builtin_prefetch(p, 0, 3);
  else if constexpr (kTo == PrefetchTo::kOuter) __builtin_prefetch(p, 0, 1);
}

// ---- exp, tanh, GELU: the one formula ------------------------------------
// exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 in two
// parts, Cody & Waite 1980); exp(r) by its degree-6 Taylor polynomial on
// |r| <= ln2/2, relative error < 3e-7. 2^n is applied as two normal factors,
// 2^floor(n/2) (exact) then 2^(n - floor(n/2)) (one rounding), so results
// near the ends of the range round correctly. x < -87.3 gives 0 (exp(-inf)
// = 0), x > 88.7 gives +inf, NaN stays NaN.
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693145751953125f, kLn2Lo = 1.428606765330187e-06f;
inline constexpr float kExpLo = -87.3f, kExpHi = 88.7f;

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Exp(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V lo = hn::Set(d, kExpLo), hi = hn::Set(d, kExpHi);
  const V xc = hn::Min(hn::Max(x, lo), hi);
  const V n = hn::Round(hn::Mul(xc, hn::Set(d, kLog2e)));
  V r = NegFma(d, n, hn::Set(d, kLn2Hi), xc);
  r = NegFma(d, n, hn::Set(d, kLn2Lo), r);
  V p = hn::Set(d, 1.f / 720.f);
  p = Fma(d, p, r, hn::Set(d, 1.f / 120.f));
  p = Fma(d, p, r, hn::Set(d, 1.f / 24.f));
  p = Fma(d, p, r, hn::Set(d, 1.f / 6.f));
  p = Fma(d, p, r, hn::Set(d, 0.5f));
  p = Fma(d, p, r, hn::Set(d, 1.f));
  p = Fma(d, p, r, hn::Set(d, 1.f));
  const auto ni = hn::ConvertTo(di, n);  // exact: |n| <= 128
  const auto a = hn::ShiftRight<1>(ni);  // floor(n / 2)
  const auto b = hn::Sub(ni, a);
  const auto bias = hn::Set(di, 127);
  const V s1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(a, bias)));
  const V s2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(b, bias)));
  V y = hn::Mul(hn::Mul(p, s1), s2);
  y = hn::IfThenElse(hn::Lt(x, lo), hn::Zero(d), y);
  y = hn::IfThenElse(hn::Gt(x, hi), hn::Set(d, INFINITY), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// tanh(z) = sign(z) (1 - e) / (1 + e), e = exp(-2|z|).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V Tanh(D d, V z) {
  const V one = hn::Set(d, 1.f);
  const V e = Exp(d, hn::Mul(hn::Set(d, -2.f), hn::Abs(z)));
  return hn::CopySign(hn::Div(hn::Sub(one, e), hn::Add(one, e)), z);
}

// 1 / (1 + exp(-x)).
template <class D, class V = hn::Vec<D>>
HWY_INLINE V Sigmoid(D d, V x) {
  const V one = hn::Set(d, 1.f);
  return hn::Div(one, hn::Add(one, Exp(d, hn::Neg(x))));
}

// GELU, tanh form (flax's default; Hendrycks & Gimpel 2016, section 2):
//   gelu(x)  = 0.5 x (1 + t),  t = tanh(c (x + k x^3)),  c = sqrt(2/pi), k = 0.044715
//   gelu'(x) = 0.5 ((1 + t) + x (1 - t^2) c (1 + 3k x^2))
inline constexpr float kGeluC = 0.7978845608028654f;
inline constexpr float kGeluK = 0.044715f;

// The chain's clips on one vector of gradients (kernels::GradClip has the
// contract): (g / norm) * max_norm, then the clamp to [-max_delta,
// max_delta] by comparisons, so that a NaN stays NaN on every target.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V ClipGrad(D d, V g, const kernels::GradClip& c) {
  if (c.scale) g = hn::Mul(hn::Div(g, hn::Set(d, c.norm)), hn::Set(d, c.max_norm));
  if (c.clamp) {
    const V hi = hn::Set(d, c.max_delta), lo = hn::Neg(hi);
    g = hn::IfThenElse(hn::Gt(g, hi), hi, hn::IfThenElse(hn::Lt(g, lo), lo, g));
  }
  return g;
}

// optax's add_decayed_weights, scale_by_learning_rate and apply_updates on
// one vector of an update u: p + (u + wd * p) * step, the decay left out when
// `decay` is false (optax skips a weight decay of 0). step is -lr.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V DecayedStep(D, V u, V p, V wd, V step, bool decay) {
  if (decay) u = hn::Add(u, hn::Mul(wd, p));
  return hn::Add(p, hn::Mul(u, step));
}

// jnp.sign: 1 or -1, and x itself for +-0 and NaN.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V SignOf(D d, V x) {
  const V zero = hn::Zero(d), one = hn::Set(d, 1.f);
  return hn::IfThenElse(hn::Gt(x, zero), one, hn::IfThenElse(hn::Lt(x, zero), hn::Neg(one), x));
}

template <class V>
struct GeluParts {
  V value, grad;
};

template <class D, class V = hn::Vec<D>>
HWY_INLINE V GeluTanhOf(D d, V x, V x2) {
  const V inner = Fma(d, hn::Set(d, kGeluK), hn::Mul(x2, x), x);
  return Tanh(d, hn::Mul(hn::Set(d, kGeluC), inner));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE V Gelu(D d, V x) {
  const V t = GeluTanhOf(d, x, hn::Mul(x, x));
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(hn::Set(d, 1.f), t));
}

template <class D, class V = hn::Vec<D>>
HWY_INLINE GeluParts<V> GeluAndGrad(D d, V x) {
  const V one = hn::Set(d, 1.f), half = hn::Set(d, 0.5f);
  const V x2 = hn::Mul(x, x);
  const V t = GeluTanhOf(d, x, x2);
  const V opt = hn::Add(one, t);
  const V dinner = hn::Mul(hn::Set(d, kGeluC), Fma(d, hn::Set(d, 3.f * kGeluK), x2, one));
  const V grad = hn::Mul(half, Fma(d, hn::Mul(x, NegFma(d, t, t, one)), dinner, opt));
  return {hn::Mul(hn::Mul(half, x), opt), grad};
}

// One value through the vector formula (a one-lane vector), for the scalar
// call sites: bitwise what the vector lanes give.
template <class F>
HWY_INLINE float OneLane(float x, F f) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(f(d1, hn::Set(d1, x)));
}

// ---- sums in a fixed order -----------------------------------------------
// Value j of a stream (counting from its start) adds into logical lane
// j % 16; total() adds the 16 lane totals pairwise (8, 4, 2, 1). On a
// 4/8/16-lane target that is 4/2/1 accumulator vectors, with the same
// per-lane sequence of additions, hence the same bits.
template <class D = DF>
struct LaneSums {
  static constexpr size_t N = hn::MaxLanes(D());
  static constexpr size_t K = kSumLanes / N;
  static_assert(K * N == kSumLanes, "vector width must divide 16");
  hn::Vec<D> acc[K];

  HWY_INLINE explicit LaneSums(D d) {
    for (size_t k = 0; k < K; ++k) acc[k] = hn::Zero(d);
  }
  // Adds the block of 16 values v[0..K).
  HWY_INLINE void add(size_t k, hn::Vec<D> v) { acc[k] = hn::Add(acc[k], v); }
  HWY_INLINE float total(D d) const {
#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE  // fixed-width vectors only
    if constexpr (std::is_same_v<hn::TFromD<D>, float> && (N == 4 || N == 8 || N == 16)) {
      // The same additions in registers (a row sum's stores and 15 scalar
      // adds were ~7% of the attention forward tile's samples): lane j gets lane j + s,
      // s = 8, 4, 2, 1.
      auto fold = [](auto dv, auto v) {  // lane j + half added to lane j
        const hn::Half<decltype(dv)> dh;
        return hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v));
      };
      hn::Vec<hn::Full128<float>> v4;
      if constexpr (N == 16) {
        v4 = fold(hn::Half<D>(), fold(d, acc[0]));
      } else if constexpr (N == 8) {
        v4 = fold(d, hn::Add(acc[0], acc[1]));
      } else {
        v4 = hn::Add(hn::Add(acc[0], acc[2]), hn::Add(acc[1], acc[3]));
      }
      v4 = hn::Add(v4, hn::Shuffle1032(v4));  // lanes 0, 1: x0 + x2, x1 + x3
      v4 = hn::Add(v4, hn::Shuffle2301(v4));  // lane 0: (x0 + x2) + (x1 + x3)
      return hn::GetLane(v4);
    } else
#endif
    {
      HWY_ALIGN hn::TFromD<D> lanes[kSumLanes];
      for (size_t k = 0; k < K; ++k) hn::Store(acc[k], d, lanes + k * N);
      for (size_t s = kSumLanes / 2; s >= 1; s /= 2)
        for (size_t j = 0; j < s; ++j) lanes[j] += lanes[j + s];
      return lanes[0];
    }
  }
};

// ---- streaming with tails ------------------------------------------------
// Kernels walk an array in vectors; the last, partial vector is loaded from
// and stored through a padded copy, so the tail takes the same instructions
// as the full vectors (and the same bits).

template <class D, typename T>
HWY_INLINE hn::Vec<D> LoadPart(D d, const T* p, size_t valid, T fill = T()) {
  constexpr size_t N = hn::MaxLanes(D());
  if (valid == N) return LoadF(d, p);
  HWY_ALIGN T buf[N];
  for (size_t i = 0; i < N; ++i) buf[i] = i < valid ? p[i] : fill;
  return LoadF(d, buf);
}

template <class D, typename T>
HWY_INLINE void StorePart(D d, hn::Vec<D> v, T* p, size_t valid) {
  constexpr size_t N = hn::MaxLanes(D());
  if (valid == N) return StoreF(d, v, p);
  HWY_ALIGN T buf[N];
  StoreF(d, v, buf);
  std::memcpy(p, buf, valid * sizeof(T));
}

// In-register transpose of N rows of N floats, N = the vector's lanes (4, 8
// or 16; 1 on HWY_SCALAR): 4 x 4 within each 128-bit block (as SSE's
// _MM_TRANSPOSE4_PS), then the blocks: halves for N = 8, adjacent blocks and
// halves for N = 16.
template <class D>
HWY_INLINE void TransposeSquare(D d, hn::Vec<D>* r) {
  constexpr size_t N = hn::MaxLanes(D());
  static_assert(N == 1 || N == 4 || N == 8 || N == 16, "square transpose of 1, 4, 8 or 16 lanes");
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  (void)r;
#else
  const hn::Repartition<double, D> dd;
  hn::Vec<D> t[N];
  for (size_t i = 0; i < N; i += 2) {
    t[i] = hn::InterleaveLower(d, r[i], r[i + 1]);
    t[i + 1] = hn::InterleaveUpper(d, r[i], r[i + 1]);
  }
  // r[4g + k]: in each block B, column 4B + k of rows 4g .. 4g + 3.
  for (size_t i = 0; i < N; i += 4) {
    const auto a = hn::BitCast(dd, t[i]), b = hn::BitCast(dd, t[i + 1]);
    const auto c = hn::BitCast(dd, t[i + 2]), e = hn::BitCast(dd, t[i + 3]);
    r[i + 0] = hn::BitCast(d, hn::InterleaveLower(dd, a, c));
    r[i + 1] = hn::BitCast(d, hn::InterleaveUpper(dd, a, c));
    r[i + 2] = hn::BitCast(d, hn::InterleaveLower(dd, b, e));
    r[i + 3] = hn::BitCast(d, hn::InterleaveUpper(dd, b, e));
  }
  if constexpr (N == 8) {
    for (size_t k = 0; k < 4; ++k) {
      const auto lo = r[k], hi = r[4 + k];
      r[k] = hn::ConcatLowerLower(d, hi, lo);
      r[4 + k] = hn::ConcatUpperUpper(d, hi, lo);
    }
  } else if constexpr (N == 16) {
    for (size_t k = 0; k < 4; ++k) {
      const auto g0 = r[k], g1 = r[4 + k], g2 = r[8 + k], g3 = r[12 + k];
      // u0 = [g0.b0 g1.b0 g0.b2 g1.b2], u1 = [g0.b1 g1.b1 g0.b3 g1.b3]; u2, u3 alike.
      const auto u0 = hn::OddEvenBlocks(hn::SwapAdjacentBlocks(g1), g0);
      const auto u1 = hn::OddEvenBlocks(g1, hn::SwapAdjacentBlocks(g0));
      const auto u2 = hn::OddEvenBlocks(hn::SwapAdjacentBlocks(g3), g2);
      const auto u3 = hn::OddEvenBlocks(g3, hn::SwapAdjacentBlocks(g2));
      r[k] = hn::ConcatLowerLower(d, u2, u0);
      r[4 + k] = hn::ConcatLowerLower(d, u3, u1);
      r[8 + k] = hn::ConcatUpperUpper(d, u2, u0);
      r[12 + k] = hn::ConcatUpperUpper(d, u3, u1);
    }
  }
#endif
}

// f(i, valid) for the vectors of [0, n): i = 0, N, 2N, ..., valid = lanes in
// range (N but for the last).
template <class F>
HWY_INLINE void ForVectors(int64_t n, F f) {
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  for (int64_t i = 0; i < n; i += N) f(i, size_t(std::min(N, n - i)));
}

// f(k, i, valid) for the vectors of 16-value blocks of [0, n): k = vector
// index within its block (for LaneSums::add); the last block's vectors may be
// partial or empty (valid = 0) so that every target adds the same lanes.
template <class F>
HWY_INLINE void ForBlocks16(int64_t n, F f) {
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  constexpr size_t K = kSumLanes / size_t(N);
  for (int64_t b = 0; b < n; b += int64_t(kSumLanes))
    for (size_t k = 0; k < K; ++k) {
      const int64_t i = b + int64_t(k) * N;
      f(k, i, size_t(std::clamp<int64_t>(n - i, 0, N)));
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#endif  // T5X_BACKEND_CPU_SIMD_INL_H_ toggle
