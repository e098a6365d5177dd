// Adafactor as implemented in t5x (t5x/adafactor.py), not optax's variant.
// Paper: Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with
// Sublinear Memory Cost" (arXiv:1804.04235), Alg. 4/5 plus update clipping
// (sec. 6) and relative step size (sec. 8).
//
// Per parameter p with gradient g (all float32), step t = state.step - step_offset:
//   [optional] g *= thr * min(1/thr, 1/global_norm(all grads))   (global_norm_clip_threshold)
//   decay  = 1 - (t + 1)^-decay_rate,  mixing = 1 - decay
//   scale  = lr * clip(max(eps2, RMS(p)), max_parameter_scale)   (multiply_by_parameter_scale)
//   g2     = g*g + eps1
//   factored:   v_row = decay*v_row + mixing*mean(g2 over COL dims)
//               v_col = decay*v_col + mixing*mean(g2 over ROW dims)
//               y = g * (v_row / mean(v_row over ROW dims))^-1/2 * v_col^-1/2
//   unfactored: v = decay*v + mixing*g2;  y = g * v^-1/2
//   y /= max(1, RMS(y) / clipping_threshold)
//   u = scale * y;  [beta1] m = beta1*m + (1-beta1)*u; u = m
//   p = (1 - weight_decay_rate) * p - u      (weight decay is NOT scaled by lr)
// RMS / means run over the "averaging dims": all dims except BATCH dims, so
// stacked / scanned params get one scale per layer.
//
// Which dims are ROW / COLUMN / BATCH (t5x `_parse_rule`, `set_param_axes`):
//   - logical_factor_rules set (the model gins set
//     standard_logical_factor_rules()): each dim's logical name (its Array
//     dim name) maps to ROW / COLUMN / BATCH / NONE. A param with ROW,
//     COLUMN and NONE dims is an error; one lacking ROW or COLUMN is not
//     factored (BATCH kept). A rank <= 2 param without BATCH dims falls back
//     to the heuristic regardless of its rule.
//   - else factor_map (regex -> rule, first match of a search on the path).
//   - else the heuristic: rank <= 2 only (higher rank throws); factor the
//     two largest dims when the second largest is >= min_dim_size_to_factor;
//     the larger is COLUMN (v_row drops it), the smaller ROW; ties keep order
//     (the earlier dim is ROW).
//
// State ("state/param_states/<path>/<slot>", t5x naming): v_row (param dims
// minus COLUMN dims), v_col (minus ROW dims) or v (param shape); m when
// beta1 is set (dtype_momentum). Unused slots are zeros of shape [unused=1],
// as t5x's jnp.zeros((1,)). Axes: v and m shard like the param; v_row, v_col
// and placeholders are replicated (t5x derive_logical_axes), except for a
// param split along BATCH dims only (an MoE expert kernel [expert, mlp_embed,
// expert_mlp] split over the 'expert' mesh axis, with
// moe_logical_factor_rules): its v_row / v_col split along those dims like
// the param (t5x contrib/moe get_logical_axes prepends 'expert'), and each
// shard updates as a param of its own, without communication.
//
// Params split across processes (t5x runs the optimizer on the shards):
// every elementwise step (v, m, the update) runs on the local shard; the
// means come from local float64 partial sums through the ShardComm, per
// param and step: one sum of those summed over a split dim (the RMS(p) sums
// per BATCH index; v_row's row sums if COLUMN dims are split, v_col's column
// sums if ROW dims are), one gather of those whole on each shard (v_col's
// if columns are split, v_row's if rows are; v_row / v_col stay
// replicated), and one sum of the clipping RMS sums. Nothing gathers a
// param. The statistics sum in float64 on both paths (one process and
// shards), so a split run rounds each mean to the same float32 as one
// process except where the float64 sums, added in another order, straddle
// a float32 rounding boundary.
// Misuse throws std::invalid_argument "[Adafactor] ...".
#pragma once
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "t5x/optim/optimizer.h"

namespace t5x {

enum class FactorDim { kNone, kBatch, kRow, kColumn };
using FactorRule = std::vector<FactorDim>;  // one entry per param dim
using LogicalFactorRules = std::vector<std::pair<std::string, FactorDim>>;

// t5x adafactor.standard_logical_factor_rules(): vocab COL, embed ROW,
// mlp COL, heads COL, kv COL, joined_kv COL, relpos_buckets NONE,
// layers BATCH, stack BATCH, q_wi_fused COL, o_wo_fused COL,
// multiquery_heads COL, kv_fused COL, layer_norm_scale NONE; and this
// port's kv_heads COL (grouped-query K/V kernels, nn/attention.h).
LogicalFactorRules standard_logical_factor_rules();
// t5x contrib/moe adafactor_utils.logical_factor_rules(): the standard rules
// plus expert BATCH, expert_mlp COL, unmodeled NONE, mlp_embed ROW (an
// expert kernel [expert, mlp_embed, expert_mlp] factors per expert).
LogicalFactorRules moe_logical_factor_rules();

// "row", "col" / "column", "batch", "none" / "unfactorized" (any case);
// throws "[Adafactor] unknown factor dim 'x'".
FactorDim factor_dim_from_name(const std::string& name);

// t5x HParamMap: ordered (regex, value) rules; the first regex found
// anywhere in the '/'-joined param path (Python re.search) wins.
template <typename T>
struct HParamMap {
  std::vector<std::pair<std::string, T>> rules;
  // Value for `path`, or nullptr when no rule matches.
  const T* find(const std::string& path) const;
};

struct AdafactorConfig {
  bool factored = true;
  bool multiply_by_parameter_scale = true;
  // Per-path override of multiply_by_parameter_scale (t5x passes an
  // HParamMap instead of the bool); a path no rule matches is an error.
  std::optional<HParamMap<bool>> multiply_by_parameter_scale_map;
  std::optional<double> beta1;  // momentum; none by default
  double decay_rate = 0.8;
  int64_t step_offset = 0;
  std::optional<double> clipping_threshold = 1.0;
  std::optional<double> weight_decay_rate;
  int64_t min_dim_size_to_factor = 128;
  double epsilon1 = 1e-30;
  double epsilon2 = 1e-3;
  DType dtype_momentum = DType::f32;
  std::optional<HParamMap<FactorRule>> factor_map;
  std::optional<LogicalFactorRules> logical_factor_rules;
  // weight_decay_rate = (weight_decay_rate or 1) * lr^exponent when set.
  std::optional<double> weight_decay_rate_lr_exponent;
  std::optional<double> global_norm_clip_threshold;
  std::optional<double> max_parameter_scale;
  bool skip_nan_updates = false;  // keep the old value where the new one is NaN
  // Params factored by their logical rule even as matrices (no fallback to
  // the size heuristic of _factored_dims). t5x skips that fallback for a
  // param with a BATCH dim or of rank 3, so a layer of scalable_t5's scanned
  // stack ([embed, layers, mlp]) or its [embed, heads, kv] query is factored
  // whatever its sizes; t5x.cpp holds that layer as a matrix (set for
  // scalable_t5 by checkpoints/param_layout.h's scalable_t5_relaid).
  std::function<bool(const std::string& path)> factor_by_rule;
};

// How one parameter is treated (t5x `_parse_rule` + `_factored_dims`).
struct FactorPlan {
  std::vector<int> averaging_dims;  // dims RMS / clipping average over
  bool factored = false;
  std::vector<int> row_dims;  // reduced for v_col
  std::vector<int> col_dims;  // reduced for v_row
};

class Adafactor : public Optimizer {
 public:
  explicit Adafactor(AdafactorConfig config = {});
  std::string name() const override { return "adafactor.Adafactor"; }
  const AdafactorConfig& config() const { return config_; }

  OptimizerState init(const ParamTree& params) const override;
  // From plan(): v_row keeps the dims but the COLUMN ones, v_col the dims
  // but the ROW ones (t5x init_param_state), v and m every dim.
  std::map<std::string, std::optional<std::vector<int>>> slot_dims(const std::string& path,
                                                                   const Shape& shape) const override;

  // The factorization of a param with this shape at this path.
  FactorPlan plan(const std::string& path, const Shape& shape) const;

  // Params laid out as [BATCH..., ROW..., COLUMN...] / [BATCH..., COLUMN...,
  // ROW...] (factored) or [BATCH..., averaged...] (unfactored) take a fused,
  // vectorised, OpenMP-parallel path (the CPU backend's
  // kernels::cpu::adafactor_*_update, backend/kernels.h); others walk the
  // elements generically. Both compute the same rule; false forces the
  // generic walk (tests compare the two). A param split across processes
  // whose shard has such a layout runs the kernels' phases on its shard
  // (adafactor_*_stats / _clip_sums / _apply), exchanging the statistics
  // between them. Threads split the elements of one param;
  // params are updated one after another, so the sums keep the same order
  // on every process.
  void set_fast_path(bool enabled) { fast_path_ = enabled; }
  bool fast_path() const { return fast_path_; }
  // Whether a param with this shape at this path takes the fast path.
  bool fast_path_applies(const std::string& path, const Shape& shape) const;

 protected:
  void do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads, double learning_rate,
                         const ShardComm* comm) const override;

 private:
  void update_param(const std::string& path, Array& param, OptimizerState& state, const Array& grad,
                    float grad_scale, float lr, int64_t step, const ShardComm* comm) const;
  AdafactorConfig config_;
  bool fast_path_ = true;
};

template <typename T>
const T* HParamMap<T>::find(const std::string& path) const {
  for (const auto& [re, value] : rules)
    if (std::regex_search(path, std::regex(re))) return &value;
  return nullptr;
}

}  // namespace t5x
