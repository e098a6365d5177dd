#include "ops/fused.h"

#include <atomic>
#include <cmath>

#include "backend/kernels.h"
#include "ops/autodiff.h"
#include "ops/detail.h"
#include "ops/lowering.h"
#include "ops/einsum.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/primitive.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace t5x {
using namespace detail;

namespace {
std::atomic<bool> g_fused{true};
}  // namespace

void set_fused_kernels_enabled(bool enabled) { g_fused.store(enabled); }
bool fused_kernels_enabled() { return g_fused.load(); }

namespace {

std::vector<std::string> with_last(const Array& x, const std::string& dim) {
  std::vector<std::string> order;
  for (const auto& n : x.names())
    if (n != dim) order.push_back(n);
  order.push_back(dim);
  return order;
}

// f32 or bf16 x [rows, E] (E last), f32 scale [E]; y and dx in x's dtype.
class RmsNorm : public Primitive {
 public:
  explicit RmsNorm(float eps) : eps_(eps) {}
  const char* name() const override { return "rms_norm"; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array &x = in[0], &s = in[1];
    const int64_t e = s.size(), rows = e ? x.size() / e : 0;
    Array y = make_output(x.shape(), x.dtype(), {x});
    rstd_ = Array(Shape{{"rows", rows}}, DType::f32, {}, {}, false);
    kernels::cpu::rms_norm_forward(x.dtype(), rows, e, x.raw_data(), s.data<float>(), eps_, y.raw_data(),
                                   rstd_.data<float>());
    return {y};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    const Array &x = in[0], &s = in[1];
    const int64_t e = s.size(), rows = e ? x.size() / e : 0;
    Array dx = make_output(x.shape(), x.dtype(), {x});
    Array ds = make_output(s.shape(), DType::f32, {s});
    kernels::cpu::rms_norm_backward(x.dtype(), rows, e, x.raw_data(), s.data<float>(), rstd_.data<float>(),
                                    cot[0].raw_data(), eps_, dx.raw_data(), ds.data<float>());
    return {dx, ds};
  }

 private:
  float eps_;
  Array rstd_;
};

// f32 logits [rows, V] and int32 targets [rows] -> loss, z_loss [rows].
class XEnt : public Primitive {
 public:
  XEnt(float z_loss, float label_smoothing) : z_loss_(z_loss), label_smoothing_(label_smoothing) {}
  const char* name() const override { return "softmax_cross_entropy"; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array &l = in[0], &t = in[1];
    const Shape& ts = t.shape();
    const int64_t rows = ts.numel(), vocab = l.shape()[l.rank() - 1].size;
    Array loss = make_output(ts, DType::f32, {l}), z = make_output(ts, DType::f32, {l});
    lse_ = Array(ts, DType::f32, {}, {}, false);
    kernels::cpu::cross_entropy_forward(rows, vocab, l.data<float>(), t.data<int32_t>(), z_loss_, label_smoothing_,
                                        loss.data<float>(), z.data<float>(), lse_.data<float>());
    return {loss, z};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    if (!needs[0]) return {Array(), Array()};
    const Array &l = in[0], &t = in[1];
    const int64_t rows = t.size(), vocab = l.shape()[l.rank() - 1].size;
    Array dl = make_output(l.shape(), DType::f32, {l});
    kernels::cpu::cross_entropy_backward(rows, vocab, l.data<float>(), t.data<int32_t>(), lse_.data<float>(),
                                         cot[0].data<float>(), z_loss_, label_smoothing_, dl.data<float>());
    return {dl, Array()};
  }

 private:
  float z_loss_, label_smoothing_;
  Array lse_;
};

class GatedGelu : public Primitive {
 public:
  const char* name() const override { return "gated_gelu"; }
  // f32 or bf16 operands (both the same dtype); bf16 in and out without cast passes.
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const DType dt = in[0].dtype();
    Array out = make_output(in[0].shape(), dt, {in[0]});
    kernels::cpu::gated_gelu_forward(dt, in[0].size(), in[0].raw_data(), in[1].raw_data(), out.raw_data());
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    const DType dt = in[0].dtype();
    Array d0 = make_output(in[0].shape(), dt, {in[0]}), d1 = make_output(in[0].shape(), dt, {in[0]});
    kernels::cpu::gated_gelu_backward(dt, in[0].size(), in[0].raw_data(), in[1].raw_data(), cot[0].raw_data(),
                                      d0.raw_data(), d1.raw_data());
    return {d0, d1};
  }
};

void check_rms_args(const char* op, const Array& x, const Array& scale, const std::string& dim, double eps) {
  check_local(op, {x, scale});  // the reference too refuses split inputs
  check_floating(op, x);
  check_floating(op, scale, "scale");
  require_dim(op, x, dim);
  if (scale.rank() != 1 || scale.shape()[0].name != dim || scale.size() != x.dim(dim))
    throw_invalid(op, "scale must be [" + dim + "=" + std::to_string(x.dim(dim)) + "], got " + describe(scale));
  if (eps < 0) throw_invalid(op, "eps must be >= 0, got " + std::to_string(eps));
}

// Targets in logits' order without vocab, as int32.
Array canonical_targets(const char* op, const Array& logits, const Array& targets, const std::string& vocab,
                        double label_smoothing) {
  check_local(op, {logits, targets});
  check_floating(op, logits, "logits");
  require_dim(op, logits, vocab, "logits");
  if (!is_integer(targets.dtype())) throw_invalid(op, "targets must be int32/int64, got " + describe(targets));
  std::vector<std::string> order;
  for (const auto& n : logits.names())
    if (n != vocab) order.push_back(n);
  bool ok = targets.rank() == int(order.size());
  for (const auto& n : order) ok = ok && targets.has_dim(n) && targets.dim(n) == logits.dim(n);
  if (!ok)
    throw_invalid(op, "targets " + describe(targets) + " must have the dims of logits " + describe(logits) +
                          " without '" + vocab + "'");
  if (label_smoothing < 0 || label_smoothing >= 1)
    throw_invalid(op, "label_smoothing must be in [0, 1), got " + std::to_string(label_smoothing));
  return cast(transpose(targets, order), DType::i32);
}

}  // namespace

// The fused ops are composites (ops/primitive.h): their sharded rules keep
// the fused kernel (or, without fused kernels, the reference) per shard.
namespace {
Array rms_norm_local(const Array& x, const Array& scale, const std::string& dim, double eps) {
  if (!fused_kernels_enabled()) return rms_norm_reference(x, scale, dim, eps);
  check_rms_args("rms_norm", x, scale, dim, eps);
  // bf16 activations go in and come out as bf16 (no cast passes).
  const DType kdt = x.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
  // dim is usually x's last already: then no names are built to say so.
  const bool last = x.shape().dims().back().name == dim;
  Array xt = cast(last ? x : transpose(x, with_last(x, dim)), kdt);
  Array y = apply1(std::make_shared<RmsNorm>(float(eps)), {xt, cast(scale, DType::f32)});
  return transpose_like(cast(y, x.dtype()), x);
}
}  // namespace

Array rms_norm(const Array& x, const Array& scale, const std::string& dim, double eps) {
  return composite1(
      "rms_norm", {x, scale}, [&](const std::vector<Array>& in) { return rms_norm_local(in[0], in[1], dim, eps); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.rms_norm(in[0], in[1], dim, eps); });
}

Array rms_norm_reference(const Array& x, const Array& scale, const std::string& dim, double eps) {
  check_rms_args("rms_norm", x, scale, dim, eps);
  Array x32 = cast(x, DType::f32);
  Array y = mul(x32, rsqrt(add(mean(square(x32), {dim}), eps)));
  return mul(cast(y, x.dtype()), cast(scale, x.dtype()));
}

namespace {
CrossEntropy cross_entropy_local(const Array& logits, const Array& targets, double z_loss, double label_smoothing,
                                 const std::string& vocab) {
  if (!fused_kernels_enabled())
    return softmax_cross_entropy_with_integer_labels_reference(logits, targets, z_loss, label_smoothing, vocab);
  const char* op = "softmax_cross_entropy_with_integer_labels";
  Array t = canonical_targets(op, logits, targets, vocab, label_smoothing);
  const int64_t V = logits.dim(vocab);
  auto tv = t.to_ints();
  for (size_t i = 0; i < tv.size(); ++i)
    if (tv[i] < 0 || tv[i] >= V)
      throw_invalid(op, "target " + std::to_string(tv[i]) + " at flat position " + std::to_string(i) +
                            " outside [0, " + std::to_string(V) + ") of dim '" + vocab + "'");
  Array l = cast(transpose(logits, with_last(logits, vocab)), DType::f32);
  auto r = t5x::apply(std::make_shared<XEnt>(float(z_loss), float(label_smoothing)), {l, t});
  return {r[0], stop_gradient(r[1])};
}
}  // namespace

CrossEntropy softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& targets, double z_loss,
                                                       double label_smoothing, const std::string& vocab) {
  auto r = apply_composite(
      "softmax_cross_entropy_with_integer_labels", {logits, targets},
      [&](const std::vector<Array>& in) {
        CrossEntropy c = cross_entropy_local(in[0], in[1], z_loss, label_smoothing, vocab);
        return std::vector<Array>{c.loss, c.z_loss};
      },
      [&](const ShardedLowering& l, const std::vector<Array>& in) {
        CrossEntropy c = l.softmax_cross_entropy(in[0], in[1], z_loss, label_smoothing, vocab);
        return std::vector<Array>{c.loss, c.z_loss};
      });
  return {r[0], r[1]};
}

CrossEntropy softmax_cross_entropy_with_integer_labels_reference(const Array& logits, const Array& targets,
                                                                 double z_loss, double label_smoothing,
                                                                 const std::string& vocab) {
  const char* op = "softmax_cross_entropy_with_integer_labels";
  Array t = canonical_targets(op, logits, targets, vocab, label_smoothing);
  const int64_t V = logits.dim(vocab);
  const double conf = 1.0 - label_smoothing;
  const double low = V > 1 ? label_smoothing / double(V - 1) : 0.0;
  const double norm = -(conf * std::log(conf) + double(V - 1) * low * std::log(low + 1e-20));
  Array l = cast(logits, DType::f32);
  Array soft = add(mul(one_hot(t, V, vocab), conf - low), low);
  Array lse = logsumexp(l, {vocab});
  Array xent = sub(neg(sum(mul(soft, sub(l, lse)), {vocab})), norm);
  Array zl = mul(square(lse), z_loss);
  return {add(xent, zl), stop_gradient(zl)};
}

namespace {
Array gated_gelu_local(const Array& h0, const Array& h1) {
  if (!fused_kernels_enabled()) return gated_gelu_reference(h0, h1);
  check_floating("gated_gelu", h0, "h0");
  check_same_dtype("gated_gelu", h0, h1, "h0", "h1");
  if (broadcast_shapes("gated_gelu", h0.shape(), h1.shape()).rank() != h0.rank() || h0.rank() != h1.rank())
    throw_invalid("gated_gelu", "h0 " + describe(h0) + " and h1 " + describe(h1) + " must have the same dims");
  if (h0.dtype() == DType::bf16) return apply1(std::make_shared<GatedGelu>(), {h0, transpose(h1, h0.names())});
  Array a = cast(h0, DType::f32), b = cast(transpose(h1, h0.names()), DType::f32);
  return cast(apply1(std::make_shared<GatedGelu>(), {a, b}), h0.dtype());
}
}  // namespace

Array gated_gelu(const Array& h0, const Array& h1) {
  return composite1(
      "gated_gelu", {h0, h1}, [](const std::vector<Array>& in) { return gated_gelu_local(in[0], in[1]); },
      [](const ShardedLowering& l, const std::vector<Array>& in) { return l.gated_gelu(in[0], in[1]); });
}

Array gated_gelu_reference(const Array& h0, const Array& h1) {
  if (h0.rank() != h1.rank() || broadcast_shapes("gated_gelu", h0.shape(), h1.shape()).rank() != h0.rank())
    throw_invalid("gated_gelu", "h0 " + describe(h0) + " and h1 " + describe(h1) + " must have the same dims");
  return mul(gelu(h0), h1);
}

Array gated_gelu_mlp(const Array& x, const Array& wi_0, const Array& wi_1, const Array& wo, const std::string& embed,
                     const std::string& mlp) {
  const EinsumPrecision in_x{.operand_dtype = x.dtype()};
  Array h = gated_gelu(matmul(x, wi_0, embed, in_x), matmul(x, wi_1, embed, in_x));
  return matmul(h, wo, mlp, in_x);
}

}  // namespace t5x
