// 16-bit floating-point storage types: bfloat16 and IEEE half (float16).
//
// Both are plain 2-byte values that convert to and from float. float -> bf16
// rounds to nearest, ties to even, and keeps NaN a (quiet) NaN, matching
// JAX/XLA and ml_dtypes (so checkpoints round-trip bit-exactly with t5x).
#pragma once
#include <bit>
#include <cstdint>

namespace t5x {

struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(float f) : bits(from_float(f)) {}
  operator float() const { return std::bit_cast<float>(uint32_t(bits) << 16); }

  static bfloat16 from_bits(uint16_t b) { bfloat16 r; r.bits = b; return r; }
  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
    return uint16_t(u >> 16);
  }
};

struct float16 {
  uint16_t bits = 0;

  float16() = default;
  explicit float16(float f) : bits(from_float(f)) {}
  operator float() const { return to_float(bits); }

  static float16 from_bits(uint16_t b) { float16 r; r.bits = b; return r; }
  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);      // NaN
    if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);     // overflow -> inf
    if (a < 0x38800000u) {                                     // subnormal or zero
      // Scale into the subnormal range and let float addition round (RNE).
      float r = std::bit_cast<float>(a) + 0.5f;                // 0.5 = 2^-1: ulp 2^-24
      return uint16_t(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += 0xc8000fffu + mant_odd;                               // rebias and round RNE
    return uint16_t(sign | (a >> 13));
  }
  static float to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {  // zero / subnormal: mant * 2^-24
      float v = float(mant) * 5.9604644775390625e-8f;
      return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
    }
    if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  }
};

}  // namespace t5x
