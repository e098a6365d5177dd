// Mixture-of-Experts feed-forward layer: routers, groups and capacity, the
// expert MLPs, the auxiliary losses and the routing metrics (flaxformer
// architectures/moe routing.py and moe_layers.py, as t5x contrib/moe uses
// them; ../shared/reference/moe.md sections 1-2). Where flaxformer and
// Mesh-TensorFlow differ (capacity rounding, top-2 renormalisation, which
// choices the balance loss counts) this follows flaxformer.
//
// Named dims: batch, length, embed (the layer's input / output), group,
// token (tokens of one group), expert, expert_capacity, expert_mlp.
//
// Parameters (t5x names below `prefix`, e.g. "encoder/layers_1/mlp"):
//   router/router_weights/w/kernel [embed, unmodeled=E] normal(0.02); float32 logits
//     (t5x axes ('embed', 'unmodeled'): replicated; route() reads 'unmodeled' as 'expert')
//   expert/wi/kernel or expert/wi_0, wi_1, ../kernel [expert, mlp_embed, expert_mlp]
//   expert/wo/kernel                                  [expert, expert_mlp, mlp_embed]
//     variance_scaling(expert_init_scale, fan_in, truncated_normal) of each
//     expert's 2-D kernel (fan_in = mlp_embed for wi, expert_mlp for wo).
// The leading `expert` dim is what the `expert` mesh axis splits (logical
// axis rules expert -> expert, expert_mlp -> model; mlp_embed replicated).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/random.h"
#include "nn/dropout.h"
#include "nn/params.h"

namespace t5x::nn {

enum class RouterType {
  kTokensChooseMasked,   // TokensChooseMaskedRouter: top-k per token (Switch k=1, GShard-style k=2)
  kTokensChooseScatter,  // TokensChooseScatterRouter: same routing, index-based dispatch
  kExpertsChooseMasked,  // ExpertsChooseMaskedRouter (Zhou et al. 2022): top-C tokens per expert; encoders only
};

struct MoeConfig {
  int64_t num_experts = 0;  // E; 0 = not an MoE layer
  int64_t expert_mlp_dim = 0;
  std::vector<std::string> activations = {"relu"};  // as nn::mlp_block
  RouterType router = RouterType::kTokensChooseMasked;
  int64_t num_selected_experts = 1;        // k (tokens-choose routers)
  bool batch_prioritized_routing = false;  // BPR: route tokens by descending top-1 probability
  double jitter_noise = 0.0;               // multiplicative U(1-eps, 1+eps) on the router inputs, training only
  bool ignore_padding_tokens = false;      // an all-zero input vector is padding
  double train_capacity_factor = 1.25;
  double eval_capacity_factor = 2.0;
  int64_t min_expert_capacity = 4;
  int64_t max_group_size = 4096;
  bool strict_group_size = false;
  // t5x NUM_EXPERT_PARTITIONS X: sets the expert replicas R and, when > 1, the
  // expert-parallel layout (E/X experts per partition); must divide num_experts.
  int64_t num_expert_partitions = 1;
  // R, the copies of each expert; 0: max(1, devices of x's mesh /
  // (num_expert_partitions * |model|)) as flaxformer (1 on one device). Set
  // it to run one process with a mesh's grouping (G is a multiple of E*R).
  int64_t num_expert_replicas = 0;
  double expert_init_scale = 1.0;     // tokens_choose_base.gin uses 0.1
  DType dtype = DType::f32;           // expert computation and all-to-all dtype (MOE_TRUNCATED_DTYPE)
};

// Python's round (half to even) of cf * group_size / num_experts, at least
// min_capacity (MoeLayer; moe.md 1.5). E.g. S=4, E=2, cf=1.25 -> 2 (2.5 rounds to 2).
int64_t expert_capacity(int64_t group_size, int64_t num_experts, double capacity_factor, int64_t min_capacity);
// flaxformer _num_groups: the smallest n >= max(num_tokens / max_group_size,
// E*R) with num_tokens % n == 0 and n % (E*R) == 0. Throws
// std::invalid_argument("[moe] ...") when none exists (or, strict, when
// num_tokens / n != max_group_size). (flaxformer stops its search at
// n = num_tokens and would return that even when it is not a multiple of E*R;
// moe_block pads the tokens to a multiple of E*R first, so that never arises.)
int64_t num_groups(int64_t num_tokens, int64_t max_group_size, int64_t num_experts, int64_t num_expert_replicas,
                   bool strict_group_size);

// What a router hands the layer, per group (moe.md 1.2-1.4).
struct RouterOutput {
  Array dispatch;  // f32 {0,1} [group, token, expert, expert_capacity]
  Array combine;   // f32 [group, token, expert, expert_capacity]: the raw softmax probability where dispatched
  Array auxiliary_loss;  // f32 scalar: E * mean_g sum_e f[g,e] P[g,e] (tokens-choose; 0 for experts-choose)
  Array router_z_loss;   // f32 scalar: mean over tokens of logsumexp(logits)^2
};

// inputs [group, token, embed] (any float dtype; routed in float32), kernel
// [embed, expert] (or [embed, unmodeled], the parameter's own dims). `jitter`
// is the key of the 'jitter' stream (training with jitter_noise > 0; the
// U(1-eps, 1+eps) factors are jax.random.uniform's for that key and the
// inputs' shape); nullopt: no jitter. Differentiable in inputs and kernel
// (combine, both losses); dispatch is a constant.
//   Tokens-choose: top-k per token; slot = inclusive cumsum over the group's
//   choices flattened k-major (every top-1 choice ahead of every top-2 one),
//   with BPR over tokens sorted by descending top-1 probability (stable);
//   slot >= capacity is dropped. ignore_padding_tokens: the masked router never
//   dispatches padding (all-zero inputs) and zeroes its probabilities.
//   Scatter: flaxformer's index form (expert, slot) gives the same dispatch
//   and combine as the masked router (same choices and slots; a pair either
//   has slot < C or is dropped in both), so it is computed as that mask. The
//   one difference is padding: the scatter router only zeroes the padding
//   probabilities before top-k, so padding tokens still take slots (with
//   combine 0) and count in the balance loss's f.
//   Experts-choose: each expert takes its top-`capacity` tokens by
//   probability (padding probabilities zeroed first); needs capacity <= tokens
//   per group; auxiliary_loss 0.
// Cost: dispatch and combine are dense f32 [G, S, E, C] (as flaxformer's masked
// routers); BPR permutes with a [G, S, S] one-hot product.
RouterOutput route(const Array& inputs, const Array& router_kernel, const MoeConfig& cfg, int64_t capacity,
                   std::optional<PRNGKey> jitter);

// The five scalars every MoE layer reports (t5x MoeLayer._sow_expert_metrics).
struct MoeMetrics {
  Array auxiliary_loss, router_z_loss;  // as RouterOutput
  Array fraction_tokens_left_behind;    // 1 - tokens dispatched at least once / tokens
                                        // (ignore_padding_tokens: / non-padding tokens,
                                        // times k for the scatter router, as flaxformer)
  Array router_confidence;              // sum(combine) / sum(dispatch)
  Array expert_usage;                   // sum(dispatch) / (E * C * G); 1 for experts-choose
};

ParamSpecs moe_param_specs(const std::string& prefix, int64_t embed, const MoeConfig& cfg);

// x [batch, length, embed] -> [batch, length, embed] in x's dtype: pad the
// tokens to a multiple of E*R (whichever of batch / length needs fewer),
// split into groups, route, dispatch (einsum over token), run each expert's
// MLP (dropout after the activations), combine, slice the padding off.
// Dropped tokens get 0 (the caller adds the residual). The experts run in
// cfg.dtype; the combine product runs in float32 (jnp.einsum promotes to the
// float32 combine array) and is rounded to x's dtype. `train` selects the
// train / eval capacity factor and enables jitter (drawn from `jitter`).
// Under an spmd context with the logical-axis constraint installed
// (nn/constraint.h) the groups keep the batch's layout (('expert', 'data'))
// and, for num_expert_partitions > 1, the experts run split over 'expert'
// with one all-to-all each way between (moe.md 2.4; docs/models.md).
// Writes the layer's metrics to *metrics when given.
Array moe_block(const ParamTree& p, const std::string& prefix, const Array& x, const MoeConfig& cfg, bool train,
                std::optional<PRNGKey> jitter, Dropout& dropout, MoeMetrics* metrics);

}  // namespace t5x::nn
