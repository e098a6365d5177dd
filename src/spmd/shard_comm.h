// The optimizer's cross-shard sums (t5x/optim/optimizer.h ShardComm) over
// the groups of the current spmd context: an in-place float64 all-reduce
// over the given mesh axes, counted in that group's byte counters.
#pragma once
#include "spmd/context.h"
#include "t5x/optim/optimizer.h"

namespace t5x::spmd {

inline ShardComm shard_comm() {
  return ShardComm{[](const std::vector<std::string>& axes, double* values, size_t n) {
    if (n > 0 && !axes.empty()) context().over(axes).all_reduce(values, values, n, CommDtype::kF64);
  }};
}

}  // namespace t5x::spmd
