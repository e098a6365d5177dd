#include "nn/dropout.h"

#include "ops/random.h"

namespace t5x::nn {

Array Dropout::operator()(const Array& x, const std::vector<std::string>& broadcast_dims) {
  if (!active()) return x;
  std::vector<std::string> dims;
  for (const auto& d : broadcast_dims)
    if (x.has_dim(d)) dims.push_back(d);
  return dropout(fold_in(*key_, counter_++), x, rate_, dims);
}

}  // namespace t5x::nn
