// Counter-based randomness for preprocessors.
//
// seqio draws per-example seeds from tf.data random streams and feeds them to
// TF's stateless (Philox) ops; bit-exact reproduction would need TF itself. We
// keep the property that matters: every random draw is a pure function of
// (seed, stage, example index, draw number), so results never depend on
// thread count, batching or where a resumed pipeline starts.
//
// The generator is SplitMix64's finaliser used as a keyed hash of a 64-bit
// counter (Steele, Lea & Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014). It passes BigCrush as a stream and is plenty for
// masking and shuffling; it is not cryptographic.
#pragma once
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace seqio::preprocessors {

// SplitMix64 finaliser: a bijective 64-bit mix.
constexpr uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Derives an independent key from (key, data), like jax.random.fold_in.
constexpr uint64_t fold_in(uint64_t key, uint64_t data) {
  return mix64(mix64(key) ^ (data * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull));
}

// Stable 64-bit hash of a stage name (FNV-1a), used to separate the streams
// of different preprocessors that share one pipeline seed.
constexpr uint64_t stage_key(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
  return h;
}

// A stream of draws from one key. Copyable; copies replay the same stream.
class Rng {
 public:
  explicit constexpr Rng(uint64_t key) : key_(key) {}
  // Key for (seed, stage, example index): the canonical per-example stream.
  static Rng for_example(uint64_t seed, std::string_view stage, uint64_t index) {
    return Rng(fold_in(fold_in(seed, stage_key(stage)), index));
  }
  uint64_t key() const { return key_; }
  // A child stream, independent of this one and of other children.
  Rng split(uint64_t i) const { return Rng(fold_in(key_ ^ 0x5851F42D4C957F2Dull, i)); }

  uint64_t next_u64() { return mix64(key_ + 0x9E3779B97F4A7C15ull * ++counter_); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform integer in [lo, hi); requires lo < hi. Multiply-shift mapping
  // (bias below 2^-40 for any range that fits in 24 bits).
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const auto range = static_cast<unsigned __int128>(static_cast<uint64_t>(hi - lo));
    return lo + static_cast<int64_t>((range * next_u64()) >> 64);
  }
  // Uniformly random permutation of v (Fisher-Yates).
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      const auto j = static_cast<size_t>(uniform_int(0, static_cast<int64_t>(i)));
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  uint64_t key_;
  uint64_t counter_ = 0;
};

}  // namespace seqio::preprocessors
