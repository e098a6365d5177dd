// Primitive: one op's forward computation per device, its vjp and its sharded
// rule, side by side (MLX's primitives, Mesh-TensorFlow's Operation.lower).
//
// Every public op (ops/*.h) is a free function that validates its arguments
// on the global shapes, broadcasts by name and decides the output shape, then
// calls apply() with a fresh primitive instance that holds the op's typed
// attributes. apply() is the one place that decides how the op runs:
//   - some valid input split over the mesh (!is_fully_local()) and a sharded
//     lowering installed (ops/lowering.h): returns lower(lowering, inputs),
//     the op's sharded rule, and records nothing itself (the lowering's own
//     ops, on local shards, record themselves);
//   - a split input and no lowering: throws "[op] sharded inputs not
//     supported yet (got ... split over the mesh); reshard to replicated
//     first";
//   - otherwise runs the forward computation of the inputs' device eagerly on
//     the local buffers (eval_cpu() or eval_cuda(); inputs on different
//     devices throw "[op] inputs on different devices: cpu:0 and cuda:0 ...";
//     an op without valid inputs runs on the CPU) and, when an autodiff tape
//     is recording (ops/autodiff.h) and some input is tracked, records the
//     primitive so that vjp() can run during the backward pass.
// apply() is the only caller of eval_cpu()/eval_cuda(): it is the one place
// that picks the device. The eval methods reach kernels through the
// backend-neutral header backend/kernels.h (docs/architecture.md), never
// through a per-device backend header.
// Primitives with accepts_split_inputs() (to_local, checkpoint blocks) skip
// the first two cases. Composite ops (is_composite(), see Composite below)
// run their forward computation op by op instead, with recording on, on
// whichever device their parts run.
// A primitive instance belongs to one call: it may keep metadata (shapes,
// dims) from its eval for vjp().
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/array.h"

namespace t5x {

class ShardedLowering;  // ops/lowering.h

class Primitive {
 public:
  virtual ~Primitive() = default;
  virtual const char* name() const = 0;
  // Computes the outputs from the inputs (all already validated), on the
  // device that holds them: the CPU kernels, the CUDA kernels. The default
  // eval_cuda() throws std::invalid_argument("[name] has no CUDA kernel in
  // this build (inputs on cuda:0)...").
  virtual std::vector<Array> eval_cpu(const std::vector<Array>& inputs) = 0;
  virtual std::vector<Array> eval_cuda(const std::vector<Array>& inputs);
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
  // Optionally adds input `input`'s cotangent into `acc` in place, for a
  // gradient that is mostly zeros (take's rows of an embedding): `acc` is
  // that input's cotangent accumulated so far (float32, the input's shape).
  // The result must be the bits of acc + the vjp's result. Returns false to
  // leave it to vjp() (the default).
  virtual bool vjp_into(const std::vector<Array>& inputs, const std::vector<Array>& cotangents, size_t input,
                        Array& acc);
  // The sharded rule: the same outputs as eval_cpu() would give on the global
  // arrays, for inputs of which some are split, computed by the one method of
  // `lowering` that matches this op, called with this primitive's attributes.
  // The default throws "[name] no sharded lowering for op 'name'; reshard its
  // inputs to replicated first" (e.g. gelu_grad, which only vjps use).
  virtual std::vector<Array> lower(const ShardedLowering& lowering, const std::vector<Array>& inputs) const;
  virtual bool saves_inputs() const { return true; }
  virtual bool saves_outputs() const { return false; }
  // True when vjp() takes float32 cotangents for bfloat16 outputs as they are
  // (casts, reshapes, transposes); other primitives get them rounded first.
  virtual bool accepts_wide_cotangents() const { return false; }
  // True when eval_cpu() itself takes split (global) arrays: apply() neither
  // lowers nor refuses them (spmd's to_local, checkpoint blocks).
  virtual bool accepts_split_inputs() const { return false; }
  // True for a composite op: eval_cpu() is written with other public ops (or
  // computes a non-differentiable result, such as argmax), and those ops
  // record themselves; apply() runs it with recording on and records nothing
  // for the composite, whose vjp() is never called.
  virtual bool is_composite() const { return false; }
};

// A composite op whose sharded rule is its own rather than the composition of
// its parts' rules (stack along a new dim, mean, the fused kernels with their
// reference decompositions, argmax, ...): `expand` computes the outputs from
// local inputs, with the op's checks; `lower` calls the op's method of the
// lowering. Both may capture the op's arguments by reference: they run
// within the apply() call.
class Composite final : public Primitive {
 public:
  using Expand = std::function<std::vector<Array>(const std::vector<Array>&)>;
  using Lower = std::function<std::vector<Array>(const ShardedLowering&, const std::vector<Array>&)>;
  Composite(const char* name, Expand expand, Lower lower)
      : name_(name), expand_(std::move(expand)), lower_(std::move(lower)) {}
  const char* name() const override { return name_; }
  bool is_composite() const override { return true; }
  // The parts pick their own device (apply() on each), so both devices expand.
  std::vector<Array> eval_cpu(const std::vector<Array>& inputs) override { return expand_(inputs); }
  std::vector<Array> eval_cuda(const std::vector<Array>& inputs) override { return expand_(inputs); }
  std::vector<Array> lower(const ShardedLowering& lowering, const std::vector<Array>& inputs) const override {
    return lower_(lowering, inputs);
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>&,
                         const std::vector<bool>&) override;  // throws std::logic_error

 private:
  const char* name_;
  Expand expand_;
  Lower lower_;
};

// Runs `p` on `inputs` as described above; records it on the active tape when needed.
std::vector<Array> apply(std::shared_ptr<Primitive> p, const std::vector<Array>& inputs);
Array apply1(std::shared_ptr<Primitive> p, const std::vector<Array>& inputs);
// apply() of a Composite.
std::vector<Array> apply_composite(const char* name, const std::vector<Array>& inputs, Composite::Expand expand,
                                   Composite::Lower lower);

}  // namespace t5x
