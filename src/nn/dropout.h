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

class Dropout {
 public:
  Dropout() = default;  // deterministic
  Dropout(double rate, std::optional<PRNGKey> key) : rate_(rate), key_(key) {}
  bool active() const { return rate_ > 0.0 && key_.has_value(); }
  double rate() const { return rate_; }
  Array operator()(const Array& x, const std::vector<std::string>& broadcast_dims = {"length"});

 private:
  double rate_ = 0.0;
  std::optional<PRNGKey> key_;
  uint32_t counter_ = 0;
};

}  // namespace t5x::nn
