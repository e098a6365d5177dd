// The sharded lowering of the plain ops (ops/lowering.h), implemented with
// the spmd:: lowerings.
//
// spmd::Lowering overrides every method of t5x::ShardedLowering with the
// matching spmd:: function (spmd/elementwise.h, reduce.h, einsum.h, index.h,
// shape_ops.h, reshard.h, fused.h), so that once it is installed the plain ops
// (t5x::einsum, t5x::add, ...) on split arrays run their sharded rule: apply()
// calls the primitive's lower(), which calls the method here for its op with
// its typed attributes. Ops with no split input never reach it. Notes:
//   - unary ops and add(a, 2.0)-style scalar ops run shard by shard
//     (spmd::unary); comparisons and logical ops are slicewise and return
//     bool (not differentiable);
//   - one_hot's new dim is unsplit (spmd::one_hot with no mesh axes);
//   - einsum lets spmd::einsum choose the local products' precision.
// Subclasses may override methods (tests count calls that way).
#pragma once
#include "ops/lowering.h"

namespace t5x::spmd {

class Lowering : public ShardedLowering {
 public:
  Array unary(UnaryOp op, const Array& x) const override;
  Array binary(BinaryOp op, const Array& a, const Array& b) const override;
  Array binary_scalar(BinaryOp op, const Array& a, double b) const override;
  Array where(const Array& cond, const Array& x, const Array& y) const override;
  Array cast(const Array& x, DType dtype) const override;

  Array reduce(Reduction op, const Array& x, const std::vector<std::string>& dims) const override;
  Array mean(const Array& x, const std::vector<std::string>& dims) const override;
  Array logsumexp(const Array& x, const std::vector<std::string>& dims) const override;
  Array softmax(const Array& x, const std::string& dim, bool log) const override;
  Array argmax(const Array& x, const std::string& dim) const override;
  Array cumsum(const Array& x, const std::string& dim, bool exclusive, bool reverse) const override;

  Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out) const override;

  Array one_hot(const Array& indices, int64_t depth, const std::string& name, DType dtype) const override;
  Array take(const Array& x, const Array& indices, const std::string& dim) const override;
  std::pair<Array, Array> top_k(const Array& x, int64_t k, const std::string& dim) const override;

  Array transpose(const Array& x, const std::vector<std::string>& order) const override;
  Array rename(const Array& x, const std::map<std::string, std::string>& renames) const override;
  Array reshape(const Array& x, const Shape& shape) const override;
  Array broadcast_to(const Array& x, const Shape& shape) const override;
  Array slice(const Array& x, const std::string& dim, int64_t start, int64_t size) const override;
  Array pad(const Array& x, const std::string& dim, int64_t lo, int64_t hi, double value) const override;
  Array concat(const std::vector<Array>& xs, const std::string& dim) const override;
  Array stack(const std::vector<Array>& xs, const std::string& name, int axis) const override;
  Array expand_dims(const Array& x, const std::string& name, int axis) const override;
  Array squeeze(const Array& x, const std::string& name) const override;
  Array dynamic_slice(const Array& x, const std::map<std::string, int64_t>& starts,
                      const std::map<std::string, int64_t>& sizes) const override;
  Array dynamic_update_slice(const Array& operand, const Array& update,
                             const std::map<std::string, int64_t>& starts) const override;

  Array rms_norm(const Array& x, const Array& scale, const std::string& dim, double eps) const override;
  CrossEntropy softmax_cross_entropy(const Array& logits, const Array& targets, double z_loss, double label_smoothing,
                                     const std::string& vocab) const override;
  Array gated_gelu(const Array& h0, const Array& h1) const override;
  Array attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& options) const override;
  Array fourier_mix(const Array& x, const std::string& length, const std::string& embed) const override;
};

// The process's spmd lowering (one stateless instance).
const Lowering& lowering();

// Installs lowering() in the op layer (t5x::set_sharded_lowering) for good:
// from then on the plain ops on split arrays run their sharded rule. Call
// once at start-up, before ops run on other threads.
void install();
bool installed();  // true while the op layer's lowering is lowering()

// Installs lowering() for the scope's lifetime and restores the previous
// lowering (or none) after.
class InstallScope : public LoweringScope {
 public:
  InstallScope() : LoweringScope(&lowering()) {}
};

}  // namespace t5x::spmd
