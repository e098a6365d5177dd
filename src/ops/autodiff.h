// Reverse-mode autodiff on eager arrays (a tape, as in PyTorch / JAX's vjp).
//
// value_and_grad(fn, params) runs fn once with the floating-point params
// tracked, records every op whose input is tracked, then walks the tape
// backwards from the scalar loss. Gradients come back in a tree keyed like the
// params (e.g. "encoder/layers_0/attention/query/kernel"), same shape and
// dtype as each param; params the loss does not depend on get zeros.
//
// Memory: the tape keeps only what each primitive's vjp needs; a node's saved
// arrays are released right after its vjp ran, and each cotangent is dropped
// once consumed, so activation memory falls as the backward pass proceeds.
// checkpoint(block) (remat, cf. jax.checkpoint / t5x's remat policies) stores
// only the block's inputs and recomputes its forward during backward.
//
// Wide cotangents: a bfloat16 value's cotangent may be carried in float32.
// Weight gradients of bfloat16 products (sums over 'batch') leave the GEMM in
// float32 (ops/einsum.h), and pass through casts, reshapes, transposes and
// collectives unrounded; a primitive that wants its own dtype gets the
// cotangent rounded first (Primitive::accepts_wide_cotangents), and two
// cotangents of different widths add in float32. So a float32 parameter's
// gradient is the float32 sum over the batch, rounded once, not a bfloat16
// one: gradients summed over data-parallel processes then match one
// process's to float32 rounding. Gradients handed back have the primal's dtype.
//
// Limits: first-order only (ops run inside vjp are not recorded); one tape
// per thread; values that a checkpointed block differentiates must be passed
// as its arguments (closure captures are treated as constants there).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/array.h"

namespace t5x {

using ParamTree = std::map<std::string, Array>;
using ArrayFn = std::function<std::vector<Array>(const std::vector<Array>&)>;

struct ValueAndGrad {
  Array value;      // the scalar loss (untracked)
  ParamTree grads;  // d value / d param, one per floating param
};
struct ValueAuxAndGrad {
  Array value;
  ParamTree aux;  // extra outputs of fn (metrics), not differentiated
  ParamTree grads;
};

// Errors: "[value_and_grad] loss must be a scalar floating array, got ...".
ValueAndGrad value_and_grad(const std::function<Array(const ParamTree&)>& fn, const ParamTree& params);
ValueAuxAndGrad value_and_grad_with_aux(const std::function<std::pair<Array, ParamTree>(const ParamTree&)>& fn,
                                        const ParamTree& params);

// Adds `grads` into `accum` (microbatch gradient accumulation; missing
// entries of accum are created). Accumulation happens in the grad's dtype.
void accumulate_grads(ParamTree& accum, const ParamTree& grads);

// General vjp: outputs = fn(primals) and the cotangents of the primals given
// one cotangent per output (null = zeros). Returns {outputs, input_cotangents}.
std::pair<std::vector<Array>, std::vector<Array>> vjp(const ArrayFn& fn, const std::vector<Array>& primals,
                                                      const std::vector<Array>& cotangents);

// Same array, cut from the tape: no gradient flows through it.
Array stop_gradient(const Array& x);

// Rematerialised block: same results as fn; under a tape it stores only the
// inputs and recomputes fn's forward during the backward pass.
ArrayFn checkpoint(ArrayFn fn);

// True while a tape records ops on this thread.
bool is_recording();

// Pauses recording on this thread for its lifetime (e.g. for eval code).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace t5x
