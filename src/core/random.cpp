#include "core/random.h"

#include <cmath>
#include <limits>

#include "core/error.h"

namespace t5x {
namespace {

inline uint32_t rotl(uint32_t v, int r) { return (v << r) | (v >> (32 - r)); }

// 20 rounds in 5 groups of 4, rotation constants alternating between the two
// sets; a key injection after each group. Written out so the rotations are
// constants and the counter loop below vectorises.
inline __attribute__((always_inline)) void threefry_block(uint32_t k0, uint32_t k1, uint32_t& x0, uint32_t& x1) {
  const uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
#define T5X_TF_ROUND(r) x0 += x1; x1 = rotl(x1, r); x1 ^= x0;
#define T5X_TF_EVEN T5X_TF_ROUND(13) T5X_TF_ROUND(15) T5X_TF_ROUND(26) T5X_TF_ROUND(6)
#define T5X_TF_ODD T5X_TF_ROUND(17) T5X_TF_ROUND(29) T5X_TF_ROUND(16) T5X_TF_ROUND(24)
  x0 += k0; x1 += k1;
  T5X_TF_EVEN x0 += k1; x1 += k2 + 1u;
  T5X_TF_ODD  x0 += k2; x1 += k0 + 2u;
  T5X_TF_EVEN x0 += k0; x1 += k1 + 3u;
  T5X_TF_ODD  x0 += k1; x1 += k2 + 4u;
  T5X_TF_EVEN x0 += k2; x1 += k0 + 5u;
#undef T5X_TF_ODD
#undef T5X_TF_EVEN
#undef T5X_TF_ROUND
}

}  // namespace

std::array<uint32_t, 2> threefry2x32(const PRNGKey& key, uint32_t x0, uint32_t x1) {
  threefry_block(key.words[0], key.words[1], x0, x1);
  return {x0, x1};
}

PRNGKey prng_key(int64_t seed) {
  PRNGKey k;
  if (seed >= std::numeric_limits<int32_t>::min() && seed <= std::numeric_limits<int32_t>::max()) {
    k.words = {0u, uint32_t(int32_t(seed))};
  } else {
    uint64_t u = uint64_t(seed);
    k.words = {uint32_t(u >> 32), uint32_t(u & 0xffffffffu)};
  }
  return k;
}

// JAX's threefry_2x32(key, counts) on a flat count vector: the counts are
// padded to even length, split into halves (x0 = first half, x1 = second),
// hashed pairwise and concatenated back.
void random_bits(const PRNGKey& key, int64_t n, uint32_t* out) {
  if (n < 0) throw_invalid("random_bits", "negative count " + std::to_string(n));
  if (n > int64_t(std::numeric_limits<uint32_t>::max()))
    throw_invalid("random_bits", "more than 2^32-1 words requested: " + std::to_string(n));
  const int64_t half = (n + 1) / 2;
  const int64_t full = n / 2;  // pairs whose second counter is real
  const uint32_t k0 = key.words[0], k1 = key.words[1];
#pragma omp parallel for schedule(static) if (half > 16384)
  for (int64_t i = 0; i < full; ++i) {
    uint32_t x0 = uint32_t(i), x1 = uint32_t(i + half);
    threefry_block(k0, k1, x0, x1);
    out[i] = x0;
    out[i + half] = x1;
  }
  if (half > full) {  // odd n: the last pair's second counter is the zero padding
    uint32_t x0 = uint32_t(full), x1 = 0;
    threefry_block(k0, k1, x0, x1);
    out[full] = x0;
  }
}

void random_bits_at(const PRNGKey& key, int64_t n, const int64_t* at, int64_t count, uint32_t* out) {
  const int64_t half = (n + 1) / 2;
  const uint32_t k0 = key.words[0], k1 = key.words[1];
  for (int64_t c = 0; c < count; ++c) {
    const int64_t i = at[c];
    if (i < 0 || i >= n)
      throw_invalid("random_bits_at", "index " + std::to_string(i) + " outside [0, " + std::to_string(n) + ")");
    // random_bits' pair (j, j + half), or (j, 0) for odd n's last j; word i
    // is the pair's first output below half, its second from half on.
    const bool second = i >= half;
    const int64_t j = second ? i - half : i;
    uint32_t x0 = uint32_t(j), x1 = j + half < n ? uint32_t(j + half) : 0u;
    threefry_block(k0, k1, x0, x1);
    out[c] = second ? x1 : x0;
  }
}

std::vector<uint32_t> random_bits(const PRNGKey& key, int64_t n) {
  std::vector<uint32_t> r(size_t(std::max<int64_t>(n, 0)));
  random_bits(key, n, r.data());
  return r;
}

std::vector<PRNGKey> split(const PRNGKey& key, int64_t n) {
  if (n < 0) throw_invalid("split", "negative number of keys " + std::to_string(n));
  std::vector<uint32_t> bits = random_bits(key, 2 * n);
  std::vector<PRNGKey> keys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) keys[size_t(i)].words = {bits[size_t(2 * i)], bits[size_t(2 * i + 1)]};
  return keys;
}

PRNGKey fold_in(const PRNGKey& key, uint32_t data) {
  auto y = threefry2x32(key, 0u, data);
  PRNGKey k;
  k.words = {y[0], y[1]};
  return k;
}

float erf_inv_f32(float x) {
  float w = -std::log1p(-x * x);
  float p;
  if (w < 5.0f) {
    w = w - 2.5f;
    p = 2.81022636e-08f;
    p = 3.43273939e-07f + p * w;
    p = -3.5233877e-06f + p * w;
    p = -4.39150654e-06f + p * w;
    p = 0.00021858087f + p * w;
    p = -0.00125372503f + p * w;
    p = -0.00417768164f + p * w;
    p = 0.246640727f + p * w;
    p = 1.50140941f + p * w;
  } else {
    w = std::sqrt(w) - 3.0f;
    p = -0.000200214257f;
    p = 0.000100950558f + p * w;
    p = 0.00134934322f + p * w;
    p = -0.00367342844f + p * w;
    p = 0.00573950773f + p * w;
    p = -0.0076224613f + p * w;
    p = 0.00943887047f + p * w;
    p = 1.00167406f + p * w;
    p = 2.83297682f + p * w;
  }
  if (std::fabs(x) == 1.0f) return x * std::numeric_limits<float>::infinity();
  return p * x;
}

}  // namespace t5x
