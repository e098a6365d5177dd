// Gradient utilities: global norm, optax.clip_by_global_norm and optax.clip
// chained before an optimizer, and t5x's
// microbatch gradient accumulation (trainer.accumulate_grads_microbatched).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/kernels.h"
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

// A stateless optax transformation that t5x's optimizers.chain puts before
// the optimizer, e.g. chain([optax.clip(1.0), optax.lion(...)]) in t5x's
// examples/t5/t5_1_1/examples/base_wmt_from_scratch_lion.gin:
//   kGlobalNorm: optax.clip_by_global_norm(max_norm), as clip_by_global_norm above;
//   kValue:      optax.clip(max_delta): each value clamped to [-max_delta, max_delta].
struct ChainedClip {
  enum class Kind { kGlobalNorm, kValue };
  Kind kind = Kind::kGlobalNorm;
  double threshold = 1.0;  // max_norm or max_delta: finite and > 0
  static ChainedClip global_norm(double max_norm) { return {Kind::kGlobalNorm, max_norm}; }
  static ChainedClip value(double max_delta) { return {Kind::kValue, max_delta}; }
};
using ChainedClips = std::vector<ChainedClip>;  // in chain order

// Throws "[op] optax.clip's max_delta must be finite and > 0, got ..." (or
// max_norm) for a bad threshold.
void check_chained_clips(const ChainedClips& clips, const char* op);

// Where an optimizer's own state sits in the chain's flax state dict: "" with
// no clips, else "<n>/" (the n clips' states are empty, and OptaxWrapper's
// state dict leaves empty states out), e.g. "1/" for chain([clip, adamw]).
std::string chain_state_prefix(const ChainedClips& clips);

// One step's clips, prepared for an update kernel. The longest tail of the
// chain that reads [clip_by_global_norm][clip] becomes `fused`, applied by
// the kernel to float32 gradients as it reads them (no clipped copy); the
// clips before that tail are applied into copies first, and gradients of
// other dtypes get the whole chain in a copy. So the kernel applies `fused`
// to exactly the gradients of `grads` that are float32.
struct PreparedClips {
  kernels::GradClip fused;
  ParamTree grads;  // every key of params
};
// `grads` must hold every key of `params`; a gradient split across processes
// needs `comm` for the global norm ("[op] gradient of 'x' is split ...").
PreparedClips prepare_chained_clips(const ChainedClips& clips, const ParamTree& params, const ParamTree& grads,
                                    const ShardComm* comm, const char* op);

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
