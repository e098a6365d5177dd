#include "nn/moe.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "nn/attention.h"
#include "nn/constraint.h"
#include "nn/layers.h"
#include "ops/ops.h"

namespace t5x::nn {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("[moe] " + msg); }

Array as_f32(const Array& x) { return x.dtype() == DType::f32 ? x : cast(x, DType::f32); }
Array as_dtype(const Array& x, DType dt) { return x.dtype() == dt ? x : cast(x, dt); }

// 1 for tokens whose input vector has a non-zero entry, 0 for padding
// (flaxformer: padding is zeroed upstream). [group, token] f32, a constant.
Array padding_mask(const Array& x) {
  return cast(gt(sum(abs(stop_gradient(x)), {"embed"}), 0.0), DType::f32);
}

// flaxformer _load_balancing_loss: E^2 * mean_{g,e}(f * P), f = fraction of
// the group's tokens that chose e among their top-k (before capacity).
Array load_balancing_loss(const Array& probs, const Array& expert_index, int64_t num_experts) {
  Array chose = max(one_hot(expert_index, num_experts, "expert"), {"selected"});  // [group, token, expert]
  Array f = mean(chose, {"token"});
  Array p = mean(probs, {"token"});
  return mul(mean(mul(f, p)), double(num_experts * num_experts));
}

// Row permutation matrix [group, token, rank]: 1 where `order`[group, rank] == token.
Array permutation(const Array& order, int64_t tokens) {
  return transpose(one_hot(rename(order, {{"token", "rank"}}), tokens, "token"), {"group", "token", "rank"});
}

// Tokens-choose routing (masked, and scatter expressed as a mask).
RouterOutput tokens_choose(Array probs, const std::optional<Array>& mask, const MoeConfig& cfg, int64_t capacity) {
  const int64_t G = probs.dim("group"), S = probs.dim("token"), E = probs.dim("expert");
  const int64_t k = cfg.num_selected_experts;
  if (k < 1 || k > E) fail("num_selected_experts must be in [1, num_experts = " + std::to_string(E) + "], got " +
                           std::to_string(k));
  const bool scatter = cfg.router == RouterType::kTokensChooseScatter;
  // Scatter: padding only down-weights the probabilities before top-k, so
  // padding tokens may still take slots (with combine weight 0).
  if (mask && scatter) probs = mul(probs, *mask);
  auto [gate, index] = top_k(probs, k, "expert");
  gate = rename(gate, {{"expert", "selected"}});
  index = rename(index, {{"expert", "selected"}});
  if (mask && !scatter) {
    // Masked: padding gets gate 0 and a negative index (-index - 1), whose
    // one-hot row is empty, so it is never dispatched.
    Array m = cast(*mask, DType::i32);
    index = sub(add(mul(index, sub(mul(m, Array::scalar(2, DType::i32)), Array::scalar(1, DType::i32))), m),
                Array::scalar(1, DType::i32));
    gate = mul(gate, *mask);
    probs = mul(probs, *mask);
  }
  RouterOutput out;
  out.auxiliary_loss = load_balancing_loss(probs, index, E);

  // Priority: every top-1 choice of the group ranks ahead of every top-2 one.
  Array chosen = one_hot(index, E, "expert");  // [group, token, selected, expert], f32 0/1
  std::optional<Array> perm;
  if (cfg.batch_prioritized_routing) {
    // Stable argsort of -gate[..., 0] == top_k over all tokens (ties: lower index first).
    Array top1 = squeeze(slice(stop_gradient(gate), "selected", 0, 1), "selected");
    Array order = top_k(top1, S, "token").second;  // [group, token=S]: token of each rank
    perm = permutation(order, S);
    chosen = rename(einsum(*perm, chosen, {"group", "rank", "selected", "expert"}), {{"rank", "token"}});
  }
  Array flat = reshape(transpose(chosen, {"group", "selected", "token", "expert"}),
                       Shape{{"group", G}, {"flat", k * S}, {"expert", E}});
  Array priority = sub(mul(cumsum(flat, "flat"), flat), 1.0);
  priority = max(reshape(priority, Shape{{"group", G}, {"selected", k}, {"token", S}, {"expert", E}}), {"selected"});
  if (perm) {
    // Back to token order (a permutation of small integers: exact in f32).
    priority = einsum(*perm, rename(priority, {{"token", "rank"}}), {"group", "token", "expert"});
  }
  out.dispatch = one_hot(cast(priority, DType::i32), capacity, "expert_capacity");
  out.combine = mul(probs, out.dispatch);
  return out;
}

RouterOutput experts_choose(Array probs, const std::optional<Array>& mask, int64_t capacity) {
  const int64_t S = probs.dim("token");
  if (capacity > S)
    fail("experts_choose routing needs expert_capacity <= tokens per group, got capacity " +
         std::to_string(capacity) + " for " + std::to_string(S) + " tokens (lower min_expert_capacity or the "
         "capacity factor, or route more tokens per group)");
  if (mask) probs = mul(probs, *mask);
  auto [gate, index] = top_k(probs, capacity, "token");  // [group, token=C, expert]
  gate = rename(gate, {{"token", "expert_capacity"}});
  index = rename(index, {{"token", "expert_capacity"}});
  RouterOutput out;
  out.dispatch = transpose(one_hot(index, S, "token"), {"group", "token", "expert", "expert_capacity"});
  out.combine = transpose(mul(out.dispatch, gate), {"group", "token", "expert", "expert_capacity"});
  out.auxiliary_loss = Array::scalar(0.0);
  return out;
}

std::vector<std::string> wi_names(const MoeConfig& cfg) {
  std::vector<std::string> n;
  for (size_t i = 0; i < cfg.activations.size(); ++i)
    n.push_back(cfg.activations.size() == 1 ? "wi" : "wi_" + std::to_string(i));
  return n;
}

Array activate(const std::string& a, const Array& h) {
  if (a == "gelu") return gelu(h);
  if (a == "relu") return relu(h);
  if (a == "silu" || a == "swish") return mul(h, sigmoid(h));
  if (a == "linear") return h;
  fail("unknown activation '" + a + "' (gelu, relu, silu, linear)");
}

// Expert kernel as the einsum wants it: 'mlp_embed' read as 'embed'. The
// einsum takes it in dt (nn::in_dtype): a float32 kernel is rounded as the
// product packs it, with no bf16 copy. Where the expert-partitioned layout
// moves the kernel first, it is cast before the move (half the bytes moved).
Array expert_kernel(const ParamTree& p, const std::string& name, DType dt, bool moved) {
  Array k = rename(get(p, name), {{"mlp_embed", "embed"}});
  return moved ? as_dtype(k, dt) : k;
}

// R = max(1, devices / (num_expert_partitions * model partitions)) of the
// mesh x lives on (flaxformer _num_expert_replicas; 1 on one device).
int64_t expert_replicas(const Array& x, const MoeConfig& cfg) {
  if (cfg.num_expert_replicas > 0) return cfg.num_expert_replicas;
  const auto& mesh = x.sharding().mesh;
  if (!mesh) return 1;
  int m = mesh->axis_index("model");
  int64_t model = m < 0 ? 1 : mesh->axis_sizes[size_t(m)];
  return std::max<int64_t>(1, mesh->num_devices() / (cfg.num_expert_partitions * model));
}

// The expert-parallel layout (flaxformer _call_experts, moe.md 2.4) for X =
// num_expert_partitions > 1. expert_in [group, expert, expert_capacity, embed]
// arrives with groups laid out like the batch (('expert', 'data') under t5x's
// MoE rules). Reshaping group -> [unmodeled = X, expert_replicas = G/X] and
// expert -> [expert = X, local_expert = E/X] keeps that layout ('expert' on the
// group chunk 'unmodeled', 'data' on 'expert_replicas'); the logical-axis
// constraint then moves the 'expert' mesh axis from the group chunk to the
// expert chunk: one all-to-all. Each device then holds E/X experts' inputs
// for its data shard of the groups, and the expert kernels [expert, ...] split
// the same way, so the expert einsums are local. to_groups is the mirror
// (the same names swapped, then the constraint: the second all-to-all).
// Without an installed constraint these are plain reshapes (one process).
struct ExpertLayout {
  int64_t X, G, E;
  ExpertLayout(int64_t x, int64_t g, int64_t e) : X(x), G(g), E(e) {
    if (X < 1 || E % X != 0)
      fail("num_expert_partitions must divide num_experts = " + std::to_string(E) + ", got " + std::to_string(X));
  }
  Array to_experts(const Array& in) const {
    Shape s{{"unmodeled", X}, {"expert_replicas", G / X}, {"expert", X}, {"local_expert", E / X},
            {"expert_capacity", in.dim("expert_capacity")}, {"embed", in.dim("embed")}};
    return constrain(reshape(transpose(in, {"group", "expert", "expert_capacity", "embed"}), s));
  }
  Array to_groups(const Array& out, int64_t C, int64_t H) const {
    Array t = transpose(out, {"unmodeled", "expert_replicas", "expert", "local_expert", "expert_capacity", "embed"});
    t = constrain(rename(t, {{"unmodeled", "expert"}, {"expert", "unmodeled"}}));
    return reshape(t, Shape{{"group", G}, {"expert", E}, {"expert_capacity", C}, {"embed", H}});
  }
  // [expert, a, b] -> [expert = X, local_expert = E/X, a, b] (local: 'expert' stays on the major dim).
  Array kernel(const Array& k) const {
    if (X == 1) return k;
    std::vector<Dim> d = k.shape().dims();
    d[0].size = X;
    d.insert(d.begin() + 1, Dim{"local_expert", E / X});
    return reshape(transpose(k, {"expert", k.shape()[1].name, k.shape()[2].name}), Shape(std::move(d)));
  }
  std::vector<std::string> out_dims(const std::string& last) const {
    if (X == 1) return {"group", "expert", "expert_capacity", last};
    return {"unmodeled", "expert_replicas", "expert", "local_expert", "expert_capacity", last};
  }
};

}  // namespace

int64_t expert_capacity(int64_t group_size, int64_t num_experts, double capacity_factor, int64_t min_capacity) {
  if (num_experts < 1) fail("num_experts must be >= 1, got " + std::to_string(num_experts));
  // Python round(): half to even, as std::nearbyint in the default rounding mode.
  double raw = capacity_factor * double(group_size) / double(num_experts);
  return std::max(int64_t(std::nearbyint(raw)), min_capacity);
}

int64_t num_groups(int64_t num_tokens, int64_t max_group_size, int64_t num_experts, int64_t num_expert_replicas,
                   bool strict_group_size) {
  if (num_tokens < 1 || max_group_size < 1 || num_experts < 1 || num_expert_replicas < 1)
    fail("num_groups needs positive num_tokens, max_group_size, num_experts and replicas, got " +
         std::to_string(num_tokens) + ", " + std::to_string(max_group_size) + ", " + std::to_string(num_experts) +
         ", " + std::to_string(num_expert_replicas));
  const int64_t er = num_experts * num_expert_replicas;
  int64_t n = std::max(num_tokens / max_group_size, er);
  while (n < num_tokens && !(num_tokens % n == 0 && n % er == 0)) ++n;
  if (num_tokens % n != 0 || n % er != 0)
    fail("no group count divides num_tokens = " + std::to_string(num_tokens) + " into groups of at most " +
         std::to_string(max_group_size) + " tokens with a multiple of num_experts * replicas = " + std::to_string(er) +
         " groups; use more tokens (batch size, length) or fewer expert copies");
  if (strict_group_size && num_tokens / n != max_group_size)
    fail("strict_group_size: selected group size " + std::to_string(num_tokens / n) + " != max_group_size " +
         std::to_string(max_group_size) + " (num_tokens = " + std::to_string(num_tokens) + ")");
  return n;
}

RouterOutput route(const Array& inputs, const Array& router_kernel, const MoeConfig& cfg, int64_t capacity,
                   std::optional<PRNGKey> jitter) {
  for (const char* d : {"group", "token", "embed"})
    if (!inputs.has_dim(d)) fail(std::string("route: inputs need dims [group, token, embed], got ") +
                                 inputs.shape().to_string());
  Array kernel = router_kernel.has_dim("unmodeled") ? rename(router_kernel, {{"unmodeled", "expert"}}) : router_kernel;
  if (!kernel.has_dim("expert") || !kernel.has_dim("embed"))
    fail("route: router kernel needs dims [embed, expert], got " + router_kernel.shape().to_string());
  if (capacity < 1) fail("route: expert capacity must be >= 1, got " + std::to_string(capacity));
  // Selective precision: the router runs in float32 whatever the model dtype.
  Array x = as_f32(inputs);
  std::optional<Array> mask;
  if (cfg.ignore_padding_tokens) mask = padding_mask(x);
  if (jitter && cfg.jitter_noise > 0.0)
    x = mul(x, uniform(*jitter, x.shape(), 1.0 - cfg.jitter_noise, 1.0 + cfg.jitter_noise));
  Array logits = einsum(x, as_f32(kernel), {"group", "token", "expert"});
  Array probs = softmax(logits, "expert");
  // Masking the logits (after the softmax) only changes the z-loss: a padding
  // row of zeros adds (ln E)^2.
  if (mask) logits = mul(logits, *mask);
  RouterOutput out;
  switch (cfg.router) {
    case RouterType::kTokensChooseMasked:
    case RouterType::kTokensChooseScatter: out = tokens_choose(probs, mask, cfg, capacity); break;
    case RouterType::kExpertsChooseMasked: out = experts_choose(probs, mask, capacity); break;
  }
  out.router_z_loss = div(sum(square(logsumexp(logits, {"expert"}))), double(logits.dim("group") * logits.dim("token")));
  return out;
}

ParamSpecs moe_param_specs(const std::string& prefix, int64_t embed, const MoeConfig& cfg) {
  const int64_t E = cfg.num_experts, F = cfg.expert_mlp_dim;
  if (E < 1 || F < 1) fail("moe_param_specs needs num_experts and expert_mlp_dim >= 1, got " + std::to_string(E) +
                           " and " + std::to_string(F) + " for " + prefix);
  if (cfg.activations.empty()) fail("activations must not be empty (" + prefix + ")");
  ParamSpecs s;
  // Router: t5x axes ('embed', 'unmodeled'): replicated, not split over 'expert'.
  s.push_back({prefix + "/router/router_weights/w/kernel", Shape{{"embed", embed}, {"unmodeled", E}},
               InitSpec::normal(0.02)});
  // init_param takes fan_in from the first dim (E here); scaling by E / fan
  // gives each expert's 2-D kernel variance expert_init_scale / fan.
  auto expert_init = [&](int64_t fan_in) {
    return InitSpec::variance_scaling(cfg.expert_init_scale * double(E) / double(fan_in), "fan_in", "truncated_normal");
  };
  for (const auto& n : wi_names(cfg))
    s.push_back({prefix + "/expert/" + n + "/kernel", Shape{{"expert", E}, {"mlp_embed", embed}, {"expert_mlp", F}},
                 expert_init(embed)});
  s.push_back({prefix + "/expert/wo/kernel", Shape{{"expert", E}, {"expert_mlp", F}, {"mlp_embed", embed}},
               expert_init(F)});
  return s;
}

Array moe_block(const ParamTree& p, const std::string& prefix, const Array& x, const MoeConfig& cfg, bool train,
                std::optional<PRNGKey> jitter, Dropout& dropout, MoeMetrics* metrics) {
  const int64_t E = cfg.num_experts;
  if (E < 1) fail("moe_block needs num_experts >= 1, got " + std::to_string(E) + " (" + prefix + ")");
  for (const char* d : {"batch", "length", "embed"})
    if (!x.has_dim(d)) fail("moe_block: x needs dims [batch, length, embed], got " + x.shape().to_string());
  const DType dt = x.dtype();
  const int64_t B = x.dim("batch"), L = x.dim("length"), H = x.dim("embed");
  const int64_t R = expert_replicas(x, cfg);
  const int64_t ER = E * R;

  // _maybe_pad: pad batch or length, whichever needs fewer tokens (tie: length).
  int64_t pad_b = 0, pad_l = 0;
  if ((B * L) % ER != 0) {
    pad_b = 1;
    while ((B * L + pad_b * L) % ER != 0) ++pad_b;
    pad_l = 1;
    while ((B * L + pad_l * B) % ER != 0) ++pad_l;
    if (pad_l * B > pad_b * L) pad_l = 0;
    else pad_b = 0;
  }
  Array xp = x;
  if (pad_b) xp = pad(xp, "batch", 0, pad_b);
  if (pad_l) xp = pad(xp, "length", 0, pad_l);
  const int64_t Bp = B + pad_b, Lp = L + pad_l, N = Bp * Lp;
  const int64_t G = num_groups(N, cfg.max_group_size, E, R, cfg.strict_group_size);
  const int64_t S = N / G;
  const int64_t C = expert_capacity(S, E, train ? cfg.train_capacity_factor : cfg.eval_capacity_factor,
                                    cfg.min_expert_capacity);

  Array xg = reshape(transpose(xp, {"batch", "length", "embed"}), Shape{{"group", G}, {"token", S}, {"embed", H}});
  const Array& router_kernel = get(p, prefix + "/router/router_weights/w/kernel");
  if (router_kernel.size() != H * E)
    fail(prefix + "/router/router_weights/w/kernel is " + router_kernel.shape().to_string() + " but embed = " +
         std::to_string(H) + " and num_experts = " + std::to_string(E) + " (check the MoE config against the params)");
  RouterOutput r = route(xg, router_kernel, cfg, C, train ? jitter : std::nullopt);

  // Dispatch (a contraction over 'token', local to each group).
  Array expert_in = einsum(xg, as_dtype(r.dispatch, dt), {"group", "expert", "expert_capacity", "embed"});
  expert_in = as_dtype(expert_in, cfg.dtype);
  // Every expert's MLP at once: 'expert' is a batch dim of the einsums.
  const ExpertLayout lay{cfg.num_expert_partitions, G, E};
  if (lay.X > 1) expert_in = lay.to_experts(expert_in);
  Array h;
  auto names = wi_names(cfg);
  for (size_t i = 0; i < names.size(); ++i) {
    Array k = lay.kernel(expert_kernel(p, prefix + "/expert/" + names[i] + "/kernel", cfg.dtype, lay.X > 1));
    Array hi = activate(cfg.activations[i], einsum(expert_in, k, lay.out_dims("expert_mlp"), in_dtype(cfg.dtype)));
    h = h.valid() ? mul(h, hi) : hi;
  }
  // flaxformer's expert MlpBlock drops along its hidden dim, shared by the
  // tokens (the mask is [expert, expert_mlp] in either layout).
  h = dropout(h, {"group", "unmodeled", "expert_replicas", "expert_capacity"});
  Array expert_out = einsum(h, lay.kernel(expert_kernel(p, prefix + "/expert/wo/kernel", cfg.dtype, lay.X > 1)),
                            lay.out_dims("embed"), in_dtype(cfg.dtype));
  if (lay.X > 1) expert_out = lay.to_groups(expert_out, C, H);
  // Combine in float32 (jnp.einsum promotes the activations to the float32
  // combine array), then back to x's dtype.
  Array y = einsum(as_f32(expert_out), r.combine, {"group", "token", "embed"});
  y = as_dtype(reshape(y, Shape{{"batch", Bp}, {"length", Lp}, {"embed", H}}), dt);
  if (pad_b) y = slice(y, "batch", 0, B);
  if (pad_l) y = slice(y, "length", 0, L);
  y = constrain(y);

  if (metrics) {
    Array dispatch = r.dispatch;
    Array combine = stop_gradient(r.combine);
    Array somewhere = sum(max(dispatch, {"expert", "expert_capacity"}));
    Array tokens = Array::scalar(double(G * S));
    if (cfg.ignore_padding_tokens) {
      tokens = sum(padding_mask(xg));
      // flaxformer's scatter path counts the k repeated copies of each token.
      if (cfg.router == RouterType::kTokensChooseScatter) tokens = mul(tokens, double(cfg.num_selected_experts));
    }
    Array dispatched = sum(dispatch);
    metrics->auxiliary_loss = r.auxiliary_loss;
    metrics->router_z_loss = r.router_z_loss;
    metrics->fraction_tokens_left_behind = sub(Array::scalar(1.0), div(somewhere, tokens));
    metrics->router_confidence = div(sum(combine), dispatched);
    metrics->expert_usage = cfg.router == RouterType::kExpertsChooseMasked
                                ? Array::scalar(1.0)
                                : div(dispatched, double(E * C * G));
  }
  return y;
}

}  // namespace t5x::nn
