// Primitive: one op's forward computation and its vjp, side by side (MLX style).
//
// Every public op (ops/*.h) is a free function that validates its arguments,
// broadcasts by name and decides the output shape, then calls apply() with a
// fresh primitive instance. apply() runs forward() eagerly and, when an
// autodiff tape is recording (ops/autodiff.h) and some input is tracked,
// records the primitive so that vjp() can run during the backward pass.
// A primitive instance belongs to one call: it may keep metadata (shapes,
// dims) from forward() for vjp().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/array.h"

namespace t5x {

class Primitive {
 public:
  virtual ~Primitive() = default;
  virtual const char* name() const = 0;
  // Computes the outputs from the inputs (all already validated).
  virtual std::vector<Array> forward(const std::vector<Array>& inputs) = 0;
  // Input cotangents from output cotangents. `inputs` / `outputs` hold the
  // forward values when saves_inputs() / saves_outputs(), else null Arrays.
  // `cotangents` has one entry per output: same shape and dtype as that output
  // (zeros when the output did not reach the loss; null for integer/bool outputs),
  // except that a primitive with accepts_wide_cotangents() may get a float32
  // cotangent for a bfloat16 output.
  // Returns one Array per input, the cotangent with exactly that input's shape
  // and dtype (or float32 for a bfloat16 input: a wide cotangent, see
  // ops/autodiff.h), or a null Array when `needs_grad[i]` is false or the
  // input is not differentiable.
  virtual std::vector<Array> vjp(const std::vector<Array>& inputs, const std::vector<Array>& outputs,
                                 const std::vector<Array>& cotangents, const std::vector<bool>& needs_grad) = 0;
  virtual bool saves_inputs() const { return true; }
  virtual bool saves_outputs() const { return false; }
  // True when vjp() takes float32 cotangents for bfloat16 outputs as they are
  // (casts, reshapes, transposes); other primitives get them rounded first.
  virtual bool accepts_wide_cotangents() const { return false; }
};

// Runs `p` on `inputs`; records it on the active tape when needed.
std::vector<Array> apply(std::shared_ptr<Primitive> p, const std::vector<Array>& inputs);
Array apply1(std::shared_ptr<Primitive> p, const std::vector<Array>& inputs);

}  // namespace t5x
