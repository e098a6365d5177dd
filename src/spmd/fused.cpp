#include "spmd/fused.h"

#include <cmath>
#include <stdexcept>

#include "ops/elementwise.h"
#include "ops/fourier.h"
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

}  // namespace

// Mesh-invariant (spmd/context.h): a split `dim` is gathered and the fused
// kernel runs as on one process.
Array rms_norm(const Array& x, const Array& scale, const std::string& dim, double eps) {
  if (!dim_split(x, dim) || context().mesh_invariant())
    return layout_op("rms_norm", {x, scale}, {dim}, [&](const std::vector<Array>& v) {
      return std::vector<Array>{t5x::rms_norm(v[0], v[1], dim, eps)};
    })[0];
  Array var = spmd::mean(spmd::mul(x, x), {dim});
  Array inv = spmd::unary(var, [eps](const Array& a) { return t5x::rsqrt(t5x::add(a, eps)); });
  return spmd::mul(spmd::mul(x, inv), scale);
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
  // t5x losses.py: soft targets c at the label, o elsewhere.
  const double V = double(logits.dim(vocab));
  const double c = 1.0 - label_smoothing, o = label_smoothing / (V - 1);
  const double norm = -(c * std::log(c) + (V - 1) * o * std::log(o + 1e-20));
  Array lse = spmd::logsumexp(logits, {vocab});
  Array logp = spmd::sub(logits, lse);
  Array onehot = spmd::one_hot(targets, logits.dim(vocab), vocab, spec_of(logits).dims[size_t(logits.shape().index(vocab))],
                               logits.dtype());
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
