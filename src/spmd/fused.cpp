#include "spmd/fused.h"

#include <cmath>
#include <stdexcept>

#include "ops/elementwise.h"
#include "ops/fourier.h"
#include "ops/primitive.h"
#include "spmd/collectives.h"
#include "spmd/context.h"
#include "spmd/elementwise.h"
#include "spmd/index.h"
#include "spmd/local.h"
#include "spmd/lower.h"
#include "spmd/reduce.h"

namespace t5x::spmd {
namespace {

bool dim_split(const Array& x, const std::string& dim) {
  int i = x.shape().index(dim);
  return i >= 0 && group_size(spec_of(x).dims[size_t(i)]) > 1;
}

Array cast_to(const Array& x, DType dtype) {
  return spmd::unary(x, [dtype](const Array& a) { return t5x::cast(a, dtype); });
}

// The identity, whose cotangent is rounded to its dtype: it does not take
// wide cotangents (ops/autodiff.h), so a float32 cotangent of a bf16 value
// is rounded before it passes. Marks where the one-process RmsNorm kernel
// reads its bf16 dy and writes its bf16 dx.
class NarrowCotangent : public Primitive {
 public:
  const char* name() const override { return "narrow_cotangent"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {in[0]}; }
  std::vector<Array> eval_cuda(const std::vector<Array>& in) override { return {in[0]}; }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {cot[0]};
  }
};

Array narrow_cotangent(const Array& x) {
  if (x.dtype() == DType::f32) return x;
  return spmd::unary(x, [](const Array& a) { return apply1(std::make_shared<NarrowCotangent>(), {a}); });
}

}  // namespace

// Mesh-invariant (spmd/context.h): a split `dim` is gathered and the fused
// kernel runs as on one process.
//
// Split `dim`: the one-process op's arithmetic (ops/fused.cpp) in its dtypes
// and order, the sum of squares a local sum + all-reduce. x is widened to
// float32 (bf16 activations with a float32 scale, as t5x trains, no longer
// meet in one mul), rstd = rsqrt(mean(x^2) + eps) (the kernel's row rstd,
// backend/cpu/rms_norm.cpp, or the reference's), then
//   fused kernels on (the default): y = (x * rstd) * float32(scale) in
//     float32, rounded once to x's dtype (the RmsNorm kernel);
//   off (rms_norm_reference, flaxformer's T5 LayerNorm):
//     y = dtype(x * rstd) * dtype(scale) in x's dtype.
// The vjp is computed in the same dtypes: with the kernel, dy is rounded to
// x's dtype, dx and dscale computed in float32 and dx rounded once to x's
// dtype (narrow_cotangent); the reference's ops are the one-process ops
// (dy rounded by the bf16 mul, dx left wide by its cast, dscale in x's dtype).
Array rms_norm(const Array& x, const Array& scale, const std::string& dim, double eps) {
  if (!dim_split(x, dim) || context().mesh_invariant())
    return layout_op("rms_norm", {x, scale}, {dim}, [&](const std::vector<Array>& v) {
      return std::vector<Array>{t5x::rms_norm(v[0], v[1], dim, eps)};
    })[0];
  const DType dt = x.dtype();
  const bool kernel = fused_kernels_enabled();
  const double n = double(x.dim(dim));
  Array x32 = cast_to(kernel ? narrow_cotangent(x) : x, DType::f32);
  Array x2 = spmd::mul(x32, x32);
  // The kernel divides the sum by E; the reference's mean multiplies by 1/E.
  Array ms = kernel ? spmd::unary(spmd::sum(x2, {dim}), [n](const Array& a) { return t5x::div(a, n); })
                    : spmd::mean(x2, {dim});
  Array rstd = spmd::unary(ms, [eps](const Array& a) { return t5x::rsqrt(t5x::add(a, eps)); });
  Array xhat = spmd::mul(x32, rstd);
  if (kernel) return narrow_cotangent(cast_to(spmd::mul(xhat, cast_to(scale, DType::f32)), dt));
  return spmd::mul(cast_to(xhat, dt), cast_to(scale, dt));
}

CrossEntropy softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& targets, double z_loss,
                                                       double label_smoothing, const std::string& vocab) {
  if (!dim_split(logits, vocab) || context().mesh_invariant()) {
    auto r = layout_op("softmax_cross_entropy_with_integer_labels", {logits, targets}, {vocab},
                       [&](const std::vector<Array>& v) {
                         CrossEntropy c = t5x::softmax_cross_entropy_with_integer_labels(v[0], v[1], z_loss,
                                                                                        label_smoothing, vocab);
                         return std::vector<Array>{c.loss, c.z_loss};
                       });
    return {r[0], r[1]};
  }
  // t5x losses.py: soft targets c at the label, o elsewhere. In float32, as
  // the one-process kernel and reference (bf16 logits are widened first; the
  // loss is float32 and the logits' gradient is rounded once to their dtype).
  const Array l = cast_to(logits, DType::f32);
  const double V = double(l.dim(vocab));
  const double c = 1.0 - label_smoothing, o = label_smoothing / (V - 1);
  const double norm = -(c * std::log(c) + (V - 1) * o * std::log(o + 1e-20));
  Array lse = spmd::logsumexp(l, {vocab});
  Array logp = spmd::sub(l, lse);
  Array onehot = spmd::one_hot(targets, l.dim(vocab), vocab, spec_of(l).dims[size_t(l.shape().index(vocab))], l.dtype());
  Array soft = spmd::unary(onehot, [c, o](const Array& a) { return t5x::add(t5x::mul(a, c - o), o); });
  Array zl = spmd::unary(lse, [z_loss](const Array& a) { return t5x::mul(t5x::square(a), z_loss); });
  Array ce = spmd::unary(spmd::sum(spmd::mul(soft, logp), {vocab}), [norm](const Array& a) { return t5x::sub(t5x::neg(a), norm); });
  Array loss = z_loss != 0.0 ? spmd::add(ce, zl) : ce;
  return {loss, zl.alias()};  // z_loss is reported, not differentiated (t5x custom vjp)
}

Array dot_product_attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& opt) {
  // Grouped K/V with split query heads: each shard would pair its local heads
  // with the wrong K/V heads (the group map is global), so refuse.
  if (k.has_dim(opt.kv_heads) && dim_split(q, opt.heads))
    throw std::invalid_argument("[dot_product_attention] k / v carry '" + opt.kv_heads + "' while q's '" + opt.heads +
                                "' is split over the mesh; repeat the K/V heads to '" + opt.heads +
                                "' first (nn::expand_kv_heads)");
  std::vector<Array> xs = {q, k, v, opt.bias, opt.q_segment_ids, opt.kv_segment_ids, opt.q_mask, opt.kv_mask};
  return layout_op("dot_product_attention", xs, {opt.length, opt.kv_length, opt.depth, opt.kv_heads},
                   [&](const std::vector<Array>& l) {
                     AttentionOptions lo = opt;
                     lo.bias = l[3];
                     lo.q_segment_ids = l[4];
                     lo.kv_segment_ids = l[5];
                     lo.q_mask = l[6];
                     lo.kv_mask = l[7];
                     return std::vector<Array>{t5x::dot_product_attention(l[0], l[1], l[2], lo)};
                   })[0];
}

Array fourier_mix(const Array& x, const std::string& length, const std::string& embed) {
  return layout_op("fourier_mix", {x}, {length, embed}, [&](const std::vector<Array>& l) {
    return std::vector<Array>{t5x::fourier_mix(l[0], length, embed)};
  })[0];
}

}  // namespace t5x::spmd
