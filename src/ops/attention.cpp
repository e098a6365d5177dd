// dot_product_attention (ops/fused.h): fused kernel path and reference.
#include "backend/kernels.h"
#include "ops/autodiff.h"
#include "ops/detail.h"
#include "ops/lowering.h"
#include "ops/einsum.h"
#include "ops/elementwise.h"
#include "ops/fused.h"
#include "ops/index.h"
#include "ops/primitive.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace t5x {
using namespace detail;

namespace {

constexpr const char* kOp = "dot_product_attention";

struct Canon {
  Array q, k, v;                 // q [b, l, h, d]; k, v [b, kl, h, d]; input dtype
  Array bias;                    // [h, l, kl] or [b, h, l, kl]; or null
  Array q_seg, kv_seg;           // int32 [b, l] / [b, kl]
  Array q_mask, kv_mask;         // bool [b, l] / [b, kl]
  bool grouped = false;          // k, v carry kv_heads instead of heads
};

Array rename_length(const Array& x, const AttentionOptions& o) {
  if (x.valid() && !x.has_dim(o.kv_length) && x.has_dim(o.length)) return rename(x, {{o.length, o.kv_length}});
  return x;
}

void require_dims(const Array& x, const std::vector<std::string>& names, const char* what) {
  bool ok = x.rank() == int(names.size());
  for (const auto& n : names) ok = ok && x.has_dim(n);
  if (!ok) throw_invalid(kOp, std::string(what) + " must have dims " + names_to_string(names) + ", got " + describe(x));
}

Canon canonicalise(const Array& q0, const Array& k0, const Array& v0, const AttentionOptions& o) {
  check_local(kOp, {q0, k0, v0, o.bias, o.q_segment_ids, o.kv_segment_ids, o.q_mask, o.kv_mask});
  check_floating(kOp, q0, "q");
  // k / v: q's dtype, or both f32 (widened copies; the kernel runs in f32).
  if (!(k0.valid() && v0.valid() && k0.dtype() == DType::f32 && v0.dtype() == DType::f32)) {
    check_same_dtype(kOp, q0, k0, "q", "k");
    check_same_dtype(kOp, q0, v0, "q", "v");
  }
  Canon c;
  const std::vector<std::string> qn = {o.batch, o.length, o.heads, o.depth};
  Array k = rename_length(k0, o), v = rename_length(v0, o);
  c.grouped = k.has_dim(o.kv_heads);
  const std::string& kh = c.grouped ? o.kv_heads : o.heads;
  const std::vector<std::string> kn = {o.batch, o.kv_length, kh, o.depth};
  require_dims(q0, qn, "q");
  require_dims(k, kn, "k");
  require_dims(v, kn, "v");
  if (c.grouped && (k.dim(o.kv_heads) == 0 || q0.dim(o.heads) % k.dim(o.kv_heads) != 0))
    throw_invalid(kOp, "'" + o.kv_heads + "' = " + std::to_string(k.dim(o.kv_heads)) + " in k " + describe(k) +
                           " must divide '" + o.heads + "' = " + std::to_string(q0.dim(o.heads)) + " in q");
  for (const std::string* dp : {&o.batch, c.grouped ? &o.batch : &o.heads, &o.depth}) {
    const std::string& d = *dp;
    if (k.dim(d) != q0.dim(d))
      throw_invalid(kOp, "dim '" + d + "' has size " + std::to_string(q0.dim(d)) + " in q " + describe(q0) + " but " +
                             std::to_string(k.dim(d)) + " in k " + describe(k));
  }
  if (v.shape() != k.shape() && transpose(v, k.names()).shape() != k.shape())
    throw_invalid(kOp, "v " + describe(v) + " must match k " + describe(k));
  c.q = transpose(q0, qn);
  c.k = transpose(k, kn);
  c.v = transpose(v, kn);
  const int64_t B = q0.dim(o.batch), H = q0.dim(o.heads), L = q0.dim(o.length), KL = k.dim(o.kv_length);
  if (o.bias.valid()) {
    check_floating(kOp, o.bias, "bias");
    for (const Dim& d : o.bias.shape().dims())
      if (d.name != o.batch && d.name != o.heads && d.name != o.length && d.name != o.kv_length)
        throw_invalid(kOp, "bias dim '" + d.name + "' is not one of " +
                               names_to_string({o.batch, o.heads, o.length, o.kv_length}) + " in " + describe(o.bias));
    c.bias = broadcast_to(cast(o.bias, q0.dtype()),
                          o.bias.has_dim(o.batch) ? Shape{{o.batch, B}, {o.heads, H}, {o.length, L}, {o.kv_length, KL}}
                                                  : Shape{{o.heads, H}, {o.length, L}, {o.kv_length, KL}});
  }
  auto seq = [&](const Array& a, const std::string& len, int64_t n, const char* what, bool ids) -> Array {
    if (!a.valid()) return a;
    if (ids ? !is_integer(a.dtype()) : a.dtype() != DType::boolean)
      throw_invalid(kOp, std::string(what) + (ids ? " must be int32/int64" : " must be bool") + ", got " + describe(a));
    require_dims(a, {o.batch, len}, what);
    if (a.dim(o.batch) != B || a.dim(len) != n)
      throw_invalid(kOp, std::string(what) + " " + describe(a) + " does not match batch=" + std::to_string(B) + ", " +
                             len + "=" + std::to_string(n));
    Array t = transpose(a, {o.batch, len});
    return ids ? cast(t, DType::i32) : t;
  };
  if (o.q_segment_ids.valid() != o.kv_segment_ids.valid())
    throw_invalid(kOp, "q_segment_ids and kv_segment_ids must be given together");
  c.q_seg = seq(o.q_segment_ids, o.length, L, "q_segment_ids", true);
  c.kv_seg = seq(rename_length(o.kv_segment_ids, o), o.kv_length, KL, "kv_segment_ids", true);
  c.q_mask = seq(o.q_mask, o.length, L, "q_mask", false);
  c.kv_mask = seq(o.kv_mask.valid() ? rename_length(o.kv_mask, o) : o.kv_mask, o.kv_length, KL, "kv_mask", false);
  return c;
}

// Canonical q, k, v (+ f32 bias), all f32 or all bf16 -> f32 out [b, l, h, d].
class Attention : public Primitive {
 public:
  // stats: keep the rows' statistics for the backward (off where the call is
  // not recorded, e.g. a decode step: two arrays fewer per call).
  Attention(kernels::AttentionDims s, Canon c, double scale, bool causal, bool stats)
      : s_(s), c_(std::move(c)), stats_(stats) {
    p_.causal = causal;
    p_.scale = float(scale);
  }
  const char* name() const override { return kOp; }
  bool saves_outputs() const override { return true; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    Array out = make_output(in[0].shape(), DType::f32, {in[0]});
    if (stats_) {
      const Shape rows{{"rows", s_.batch * s_.heads * s_.q_length}};
      lse_ = Array(rows, DType::f32, {}, {}, false);
      logl_ = Array(rows, DType::f32, {}, {}, false);
    }
    kernels::AttentionArgs p = params(in);
    kernels::cpu::attention_forward(s_, p, in[0].dtype(), in[0].raw_data(), in[1].dtype(), in[1].raw_data(),
                                    in[2].raw_data(), out.data<float>(), stats_ ? lse_.data<float>() : nullptr,
                                    stats_ ? logl_.data<float>() : nullptr);
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>& out, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    if (in[1].dtype() != in[0].dtype() || in[2].dtype() != in[0].dtype())
      throw_invalid(kOp, "internal: the backward needs q, k and v in one dtype");
    if (!stats_) throw_invalid(kOp, "internal: a backward through a call made unrecorded");
    Array dq = make_output(in[0].shape(), DType::f32, {in[0]});
    Array dk = make_output(in[1].shape(), DType::f32, {in[1]});
    Array dv = make_output(in[2].shape(), DType::f32, {in[2]});
    Array db;
    if (in.size() > 3 && in[3].valid() && needs[3]) db = make_output(in[3].shape(), DType::f32, {in[3]});
    kernels::AttentionArgs p = params(in);
    // f32 gradients for bf16 q / k / v: wide cotangents (ops/autodiff.h),
    // which the projections' einsums take as they are.
    kernels::cpu::attention_backward(s_, p, in[0].dtype(), in[0].raw_data(), in[1].raw_data(), in[2].raw_data(),
                                     out[0].data<float>(), lse_.data<float>(), logl_.data<float>(),
                                     cot[0].data<float>(), dq.data<float>(), dk.data<float>(), dv.data<float>(),
                                     db.valid() ? db.data<float>() : nullptr);
    return {dq, dk, dv, db};
  }

 private:
  kernels::AttentionArgs params(const std::vector<Array>& in) const {
    kernels::AttentionArgs p = p_;
    if (in.size() > 3 && in[3].valid()) {
      p.bias = in[3].data<float>();
      p.bias_layout = in[3].rank() == 3 ? kernels::AttentionBias::kHeads : kernels::AttentionBias::kBatchHeads;
    }
    if (c_.q_seg.valid()) {
      p.q_segment_ids = c_.q_seg.data<int32_t>();
      p.kv_segment_ids = c_.kv_seg.data<int32_t>();
    }
    if (c_.q_mask.valid()) p.q_mask = c_.q_mask.data<uint8_t>();
    if (c_.kv_mask.valid()) p.kv_mask = c_.kv_mask.data<uint8_t>();
    return p;
  }
  kernels::AttentionDims s_;
  Canon c_;
  kernels::AttentionArgs p_;
  bool stats_ = true;
  Array lse_, logl_;  // the backward's row statistics (kernels.h)
};

}  // namespace

namespace {
Array attention_local(const Array& q, const Array& k, const Array& v, const AttentionOptions& o) {
  if (!fused_kernels_enabled()) return dot_product_attention_reference(q, k, v, o);
  Canon c = canonicalise(q, k, v, o);
  kernels::AttentionDims s;
  s.batch = q.dim(o.batch);
  s.q_length = q.dim(o.length);
  s.kv_length = c.k.dim(o.kv_length);
  s.heads = q.dim(o.heads);
  s.kv_heads = c.grouped ? c.k.dim(o.kv_heads) : s.heads;
  s.head_dim = q.dim(o.depth);
  // bf16 q, k and v reach the kernel as they are (bf16 activations, or a
  // decode cache kept in the activation dtype): half the bytes read, and no
  // f32 copies made and kept for the backward. (bf16 k / v come with a bf16 q:
  // canonicalise.)
  const bool narrow = c.q.dtype() == DType::bf16 && c.k.dtype() == DType::bf16 && c.v.dtype() == DType::bf16;
  auto in_dtype = [&](const Array& x) { return narrow ? x : cast(x, DType::f32); };
  std::vector<Array> in = {in_dtype(c.q), in_dtype(c.k), in_dtype(c.v)};
  if (c.bias.valid()) in.push_back(cast(c.bias, DType::f32));
  Array out = apply1(std::make_shared<Attention>(s, c, o.scale, o.causal, is_recording()), in);
  return transpose_like(cast(out, q.dtype()), q);
}
}  // namespace

// A composite (ops/primitive.h) over q, k, v and the options' arrays, any of
// which may be split; the sharded rule keeps the fused kernel per shard.
Array dot_product_attention(const Array& q, const Array& k, const Array& v, const AttentionOptions& o) {
  return composite1(
      "dot_product_attention", {q, k, v, o.bias, o.q_segment_ids, o.kv_segment_ids, o.q_mask, o.kv_mask},
      [&](const std::vector<Array>& in) { return attention_local(in[0], in[1], in[2], o); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.attention(in[0], in[1], in[2], o); });
}

Array dot_product_attention_reference(const Array& q, const Array& k0, const Array& v0, const AttentionOptions& o) {
  // f32 k / v for a narrower q hold q-dtype values (fused.h): narrowing is exact.
  const Array k = k0.valid() && k0.dtype() != q.dtype() ? cast(k0, q.dtype()) : k0;
  const Array v = v0.valid() && v0.dtype() != q.dtype() ? cast(v0, q.dtype()) : v0;
  Canon c = canonicalise(q, k, v, o);
  if (c.grouped) {  // repeat each kv head for its group of query heads
    const int64_t H = q.dim(o.heads), G = c.k.dim(o.kv_heads);
    auto expand = [&](const Array& x) {
      Shape b{{o.batch, x.dim(o.batch)}, {o.kv_length, x.dim(o.kv_length)}, {o.kv_heads, G}, {"__group", H / G},
              {o.depth, x.dim(o.depth)}};
      Shape r{{o.batch, x.dim(o.batch)}, {o.kv_length, x.dim(o.kv_length)}, {o.heads, H}, {o.depth, x.dim(o.depth)}};
      return reshape(broadcast_to(x, b), r);
    };
    c.k = expand(c.k);
    c.v = expand(c.v);
  }
  Array logits = einsum(c.q, c.k, {o.batch, o.heads, o.length, o.kv_length});
  if (o.scale != 1.0) logits = mul(logits, o.scale);
  const int64_t L = q.dim(o.length), KL = c.k.dim(o.kv_length);
  Array allowed;
  auto both = [&](const Array& m) { allowed = allowed.valid() ? logical_and(allowed, m) : m; };
  if (o.causal) {
    Shape s{{o.length, L}, {o.kv_length, KL}};
    both(le(iota(s, o.kv_length), add(iota(s, o.length), double(KL - L))));
  }
  if (c.q_seg.valid()) {
    both(eq(c.q_seg, c.kv_seg));
    both(ne(c.q_seg, 0.0));
  }
  if (c.q_mask.valid()) both(c.q_mask);
  if (c.kv_mask.valid()) both(c.kv_mask);
  Array bias;
  if (allowed.valid()) bias = where(allowed, Array::scalar(0.0, q.dtype()), Array::scalar(-1e10, q.dtype()));
  if (c.bias.valid()) bias = bias.valid() ? add(bias, c.bias) : c.bias;
  if (bias.valid()) logits = add(logits, bias);
  Array probs = softmax(logits, o.kv_length);
  return transpose(einsum(probs, c.v, {o.batch, o.length, o.heads, o.depth}), q.names());
}

}  // namespace t5x
