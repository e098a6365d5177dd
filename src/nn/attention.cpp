#include "nn/attention.h"

#include <cmath>
#include <stdexcept>

#include "ops/ops.h"

namespace t5x::nn {

namespace {

// Dims of x without `drop`, followed by `add`.
std::vector<std::string> replace_dims(const Array& x, const std::vector<std::string>& drop,
                                      const std::vector<std::string>& add) {
  std::vector<std::string> out;
  for (const auto& n : x.names()) {
    bool d = false;
    for (const auto& k : drop) d = d || n == k;
    if (!d) out.push_back(n);
  }
  out.insert(out.end(), add.begin(), add.end());
  return out;
}

Array to_kv_length(const Array& a) {
  if (!a.valid() || !a.has_dim("length")) return a;
  return rename(a, {{"length", "kv_length"}});
}

Array as_bool(const Array& a) { return a.dtype() == DType::boolean ? a : ne(a, 0.0); }

}  // namespace

EinsumPrecision in_dtype(DType dt) { return EinsumPrecision{.operand_dtype = dt}; }

Array attention_mask_bias(const MaskSpec& m, int64_t batch, int64_t length, int64_t kv_length) {
  Array allowed;
  auto conj = [&](const Array& a) { allowed = allowed.valid() ? logical_and(allowed, a) : a; };
  if (m.causal) {
    Shape s{{"length", length}, {"kv_length", kv_length}};
    Array qi = iota(s, "length"), ki = iota(s, "kv_length");
    Array c = le(ki, add(qi, double(kv_length - length)));
    if (m.bidirectional_prefix.valid()) {
      Array pq = as_bool(m.bidirectional_prefix);
      c = logical_or(c, logical_and(pq, to_kv_length(pq)));
    }
    conj(c);
  }
  if (m.q_segment_ids.valid() != m.kv_segment_ids.valid())
    throw std::invalid_argument("[attention] give both q_segment_ids and kv_segment_ids or neither");
  if (m.q_segment_ids.valid()) {
    Array kv = to_kv_length(m.kv_segment_ids);
    conj(logical_and(eq(m.q_segment_ids, cast(kv, m.q_segment_ids.dtype())), ne(m.q_segment_ids, 0.0)));
  }
  if (m.q_mask.valid()) conj(as_bool(m.q_mask));
  if (m.kv_mask.valid()) conj(to_kv_length(as_bool(m.kv_mask)));
  Shape out{{"batch", batch}, {"length", length}, {"kv_length", kv_length}};
  if (!allowed.valid()) return Array::zeros(out);
  Array bias = where(allowed, Array::scalar(0.0), -1e10);
  return transpose(broadcast_to(bias, out), {"batch", "length", "kv_length"});
}

ParamSpecs attention_param_specs(const std::string& prefix, int64_t embed, const AttentionConfig& cfg) {
  if (cfg.num_heads % cfg.kv_heads() != 0)
    throw std::invalid_argument("[attention] num_kv_heads " + std::to_string(cfg.kv_heads()) +
                                " must divide num_heads " + std::to_string(cfg.num_heads));
  const int64_t q_joined = cfg.num_heads * cfg.head_dim;
  auto fan_in = InitSpec::variance_scaling(1.0, "fan_in", "normal");
  auto q_init = InitSpec::variance_scaling(1.0, "fan_in", "normal", std::sqrt(double(cfg.head_dim)));
  const Shape kv = cfg.grouped() ? Shape{{"embed", embed}, {"kv_heads", cfg.kv_heads()}, {"kv", cfg.head_dim}}
                                 : Shape{{"embed", embed}, {"joined_kv", q_joined}};
  return {
      {prefix + "/query/kernel", Shape{{"embed", embed}, {"joined_kv", q_joined}}, q_init},
      {prefix + "/key/kernel", kv, fan_in},
      {prefix + "/value/kernel", kv, fan_in},
      {prefix + "/out/kernel", Shape{{"joined_kv", q_joined}, {"embed", embed}}, fan_in},
  };
}

Array project_query(const ParamTree& p, const std::string& prefix, const Array& x, const AttentionConfig& cfg) {
  Array w = get(p, prefix + "/query/kernel");
  int64_t e = w.dim("embed");
  w = reshape(w, Shape{{"embed", e}, {"heads", cfg.num_heads}, {"kv", cfg.head_dim}});
  return einsum(x, w, replace_dims(x, {"embed"}, {"heads", "kv"}), in_dtype(x.dtype()));
}

std::pair<Array, Array> project_key_value(const ParamTree& p, const std::string& prefix, const Array& x_in,
                                          const AttentionConfig& cfg) {
  Array x = to_kv_length(x_in);
  const char* hn = cfg.grouped() ? "kv_heads" : "heads";
  auto proj = [&](const std::string& name) {
    Array w = get(p, prefix + "/" + name + "/kernel");
    if (!cfg.grouped()) w = reshape(w, Shape{{"embed", w.dim("embed")}, {hn, cfg.kv_heads()}, {"kv", cfg.head_dim}});
    return einsum(x, w, replace_dims(x, {"embed"}, {hn, "kv"}), in_dtype(x.dtype()));
  };
  return {proj("key"), proj("value")};
}

Array expand_kv_heads(const Array& kv, const AttentionConfig& cfg) {
  if (!kv.has_dim("kv_heads")) return kv;
  int64_t g = cfg.num_heads / cfg.kv_heads();
  std::vector<std::string> order = replace_dims(kv, {"kv_heads", "kv"}, {"kv_heads", "kv"});
  Array t = transpose(kv, order);
  std::vector<Dim> bd, rd;
  for (const auto& d : t.shape().dims()) {
    if (d.name == "kv_heads") {
      bd.push_back(d);
      bd.push_back({"group", g});
      rd.push_back({"heads", cfg.num_heads});
    } else {
      bd.push_back(d);
      rd.push_back(d);
    }
  }
  return reshape(broadcast_to(t, Shape(bd)), Shape(rd));
}

Array attend(const Array& q, const Array& k_in, const Array& v_in, const MaskSpec& m, const Array& bias,
             const AttentionConfig& cfg, Dropout& dropout) {
  Array k = to_kv_length(k_in), v = to_kv_length(v_in);
  DType dt = q.dtype();
  const bool fused = !dropout.active() && !m.bidirectional_prefix.valid();
  // The fused kernel reads each K/V head once per group (no repeated copy of
  // the decode cache); under spmd the heads may be split, so repeat there.
  if (!fused || !q.is_fully_local() || !k.is_fully_local() || !v.is_fully_local()) {
    k = expand_kv_heads(k, cfg);
    v = expand_kv_heads(v, cfg);
  }
  if (fused) {
    AttentionOptions o;
    if (bias.valid()) o.bias = bias.dtype() == dt ? bias : cast(bias, dt);
    o.causal = m.causal;
    o.q_segment_ids = m.q_segment_ids;
    o.kv_segment_ids = to_kv_length(m.kv_segment_ids);
    if (m.q_mask.valid()) o.q_mask = as_bool(m.q_mask);
    if (m.kv_mask.valid()) o.kv_mask = to_kv_length(as_bool(m.kv_mask));
    return dot_product_attention(q, k, v, o);
  }
  Array total = attention_mask_bias(m, q.dim("batch"), q.dim("length"), k.dim("kv_length"));
  if (bias.valid()) total = add(total, bias.dtype() == DType::f32 ? bias : cast(bias, DType::f32));
  if (dt != DType::f32) total = cast(total, dt);
  if (!dropout.active()) {
    AttentionOptions o;
    o.bias = total;
    return dot_product_attention(q, k, v, o);
  }
  Array logits = add(einsum(q, k, {"batch", "heads", "length", "kv_length"}), total);
  Array probs = dropout(softmax(logits, "kv_length"), {"length"});
  return einsum(probs, v, replace_dims(q, {}, {}));
}

Array project_out(const ParamTree& p, const std::string& prefix, const Array& ctx, const AttentionConfig& cfg) {
  Array w = get(p, prefix + "/out/kernel");
  int64_t e = w.dim("embed");
  w = reshape(w, Shape{{"heads", cfg.num_heads}, {"kv", cfg.head_dim}, {"embed", e}});
  return einsum(ctx, w, replace_dims(ctx, {"heads", "kv"}, {"embed"}), in_dtype(ctx.dtype()));
}

Array multi_head_attention(const ParamTree& p, const std::string& prefix, const Array& x_q, const Array& x_kv,
                           const MaskSpec& mask, const Array& bias, const AttentionConfig& cfg, Dropout& dropout) {
  Array q = project_query(p, prefix, x_q, cfg);
  auto [k, v] = project_key_value(p, prefix, x_kv, cfg);
  return project_out(p, prefix, attend(q, k, v, mask, bias, cfg, dropout), cfg);
}

}  // namespace t5x::nn
