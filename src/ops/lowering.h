// The sharded lowering of the public ops: a typed interface the op layer
// calls and the spmd layer implements (Mesh-TensorFlow's Operation.lower).
//
// Every public op runs through apply() (ops/primitive.h). When a lowering is
// installed and some valid input of the primitive is split over the mesh
// (!is_fully_local()), apply() does not run the primitive's local eval_cpu();
// it returns p->lower(lowering, inputs), and each primitive's lower() calls
// the one method below that matches it, with the primitive's own typed
// attributes (a cumsum's dim, exclusive and reverse; an attention's options).
// The lowering computes on the local shards with the plain ops (whose inputs
// are then fully local, so apply() runs their eval_cpu(): no recursion) plus
// collectives, and those ops record themselves on the autodiff tape.
//
// Layering: src/spmd depends on src/ops, not the reverse, so the op layer
// only declares this interface; spmd::Lowering (spmd/dispatch.h) implements
// it and spmd::install() or a LoweringScope installs it. Every method is pure:
// a lowering that misses one does not compile, and adding an op family means
// one method here, one override in spmd, and one lower() in its primitive. A
// primitive without a lower() throws "[op] no sharded lowering for op 'op';
// reshard its inputs to replicated first" (Primitive::lower).
//
// The arguments are the op's public arguments, already validated on the
// global shapes by the free function, except for the composite ops (mean,
// logsumexp, stack, expand_dims, squeeze, argmax, one_hot, isnan, isfinite,
// einsum, rms_norm, the cross-entropy, gated_gelu, attention, fourier_mix), whose checks
// run in their local expansion; the lowering validates what it needs.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/array.h"
#include "ops/fused.h"

namespace t5x {

// Element-wise ops of one operand (ops/elementwise.h), by public name.
enum class UnaryOp { Neg, Abs, Sign, Square, Exp, Log, Tanh, Sqrt, Rsqrt, Sigmoid, Relu, Gelu, LogicalNot, IsNan, IsFinite };
// Element-wise ops of two operands; Eq ... LogicalOr return bool.
enum class BinaryOp { Add, Sub, Mul, Div, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr };
enum class Reduction { Sum, Max, Min };

const char* op_name(UnaryOp op);    // "neg", ..., "isfinite"
const char* op_name(BinaryOp op);   // "add", ..., "logical_or"
const char* op_name(Reduction op);  // "sum", "max", "min"

class ShardedLowering {
 public:
  virtual ~ShardedLowering() = default;

  // ops/elementwise.h
  virtual Array unary(UnaryOp op, const Array& x) const = 0;
  virtual Array binary(BinaryOp op, const Array& a, const Array& b) const = 0;
  // add(a, 2.0) and the like (Add ... Minimum): the scalar is applied to each shard.
  virtual Array binary_scalar(BinaryOp op, const Array& a, double b) const = 0;
  virtual Array where(const Array& cond, const Array& x, const Array& y) const = 0;
  virtual Array cast(const Array& x, DType dtype) const = 0;

  // ops/reduce.h
  virtual Array reduce(Reduction op, const Array& x, const std::vector<std::string>& dims) const = 0;
  virtual Array mean(const Array& x, const std::vector<std::string>& dims) const = 0;
  virtual Array logsumexp(const Array& x, const std::vector<std::string>& dims) const = 0;
  // softmax, or log_softmax when `log`.
  virtual Array softmax(const Array& x, const std::string& dim, bool log) const = 0;
  virtual Array argmax(const Array& x, const std::string& dim) const = 0;
  virtual Array cumsum(const Array& x, const std::string& dim, bool exclusive, bool reverse) const = 0;

  // ops/einsum.h (the local products choose their own precision)
  virtual Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out) const = 0;

  // ops/index.h
  virtual Array one_hot(const Array& indices, int64_t depth, const std::string& name, DType dtype) const = 0;
  virtual Array take(const Array& x, const Array& indices, const std::string& dim) const = 0;
  virtual std::pair<Array, Array> top_k(const Array& x, int64_t k, const std::string& dim) const = 0;

  // ops/shape.h
  virtual Array transpose(const Array& x, const std::vector<std::string>& order) const = 0;
  virtual Array rename(const Array& x, const std::map<std::string, std::string>& renames) const = 0;
  virtual Array reshape(const Array& x, const Shape& shape) const = 0;
  virtual Array broadcast_to(const Array& x, const Shape& shape) const = 0;
  virtual Array slice(const Array& x, const std::string& dim, int64_t start, int64_t size) const = 0;
  virtual Array pad(const Array& x, const std::string& dim, int64_t lo, int64_t hi, double value) const = 0;
  virtual Array concat(const std::vector<Array>& xs, const std::string& dim) const = 0;
  virtual Array stack(const std::vector<Array>& xs, const std::string& name, int axis) const = 0;
  virtual Array expand_dims(const Array& x, const std::string& name, int axis) const = 0;
  virtual Array squeeze(const Array& x, const std::string& name) const = 0;
  virtual Array dynamic_slice(const Array& x, const std::map<std::string, int64_t>& starts,
                              const std::map<std::string, int64_t>& sizes) const = 0;
  virtual Array dynamic_update_slice(const Array& operand, const Array& update,
                                     const std::map<std::string, int64_t>& starts) const = 0;

  // ops/fused.h
  virtual Array rms_norm(const Array& x, const Array& scale, const std::string& dim, double eps) const = 0;
  virtual CrossEntropy softmax_cross_entropy(const Array& logits, const Array& targets, double z_loss,
                                             double label_smoothing, const std::string& vocab) const = 0;
  virtual Array gated_gelu(const Array& h0, const Array& h1) const = 0;
  // The options' arrays (bias, segment ids, masks) may be split too.
  virtual Array attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& options) const = 0;

  // ops/fourier.h
  virtual Array fourier_mix(const Array& x, const std::string& length, const std::string& embed) const = 0;
};

// The installed lowering, or null (then a split input is an error: "[op]
// sharded inputs not supported yet ...; reshard to replicated first").
const ShardedLowering* sharded_lowering();
// Installs `lowering` (null removes it) until the next call. Process-wide and
// not synchronised with running ops: install before ops run on other threads.
void set_sharded_lowering(const ShardedLowering* lowering);

// Installs `lowering` for the scope's lifetime and restores the previous one
// (which may be null) on destruction; scopes nest in LIFO order.
class LoweringScope {
 public:
  explicit LoweringScope(const ShardedLowering* lowering);
  ~LoweringScope();
  LoweringScope(const LoweringScope&) = delete;
  LoweringScope& operator=(const LoweringScope&) = delete;

 private:
  const ShardedLowering* prev_;
};

}  // namespace t5x
