#include "ops/elementwise.h"

#include <chrono>
#include <cmath>
#include <optional>

#include "backend/kernels.h"
#include "ops/detail.h"
#include "ops/lowering.h"
#include "ops/primitive.h"
#include "ops/profile.h"

namespace t5x {
using namespace detail;

namespace {

using U = kernels::UnaryKind;

const char* uname(U op) {
  static const char* n[] = {"neg", "abs", "sign", "square", "exp", "log", "tanh", "sqrt", "rsqrt",
                            "sigmoid", "relu", "gelu", "gelu_grad", "logical_not"};
  return n[int(op)];
}

Array unary_forward(U op, const Array& x) {
  Array out = make_output(x.shape(), x.dtype(), {x});
  kernels::cpu::unary(op, x.dtype(), x.raw_data(), out.raw_data(), x.local_size());
  return out;
}

class Unary : public Primitive {
 public:
  explicit Unary(U op) : op_(op) {}
  const char* name() const override { return uname(op_); }
  bool saves_inputs() const override { return !saves_outputs(); }
  bool saves_outputs() const override {
    return op_ == U::Exp || op_ == U::Tanh || op_ == U::Sqrt || op_ == U::Rsqrt || op_ == U::Sigmoid;
  }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {unary_forward(op_, in[0])}; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    static const UnaryOp public_op[] = {UnaryOp::Neg,  UnaryOp::Abs,     UnaryOp::Sign, UnaryOp::Square,
                                        UnaryOp::Exp,  UnaryOp::Log,     UnaryOp::Tanh, UnaryOp::Sqrt,
                                        UnaryOp::Rsqrt, UnaryOp::Sigmoid, UnaryOp::Relu, UnaryOp::Gelu};
    if (op_ == U::GeluGrad) return Primitive::lower(l, in);  // vjps only
    return {l.unary(op_ == U::Not ? UnaryOp::LogicalNot : public_op[int(op_)], in[0])};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>& out,
                         const std::vector<Array>& cot, const std::vector<bool>& needs) override {
    if (!needs[0]) return {Array()};
    const Array& g = cot[0];
    const Array& x = in[0];
    const Array& y = out[0];
    switch (op_) {
      case U::Neg: return {neg(g)};
      case U::Abs: return {mul(g, sign(x))};
      case U::Sign: return {zeros_like(g)};
      case U::Square: return {mul(g, mul(x, 2.0))};
      case U::Exp: return {mul(g, y)};
      case U::Log: return {div(g, x)};
      case U::Tanh: return {mul(g, sub(scalar_like(y, 1.0), square(y)))};
      case U::Sqrt: return {div(mul(g, 0.5), y)};
      case U::Rsqrt: return {mul(g, mul(mul(y, square(y)), -0.5))};
      case U::Sigmoid: return {mul(g, mul(y, sub(scalar_like(y, 1.0), y)))};
      case U::Relu: return {where(gt(x, 0.0), g, 0.0)};
      case U::Gelu: return {mul(g, unary_forward(U::GeluGrad, x))};
      default: return {Array()};
    }
  }

 private:
  U op_;
};

Array unary(U op, const Array& x, bool float_only) {
  if (float_only) check_floating(uname(op), x);
  else if (x.dtype() == DType::boolean && op != U::Not)
    throw_invalid(uname(op), "does not accept bool, got " + describe(x));
  if (op == U::Not && x.dtype() != DType::boolean) throw_invalid(uname(op), "expects bool, got " + describe(x));
  return apply1(std::make_shared<Unary>(op), {x});
}

using B = kernels::BinaryKind;
const char* bname(B op) {
  static const char* n[] = {"add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
                            "logical_and", "logical_or"};
  return n[int(op)];
}
bool is_cmp(B op) { return op >= B::Eq; }

Array binary_forward(B op, const Array& a, const Array& b, const Shape& out_shape) {
  Array out = make_output(out_shape, is_cmp(op) ? DType::boolean : a.dtype(), {a, b});
  if (a.shape() == out_shape && b.shape() == out_shape &&
      kernels::cpu::binary_dense(op, a.dtype(), out.local_size(), a.raw_data(), b.raw_data(), out.raw_data()))
    return out;
  kernels::Strided<2> s{out_shape.sizes(), {strides_over(a.shape(), out_shape), strides_over(b.shape(), out_shape)}};
  kernels::cpu::binary(op, a.dtype(), s, a.raw_data(), b.raw_data(), out.raw_data());
  return out;
}

class Binary : public Primitive {
 public:
  Binary(B op, Shape out, std::optional<double> scalar) : op_(op), out_(std::move(out)), scalar_(scalar) {}
  const char* name() const override { return bname(op_); }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    static_assert(int(B::Max) == int(BinaryOp::Maximum) && int(B::Or) == int(BinaryOp::LogicalOr));
    const BinaryOp op = BinaryOp(int(op_));  // same order
    return {scalar_ ? l.binary_scalar(op, in[0], *scalar_) : l.binary(op, in[0], in[1])};
  }
  bool saves_inputs() const override { return op_ != B::Add && op_ != B::Sub; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    a_shape_ = in[0].shape();
    b_shape_ = in[1].shape();
    return {binary_forward(op_, in[0], in[1], out_)};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    const Array& g = cot[0];
    Array ga, gb;
    switch (op_) {
      case B::Add: ga = g; gb = g; break;
      case B::Sub: ga = g; if (needs[1]) gb = neg(g); break;
      case B::Mul:
        if (needs[0]) ga = mul(g, in[1]);
        if (needs[1]) gb = mul(g, in[0]);
        break;
      case B::Div:
        if (needs[0]) ga = div(g, in[1]);
        if (needs[1]) gb = neg(div(mul(g, in[0]), square(in[1])));
        break;
      case B::Max:
      case B::Min: {
        // Share of the gradient going to a: 1 where a wins, 0.5 on ties.
        Array wins = op_ == B::Max ? gt(in[0], in[1]) : lt(in[0], in[1]);
        Array tie = eq(in[0], in[1]);
        Array half = mul(g, 0.5);
        Array zero = zeros_like(g);
        if (needs[0]) ga = where(wins, g, where(tie, half, zero));
        if (needs[1]) gb = where(wins, zero, where(tie, half, g));
        break;
      }
      default: break;
    }
    return {needs[0] && ga.valid() ? unbroadcast(ga, a_shape_) : Array(),
            needs[1] && gb.valid() ? unbroadcast(gb, b_shape_) : Array()};
  }

 private:
  B op_;
  Shape out_, a_shape_, b_shape_;
  std::optional<double> scalar_;  // b's value, for add(a, 2.0) and the like
};

Array binary(B op, const Array& a, const Array& b, std::optional<double> scalar = std::nullopt) {
  const char* n = bname(op);
  check_same_dtype(n, a, b);
  if (op == B::And || op == B::Or) {
    if (a.dtype() != DType::boolean) throw_invalid(n, "expects bool operands, got " + describe(a));
  } else if (a.dtype() == DType::boolean && !(op == B::Eq || op == B::Ne)) {
    throw_invalid(n, "does not accept bool operands, got " + describe(a));
  }
  Shape out = broadcast_shapes(n, a.shape(), b.shape());
  return apply1(std::make_shared<Binary>(op, out, scalar), {a, b});
}
// add(a, 2.0) and the like: sharded, the scalar is applied to each shard.
Array binary_scalar(B op, const Array& a, double b) { return binary(op, a, scalar_like(a, b), b); }

class Where : public Primitive {
 public:
  explicit Where(Shape out) : out_(std::move(out)) {}
  const char* name() const override { return "where"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.where(in[0], in[1], in[2])};
  }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array &c = in[0], &x = in[1], &y = in[2];
    x_shape_ = x.shape();
    y_shape_ = y.shape();
    Array out = make_output(out_, x.dtype(), {x, y});
    kernels::Strided<3> s{out_.sizes(),
                          {strides_over(c.shape(), out_), strides_over(x.shape(), out_), strides_over(y.shape(), out_)}};
    kernels::cpu::where(x.dtype(), s, static_cast<const uint8_t*>(c.raw_data()), x.raw_data(), y.raw_data(),
                        out.raw_data());
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    const Array& g = cot[0];
    Array zero = scalar_like(g, 0.0);
    return {Array(), needs[1] ? unbroadcast(where(in[0], g, zero), x_shape_) : Array(),
            needs[2] ? unbroadcast(where(in[0], zero, g), y_shape_) : Array()};
  }

 private:
  Shape out_, x_shape_, y_shape_;
};

class Cast : public Primitive {
 public:
  explicit Cast(DType to) : to_(to) {}
  const char* name() const override { return "cast"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.cast(in[0], to_)};
  }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array& x = in[0];
    from_ = x.dtype();
    if (from_ == to_) return {x};
    Array out = make_output(x.shape(), to_, {x});
    const bool profile = op_profile_enabled();  // T5X_OP_PROFILE: each cast's time under its dtypes and size
    const auto t0 = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    kernels::cpu::cast(from_, to_, x.raw_data(), out.raw_data(), x.local_size());
    if (profile)
      op_profile_add("  cast " + std::string(dtype_name(from_)) + "->" + dtype_name(to_) + " n" +
                         std::to_string(x.local_size()),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    if (!needs[0] || !is_floating(from_) || !is_floating(to_)) return {Array()};
    // A float32 cotangent of a bfloat16 value stays float32 (wide).
    const bool keep_wide = from_ == DType::bf16 && cot[0].dtype() == DType::f32;
    return {keep_wide ? cot[0] : cast(cot[0], from_)};
  }
  bool accepts_wide_cotangents() const override { return true; }

 private:
  DType to_, from_ = DType::f32;
};

}  // namespace

Array neg(const Array& x) { return unary(U::Neg, x, false); }
Array abs(const Array& x) { return unary(U::Abs, x, false); }
Array sign(const Array& x) { return unary(U::Sign, x, false); }
Array square(const Array& x) { return unary(U::Square, x, false); }
Array exp(const Array& x) { return unary(U::Exp, x, true); }
Array log(const Array& x) { return unary(U::Log, x, true); }
Array tanh(const Array& x) { return unary(U::Tanh, x, true); }
Array sqrt(const Array& x) { return unary(U::Sqrt, x, true); }
Array rsqrt(const Array& x) { return unary(U::Rsqrt, x, true); }
Array sigmoid(const Array& x) { return unary(U::Sigmoid, x, true); }
Array relu(const Array& x) { return unary(U::Relu, x, false); }
Array gelu(const Array& x) { return unary(U::Gelu, x, true); }
Array logical_not(const Array& x) { return unary(U::Not, x, false); }

// acc + g written over acc's buffer (add_into).
class AddInto : public Primitive {
 public:
  const char* name() const override { return "add"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    Array out = in[0].alias();
    if (!kernels::cpu::binary_dense(B::Add, out.dtype(), out.local_size(), in[0].raw_data(), in[1].raw_data(),
                                    out.raw_data()))
      throw_invalid("add", "internal: no dense kernel for " + describe(in[0]));
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>&,
                         const std::vector<bool>&) override {
    throw_invalid("add", "internal: add_into is not differentiable");
  }
};

Array add(const Array& a, const Array& b) { return binary(B::Add, a, b); }
void add_into(Array& acc, const Array& g) {
  const bool donate = acc.valid() && g.valid() && acc.dtype() == g.dtype() &&
                      (acc.dtype() == DType::f32 || acc.dtype() == DType::bf16) && acc.shape() == g.shape() &&
                      can_write_over(acc, {g});
  if (!donate) {
    acc = add(acc, g);
    return;
  }
  Array a = std::move(acc);
  acc = apply1(std::make_shared<AddInto>(), {a, g});
}
Array sub(const Array& a, const Array& b) { return binary(B::Sub, a, b); }
Array mul(const Array& a, const Array& b) { return binary(B::Mul, a, b); }
Array div(const Array& a, const Array& b) { return binary(B::Div, a, b); }
Array maximum(const Array& a, const Array& b) { return binary(B::Max, a, b); }
Array minimum(const Array& a, const Array& b) { return binary(B::Min, a, b); }
Array add(const Array& a, double b) { return binary_scalar(B::Add, a, b); }
Array sub(const Array& a, double b) { return binary_scalar(B::Sub, a, b); }
Array mul(const Array& a, double b) { return binary_scalar(B::Mul, a, b); }
Array div(const Array& a, double b) { return binary_scalar(B::Div, a, b); }
Array maximum(const Array& a, double b) { return binary_scalar(B::Max, a, b); }
Array minimum(const Array& a, double b) { return binary_scalar(B::Min, a, b); }

Array eq(const Array& a, const Array& b) { return binary(B::Eq, a, b); }
Array ne(const Array& a, const Array& b) { return binary(B::Ne, a, b); }
Array lt(const Array& a, const Array& b) { return binary(B::Lt, a, b); }
Array le(const Array& a, const Array& b) { return binary(B::Le, a, b); }
Array gt(const Array& a, const Array& b) { return binary(B::Gt, a, b); }
Array ge(const Array& a, const Array& b) { return binary(B::Ge, a, b); }
Array eq(const Array& a, double b) { return binary(B::Eq, a, scalar_like(a, b)); }
Array ne(const Array& a, double b) { return binary(B::Ne, a, scalar_like(a, b)); }
Array lt(const Array& a, double b) { return binary(B::Lt, a, scalar_like(a, b)); }
Array le(const Array& a, double b) { return binary(B::Le, a, scalar_like(a, b)); }
Array gt(const Array& a, double b) { return binary(B::Gt, a, scalar_like(a, b)); }
Array ge(const Array& a, double b) { return binary(B::Ge, a, scalar_like(a, b)); }
Array logical_and(const Array& a, const Array& b) { return binary(B::And, a, b); }
Array logical_or(const Array& a, const Array& b) { return binary(B::Or, a, b); }

Array where(const Array& cond, const Array& x, const Array& y) {
  if (cond.dtype() != DType::boolean) throw_invalid("where", "cond must be bool, got " + describe(cond));
  check_same_dtype("where", x, y);
  Shape out = broadcast_shapes("where", broadcast_shapes("where", x.shape(), y.shape()), cond.shape());
  return apply1(std::make_shared<Where>(out), {cond, x, y});
}
Array where(const Array& cond, const Array& x, double y) { return where(cond, x, scalar_like(x, y)); }
Array where(const Array& cond, double x, const Array& y) { return where(cond, scalar_like(y, x), y); }

Array clip(const Array& x, double lo, double hi) {
  if (lo > hi) throw_invalid("clip", "lo " + std::to_string(lo) + " > hi " + std::to_string(hi));
  return minimum(maximum(x, lo), hi);
}

namespace {
Array float_mask_local(const char* op, kernels::FloatTest test, const Array& x) {
  check_floating(op, x);
  require_cpu(op, {x});
  Array out = make_output(x.shape(), DType::boolean, {x});
  kernels::cpu::float_test(test, x.dtype(), x.raw_data(), out.data<uint8_t>(), x.local_size());
  return out;
}
// Not differentiable: a composite whose expansion is the kernel.
Array float_mask(UnaryOp op, kernels::FloatTest test, const Array& x) {
  return composite1(
      op_name(op), {x}, [&](const std::vector<Array>& in) { return float_mask_local(op_name(op), test, in[0]); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.unary(op, in[0]); });
}
}  // namespace

Array isnan(const Array& x) { return float_mask(UnaryOp::IsNan, kernels::FloatTest::IsNan, x); }
Array isfinite(const Array& x) { return float_mask(UnaryOp::IsFinite, kernels::FloatTest::IsFinite, x); }

Array cast(const Array& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return apply1(std::make_shared<Cast>(dtype), {x});
}

Array scalar_like(const Array& x, double value) { return Array::full(Shape{}, value, x.dtype()); }
Array zeros_like(const Array& x) { return Array::zeros(x.shape(), x.dtype()); }
Array ones_like(const Array& x) { return Array::ones(x.shape(), x.dtype()); }

}  // namespace t5x
