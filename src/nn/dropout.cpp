#include "nn/dropout.h"

#include <algorithm>

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/shape.h"

namespace t5x::nn {

Array Dropout::operator()(const Array& x, const std::vector<std::string>& broadcast_dims) {
  if (!active()) return x;
  std::vector<std::string> dims;
  for (const auto& d : broadcast_dims)
    if (x.has_dim(d)) dims.push_back(d);
  const uint32_t call = counter_++;
  if (keys_.blocks.size() == 1) return dropout(fold_in(keys_.blocks[0], call), x, rate_, dims);
  // One mask per block of rows, each drawn over the block's shape as a pass
  // over those rows alone draws it, joined along "batch".
  const int64_t n = int64_t(keys_.blocks.size());
  // An array with no rows to split (the experts' hidden layer of an MoE
  // layer, [expert, capacity, expert_mlp], its tokens gathered from every
  // block): one mask, from the first block's key. Such a mesh step then
  // drops differently from one process's microbatches (docs/trainer.md).
  if (!x.has_dim("batch")) return dropout(fold_in(keys_.blocks[0], call), x, rate_, dims);
  if (x.dim("batch") % n != 0)
    throw_invalid("dropout", "per-block keys need a \"batch\" dim divisible by the " + std::to_string(n) +
                                 " blocks, got " + x.shape().to_string());
  std::vector<Dim> md;
  for (const Dim& d : x.shape().dims())
    if (std::find(dims.begin(), dims.end(), d.name) == dims.end())
      md.push_back(d.name == "batch" ? Dim{d.name, d.size / n} : d);
  std::vector<Array> masks;
  for (const PRNGKey& k : keys_.blocks) masks.push_back(bernoulli(fold_in(k, call), 1.0 - rate_, Shape(md)));
  return where(concat(masks, "batch"), mul(x, 1.0 / (1.0 - rate_)), 0.0);
}

}  // namespace t5x::nn
