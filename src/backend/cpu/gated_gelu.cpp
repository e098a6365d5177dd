#include "backend/cpu/gated_gelu.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "backend/cpu/bf16_vec.h"
#include "backend/cpu/parallel.h"
#include "backend/cpu/vec_math.h"

namespace t5x::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoef = 0.044715f;
constexpr int64_t kGrain = 1 << 14;

void check(int64_t n) {
  if (n < 0) throw std::invalid_argument("[gated_gelu] negative size " + std::to_string(n));
}

}  // namespace

float gelu_tanh(float u) {
  float t = fast_tanh(kSqrt2OverPi * (u + kCoef * u * u * u));
  return 0.5f * u * (1.f + t);
}

float gelu_tanh_grad(float u) {
  float t = fast_tanh(kSqrt2OverPi * (u + kCoef * u * u * u));
  float dinner = kSqrt2OverPi * (1.f + 3.f * kCoef * u * u);
  return 0.5f * (1.f + t) + 0.5f * u * (1.f - t * t) * dinner;
}

namespace {

#if defined(__AVX512F__)
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const bfloat16* p) { return bf16x16_load(p); }
inline void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
inline void store16(bfloat16* p, __m512 v) { bf16x16_store(p, v); }
#endif
inline float to_f(float x) { return x; }
inline float to_f(bfloat16 x) { return float(x); }

// The same f32 arithmetic for f32 and bf16 storage (bf16 is widened on load
// and rounded once on store), so bf16 I/O equals cast -> f32 kernel -> cast.
template <typename T>
void forward_impl(int64_t n, const T* h0, const T* h1, T* out) {
  check(n);
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    int64_t i = b;
#if defined(__AVX512F__)
    const __m512 c0 = _mm512_set1_ps(kSqrt2OverPi), c1 = _mm512_set1_ps(kCoef),
                 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.f);
    for (; i + 16 <= e; i += 16) {
      __m512 u = load16(h0 + i);
      __m512 u3 = _mm512_mul_ps(_mm512_mul_ps(u, u), u);
      __m512 t = tanh512(_mm512_mul_ps(c0, _mm512_fmadd_ps(c1, u3, u)));
      __m512 g = _mm512_mul_ps(_mm512_mul_ps(half, u), _mm512_add_ps(one, t));
      store16(out + i, _mm512_mul_ps(g, load16(h1 + i)));
    }
#endif
    for (; i < e; ++i) out[i] = T(gelu_tanh(to_f(h0[i])) * to_f(h1[i]));
  });
}

template <typename T>
void backward_impl(int64_t n, const T* h0, const T* h1, const T* dout, T* dh0, T* dh1) {
  check(n);
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    int64_t i = b;
#if defined(__AVX512F__)
    const __m512 c0 = _mm512_set1_ps(kSqrt2OverPi), c1 = _mm512_set1_ps(kCoef),
                 c3 = _mm512_set1_ps(3.f * kCoef), half = _mm512_set1_ps(0.5f),
                 one = _mm512_set1_ps(1.f);
    for (; i + 16 <= e; i += 16) {
      __m512 u = load16(h0 + i), v = load16(h1 + i), g = load16(dout + i);
      __m512 u2 = _mm512_mul_ps(u, u);
      __m512 t = tanh512(_mm512_mul_ps(c0, _mm512_fmadd_ps(c1, _mm512_mul_ps(u2, u), u)));
      __m512 dinner = _mm512_mul_ps(c0, _mm512_fmadd_ps(c3, u2, one));
      __m512 opt = _mm512_add_ps(one, t);
      __m512 gelu = _mm512_mul_ps(_mm512_mul_ps(half, u), opt);
      // 0.5 (1 + t) + 0.5 u (1 - t^2) dinner
      __m512 omt2 = _mm512_fnmadd_ps(t, t, one);
      __m512 dgelu = _mm512_mul_ps(half, _mm512_fmadd_ps(_mm512_mul_ps(u, omt2), dinner, opt));
      store16(dh0 + i, _mm512_mul_ps(_mm512_mul_ps(g, v), dgelu));
      store16(dh1 + i, _mm512_mul_ps(g, gelu));
    }
#endif
    for (; i < e; ++i) {
      float u = to_f(h0[i]), g = to_f(dout[i]), v = to_f(h1[i]);
      float gelu = gelu_tanh(u), dgelu = gelu_tanh_grad(u);
      dh0[i] = T(g * v * dgelu);
      dh1[i] = T(g * gelu);
    }
  });
}

}  // namespace

void gated_gelu_forward(int64_t n, const float* h0, const float* h1, float* out) { forward_impl(n, h0, h1, out); }

void gated_gelu_backward(int64_t n, const float* h0, const float* h1, const float* dout, float* dh0, float* dh1) {
  backward_impl(n, h0, h1, dout, dh0, dh1);
}

void gated_gelu_forward_bf16(int64_t n, const bfloat16* h0, const bfloat16* h1, bfloat16* out) {
  forward_impl(n, h0, h1, out);
}

void gated_gelu_backward_bf16(int64_t n, const bfloat16* h0, const bfloat16* h1, const bfloat16* dout,
                              bfloat16* dh0, bfloat16* dh1) {
  backward_impl(n, h0, h1, dout, dh0, dh1);
}

}  // namespace t5x::cpu
