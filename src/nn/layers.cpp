#include "nn/layers.h"

#include <stdexcept>

#include "nn/attention.h"
#include "nn/constraint.h"
#include "ops/ops.h"

namespace t5x::nn {

ParamSpec embedding_param_spec(const std::string& name, int64_t vocab, int64_t embed) {
  return {name, Shape{{"vocab", vocab}, {"embed", embed}}, InitSpec::normal(1.0)};
}

ParamSpec norm_param_spec(const std::string& name, int64_t embed) {
  return {name, Shape{{"embed", embed}}, InitSpec::ones()};
}

ParamSpec dense_param_spec(const std::string& name, const Dim& in, const Dim& out) {
  return {name, Shape{in, out}, InitSpec::variance_scaling(1.0, "fan_in", "truncated_normal")};
}

Array embed_lookup(const Array& embedding, const Array& tokens, DType dt) {
  Array e = take(embedding, tokens, "vocab");
  return e.dtype() == dt ? e : cast(e, dt);
}

Array embed_attend(const Array& embedding, const Array& x) {
  Array xf = x.dtype() == DType::f32 ? x : cast(x, DType::f32);
  Array ef = embedding.dtype() == DType::f32 ? embedding : cast(embedding, DType::f32);
  std::vector<std::string> out;
  for (const auto& n : xf.names())
    if (n != "embed") out.push_back(n);
  out.push_back("vocab");
  return einsum(xf, ef, out);
}

Array dense(const Array& x, const Array& kernel, const std::string& in_dim) {
  return matmul(x, kernel, in_dim, in_dtype(x.dtype()));
}

Array layer_norm(const ParamTree& p, const std::string& name, const Array& x) {
  return rms_norm(x, get(p, name + "/scale"), "embed", 1e-6);
}

ParamSpecs mlp_param_specs(const std::string& prefix, int64_t embed, int64_t mlp_dim,
                           const std::vector<std::string>& activations) {
  if (activations.empty()) throw std::invalid_argument("[mlp] activations must not be empty");
  ParamSpecs s;
  for (size_t i = 0; i < activations.size(); ++i) {
    std::string n = activations.size() == 1 ? "wi" : "wi_" + std::to_string(i);
    s.push_back(dense_param_spec(prefix + "/" + n + "/kernel", {"embed", embed}, {"mlp", mlp_dim}));
  }
  s.push_back(dense_param_spec(prefix + "/wo/kernel", {"mlp", mlp_dim}, {"embed", embed}));
  return s;
}

namespace {
Array activate(const std::string& a, const Array& h) {
  if (a == "gelu") return gelu(h);
  if (a == "relu") return relu(h);
  if (a == "silu" || a == "swish") return mul(h, sigmoid(h));
  if (a == "linear") return h;
  throw std::invalid_argument("[mlp] unknown activation '" + a + "' (gelu, relu, silu, linear)");
}
}  // namespace

ParamTree fuse_gated_wi(const ParamTree& p) {
  ParamTree out = p;
  for (const auto& [name, wi_0] : p) {
    const std::string tail = "/wi_0/kernel";
    if (!name.ends_with(tail) || wi_0.rank() != 2 || !wi_0.has_dim("embed") || !wi_0.has_dim("mlp")) continue;
    const std::string prefix = name.substr(0, name.size() - tail.size());
    auto wi_1 = p.find(prefix + "/wi_1/kernel");
    if (wi_1 == p.end() || p.count(prefix + "/wi_2/kernel") || wi_1->second.shape() != wi_0.shape() ||
        wi_1->second.dtype() != wi_0.dtype())
      continue;
    // [embed, branch, mlp]: a row of B holds wi_0's row, then wi_1's.
    const Array a = transpose(wi_0, {"embed", "mlp"}), b = transpose(wi_1->second, {"embed", "mlp"});
    out[prefix + "/" + std::string(kFusedWiName) + "/kernel"] = stack({a, b}, std::string(kFusedWiBranch), 1);
    out.erase(name);
    out.erase(prefix + "/wi_1/kernel");
  }
  return out;
}

Array mlp_block(const ParamTree& p, const std::string& prefix, const Array& x,
                const std::vector<std::string>& activations, Dropout& dropout) {
  const Array& wo = get(p, prefix + "/wo/kernel");
  const bool gated_gelu_no_dropout =
      activations.size() == 2 && activations[0] == "gelu" && activations[1] == "linear" && !dropout.active();
  if (auto fused = p.find(prefix + "/" + std::string(kFusedWiName) + "/kernel"); fused != p.end()) {
    // A decode layout's wi_0 and wi_1 as one kernel (fuse_gated_wi): one
    // product, each output column the same sum over embed as in its own
    // product, so the same bits as the two products on the default kernels
    // (T5X_GEMM_KERNEL=onednn: to rounding).
    if (!gated_gelu_no_dropout)
      throw std::invalid_argument("[mlp] " + fused->first +
                                  " (a decode layout) serves only the gated GELU MLP without dropout; "
                                  "decode with the model's own parameters instead");
    const EinsumPrecision in_x{.operand_dtype = x.dtype()};
    std::vector<Array> h = unstack(matmul(x, fused->second, "embed", in_x), std::string(kFusedWiBranch));
    return matmul(gated_gelu(h[0], h[1]), wo, "mlp", in_x);
  }
  if (gated_gelu_no_dropout)
    return gated_gelu_mlp(x, get(p, prefix + "/wi_0/kernel"), get(p, prefix + "/wi_1/kernel"), wo);
  Array h;
  for (size_t i = 0; i < activations.size(); ++i) {
    std::string n = activations.size() == 1 ? "wi" : "wi_" + std::to_string(i);
    Array hi = activate(activations[i], dense(x, get(p, prefix + "/" + n + "/kernel"), "embed"));
    h = h.valid() ? mul(h, hi) : hi;
  }
  h = constrain(dropout(h, {"length"}));
  return dense(h, wo, "mlp");
}

}  // namespace t5x::nn
