// JAX-compatible counter-based PRNG keys (threefry2x32, jax.random's default
// "threefry2x32" implementation in its legacy, non-partitionable mode,
// i.e. jax_threefry_partitionable=False).
//
// A key is two uint32 words. The functions below produce bit-for-bit the same
// keys and bits as jax.random.PRNGKey / split / fold_in / bits (golden values
// in tests/golden/core/random.json, made by scripts/golden/core_random.py).
// Source: Salmon et al., "Parallel random numbers: as easy as 1, 2, 3" (SC'11),
// Threefry-2x32 with 20 rounds; JAX's jax/_src/prng.py for the key schedule.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

namespace t5x {

struct PRNGKey {
  std::array<uint32_t, 2> words{0, 0};
  bool operator==(const PRNGKey&) const = default;
};

// jax.random.PRNGKey(seed) with JAX's default 32-bit mode: seeds that fit in
// int32 give {0, uint32(seed)}; larger seeds give {seed >> 32, seed & 0xffffffff}
// (the jax_enable_x64 result).
PRNGKey prng_key(int64_t seed);
// jax.random.split(key, n): n new keys.
std::vector<PRNGKey> split(const PRNGKey& key, int64_t n = 2);
// jax.random.fold_in(key, data).
PRNGKey fold_in(const PRNGKey& key, uint32_t data);

// The threefry2x32 block function on one counter pair.
std::array<uint32_t, 2> threefry2x32(const PRNGKey& key, uint32_t x0, uint32_t x1);

// jax.random.bits(key, (n,), uint32): n 32-bit words. Word i depends only on
// (key, i, n), so any thread split of the range gives the same result.
void random_bits(const PRNGKey& key, int64_t n, uint32_t* out);
std::vector<uint32_t> random_bits(const PRNGKey& key, int64_t n);
// Words at[i] (each in [0, n), else std::invalid_argument) of
// random_bits(key, n), without the others: a word is one threefry block of
// its counter pair.
void random_bits_at(const PRNGKey& key, int64_t n, const int64_t* at, int64_t count, uint32_t* out);

// Maps 32 random bits to a float in [0, 1) exactly as jax.random.uniform
// (23 mantissa bits: bitcast((bits >> 9) | 0x3f800000) - 1).
inline float bits_to_unit_float(uint32_t bits) {
  uint32_t u = (bits >> 9) | 0x3f800000u;
  float f;
  static_assert(sizeof(f) == sizeof(u));
  __builtin_memcpy(&f, &u, sizeof(f));
  return f - 1.0f;
}

// Inverse error function in float32 (Giles' single-precision approximation,
// "Approximating the erfinv function", GPU Computing Gems 2010, as XLA uses).
float erf_inv_f32(float x);

}  // namespace t5x
