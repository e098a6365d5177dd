// The optimizer's cross-shard sums (t5x/optim/optimizer.h ShardComm) over
// the groups of the current spmd context: float64 all-reduce and all-gather
// over the given mesh axes, counted in that group's byte counters.
#pragma once
#include <algorithm>

#include "spmd/context.h"
#include "t5x/optim/optimizer.h"

namespace t5x::spmd {

inline ShardComm shard_comm() {
  return ShardComm{[](const std::vector<std::string>& axes, double* values, size_t n) {
    if (n > 0 && !axes.empty()) context().over(axes).all_reduce(values, values, n, CommDtype::kF64);
  },
                   [](const std::vector<std::string>& axes, const double* local, size_t n, double* out) {
                     if (axes.empty()) {
                       std::copy(local, local + n, out);
                     } else if (n > 0) {
                       context().over(axes).all_gather(local, out, n, CommDtype::kF64);
                     }
                   }};
}

}  // namespace t5x::spmd
