#include "backend/cpu/gated_gelu.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "backend/cpu/parallel.h"

namespace t5x::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoef = 0.044715f;
constexpr int64_t kGrain = 1 << 14;

void check(int64_t n) {
  if (n < 0) throw std::invalid_argument("[gated_gelu] negative size " + std::to_string(n));
}

// tanh(z) = 1 - 2 / (exp(2z) + 1); vectorises (glibc's libmvec has expf).
inline float fast_tanh(float z) {
  z = std::fmin(std::fmax(z, -20.f), 20.f);
  return 1.f - 2.f / (std::exp(2.f * z) + 1.f);
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

void gated_gelu_forward(int64_t n, const float* h0, const float* h1, float* out) {
  check(n);
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) {
      float u = h0[i];
      float t = fast_tanh(kSqrt2OverPi * (u + kCoef * u * u * u));
      out[i] = 0.5f * u * (1.f + t) * h1[i];
    }
  });
}

void gated_gelu_backward(int64_t n, const float* h0, const float* h1, const float* dout,
                         float* dh0, float* dh1) {
  check(n);
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) {
      float u = h0[i], g = dout[i], v = h1[i];
      float t = fast_tanh(kSqrt2OverPi * (u + kCoef * u * u * u));
      float dinner = kSqrt2OverPi * (1.f + 3.f * kCoef * u * u);
      float gelu = 0.5f * u * (1.f + t);
      float dgelu = 0.5f * (1.f + t) + 0.5f * u * (1.f - t * t) * dinner;
      dh0[i] = g * v * dgelu;
      dh1[i] = g * gelu;
    }
  });
}

}  // namespace t5x::cpu
