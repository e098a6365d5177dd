// Dropout with counter-based keys (flax nn.Dropout as used by t5x).
//
// A Dropout object is created per forward pass from (rate, key). Each call
// draws its mask from fold_in(key, call number), so a forward pass is a pure
// function of the key and the call order. Deterministic (rate 0 or no key)
// returns x unchanged. broadcast_dims share one mask value along those dims:
// t5x uses ("length") for residual / embedding / MLP dropout and the query
// length for attention probabilities.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/random.h"

namespace t5x::nn {

// The dropout keys of a forward pass: none (deterministic), one, or one per
// equal block of the "batch" dim, in batch order. Block b's rows draw their
// masks as a forward pass over those rows alone with key b does, so a batch
// made of D gradient blocks (a global batch on a mesh) drops exactly what D
// microbatches of one process drop (docs/trainer.md, dropout keys). An array
// without a "batch" dim (an MoE layer's expert hidden layer) draws one mask
// from the first block's key.
struct DropoutKeys {
  std::vector<PRNGKey> blocks;
  DropoutKeys() = default;
  DropoutKeys(std::nullopt_t) {}
  DropoutKeys(const PRNGKey& key) : blocks{key} {}
  DropoutKeys(const std::optional<PRNGKey>& key) {
    if (key) blocks.push_back(*key);
  }
  static DropoutKeys per_block(std::vector<PRNGKey> keys) {
    DropoutKeys k;
    k.blocks = std::move(keys);
    return k;
  }
};

class Dropout {
 public:
  Dropout() = default;  // deterministic
  // Errors (at the call): "[dropout] ..." when x's "batch" dim is not a
  // multiple of the blocks.
  Dropout(double rate, DropoutKeys keys) : rate_(rate), keys_(std::move(keys)) {}
  bool active() const { return rate_ > 0.0 && !keys_.blocks.empty(); }
  double rate() const { return rate_; }
  Array operator()(const Array& x, const std::vector<std::string>& broadcast_dims = {"length"});

 private:
  double rate_ = 0.0;
  DropoutKeys keys_;
  uint32_t counter_ = 0;
};

}  // namespace t5x::nn
