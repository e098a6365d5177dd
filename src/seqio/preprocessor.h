// Preprocessor type of a seqio Task.
//
// seqio passes tf.data.Dataset -> Dataset callables. Here a preprocessor is one
// of:
//  - a per-example map (seqio's `map_over_dataset`): Example -> Example, or
//    std::nullopt to drop the example (a filter);
//  - a block transform: the examples of one pipeline block (consecutive
//    examples, `DatasetOptions::block_size`, default 1000) -> any number of
//    examples. This covers seqio's dataset-level steps (reduce_concat_tokens,
//    split_tokens). Blocks are independent, which is what makes every
//    pipeline position resumable and lets blocks run on several threads; a
//    block transform never sees examples of two different blocks;
//  - the CacheDatasetPlaceholder marking the offline-cache boundary.
//
// Determinism: a preprocessor must draw randomness only from ctx.seed (or
// ctx.seed_for(i) for the i-th example of a block). Seeds are pure functions
// of (pipeline seed, preprocessor position, example key, epoch); they never
// depend on thread scheduling.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "seqio/example.h"
#include "seqio/feature.h"

namespace seqio {

// splitmix64 finaliser: the mixing step behind every derived seed.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Seed for a (parent, child) pair; order-sensitive.
inline uint64_t derive_seed(uint64_t parent, uint64_t child) {
  return mix64(mix64(parent) ^ (child + 0x632BE59BD9B4E019ull));
}

struct PreprocessContext {
  const OutputFeatures& output_features;
  // Empty for pre-cache preprocessors (seqio forbids `sequence_length` there).
  const SequenceLengths& sequence_lengths;
  // Map: seed of this example. Block: seed of this block.
  uint64_t seed = 0;
  // Map: the example's key (source index, or a derived key after a block
  // transform). Block: key of the block's first example.
  uint64_t key = 0;
  int64_t epoch = 0;
  // For block transforms: a seed for the i-th input example of the block.
  uint64_t seed_for(uint64_t i) const { return derive_seed(seed, i); }
};

using MapFn = std::function<std::optional<Example>(Example, const PreprocessContext&)>;
using BlockFn = std::function<std::vector<Example>(std::vector<Example>, const PreprocessContext&)>;

struct Preprocessor {
  enum class Kind { kMap, kBlock, kCachePlaceholder };
  Kind kind = Kind::kMap;
  std::string name;           // for error messages and `seqio show`
  MapFn map;                  // kMap
  BlockFn block;              // kBlock
  bool cache_required = false;  // kCachePlaceholder: task must be read from cache

  static Preprocessor Map(std::string name, MapFn fn) {
    Preprocessor p; p.kind = Kind::kMap; p.name = std::move(name); p.map = std::move(fn); return p;
  }
  static Preprocessor Block(std::string name, BlockFn fn) {
    Preprocessor p; p.kind = Kind::kBlock; p.name = std::move(name); p.block = std::move(fn); return p;
  }
  // seqio.CacheDatasetPlaceholder(required=...).
  static Preprocessor CachePlaceholder(bool required = false) {
    Preprocessor p; p.kind = Kind::kCachePlaceholder; p.name = "cache_placeholder";
    p.cache_required = required; return p;
  }
};

}  // namespace seqio
