// Gradient utilities: global norm, optax.clip_by_global_norm, and t5x's
// microbatch gradient accumulation (trainer.accumulate_grads_microbatched).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/array.h"
#include "mesh/pairwise_sum.h"
#include "ops/autodiff.h"
#include "t5x/optim/optimizer.h"

namespace t5x {

// sqrt(sum over all arrays of sum(g^2)) (optax.global_norm). Sums in float64.
// Arrays must be fully local: "[global_norm] 'x' is sharded ..." otherwise.
double global_norm(const ParamTree& grads);
// The same over arrays that may be split across processes: a split array's
// local sum of squares is summed through `comm` over the mesh axes it is
// split on (one float64 scalar per set of axes); a replicated one counts once.
// comm may be nullptr when every array is fully local.
double global_norm(const ParamTree& grads, const ShardComm* comm);

// The grads of `params` (an optimizer's clip_by_global_norm sums over the
// params it updates). Throws "[op] gradient of 'x' is split across
// processes; ..." when a grad is split and `comm` is nullptr.
ParamTree grads_to_clip(const ParamTree& params, const ParamTree& grads, const ShardComm* comm, const char* op);

// optax.clip_by_global_norm(max_norm): if global_norm < max_norm the grads
// are unchanged, else every g becomes (g / global_norm) * max_norm (float32,
// in that order). Returns new arrays; the inputs are not modified.
ParamTree clip_by_global_norm(const ParamTree& grads, double max_norm);
// Same with the global norm given (e.g. computed from gathered shards);
// works on local shards.
ParamTree clip_by_global_norm(const ParamTree& grads, double max_norm, double norm);

// Batch slice used for microbatch `index` of `num_microbatches`
// (t5x get_microbatch): rows [index*m, (index+1)*m) of dim `batch_dim`,
// m = batch / num_microbatches. Throws "[get_microbatch] ..." when the batch
// does not divide evenly or an array lacks `batch_dim`.
std::map<std::string, Array> get_microbatch(const std::map<std::string, Array>& batch, int64_t index,
                                            int64_t num_microbatches, const std::string& batch_dim = "batch");

// Float32 sum of per-microbatch gradients, as t5x's trainer: the
// accumulator starts as float32 zeros shaped like each param and adds each
// microbatch's grads; there is no division (t5x losses are sums over tokens,
// so the sum of microbatch grads is the full-batch gradient).
class GradAccumulator {
 public:
  explicit GradAccumulator(const ParamTree& params);
  // Adds one microbatch's grads (any floating dtype; same keys and shapes).
  // Throws "[GradAccumulator] ..." on a missing key or shape mismatch.
  void add(const ParamTree& grads);
  int64_t count() const { return count_; }
  const ParamTree& sum() const { return sum_; }

 private:
  ParamTree sum_;
  int64_t count_ = 0;
};

// sum_pairwise (mesh/pairwise_sum.h): the order microbatches and the data
// axis share.

// t5x accumulate_grads_microbatched for num_microbatches > 1: runs
// grad_fn(microbatch index) for every microbatch and sums the grads in
// float32, pairwise ((g0 + g1) + (g2 + g3), ...): the order in which a sum
// of microbatches split over data-parallel processes is formed, so that a
// run on one process and on several sum the same blocks the same way. With
// num_microbatches <= 1 returns grad_fn(0) unchanged.
ParamTree accumulate_grads_microbatched(const ParamTree& params, int64_t num_microbatches,
                                        const std::function<ParamTree(int64_t)>& grad_fn);

}  // namespace t5x
