#include "backend/cpu/gated_gelu.h"

#include <stdexcept>
#include <string>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/gated_gelu.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "backend/cpu/simd-inl.h"

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

// The same f32 arithmetic for f32 and bf16 storage (bf16 is widened on load
// and rounded once on store), so bf16 I/O equals cast -> f32 kernel -> cast.
//
// Whole turns of kTurn vectors, each step written for all of them before the
// next, then the tail a vector at a time. GELU's exp and division are a
// dependent chain of ~100 cycles per vector; one vector at a time, its
// operations (with bf16's widening and rounding) filled Zen 2's FP scheduler
// and the chains of consecutive vectors did not overlap: the bf16 backward
// took 1.9x the f32 kernel's time. Each lane keeps its arithmetic, so its bits.
constexpr int kTurn = 4;

template <typename T>
HWY_INLINE void ForwardRange(int64_t n, const T* h0, const T* h1, T* out) {
  const DF d;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  auto one = [&](VF u, VF v) HWY_ATTR { return hn::Mul(Gelu(d, u), v); };  // out = gelu(h0) h1
  int64_t i = 0;
  for (; i + kTurn * N <= n; i += kTurn * N) {
    VF u[kTurn], v[kTurn];
#pragma GCC unroll 4
    for (int k = 0; k < kTurn; ++k) {
      u[k] = LoadF(d, h0 + i + k * N);
      v[k] = LoadF(d, h1 + i + k * N);
    }
#pragma GCC unroll 4
    for (int k = 0; k < kTurn; ++k) u[k] = one(u[k], v[k]);
#pragma GCC unroll 4
    for (int k = 0; k < kTurn; ++k) StoreF(d, u[k], out + i + k * N);
  }
  ForVectors(n - i, [&](int64_t j, size_t m) {
    StorePart(d, one(LoadPart(d, h0 + i + j, m), LoadPart(d, h1 + i + j, m)), out + i + j, m);
  });
}

template <typename T>
HWY_INLINE void BackwardRange(int64_t n, const T* h0, const T* h1, const T* dout, T* dh0, T* dh1) {
  const DF d;
  constexpr int64_t N = int64_t(hn::MaxLanes(DF()));
  // (dh0, dh1) = (dout h1 gelu'(h0), dout gelu(h0)) into (a0, a1).
  auto one = [&](VF u, VF v, VF g, VF& a0, VF& a1) HWY_ATTR {
    const GeluParts<VF> p = GeluAndGrad(d, u);
    a0 = hn::Mul(hn::Mul(g, v), p.grad);
    a1 = hn::Mul(g, p.value);
  };
  int64_t i = 0;
  for (; i + kTurn * N <= n; i += kTurn * N) {
    VF u[kTurn], v[kTurn], g[kTurn];
#pragma GCC unroll 4
    for (int k = 0; k < kTurn; ++k) {
      u[k] = LoadF(d, h0 + i + k * N);
      v[k] = LoadF(d, h1 + i + k * N);
      g[k] = LoadF(d, dout + i + k * N);
    }
#pragma GCC unroll 4
    for (int k = 0; k < kTurn; ++k) one(u[k], v[k], g[k], u[k], v[k]);
#pragma GCC unroll 4
    for (int k = 0; k < kTurn; ++k) {
      StoreF(d, u[k], dh0 + i + k * N);
      StoreF(d, v[k], dh1 + i + k * N);
    }
  }
  ForVectors(n - i, [&](int64_t j, size_t m) {
    VF a0, a1;
    one(LoadPart(d, h0 + i + j, m), LoadPart(d, h1 + i + j, m), LoadPart(d, dout + i + j, m), a0, a1);
    StorePart(d, a0, dh0 + i + j, m);
    StorePart(d, a1, dh1 + i + j, m);
  });
}

void ForwardF32(int64_t n, const float* h0, const float* h1, float* out) { ForwardRange(n, h0, h1, out); }
void ForwardBf16(int64_t n, const bfloat16* h0, const bfloat16* h1, bfloat16* out) { ForwardRange(n, h0, h1, out); }
void BackwardF32(int64_t n, const float* h0, const float* h1, const float* dout, float* dh0, float* dh1) {
  BackwardRange(n, h0, h1, dout, dh0, dh1);
}
void BackwardBf16(int64_t n, const bfloat16* h0, const bfloat16* h1, const bfloat16* dout, bfloat16* dh0,
                  bfloat16* dh1) {
  BackwardRange(n, h0, h1, dout, dh0, dh1);
}
float GeluOne(float x) {
  return OneLane(x, [](auto d, auto v) { return Gelu(d, v); });
}
float GeluGradOne(float x) {
  return OneLane(x, [](auto d, auto v) { return GeluAndGrad(d, v).grad; });
}

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "backend/cpu/parallel.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

void check(int64_t n) {
  if (n < 0) throw std::invalid_argument("[gated_gelu] negative size " + std::to_string(n));
}

}  // namespace

HWY_EXPORT(ForwardF32);
HWY_EXPORT(ForwardBf16);
HWY_EXPORT(BackwardF32);
HWY_EXPORT(BackwardBf16);
HWY_EXPORT(GeluOne);
HWY_EXPORT(GeluGradOne);

float gelu_tanh(float u) { return T5X_DISPATCH(GeluOne)(u); }
float gelu_tanh_grad(float u) { return T5X_DISPATCH(GeluGradOne)(u); }

void gated_gelu_forward(int64_t n, const float* h0, const float* h1, float* out) {
  check(n);
  simd_init();
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(ForwardF32)(e - b, h0 + b, h1 + b, out + b); });
}

void gated_gelu_backward(int64_t n, const float* h0, const float* h1, const float* dout, float* dh0, float* dh1) {
  check(n);
  simd_init();
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(BackwardF32)(e - b, h0 + b, h1 + b, dout + b, dh0 + b, dh1 + b);
  });
}

void gated_gelu_forward_bf16(int64_t n, const bfloat16* h0, const bfloat16* h1, bfloat16* out) {
  check(n);
  simd_init();
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) { HWY_DYNAMIC_DISPATCH(ForwardBf16)(e - b, h0 + b, h1 + b, out + b); });
}

void gated_gelu_backward_bf16(int64_t n, const bfloat16* h0, const bfloat16* h1, const bfloat16* dout,
                              bfloat16* dh0, bfloat16* dh1) {
  check(n);
  simd_init();
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    HWY_DYNAMIC_DISPATCH(BackwardBf16)(e - b, h0 + b, h1 + b, dout + b, dh0 + b, dh1 + b);
  });
}

}  // namespace t5x::cpu
#endif
