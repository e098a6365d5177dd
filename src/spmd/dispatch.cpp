#include "spmd/dispatch.h"

#include "core/error.h"
#include "ops/elementwise.h"
#include "spmd/einsum.h"
#include "spmd/elementwise.h"
#include "spmd/fused.h"
#include "spmd/index.h"
#include "spmd/reduce.h"
#include "spmd/reshard.h"
#include "spmd/shape_ops.h"

namespace t5x::spmd {
namespace {

using UnaryFn = Array (*)(const Array&);
UnaryFn plain(UnaryOp op) {
  static const UnaryFn f[] = {t5x::neg,   t5x::abs,     t5x::sign, t5x::square, t5x::exp,         t5x::log,
                              t5x::tanh,  t5x::sqrt,    t5x::rsqrt, t5x::sigmoid, t5x::relu,       t5x::gelu,
                              t5x::logical_not, t5x::isnan, t5x::isfinite};
  static_assert(sizeof(f) / sizeof(f[0]) == size_t(UnaryOp::IsFinite) + 1);
  return f[int(op)];
}

using BinaryFn = Array (*)(const Array&, const Array&);
BinaryFn plain(BinaryOp op) {
  static const BinaryFn f[] = {t5x::add, t5x::sub, t5x::mul, t5x::div, t5x::maximum, t5x::minimum, t5x::eq,
                               t5x::ne,  t5x::lt,  t5x::le,  t5x::gt,  t5x::ge, t5x::logical_and, t5x::logical_or};
  static_assert(sizeof(f) / sizeof(f[0]) == size_t(BinaryOp::LogicalOr) + 1);
  return f[int(op)];
}

using ScalarFn = Array (*)(const Array&, double);
ScalarFn plain_scalar(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return t5x::add;
    case BinaryOp::Sub: return t5x::sub;
    case BinaryOp::Mul: return t5x::mul;
    case BinaryOp::Div: return t5x::div;
    case BinaryOp::Maximum: return t5x::maximum;
    case BinaryOp::Minimum: return t5x::minimum;
    default: throw_invalid("spmd", std::string("no scalar form of op '") + op_name(op) + "'");
  }
}

}  // namespace

Array Lowering::unary(UnaryOp op, const Array& x) const { return spmd::unary(x, plain(op)); }

Array Lowering::binary(BinaryOp op, const Array& a, const Array& b) const {
  switch (op) {
    case BinaryOp::Add: return spmd::add(a, b);
    case BinaryOp::Sub: return spmd::sub(a, b);
    case BinaryOp::Mul: return spmd::mul(a, b);
    case BinaryOp::Div: return spmd::div(a, b);
    case BinaryOp::Maximum: return spmd::maximum(a, b);
    case BinaryOp::Minimum: return spmd::minimum(a, b);
    default: {
      // Comparisons and logical ops: slicewise, not differentiable (bool out).
      BinaryFn f = plain(op);
      return spmd::elementwise(op_name(op), {a, b}, [f](const std::vector<Array>& v) { return f(v[0], v[1]); });
    }
  }
}

Array Lowering::binary_scalar(BinaryOp op, const Array& a, double b) const {
  ScalarFn f = plain_scalar(op);
  return spmd::unary(a, [f, b](const Array& v) { return f(v, b); });
}

Array Lowering::where(const Array& cond, const Array& x, const Array& y) const { return spmd::where(cond, x, y); }

Array Lowering::cast(const Array& x, DType dtype) const {
  return spmd::unary(x, [dtype](const Array& v) { return t5x::cast(v, dtype); });
}

Array Lowering::reduce(Reduction op, const Array& x, const std::vector<std::string>& dims) const {
  switch (op) {
    case Reduction::Sum: return spmd::sum(x, dims);
    case Reduction::Max: return spmd::max(x, dims);
    case Reduction::Min: return spmd::min(x, dims);
  }
  throw_invalid("spmd", "unknown reduction");
}

Array Lowering::mean(const Array& x, const std::vector<std::string>& dims) const { return spmd::mean(x, dims); }
Array Lowering::logsumexp(const Array& x, const std::vector<std::string>& dims) const {
  return spmd::logsumexp(x, dims);
}
Array Lowering::softmax(const Array& x, const std::string& dim, bool log) const {
  return log ? spmd::log_softmax(x, dim) : spmd::softmax(x, dim);
}
Array Lowering::argmax(const Array& x, const std::string& dim) const { return spmd::argmax(x, dim); }
Array Lowering::cumsum(const Array& x, const std::string& dim, bool exclusive, bool reverse) const {
  return spmd::cumsum(x, dim, exclusive, reverse);
}

Array Lowering::einsum(const Array& x, const Array& y, const std::vector<std::string>& out) const {
  return spmd::einsum(x, y, out);
}

Array Lowering::one_hot(const Array& indices, int64_t depth, const std::string& name, DType dtype) const {
  return spmd::one_hot(indices, depth, name, {}, dtype);
}
Array Lowering::take(const Array& x, const Array& indices, const std::string& dim) const {
  return spmd::take(x, indices, dim);
}
std::pair<Array, Array> Lowering::top_k(const Array& x, int64_t k, const std::string& dim) const {
  return spmd::top_k(x, k, dim);
}

Array Lowering::transpose(const Array& x, const std::vector<std::string>& order) const {
  return spmd::transpose(x, order);
}
Array Lowering::rename(const Array& x, const std::map<std::string, std::string>& renames) const {
  return spmd::rename(x, renames);
}
Array Lowering::reshape(const Array& x, const Shape& shape) const { return spmd::reshape(x, shape); }
Array Lowering::broadcast_to(const Array& x, const Shape& shape) const { return spmd::broadcast_to(x, shape); }
Array Lowering::slice(const Array& x, const std::string& dim, int64_t start, int64_t size) const {
  return spmd::slice(x, dim, start, size);
}
Array Lowering::pad(const Array& x, const std::string& dim, int64_t lo, int64_t hi, double value) const {
  return spmd::pad(x, dim, lo, hi, value);
}
Array Lowering::concat(const std::vector<Array>& xs, const std::string& dim) const { return spmd::concat(xs, dim); }
Array Lowering::stack(const std::vector<Array>& xs, const std::string& name, int axis) const {
  return spmd::stack(xs, name, axis);
}
Array Lowering::expand_dims(const Array& x, const std::string& name, int axis) const {
  return spmd::expand_dims(x, name, axis);
}
Array Lowering::squeeze(const Array& x, const std::string& name) const { return spmd::squeeze(x, name); }
Array Lowering::dynamic_slice(const Array& x, const std::map<std::string, int64_t>& starts,
                              const std::map<std::string, int64_t>& sizes) const {
  return spmd::dynamic_slice(x, starts, sizes);
}
Array Lowering::dynamic_update_slice(const Array& operand, const Array& update,
                                     const std::map<std::string, int64_t>& starts) const {
  return spmd::dynamic_update_slice(operand, update, starts);
}

Array Lowering::rms_norm(const Array& x, const Array& scale, const std::string& dim, double eps) const {
  return spmd::rms_norm(x, scale, dim, eps);
}
CrossEntropy Lowering::softmax_cross_entropy(const Array& logits, const Array& targets, double z_loss,
                                             double label_smoothing, const std::string& vocab) const {
  return spmd::softmax_cross_entropy_with_integer_labels(logits, targets, z_loss, label_smoothing, vocab);
}
Array Lowering::gated_gelu(const Array& h0, const Array& h1) const {
  return spmd::elementwise("gated_gelu", {h0, h1}, [](const std::vector<Array>& v) { return t5x::gated_gelu(v[0], v[1]); });
}
Array Lowering::attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& options) const {
  return spmd::dot_product_attention(q, k, v, options);
}
Array Lowering::fourier_mix(const Array& x, const std::string& length, const std::string& embed) const {
  return spmd::fourier_mix(x, length, embed);
}

const Lowering& lowering() {
  static const Lowering l;
  return l;
}

void install() { t5x::set_sharded_lowering(&lowering()); }
bool installed() { return t5x::sharded_lowering() == &lowering(); }

}  // namespace t5x::spmd
