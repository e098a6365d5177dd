#include "t5x/optim/adafactor.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>

#include "backend/kernels.h"
#include "t5x/optim/buffers.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/optim/reduce_walker.h"

namespace t5x {

using optim_detail::ConstFloatView;
using optim_detail::FloatView;
using optim_detail::ReduceWalker;

namespace {

const char* kOp = "Adafactor";

// jnp.maximum / jnp.minimum propagate NaN (std::max / std::min do not).
float nan_max(float a, float b) { return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::max(a, b); }
float nan_min(float a, float b) { return std::isnan(a) || std::isnan(b) ? std::nanf("") : std::min(a, b); }

Array placeholder(const Array& like) {
  return optim_detail::zeros_like_sharded(Shape{{"unused", 1}}, like, /*replicated=*/true);
}

Shape drop_dims(const Shape& s, const std::vector<int>& drop) {
  std::vector<Dim> out;
  for (int d = 0; d < s.rank(); ++d)
    if (std::find(drop.begin(), drop.end(), d) == drop.end()) out.push_back(s[d]);
  return Shape(out);
}

std::string rule_to_string(const FactorRule& r) {
  std::string s = "(";
  for (size_t i = 0; i < r.size(); ++i) {
    if (i) s += ", ";
    s += r[i] == FactorDim::kRow ? "ROW" : r[i] == FactorDim::kColumn ? "COLUMN" : r[i] == FactorDim::kBatch ? "BATCH" : "NONE";
  }
  return s + ")";
}

// Whether the param fits a fast-path layout (kernels::cpu::adafactor_*_update
// in backend/kernels.h): leading BATCH dims, then either only averaged dims
// (unfactored) or one contiguous group of ROW dims and one of COLUMN dims
// (factored). Empty dims do not.
struct FastLayout {
  bool ok = false;
  kernels::FactoredLayout f;  // factored: [nb, n_outer, n_inner]; unfactored: nb, n_outer
};

FastLayout fast_layout(const FactorPlan& fp, const std::vector<int64_t>& sizes) {
  FastLayout out;
  const int rank = int(sizes.size());
  auto in = [](const std::vector<int>& v, int d) { return std::find(v.begin(), v.end(), d) != v.end(); };
  // 0 = BATCH, 1 = ROW, 2 = COLUMN, 3 = averaged but not factored.
  std::vector<int> cat(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    if (sizes[size_t(d)] <= 0) return out;
    cat[size_t(d)] = !in(fp.averaging_dims, d) ? 0 : in(fp.row_dims, d) ? 1 : in(fp.col_dims, d) ? 2 : 3;
  }
  int d = 0;
  for (; d < rank && cat[size_t(d)] == 0; ++d) out.f.nb *= sizes[size_t(d)];
  // Group the rest into runs of equal category.
  std::vector<std::pair<int, int64_t>> runs;
  for (; d < rank; ++d) {
    if (runs.empty() || runs.back().first != cat[size_t(d)]) runs.emplace_back(cat[size_t(d)], 1);
    runs.back().second *= sizes[size_t(d)];
  }
  if (!fp.factored) {
    for (const auto& r : runs)
      if (r.first != 3) return out;
    out.f.n_outer = runs.empty() ? 1 : runs[0].second;
    out.ok = runs.size() <= 1;
    return out;
  }
  if (runs.size() != 2 || runs[0].first == 3 || runs[1].first == 3 || runs[0].first == 0 || runs[1].first == 0)
    return out;
  out.f.row_outer = runs[0].first == 1;
  out.f.n_outer = runs[0].second;
  out.f.n_inner = runs[1].second;
  out.ok = true;
  return out;
}

// A param's statistics over its shards. Reduced layout t (ReduceWalker) of
// the local shard maps into that of the global param by the shard offsets.
// sum() turns local vectors into the global ones with the collectives their
// layout needs: a vector summed over a split dim (the RMS sums; v_row's row
// sums when columns are split, v_col's column sums when rows are) is a
// partial sum: one all-reduce, each process's values at their global
// positions, zeros elsewhere; a vector that keeps every split dim is whole
// for its slice: one all-gather of the slices (v_col when columns are split,
// v_row when rows are), as v_row / v_col are replicated. local() takes this
// shard's part of a global vector. Identities for a param that is not split.
class ShardStats {
 public:
  ShardStats(const Array& param, const std::array<std::vector<bool>, ReduceWalker::kTargets>& keep,
             const ShardComm* comm)
      : comm_(comm), keep_(keep), global_(param.shape().sizes()), local_(param.local_shape().sizes()) {
    if (!comm_) return;
    axes_ = split_axes(param);
    off_ = shard_offsets(param);
    // Every member's offsets, in group rank order (row-major over axes_).
    const MeshDesc& mesh = *param.sharding().mesh;
    int64_t k = 1;
    for (const auto& ax : axes_) k *= mesh.axis_sizes[size_t(mesh.axis_index(ax))];
    for (int64_t r = 0; r < k; ++r) {
      std::vector<int64_t> coord(mesh.axis_sizes.size());
      for (int i = 0; i < int(coord.size()); ++i) coord[size_t(i)] = mesh.coord(mesh.device_id, i);
      for (int64_t rest = r, j = int64_t(axes_.size()) - 1; j >= 0; --j) {
        const int i = mesh.axis_index(axes_[size_t(j)]);
        coord[size_t(i)] = rest % mesh.axis_sizes[size_t(i)];
        rest /= mesh.axis_sizes[size_t(i)];
      }
      int64_t dev = 0;
      for (size_t i = 0; i < coord.size(); ++i) dev = dev * mesh.axis_sizes[i] + coord[i];
      member_off_.push_back(shard_offsets(param, dev));
    }
  }

  // Each non-empty *vecs[i] (local layout layouts[i]) becomes the global
  // layout's statistic: at most one all-reduce and one all-gather.
  void sum(const std::vector<std::vector<double>*>& vecs, const std::vector<int>& layouts) const {
    if (!comm_) return;
    std::vector<double> reduced, gathered;
    for (size_t i = 0; i < vecs.size(); ++i) {
      const std::vector<double>& l = *vecs[i];
      if (l.empty()) continue;
      if (whole(layouts[i])) {
        gathered.insert(gathered.end(), l.begin(), l.end());
        continue;
      }
      const size_t at = reduced.size();
      reduced.resize(at + size_t(global_size(layouts[i])), 0.0);
      walk(layouts[i], off_, [&](int64_t li, int64_t gi) { reduced[at + size_t(gi)] = l[size_t(li)]; });
    }
    if (!reduced.empty()) comm_->sum(axes_, reduced.data(), reduced.size());
    std::vector<double> all(gathered.size() * member_off_.size());
    if (!gathered.empty()) comm_->gather(axes_, gathered.data(), gathered.size(), all.data());
    size_t r_at = 0, g_at = 0;
    for (size_t i = 0; i < vecs.size(); ++i) {
      std::vector<double>& l = *vecs[i];
      if (l.empty()) continue;
      const int t = layouts[i];
      std::vector<double> g(size_t(global_size(t)));
      if (whole(t)) {
        for (size_t r = 0; r < member_off_.size(); ++r) {
          const double* src = all.data() + r * gathered.size() + g_at;
          walk(t, member_off_[r], [&](int64_t li, int64_t gi) { g[size_t(gi)] = src[li]; });
        }
        g_at += l.size();
      } else {
        std::copy(reduced.begin() + std::ptrdiff_t(r_at), reduced.begin() + std::ptrdiff_t(r_at + g.size()), g.begin());
        r_at += g.size();
      }
      l = std::move(g);
    }
  }

  template <typename T>
  std::vector<T> local(const std::vector<T>& global, int layout) const {
    if (!comm_) return global;
    std::vector<T> out;
    walk(layout, off_, [&](int64_t li, int64_t gi) {
      if (size_t(li) >= out.size()) out.resize(size_t(li) + 1);
      out[size_t(li)] = global[size_t(gi)];
    });
    return out;
  }

 private:
  int64_t global_size(int t) const {
    int64_t n = 1;
    for (size_t d = 0; d < global_.size(); ++d)
      if (keep_[size_t(t)][d]) n *= global_[d];
    return n;
  }
  // Whether layout t keeps every split dim (its values are whole sums).
  bool whole(int t) const {
    for (size_t d = 0; d < global_.size(); ++d)
      if (local_[d] != global_[d] && !keep_[size_t(t)][d]) return false;
    return true;
  }
  // f(local index, global index) over the layout t of the shard at `off`
  // (row-major).
  template <typename F>
  void walk(int t, const std::vector<int64_t>& off, F&& f) const {
    std::vector<size_t> dims;
    for (size_t d = 0; d < global_.size(); ++d)
      if (keep_[size_t(t)][d]) dims.push_back(d);
    std::vector<int64_t> idx(dims.size(), 0);
    for (int64_t li = 0;; ++li) {
      int64_t gi = 0;
      for (size_t k = 0; k < dims.size(); ++k) gi = gi * global_[dims[k]] + off[dims[k]] + idx[k];
      f(li, gi);
      size_t k = dims.size();
      while (k > 0 && ++idx[k - 1] == local_[dims[k - 1]]) idx[--k] = 0;
      if (k == 0) return;
    }
  }

  const ShardComm* comm_;
  std::array<std::vector<bool>, ReduceWalker::kTargets> keep_;
  std::vector<int64_t> global_, local_, off_;
  std::vector<std::vector<int64_t>> member_off_;
  std::vector<std::string> axes_;
};

// Whether `param` is split only along dims no statistic averages over (t5x's
// BATCH factor dims, e.g. an expert kernel's 'expert' dim on the 'expert'
// mesh axis, t5x contrib/moe). Each shard's statistics are then its own: it
// updates as a param of its own shape, and its factored slots split like
// it (t5x MoePjitPartitioner prepends 'expert' to v_row / v_col).
bool split_along_batch_dims_only(const FactorPlan& fp, const Array& param) {
  if (param.is_fully_local()) return false;
  const auto global = param.shape().sizes(), local = param.local_shape().sizes();
  for (int d : fp.averaging_dims)
    if (global[size_t(d)] != local[size_t(d)]) return false;
  return true;
}

// Zeros of `shape` (= the param's shape without the dims `dropped`), split
// as the param's remaining dims.
Array zeros_split_like(const Shape& shape, const Array& param, const std::vector<int>& dropped) {
  Sharding s = param.sharding();
  std::vector<std::vector<std::string>> dims;
  for (size_t d = 0; d < s.spec.dims.size(); ++d)
    if (std::find(dropped.begin(), dropped.end(), int(d)) == dropped.end()) dims.push_back(s.spec.dims[d]);
  s.spec = PartitionSpec(std::move(dims));
  return Array(shape, DType::f32, s);
}

}  // namespace

LogicalFactorRules standard_logical_factor_rules() {
  using F = FactorDim;
  return {{"vocab", F::kColumn},        {"embed", F::kRow},          {"mlp", F::kColumn},
          {"heads", F::kColumn},        {"kv", F::kColumn},          {"joined_kv", F::kColumn},
          {"relpos_buckets", F::kNone}, {"layers", F::kBatch},       {"stack", F::kBatch},
          {"q_wi_fused", F::kColumn},   {"o_wo_fused", F::kColumn},  {"multiquery_heads", F::kColumn},
          {"kv_fused", F::kColumn},     {"layer_norm_scale", F::kNone},
          // This port's grouped-query K/V kernels [embed, kv_heads, kv]:
          // factored as the multi-head [embed, joined_kv] one (v_row over embed).
          {"kv_heads", F::kColumn},
          // Sparse Mixer's W_seq kernel [length, mixing_length] (config.h):
          // factored as a dense [in, out] kernel.
          {"length", F::kRow},          {"mixing_length", F::kColumn}};
}

LogicalFactorRules moe_logical_factor_rules() {
  LogicalFactorRules r = standard_logical_factor_rules();
  r.insert(r.end(), {{"expert", FactorDim::kBatch},
                     {"expert_mlp", FactorDim::kColumn},
                     {"unmodeled", FactorDim::kNone},
                     {"mlp_embed", FactorDim::kRow}});
  return r;
}

FactorDim factor_dim_from_name(const std::string& name) {
  std::string n = name;
  for (char& c : n) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (n == "row") return FactorDim::kRow;
  if (n == "col" || n == "column") return FactorDim::kColumn;
  if (n == "batch") return FactorDim::kBatch;
  if (n == "none" || n == "unfactorized") return FactorDim::kNone;
  throw_invalid(kOp, "unknown factor dim '" + name + "' (expected row, col, column, batch, none, unfactorized)");
}

Adafactor::Adafactor(AdafactorConfig config) : config_(std::move(config)) {
  if (!config_.factored && config_.factor_map)
    throw_invalid(kOp, "factored is false but factorization rules (factor_map) were given");
  // Written so that nan fails each check (it passed `x < 0 || x >= 1`).
  if (config_.beta1 && !(*config_.beta1 >= 0 && *config_.beta1 < 1))
    throw_invalid(kOp, "beta1 must be in [0, 1), got " + std::to_string(*config_.beta1));
  auto positive = [](const std::optional<double>& x) { return !x || (*x > 0 && std::isfinite(*x)); };
  if (!positive(config_.clipping_threshold))
    throw_invalid(kOp, "clipping_threshold must be finite and > 0, got " + std::to_string(*config_.clipping_threshold));
  if (!positive(config_.global_norm_clip_threshold))
    throw_invalid(kOp, "global_norm_clip_threshold must be finite and > 0, got " +
                           std::to_string(*config_.global_norm_clip_threshold));
  if (!positive(config_.max_parameter_scale))
    throw_invalid(kOp, "max_parameter_scale must be finite and > 0, got " + std::to_string(*config_.max_parameter_scale));
  if (!std::isfinite(config_.decay_rate))
    throw_invalid(kOp, "decay_rate must be finite, got " + std::to_string(config_.decay_rate));
  if (!(config_.epsilon1 > 0 && std::isfinite(config_.epsilon1)))
    throw_invalid(kOp, "epsilon1 must be finite and > 0, got " + std::to_string(config_.epsilon1));
  if (!(config_.epsilon2 >= 0 && std::isfinite(config_.epsilon2)))
    throw_invalid(kOp, "epsilon2 must be finite and >= 0, got " + std::to_string(config_.epsilon2));
  if (config_.weight_decay_rate && !std::isfinite(*config_.weight_decay_rate))
    throw_invalid(kOp, "weight_decay_rate must be finite, got " + std::to_string(*config_.weight_decay_rate));
  if (!is_floating(config_.dtype_momentum)) throw_invalid(kOp, "dtype_momentum must be a floating dtype");
}

FactorPlan Adafactor::plan(const std::string& path, const Shape& shape) const {
  const int rank = shape.rank();
  FactorPlan p;
  std::vector<int> all(static_cast<size_t>(rank));
  std::iota(all.begin(), all.end(), 0);
  p.averaging_dims = all;
  if (!config_.factored) return p;

  std::optional<FactorRule> rule;
  if (config_.logical_factor_rules) {
    // t5x set_param_axes: rules from the logical axis names.
    FactorRule r;
    for (const auto& name : shape.names()) {
      const auto& rules = *config_.logical_factor_rules;
      auto it = std::find_if(rules.begin(), rules.end(), [&](const auto& kv) { return kv.first == name; });
      if (it == rules.end())
        throw_invalid(kOp, "no factor rule for logical axis '" + name + "' of param '" + path + "' " +
                               shape.to_string() + "; add it to logical_factor_rules");
      r.push_back(it->second);
    }
    auto has = [&](FactorDim f) { return std::find(r.begin(), r.end(), f) != r.end(); };
    if (has(FactorDim::kRow) && has(FactorDim::kColumn) && has(FactorDim::kNone))
      throw_invalid(kOp, "incomplete adafactor spec " + rule_to_string(r) + " for '" + path + "' " + shape.to_string());
    if (!has(FactorDim::kRow) || !has(FactorDim::kColumn))
      for (auto& f : r)
        if (f == FactorDim::kRow || f == FactorDim::kColumn) f = FactorDim::kNone;
    rule = r;
  } else if (config_.factor_map) {
    const FactorRule* r = config_.factor_map->find(path);
    if (!r) throw_invalid(kOp, "no factor rule found for parameter: " + path);
    rule = *r;
  }

  bool heuristic = !rule;
  if (rule) {
    if (int(rule->size()) != rank)
      throw_invalid(kOp, "factorization rule " + rule_to_string(*rule) + " has incorrect rank for param of rank " +
                             std::to_string(rank) + ": " + path + " " + shape.to_string());
    std::vector<int> rows, cols, batch;
    for (int d = 0; d < rank; ++d) {
      FactorDim f = (*rule)[size_t(d)];
      if (f == FactorDim::kRow) rows.push_back(d);
      if (f == FactorDim::kColumn) cols.push_back(d);
      if (f == FactorDim::kBatch) batch.push_back(d);
    }
    if (rank <= 2 && batch.empty() && !(config_.factor_by_rule && config_.factor_by_rule(path))) {
      heuristic = true;  // t5x ignores explicit rules for plain matrices / vectors
    } else {
      p.averaging_dims.clear();
      for (int d = 0; d < rank; ++d)
        if (std::find(batch.begin(), batch.end(), d) == batch.end()) p.averaging_dims.push_back(d);
      if (rows.empty() != cols.empty())
        throw_invalid(kOp, "factor rule " + rule_to_string(*rule) + " for '" + path +
                               "' needs both ROW and COLUMN dims (or neither)");
      p.factored = !rows.empty();
      p.row_dims = rows;
      p.col_dims = cols;
    }
  }
  if (heuristic) {
    if (rank > 2)
      throw_invalid(kOp, "a parameter with rank strictly higher than 2 must have an explicit factorization rule: " +
                             path + " " + shape.to_string() + " (set logical_factor_rules or factor_map)");
    if (rank < 2) return p;
    // Stable order by size: the larger dim is COLUMN, the other ROW.
    int big = shape[1].size >= shape[0].size ? 1 : 0;
    int small = 1 - big;
    if (shape[small].size < config_.min_dim_size_to_factor) return p;
    p.factored = true;
    p.row_dims = {small};
    p.col_dims = {big};
  }
  return p;
}

std::map<std::string, std::optional<std::vector<int>>> Adafactor::slot_dims(const std::string& path,
                                                                            const Shape& shape) const {
  const FactorPlan fp = plan(path, shape);
  auto all_but = [&](const std::vector<int>& drop) {
    std::vector<int> keep;
    for (int d = 0; d < shape.rank(); ++d)
      if (std::find(drop.begin(), drop.end(), d) == drop.end()) keep.push_back(d);
    return keep;
  };
  std::map<std::string, std::optional<std::vector<int>>> out{
      {"v_row", std::nullopt}, {"v_col", std::nullopt}, {"v", std::nullopt}, {"m", std::nullopt}};
  if (fp.factored) {
    out["v_row"] = all_but(fp.col_dims);
    out["v_col"] = all_but(fp.row_dims);
  } else {
    out["v"] = all_but({});
  }
  if (config_.beta1) out["m"] = all_but({});
  return out;
}

bool Adafactor::fast_path_applies(const std::string& path, const Shape& shape) const {
  return fast_path_ && fast_layout(plan(path, shape), shape.sizes()).ok;
}

OptimizerState Adafactor::init(const ParamTree& params) const {
  OptimizerState st;
  for (const auto& [path, param] : params) {
    if (!is_floating(param.dtype()))
      throw_invalid(kOp, "param '" + path + "' has non-floating dtype " + dtype_name(param.dtype()));
    FactorPlan fp = plan(path, param.shape());
    std::vector<std::string> none(1, "");
    for (const char* s : {"v_row", "v_col", "v", "m"}) {
      st.slots[path + "/" + s] = placeholder(param);
      st.slot_axes[path + "/" + s] = none;
    }
    if (fp.factored) {
      Shape vr = drop_dims(param.shape(), fp.col_dims), vc = drop_dims(param.shape(), fp.row_dims);
      const bool own = split_along_batch_dims_only(fp, param);
      st.slots[path + "/v_row"] =
          own ? zeros_split_like(vr, param, fp.col_dims) : optim_detail::zeros_like_sharded(vr, param, true);
      st.slots[path + "/v_col"] =
          own ? zeros_split_like(vc, param, fp.row_dims) : optim_detail::zeros_like_sharded(vc, param, true);
      st.slot_axes[path + "/v_row"] = std::vector<std::string>(size_t(vr.rank()), "");
      st.slot_axes[path + "/v_col"] = std::vector<std::string>(size_t(vc.rank()), "");
    } else {
      st.slots[path + "/v"] = optim_detail::zeros_like_sharded(param.shape(), param, false);
      st.slot_axes[path + "/v"] = param.names();
    }
    if (config_.beta1) {
      st.slots[path + "/m"] = optim_detail::zeros_like_sharded(param.shape(), param, false, config_.dtype_momentum);
      st.slot_axes[path + "/m"] = param.names();
    }
  }
  return st;
}

void Adafactor::do_apply_gradient(ParamTree& params, OptimizerState& state, const ParamTree& grads,
                                  double learning_rate, const ShardComm* comm) const {
  for (const auto& [path, param] : params) {
    auto it = grads.find(path);
    if (it == grads.end()) throw_invalid(kOp, "no gradient for param '" + path + "'");
    if (it->second.shape() != param.shape())
      throw_invalid(kOp, "gradient for '" + path + "' has shape " + it->second.shape().to_string() +
                             " but the param is " + param.shape().to_string());
    if (!param.is_fully_local() && !comm)
      throw_invalid(kOp, "param '" + path + "' is split across processes; pass the ShardComm of the run "
                         "(spmd::shard_comm()) to apply_gradient, or replicate the param");
    if (it->second.local_shape() != param.local_shape())
      throw_invalid(kOp, "gradient for '" + path + "' is not sharded like the param");
  }
  float grad_scale = 1.0f;
  if (config_.global_norm_clip_threshold && *config_.global_norm_clip_threshold != 0) {
    // t5x: scale = thr * min(1/thr, 1/global_norm), in float32.
    ParamTree g;
    for (const auto& [path, p] : params) g[path] = grads.at(path);
    const float thr = float(*config_.global_norm_clip_threshold);
    const float gn = float(global_norm(g, comm));
    grad_scale = thr * std::min(float(1.0 / *config_.global_norm_clip_threshold), 1.0f / gn);
  }
  for (auto& [path, param] : params)
    update_param(path, param, state, grads.at(path), grad_scale, float(learning_rate), state.step, comm);
  state.step += 1;
}

void Adafactor::update_param(const std::string& path, Array& param, OptimizerState& state, const Array& grad,
                             float grad_scale, float lr, int64_t step, const ShardComm* comm) const {
  const AdafactorConfig& c = config_;
  auto slot = [&](const char* name) -> Array& {
    auto it = state.slots.find(path + "/" + name);
    if (it == state.slots.end())
      throw_invalid(kOp, "state has no slot '" + path + "/" + name + "'; was it created by this optimizer's init()?");
    return it->second;
  };
  const FactorPlan fp = plan(path, param.shape());
  const int rank = param.rank();
  // A shard split along BATCH dims only updates as a whole param of its own
  // (split_along_batch_dims_only); its slots are split likewise.
  const bool split = !param.is_fully_local() && !split_along_batch_dims_only(fp, param);
  const auto sizes = split ? param.shape().sizes() : param.local_shape().sizes();  // the statistics' extent
  auto in = [](const std::vector<int>& v, int d) { return std::find(v.begin(), v.end(), d) != v.end(); };

  // Layouts: 0 = per-batch (averaging dims removed), 1 = v_row, 2 = v_col
  // (3 is unused here).
  std::array<std::vector<bool>, ReduceWalker::kTargets> keep;
  for (auto& k : keep) k.assign(size_t(rank), true);
  for (int d = 0; d < rank; ++d) {
    if (in(fp.averaging_dims, d)) keep[0][size_t(d)] = false;
    if (in(fp.col_dims, d)) keep[1][size_t(d)] = false;
    if (in(fp.row_dims, d)) keep[2][size_t(d)] = false;
  }
  // Statistics are sized and averaged over the global param (`gwalk`);
  // the element loops walk the local shard (`walk`).
  ReduceWalker gwalk(sizes, keep);
  ReduceWalker walk(param.local_shape().sizes(), keep);
  const int64_t nb = gwalk.reduced_size(0);
  const double n_avg = double(gwalk.size()) / double(nb);
  ShardStats shards(param, keep, split ? comm : nullptr);

  // Hyper-parameters as float32, as t5x computes them.
  float wd = 0.0f;
  if (c.weight_decay_rate_lr_exponent && *c.weight_decay_rate_lr_exponent != 0)
    wd = float(c.weight_decay_rate.value_or(1.0)) * std::pow(lr, float(*c.weight_decay_rate_lr_exponent));
  else if (c.weight_decay_rate)
    wd = float(*c.weight_decay_rate);
  const float t = float(step - c.step_offset) + 1.0f;
  const float decay = 1.0f - std::pow(t, -float(c.decay_rate));
  const float mixing = 1.0f - decay;
  const float eps1 = float(c.epsilon1);
  const bool skip_nan = c.skip_nan_updates;  // keep old values where new ones are NaN

  bool use_scale = c.multiply_by_parameter_scale;
  if (c.multiply_by_parameter_scale_map) {
    const bool* v = c.multiply_by_parameter_scale_map->find(path);
    if (!v) throw_invalid(kOp, "multiply_by_parameter_scale map has no rule for parameter: " + path);
    use_scale = *v;
  }

  FloatView p(param);
  ConstFloatView g(grad);
  const float* pp = p.data();
  const float* gp = g.data();
  auto grad_at = [&](int64_t i) { return grad_scale == 1.0f ? gp[i] : gp[i] * grad_scale; };

  // The backend kernels' scalars (fast path, and the phases of a split param).
  kernels::AdafactorScalars sc;
  sc.decay = decay;
  sc.mixing = mixing;
  sc.eps1 = eps1;
  sc.eps2 = float(c.epsilon2);
  sc.has_max_parameter_scale = c.max_parameter_scale.has_value();
  sc.max_parameter_scale = float(c.max_parameter_scale.value_or(0.0));
  sc.lr = lr;
  sc.use_scale = use_scale;
  sc.clip = c.clipping_threshold.has_value();
  sc.clipping_threshold = float(c.clipping_threshold.value_or(1.0));
  sc.keep_w = float(1.0 - double(wd));  // 1 without weight decay: keep_w * p == p
  sc.skip_nan = skip_nan;
  sc.grad_scale = grad_scale;  // x * 1.0f == x
  if (c.beta1) {
    sc.b1 = float(*c.beta1);
    sc.one_minus_b1 = float(1.0 - *c.beta1);
  }
  if (const FastLayout fl = fast_path_ && !split ? fast_layout(fp, sizes) : FastLayout{}; fl.ok) {
    std::unique_ptr<FloatView> mview;
    if (c.beta1) {
      mview = std::make_unique<FloatView>(slot("m"));
      if (mview->size() != walk.size())
        throw_invalid(kOp, "slot '" + path + "/m' does not match the param " + param.shape().to_string());
    }
    float* m = mview ? mview->data() : nullptr;
    if (fp.factored) {
      FloatView vr(slot("v_row")), vc(slot("v_col"));
      if (vr.size() != walk.reduced_size(1) || vc.size() != walk.reduced_size(2))
        throw_invalid(kOp, "factored slots of '" + path + "' do not match the param " + param.shape().to_string());
      kernels::cpu::adafactor_factored_update(fl.f, sc, p.data(), gp, vr.data(), vc.data(), m);
      vr.commit();
      vc.commit();
    } else {
      FloatView vv(slot("v"));
      if (vv.size() != walk.size())
        throw_invalid(kOp, "slot '" + path + "/v' does not match the param " + param.shape().to_string());
      kernels::cpu::adafactor_unfactored_update(fl.f.nb, fl.f.n_outer, sc, p.data(), gp, vv.data(), m);
      vv.commit();
    }
    p.commit();
    if (mview) mview->commit();
    return;
  }

  // A param split across processes, or of no fast-path layout. Pass 1:
  // parameter RMS and squared-gradient statistics of the local elements.
  std::vector<double> psum(size_t(walk.reduced_size(0)), 0.0);
  std::vector<double> rsum, csum;
  float* v = nullptr;
  float *vrow = nullptr, *vcol = nullptr;
  std::unique_ptr<FloatView> vview, vrview, vcview;
  if (fp.factored) {
    vrview = std::make_unique<FloatView>(slot("v_row"));
    vcview = std::make_unique<FloatView>(slot("v_col"));
    if (vrview->size() != gwalk.reduced_size(1) || vcview->size() != gwalk.reduced_size(2))
      throw_invalid(kOp, "factored slots of '" + path + "' do not match the param " + param.shape().to_string());
    vrow = vrview->data();
    vcol = vcview->data();
    rsum.assign(size_t(walk.reduced_size(1)), 0.0);
    csum.assign(size_t(walk.reduced_size(2)), 0.0);
  } else {
    vview = std::make_unique<FloatView>(slot("v"));
    if (vview->size() != walk.size())
      throw_invalid(kOp, "slot '" + path + "/v' does not match the param " + param.shape().to_string());
    v = vview->data();
  }
  // A split param whose shard has a fast-path layout runs the backend's
  // phases (kernels.h) on its shard; the element walk below is for the
  // other layouts.
  const FastLayout lfl = fast_path_ && split ? fast_layout(fp, param.local_shape().sizes()) : FastLayout{};
  if (lfl.ok) {
    const int64_t rows = lfl.f.row_outer ? lfl.f.n_outer : lfl.f.n_inner;
    const int64_t cols = lfl.f.row_outer ? lfl.f.n_inner : lfl.f.n_outer;
    if (int64_t(psum.size()) != lfl.f.nb ||
        (fp.factored && (int64_t(rsum.size()) != lfl.f.nb * rows || int64_t(csum.size()) != lfl.f.nb * cols)))
      throw_invalid(kOp, "internal: the shard layout of '" + path + "' does not match its statistics");
  }
  std::vector<double> ysum(size_t(walk.reduced_size(0)), 0.0);
  if (lfl.ok && fp.factored) {
    kernels::cpu::adafactor_factored_stats(lfl.f, sc, pp, gp, psum.data(), rsum.data(), csum.data());
  } else if (lfl.ok) {
    kernels::cpu::adafactor_unfactored_stats(lfl.f.nb, lfl.f.n_outer, sc, pp, gp, v, psum.data(), ysum.data());
  } else {
    walk.run_rows([&](int64_t i0, int64_t len, const auto& o, const auto& st) {
      for (int64_t j = 0; j < len; ++j) {
        const int64_t i = i0 + j;
        const float pv = pp[i];
        psum[size_t(o[0] + j * st[0])] += double(pv * pv);
        const float gv = grad_at(i);
        const float g2 = gv * gv + eps1;
        if (fp.factored) {
          rsum[size_t(o[1] + j * st[1])] += double(g2);
          csum[size_t(o[2] + j * st[2])] += double(g2);
        } else {
          const float nv = decay * v[i] + mixing * g2;
          if (!(skip_nan && std::isnan(nv))) v[i] = nv;
        }
      }
    });
  }

  // Over the shards: the global statistics from the local ones (float64).
  shards.sum({&psum, &rsum, &csum}, {0, 1, 2});
  std::vector<float> scale(size_t(nb), lr);
  if (use_scale) {
    for (int64_t b = 0; b < nb; ++b) {
      float ps = std::sqrt(float(psum[size_t(b)] / n_avg));
      ps = nan_max(ps, float(c.epsilon2));
      if (c.max_parameter_scale) ps = nan_min(ps, float(*c.max_parameter_scale));
      scale[size_t(b)] = lr * ps;
    }
  }

  // Factored second moment: update v_row / v_col, then the factors
  // row_factor = (v_row / mean(v_row over ROW dims))^-1/2, col_factor = v_col^-1/2.
  std::vector<float> row_factor, col_factor;
  if (fp.factored) {
    const double ncols = double(gwalk.size()) / double(gwalk.reduced_size(1));
    const double nrows = double(gwalk.size()) / double(gwalk.reduced_size(2));
    auto ema = [&](float& s, double mean) {
      const float ns = decay * s + mixing * float(mean);
      if (!(skip_nan && std::isnan(ns))) s = ns;
    };
    for (size_t j = 0; j < rsum.size(); ++j) ema(vrow[j], rsum[j] / ncols);
    for (size_t j = 0; j < csum.size(); ++j) ema(vcol[j], csum[j] / nrows);
    // Walk v_row's own layout (param dims minus COLUMN dims); layout 0 drops
    // its ROW dims too, which is the row-mean's layout.
    std::vector<int64_t> vr_sizes;
    std::vector<bool> vr_keep;
    for (int d = 0; d < rank; ++d) {
      if (in(fp.col_dims, d)) continue;
      vr_sizes.push_back(sizes[size_t(d)]);
      vr_keep.push_back(!in(fp.row_dims, d));
    }
    ReduceWalker vr_walk(vr_sizes, {vr_keep, {}, {}, {}});
    std::vector<double> rcs(size_t(vr_walk.reduced_size(0)), 0.0);
    vr_walk.run([&](int64_t j, const auto& off) { rcs[size_t(off[0])] += double(vrow[j]); });
    const double per_mean = double(vr_walk.size()) / double(vr_walk.reduced_size(0));
    std::vector<float> rc_mean(rcs.size());
    for (size_t k = 0; k < rcs.size(); ++k) rc_mean[k] = float(rcs[k] / per_mean);
    row_factor.resize(size_t(vr_walk.size()));
    vr_walk.run([&](int64_t j, const auto& off) {
      row_factor[size_t(j)] = 1.0f / std::sqrt(vrow[j] / rc_mean[size_t(off[0])]);
    });
    col_factor.resize(csum.size());
    for (size_t j = 0; j < csum.size(); ++j) col_factor[j] = 1.0f / std::sqrt(vcol[j]);
    row_factor = shards.local(row_factor, 1);
    col_factor = shards.local(col_factor, 2);
  }
  scale = shards.local(scale, 0);

  // Pass 2: the preconditioned gradient y, and its RMS for clipping (the
  // backend's unfactored phase 1 summed it already).
  std::vector<float> y;
  if (lfl.ok && fp.factored && c.clipping_threshold) {
    kernels::cpu::adafactor_factored_clip_sums(lfl.f, sc, gp, row_factor.data(), col_factor.data(), ysum.data());
  } else if (!lfl.ok) {
    y.resize(size_t(walk.size()));
    walk.run_rows([&](int64_t i0, int64_t len, const auto& o, const auto& st) {
      for (int64_t j = 0; j < len; ++j) {
        const int64_t i = i0 + j;
        const float gv = grad_at(i);
        const float yv = fp.factored ? gv * row_factor[size_t(o[1] + j * st[1])] * col_factor[size_t(o[2] + j * st[2])]
                                     : gv * (1.0f / std::sqrt(v[i]));
        y[size_t(i)] = yv;
        ysum[size_t(o[0] + j * st[0])] += double(yv * yv);
      }
    });
  }
  std::vector<float> denom(size_t(nb), 1.0f);
  if (c.clipping_threshold) {
    shards.sum({&ysum}, {0});
    for (int64_t b = 0; b < nb; ++b)
      denom[size_t(b)] = nan_max(1.0f, std::sqrt(float(ysum[size_t(b)] / n_avg)) / float(*c.clipping_threshold));
  }
  denom = shards.local(denom, 0);

  // Pass 3: apply.
  std::unique_ptr<FloatView> mview;
  float* m = nullptr;
  if (c.beta1) {
    mview = std::make_unique<FloatView>(slot("m"));
    if (mview->size() != walk.size())
      throw_invalid(kOp, "slot '" + path + "/m' does not match the param " + param.shape().to_string());
    m = mview->data();
  }
  float* pw = p.data();
  if (lfl.ok && fp.factored) {
    kernels::cpu::adafactor_factored_apply(lfl.f, sc, pw, gp, row_factor.data(), col_factor.data(), scale.data(),
                                           denom.data(), m);
  } else if (lfl.ok) {
    kernels::cpu::adafactor_unfactored_apply(lfl.f.nb, lfl.f.n_outer, sc, pw, gp, v, scale.data(), denom.data(), m);
  } else {
    walk.run_rows([&](int64_t i0, int64_t len, const auto& o, const auto& st) {
      for (int64_t j = 0; j < len; ++j) {
        const int64_t i = i0 + j;
        const size_t b = size_t(o[0] + j * st[0]);
        float yv = y[size_t(i)];
        if (sc.clip) yv = yv / denom[b];
        float u = scale[b] * yv;
        if (m) {
          const float nm = sc.b1 * m[i] + sc.one_minus_b1 * u;
          if (!(skip_nan && std::isnan(nm))) m[i] = nm;
          u = nm;
        }
        const float np = sc.keep_w * pw[i] - u;  // keep_w = 1 without weight decay: 1 * p == p
        if (!(skip_nan && std::isnan(np))) pw[i] = np;
      }
    });
  }
  p.commit();
  if (vview) vview->commit();
  if (vrview) vrview->commit();
  if (vcview) vcview->commit();
  if (mview) mview->commit();
}

}  // namespace t5x
