#include "t5x/trainer/run_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <stdexcept>

#include "seqio/cache.h"
#include "seqio/feature.h"
#include "seqio/mixture.h"
#include "seqio/vocabularies.h"
#include "seqio/preprocessors/noise.h"
#include "t5x/checkpoints/checkpoint_dir.h"
#include "t5x/checkpoints/param_layout.h"
#include "t5x/gin/registry.h"
#include "t5x/optim/adafactor.h"
#include "t5x/optim/adamw.h"
#include "t5x/optim/lion.h"
#include "t5x/optim/sgd.h"

namespace t5x::trainer {

namespace {

using gin::Config;
using gin::Reference;
using gin::Value;
using gin::ValueKind;

std::optional<Value> opt_value(const Config& cfg, const std::string& scope, const std::string& conf,
                               const std::string& param) {
  auto v = cfg.get_optional(scope, conf, param);
  if (!v || v->is_none()) return std::nullopt;
  return v;
}

std::optional<uint64_t> opt_seed(const Config& cfg, const std::string& scope, const std::string& conf,
                                 const std::string& param) {
  auto v = opt_value(cfg, scope, conf, param);
  if (!v) return std::nullopt;
  return static_cast<uint64_t>(v->as_int());
}

RestoreCheckpointConfig read_restore(const Config& cfg, const Reference& ref) {
  RestoreCheckpointConfig r;
  const std::string c = canonical_name(cfg, ref);
  if (auto p = opt_value(cfg, ref.scope, c, "path")) {
    if (p->is_sequence())
      for (const auto& item : p->as_list()) r.paths.push_back(item.as_string());
    else
      r.paths.push_back(p->as_string());
  }
  r.mode = cfg.get_string(ref.scope, c, "mode");
  if (r.mode == "all")  // t5x's eval.py walks every checkpoint; here each run reads one
    throw gin::GinError(opt_value(cfg, ref.scope, c, "mode")->where(),
                        c + ".mode = 'all' (every checkpoint in turn) is not supported",
                        "run once per checkpoint with mode = 'specific' and CHECKPOINT_PATH set to it");
  if (r.mode != "specific" && r.mode != "latest")
    throw gin::GinError(opt_value(cfg, ref.scope, c, "mode")->where(), c + ".mode = '" + r.mode + "' is not a mode",
                        "'specific' (the checkpoint at path) or 'latest' (the newest under path)");
  if (auto d = opt_value(cfg, ref.scope, c, "dtype"); d && !d->is_none()) {
    r.dtype = d->as_string();
    if (r.dtype != "float32" && r.dtype != "bfloat16" && r.dtype != "float16")
      throw gin::GinError(d->where(), c + ".dtype = '" + r.dtype + "' is not a parameter dtype",
                          "'float32', 'bfloat16', 'float16', or None (as saved)");
  }
  r.strict = cfg.get_bool(ref.scope, c, "strict");
  r.fallback_to_scratch = cfg.get_bool(ref.scope, c, "fallback_to_scratch");
  if (auto m = opt_value(cfg, ref.scope, c, "assignment_map"); m && !m->is_none()) {
    const std::string what = c + ".assignment_map";
    const std::string hint = "write a tuple of (regex, replacement or None) pairs, e.g. "
                             "((r'state/param_states/.*', None), (r'state/step', None))";
    if (!m->is_sequence()) throw gin::GinError(m->where(), what + " is " + m->describe(), hint);
    for (const auto& rule : m->as_list()) {
      const bool ok = rule.is_sequence() && rule.as_list().size() == 2 &&
                      rule.as_list()[0].kind() == ValueKind::kString &&
                      (rule.as_list()[1].is_none() || rule.as_list()[1].kind() == ValueKind::kString);
      if (!ok) throw gin::GinError(rule.where(), what + ": a rule is " + rule.describe(), hint);
      const auto& pair = rule.as_list();
      r.assignment_map.push_back(
          {pair[0].as_string(), pair[1].is_none() ? std::nullopt : std::optional<std::string>(pair[1].as_string())});
    }
  }
  if (auto ck = opt_value(cfg, ref.scope, c, "checkpointer_cls"); ck && !ck->is_none()) {
    const Value v = cfg.resolve(*ck);
    if (v.kind() != ValueKind::kReference)
      throw gin::GinError(ck->where(), c + ".checkpointer_cls is " + v.describe(),
                          "write @checkpoints.UpcycleCheckpointer (sparse upcycling) or None");
    Reference k = v.as_reference();
    k.scope = gin::reference_scope(ref.scope, k.scope);
    const std::string kc = canonical_name(cfg, k);
    if (kc == "checkpoints.UpcycleCheckpointer") {
      r.upcycle_num_experts = cfg.get_int(k.scope, kc, "num_experts");
      if (r.upcycle_num_experts < 1)
        throw gin::GinError(cfg.get(k.scope, kc, "num_experts").where(),
                            "checkpoints.UpcycleCheckpointer.num_experts = " + std::to_string(r.upcycle_num_experts) +
                                " must be >= 1",
                            "bind it to the model's NUM_EXPERTS");
    } else if (kc != "checkpoints.Checkpointer") {
      throw gin::GinError(ck->where(), c + ".checkpointer_cls = @" + kc + " is not supported",
                          "use @checkpoints.Checkpointer (default) or @checkpoints.UpcycleCheckpointer");
    }
  }
  return r;
}

// A literal list of logical-axis rules, as t5x takes it: (name, mesh axis),
// the axis None (replicated) or a tuple of axes (split over their product).
LogicalAxisRules read_axis_rules(const Value& v, const std::string& what, bool moe) {
  const std::string axes = moe ? "'data', 'expert' or 'model'" : "'data' or 'model'";
  auto bad = [&](const Value& at, const std::string& why) {
    return gin::GinError(at.where(), what + ": " + why,
                         "write [('name', 'mesh axis'), ...] with a mesh axis " + axes +
                             ", None (replicated) or a tuple of them, as t5x's logical_axis_rules");
  };
  if (!v.is_sequence()) throw bad(v, "not a list of rules");
  LogicalAxisRules out;
  for (const Value& r : v.items()) {
    if (!r.is_sequence() || r.items().size() != 2 || r.items()[0].kind() != ValueKind::kString)
      throw bad(r, "each rule is a pair (logical name, mesh axes)");
    AxisRule rule{r.items()[0].as_string(), {}};
    const Value& m = r.items()[1];
    std::vector<Value> names = m.is_sequence() ? m.items() : std::vector<Value>{m};
    if (m.is_none()) names.clear();
    for (const Value& a : names) {
      if (a.kind() != ValueKind::kString) throw bad(a, "a mesh axis is a string or None");
      const std::string& axis = a.as_string();
      if (axis != "data" && axis != "model" && !(moe && axis == "expert"))
        throw bad(a, "rule '" + rule.logical + "' names mesh axis '" + axis + "', which the mesh does not have");
      rule.mesh_axes.push_back(axis);
    }
    out.push_back(std::move(rule));
  }
  return out;
}

PartitionerConfig read_partitioner(const Config& cfg, const Reference& ref) {
  PartitionerConfig p;
  const std::string c = canonical_name(cfg, ref);
  p.name = c;
  auto np = opt_value(cfg, ref.scope, c, "num_partitions");
  auto sub = opt_value(cfg, ref.scope, c, "model_parallel_submesh");
  if (sub) {
    for (const auto& v : sub->as_list()) p.model_parallel_submesh.push_back(v.as_int());
    p.num_partitions = 0;
  }
  if (np) {
    p.num_partitions = np->as_int();
    if (p.num_partitions < 1)
      throw gin::GinError(np->where(), c + ".num_partitions = " + std::to_string(p.num_partitions) +
                                           " must be at least 1",
                          "the size of the 'model' mesh axis: 1 for data parallelism only");
  }
  if (np && sub)
    throw std::invalid_argument(
        "[partitioning] set either num_partitions or model_parallel_submesh, not both (t5x raises the same)");
  if (!np && !sub) p.num_partitions = 1;
  if (c == "partitioning.MoePjitPartitioner") {
    const Value x = cfg.get(ref.scope, c, "num_expert_partitions");
    p.num_expert_partitions = x.as_int();
    if (p.num_expert_partitions < 1)
      throw gin::GinError(x.where(), c + ".num_expert_partitions = " + std::to_string(p.num_expert_partitions) +
                                         " must be at least 1",
                          "bind it to %NUM_EXPERT_PARTITIONS, the model's network.T5Config.num_expert_partitions");
    p.mesh_invariant = false;
  }
  if (auto inv = cfg.get_optional(ref.scope, c, "mesh_invariant")) {
    if (inv->is_none())
      throw gin::GinError(inv->where(), c + ".mesh_invariant is None",
                          "write True (no sum split across processes) or False (GSPMD's partial sums)");
    p.mesh_invariant = inv->as_bool();
    if (p.moe() && p.mesh_invariant)
      throw gin::GinError(inv->where(), c + ".mesh_invariant = True is not supported",
                          "an MoE step runs on the whole (data, expert, model) mesh (its experts exchange tokens "
                          "across 'expert'); leave it False");
  }
  auto rules = cfg.get_optional(ref.scope, c, "logical_axis_rules");
  if (rules && rules->kind() == ValueKind::kReference) {
    const Reference& rr = rules->as_reference();
    const std::string rc = canonical_name(cfg, rr);
    const std::string scope = gin::reference_scope(ref.scope, rr.scope);
    if (auto a = opt_value(cfg, scope, rc, "activation_partitioning_dims")) p.activation_partitioning_dims = int(a->as_int());
    if (auto b = opt_value(cfg, scope, rc, "parameter_partitioning_dims")) p.parameter_partitioning_dims = int(b->as_int());
    if (auto x = opt_value(cfg, scope, rc, "additional_rules"); x && !x->is_none())
      p.additional_rules = read_axis_rules(*x, rc + ".additional_rules", p.moe());
  } else if (rules && !rules->is_none()) {
    p.explicit_rules = read_axis_rules(*rules, c + ".logical_axis_rules", p.moe());
  }
  return p;
}

// The MoE layer's expert layout and the partitioner's mesh come from one
// setting in t5x (NUM_EXPERT_PARTITIONS); two different values would split
// the experts one way and the mesh another.
void check_expert_partitions(const ModelConfig& m, const PartitionerConfig& p) {
  if (!p.moe() || !m.network.is_moe() || m.network.moe.num_expert_partitions == p.num_expert_partitions) return;
  throw std::invalid_argument(
      "[partitioning] network.T5Config.num_expert_partitions = " + std::to_string(m.network.moe.num_expert_partitions) +
      " but " + p.name + ".num_expert_partitions = " + std::to_string(p.num_expert_partitions) +
      "\n  hint: bind both to %NUM_EXPERT_PARTITIONS (configs/models/moe/moe.gin and configs/runs/moe/*.gin do) "
      "and set --gin.NUM_EXPERT_PARTITIONS");
}

LearningRateSchedule read_schedule(const Config& cfg, const Reference& ref) {
  const std::string c = canonical_name(cfg, ref);
  const std::string& s = ref.scope;
  if (c == "utils.create_learning_rate_scheduler") {
    LearningRateSchedulerConfig lc;
    lc.factors = cfg.get_string(s, c, "factors");
    lc.base_learning_rate = cfg.get_double(s, c, "base_learning_rate");
    lc.warmup_steps = cfg.get_int(s, c, "warmup_steps");
    lc.decay_factor = cfg.get_double(s, c, "decay_factor");
    lc.steps_per_decay = cfg.get_int(s, c, "steps_per_decay");
    lc.steps_per_cycle = cfg.get_int(s, c, "steps_per_cycle");
    lc.step_offset = cfg.get_int(s, c, "step_offset");
    lc.min_learning_rate = cfg.get_double(s, c, "min_learning_rate");
    // t5x divides by them (rsqrt_decay takes max(step, warmup_steps)): a
    // negative count gave an infinite learning rate at the first step.
    for (const auto& [name, v] : {std::pair<const char*, double>{"base_learning_rate", lc.base_learning_rate},
                                  {"decay_factor", lc.decay_factor},
                                  {"min_learning_rate", lc.min_learning_rate}})
      if (!std::isfinite(v))
        throw std::invalid_argument("[trainer] " + c + "." + name + " must be finite, got " + std::to_string(v));
    for (const auto& [name, v] : {std::pair<const char*, int64_t>{"warmup_steps", lc.warmup_steps},
                                  {"steps_per_decay", lc.steps_per_decay},
                                  {"steps_per_cycle", lc.steps_per_cycle}})
      if (v < 0)
        throw std::invalid_argument("[trainer] " + c + "." + name + " must be >= 0, got " + std::to_string(v));
    return create_learning_rate_scheduler(lc);
  }
  if (c == "optax.warmup_cosine_decay_schedule") {
    // optax's decay_steps counts the warmup: the cosine part runs for
    // decay_steps - warmup_steps, which optax refuses unless positive.
    const int64_t warmup = cfg.get_int(s, c, "warmup_steps"), decay = cfg.get_int(s, c, "decay_steps");
    if (decay <= warmup)
      throw std::invalid_argument(
          "[trainer] " + (s.empty() ? "" : s + "/") + c + ".decay_steps = " + std::to_string(decay) +
          " must be larger than its warmup_steps = " + std::to_string(warmup) +
          " (the total length of the schedule, warmup included, as optax counts it)\n  hint: configs/runs/lion.gin "
          "binds decay_steps = %TRAIN_STEPS and warmup_steps = %LION_WARMUP_STEPS: pass a smaller "
          "--gin.LION_WARMUP_STEPS (or more TRAIN_STEPS)");
    return warmup_cosine_decay_schedule(cfg.get_double(s, c, "init_value"), cfg.get_double(s, c, "peak_value"),
                                        warmup, decay, cfg.get_double(s, c, "end_value"));
  }
  if (c == "optax.linear_schedule")
    return linear_schedule(cfg.get_double(s, c, "init_value"), cfg.get_double(s, c, "end_value"),
                           cfg.get_int(s, c, "transition_steps"), cfg.get_int(s, c, "transition_begin"));
  if (c == "optax.cosine_decay_schedule")
    return cosine_decay_schedule(cfg.get_double(s, c, "init_value"), cfg.get_int(s, c, "decay_steps"),
                                 cfg.get_double(s, c, "alpha"));
  throw std::invalid_argument("[trainer] unsupported learning-rate schedule '" + c +
                              "'; use utils.create_learning_rate_scheduler or an optax schedule");
}

// A learning_rate parameter: a number (constant) or a schedule reference.
LearningRateSchedule read_lr_value(const Config& cfg, const std::string& scope, const std::string& conf,
                                   const std::string& param) {
  auto v = opt_value(cfg, scope, conf, param);
  if (!v) return nullptr;
  if (v->kind() == ValueKind::kReference) {
    Reference r = v->as_reference();
    r.scope = gin::reference_scope(scope, r.scope);
    return read_schedule(cfg, r);
  }
  double lr = v->as_double();
  if (!std::isfinite(lr))  // a nan rate stopped the run at its first step, blaming the rate's size
    throw gin::GinError(v->where(), conf + "." + param + " = " + v->to_gin() + " is not a finite number",
                        "write a learning rate such as 1e-3, or a schedule");
  return [lr](int64_t) { return lr; };
}

// optax's optimizers take learning_rate as a required argument (t5x's
// OptaxWrapper passes it through): a number or a schedule, never the
// trainer's learning_rate_fn.
Value optax_learning_rate(const Config& cfg, const std::string& s, const std::string& c) {
  const std::string name = (s.empty() ? "" : s + "/") + c + ".learning_rate";
  auto v = cfg.get_optional(s, c, "learning_rate");
  if (!v)
    throw std::invalid_argument("[trainer] " + name + " is not bound\n  hint: bind a number (e.g. 1e-4) or a "
                                "schedule (e.g. @optax.warmup_cosine_decay_schedule())");
  if (v->is_none())
    throw std::invalid_argument("[trainer] " + name + " is None\n  hint: bind a number (e.g. 1e-4) or a schedule "
                                "(e.g. @optax.warmup_cosine_decay_schedule())");
  return *v;
}

// optax's mu_dtype: None keeps the moment in float32 (the dtype of the float32
// params t5x trains); 'float32' or 'bfloat16' name it.
DType read_mu_dtype(const Config& cfg, const std::string& s, const std::string& c) {
  auto v = opt_value(cfg, s, c, "mu_dtype");
  if (!v || v->is_none()) return DType::f32;
  const std::string d = v->kind() == ValueKind::kString ? v->as_string() : "";
  if (d == "float32" || d == "jnp.float32") return DType::f32;
  if (d == "bfloat16" || d == "jnp.bfloat16") return DType::bf16;
  throw std::invalid_argument("[trainer] " + c + ".mu_dtype = " + v->to_gin() +
                              " is not supported\n  hint: leave it None (float32) or set 'float32' or 'bfloat16'");
}

// optax's weight-decay mask is a pytree or a Python callable, which a gin
// file cannot give t5x.cpp; say so rather than decay every param.
void refuse_mask(const Config& cfg, const std::string& s, const std::string& c) {
  auto v = opt_value(cfg, s, c, "mask");
  if (v && !v->is_none())
    throw std::invalid_argument("[trainer] " + c + ".mask = " + v->to_gin() +
                                " is not supported (optax takes a pytree or a callable there)\n  hint: remove the "
                                "binding (every param is decayed), or set weight_decay = 0.0");
}

std::shared_ptr<const Optimizer> read_adamw(const Config& cfg, const Reference& ref, const ChainedClips& chain,
                                            LearningRateSchedule* lr) {
  const std::string c = canonical_name(cfg, ref);
  const std::string& s = ref.scope;
  AdamWConfig a;
  a.b1 = cfg.get_double(s, c, "b1");
  a.b2 = cfg.get_double(s, c, "b2");
  a.eps = cfg.get_double(s, c, "eps");
  a.eps_root = cfg.get_double(s, c, "eps_root");
  if (c.ends_with("adamw")) a.weight_decay = cfg.get_double(s, c, "weight_decay");
  else a.weight_decay = 0.0;
  a.chain = chain;
  a.mu_dtype = read_mu_dtype(cfg, s, c);
  if (c.ends_with("adamw")) refuse_mask(cfg, s, c);
  a.lr_is_schedule = optax_learning_rate(cfg, s, c).kind() == ValueKind::kReference;
  *lr = read_lr_value(cfg, s, c, "learning_rate");
  return std::make_shared<AdamW>(a);
}

// optimizers.lion = optax.lion(learning_rate, b1=0.9, b2=0.99, mu_dtype=None,
// weight_decay=1e-3, mask=None) behind OptaxWrapper.
std::shared_ptr<const Optimizer> read_lion(const Config& cfg, const Reference& ref, const ChainedClips& chain,
                                           LearningRateSchedule* lr) {
  const std::string c = canonical_name(cfg, ref);
  const std::string& s = ref.scope;
  LionConfig o;
  o.b1 = cfg.get_double(s, c, "b1");
  o.b2 = cfg.get_double(s, c, "b2");
  for (const auto& [name, b] : {std::pair<const char*, double>{"b1", o.b1}, {"b2", o.b2}})
    if (!(b >= 0.0 && b <= 1.0))
      throw std::invalid_argument("[trainer] " + c + "." + name + " must be in [0, 1], got " + std::to_string(b));
  if (auto w = opt_value(cfg, s, c, "weight_decay"); w && w->kind() == ValueKind::kReference)
    throw std::invalid_argument("[trainer] " + c + ".weight_decay = " + w->to_gin() +
                                " is a schedule; t5x.cpp takes a number there\n  hint: bind a float (default 1e-3)");
  o.weight_decay = cfg.get_double(s, c, "weight_decay");
  if (!std::isfinite(o.weight_decay))
    throw std::invalid_argument("[trainer] " + c + ".weight_decay must be finite, got " +
                                std::to_string(o.weight_decay));
  o.mu_dtype = read_mu_dtype(cfg, s, c);
  refuse_mask(cfg, s, c);
  o.chain = chain;
  o.lr_is_schedule = optax_learning_rate(cfg, s, c).kind() == ValueKind::kReference;
  *lr = read_lr_value(cfg, s, c, "learning_rate");
  return std::make_shared<Lion>(o);
}

// optimizers.sgd = optax.sgd(learning_rate, momentum=None, nesterov=False,
// accumulator_dtype=None) behind OptaxWrapper.
std::shared_ptr<const Optimizer> read_sgd(const Config& cfg, const Reference& ref, const ChainedClips& chain,
                                          LearningRateSchedule* lr) {
  const std::string c = canonical_name(cfg, ref);
  const std::string& s = ref.scope;
  SgdConfig o;
  o.chain = chain;
  if (!cfg.is_none(s, c, "momentum")) {
    o.momentum = cfg.get_double(s, c, "momentum");  // names the parameter on a bad kind
    if (!std::isfinite(*o.momentum))
      throw std::invalid_argument("[trainer] " + c + ".momentum must be finite or None, got " +
                                  std::to_string(*o.momentum));
  }
  o.nesterov = cfg.get_bool(s, c, "nesterov");
  // The trace is kept in float32 (optax's None for float32 params).
  if (auto v = opt_value(cfg, s, c, "accumulator_dtype")) {
    const bool f32 = v->kind() == ValueKind::kString &&
                     (v->as_string() == "float32" || v->as_string() == "jnp.float32");
    if (!f32)
      throw std::invalid_argument("[trainer] " + c + ".accumulator_dtype = " + v->to_gin() +
                                  " is not supported; leave it None (the momentum trace is kept in float32) "
                                  "or set 'float32'");
  }
  o.lr_is_schedule = optax_learning_rate(cfg, s, c).kind() == ValueKind::kReference;
  *lr = read_lr_value(cfg, s, c, "learning_rate");
  return std::make_shared<Sgd>(o);
}

// The optax optimizers t5x.cpp runs, by their t5x or optax name.
bool optax_optimizer(const std::string& c) {
  for (const char* n : {"adamw", "adam", "sgd", "lion"})
    if (c == std::string("optimizers.") + n || c == std::string("optax.") + n) return true;
  return false;
}

std::shared_ptr<const Optimizer> read_optax_optimizer(const Config& cfg, const Reference& ref,
                                                      const ChainedClips& chain, LearningRateSchedule* lr) {
  const std::string c = canonical_name(cfg, ref);
  if (c.ends_with(".sgd")) return read_sgd(cfg, ref, chain, lr);
  if (c.ends_with(".lion")) return read_lion(cfg, ref, chain, lr);
  return read_adamw(cfg, ref, chain, lr);
}

}  // namespace

DatasetConfig read_dataset_config(const Config& cfg, const Reference& ref) {
  DatasetConfig d;
  const std::string c = canonical_name(cfg, ref);
  const std::string& s = ref.scope;
  d.mixture_or_task_name = cfg.get_string(s, c, "mixture_or_task_name");
  if (auto v = opt_value(cfg, s, c, "task_feature_lengths")) {
    seqio::SequenceLengths lens;
    for (const auto& [k, len] : v->as_dict()) {
      // Caught here, before initialisation writes anything (a length of 0
      // used to surface as a bad record of the data file).
      if (len.as_int() < 1 || len.as_int() > seqio::kMaxSequenceLength)
        throw std::invalid_argument("[trainer] " + c + ".task_feature_lengths['" + k.as_string() +
                                    "'] must be in [1, " + std::to_string(seqio::kMaxSequenceLength) + "], got " +
                                    std::to_string(len.as_int()) + " (TASK_FEATURE_LENGTHS)");
      lens[k.as_string()] = static_cast<int>(len.as_int());
    }
    d.task_feature_lengths = lens;
  }
  d.split = cfg.get_string(s, c, "split");
  d.batch_size = cfg.get_int(s, c, "batch_size");
  d.shuffle = cfg.get_bool(s, c, "shuffle");
  d.seed = opt_seed(cfg, s, c, "seed");
  d.use_cached = cfg.get_bool(s, c, "use_cached");
  if (cfg.registry() && cfg.registry()->by_name("seqio.add_global_cache_dirs"))
    for (const auto& v : cfg.get_list("", "seqio.add_global_cache_dirs", "global_cache_dirs"))
      d.cache_dirs.push_back(v.as_string());
  d.pack = cfg.get_bool(s, c, "pack");
  // A process-wide gin binding in T5, so a process-wide default here.
  seqio::preprocessors::set_random_spans_random_roll(
      cfg.get_bool("", "preprocessors.random_spans_noise_mask", "random_roll"));
  if (d.batch_size < 1 || d.batch_size > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("[trainer] utils.DatasetConfig.batch_size (BATCH_SIZE) must be in [1, 2^31 - 1], got " +
                                std::to_string(d.batch_size));
  return d;
}

std::vector<std::string> use_cached_warnings(const DatasetConfig& d) {
  std::vector<std::string> out;
  if (!d.use_cached) return out;
  for (const auto& t : seqio::tasks_without_cache_step(d.mixture_or_task_name))
    out.push_back("warning: task '" + t + "' has no cache step (CacheDatasetPlaceholder), so use_cached = True " +
                  "(USE_CACHED_TASKS) reads it from its source, as seqio does; set USE_CACHED_TASKS = False, " +
                  "or add a cache step to the task and run `seqio cache " + t + " --output DIR` (with " +
                  "--module TASKS.gin first when a task file declares the task)");
  return out;
}

// The trainer class a run binds (train_script.train.trainer_cls): t5x's
// trainer.Trainer, or contrib/moe's MoeTrainer (the same step plus the expert
// partition count, which must match the partitioner's). Unbound: trainer.Trainer.
static std::string trainer_class(const Config& cfg) {
  auto v = opt_value(cfg, "", "train_script.train", "trainer_cls");
  if (!v || v->is_none()) return "trainer.Trainer";
  const Value r = cfg.resolve(*v);
  const std::string c = r.kind() == ValueKind::kReference ? canonical_name(cfg, r.as_reference()) : "";
  if (c == "trainer.Trainer" || c == "trainer.MoeTrainer") {
    // num_microbatches set on the class the run does not use would be
    // dropped without a word. The run files bind it to None on
    // trainer.Trainer (its default), and t5x's contrib/moe ones the same
    // value on both, which is fine.
    const std::string other = c == "trainer.Trainer" ? "trainer.MoeTrainer" : "trainer.Trainer";
    if (auto unused = cfg.get_optional("", other, "num_microbatches"); unused && !cfg.resolve(*unused).is_none()) {
      auto used = cfg.get_optional("", c, "num_microbatches");
      if (!used || cfg.resolve(*used).to_gin() != cfg.resolve(*unused).to_gin())
        throw std::invalid_argument("[trainer] " + other + ".num_microbatches = " + unused->to_gin() +
                                    " is not read: the run's trainer is " + c +
                                    " (train_script.train.trainer_cls)\n  hint: bind " + c +
                                    ".num_microbatches instead");
    }
    return c;
  }
  throw std::invalid_argument("[trainer] train_script.train.trainer_cls = " + v->to_gin() +
                              " is not a trainer\n  hint: write @trainer.Trainer, or @moe_trainer.MoeTrainer "
                              "(from t5x.contrib.moe import trainer as moe_trainer) for an MoE run");
}

OptimizerConfig read_optimizer_config(const Config& cfg, const Reference& model_ref) {
  OptimizerConfig o;
  Reference ref = nested_reference(cfg, model_ref, "optimizer_def");
  const std::string c = canonical_name(cfg, ref);
  const std::string& s = ref.scope;
  LearningRateSchedule own_lr;
  Reference lr_owner = ref;  // the configurable that holds its own learning rate (a chain's optimizer)
  if (c == "adafactor.Adafactor") {
    AdafactorConfig a;
    a.factored = cfg.get_bool(s, c, "factored");
    a.multiply_by_parameter_scale = cfg.get_bool(s, c, "multiply_by_parameter_scale");
    if (auto v = opt_value(cfg, s, c, "beta1")) a.beta1 = v->as_double();
    a.decay_rate = cfg.get_double(s, c, "decay_rate");
    a.step_offset = cfg.get_int(s, c, "step_offset");
    if (auto v = opt_value(cfg, s, c, "clipping_threshold")) a.clipping_threshold = v->as_double();
    else a.clipping_threshold.reset();
    if (auto v = opt_value(cfg, s, c, "weight_decay_rate")) a.weight_decay_rate = v->as_double();
    a.min_dim_size_to_factor = cfg.get_int(s, c, "min_dim_size_to_factor");
    a.epsilon1 = cfg.get_double(s, c, "epsilon1");
    a.epsilon2 = cfg.get_double(s, c, "epsilon2");
    if (auto v = opt_value(cfg, s, c, "logical_factor_rules"); v && !v->is_none()) {
      const Value r = cfg.resolve(*v);
      const bool moe = r.kind() == ValueKind::kReference &&
                       canonical_name(cfg, r.as_reference()) == "adafactor_utils.logical_factor_rules";
      a.logical_factor_rules = moe ? moe_logical_factor_rules() : standard_logical_factor_rules();
    }
    if (auto v = opt_value(cfg, s, c, "global_norm_clip_threshold")) a.global_norm_clip_threshold = v->as_double();
    if (auto v = opt_value(cfg, s, c, "max_parameter_scale")) a.max_parameter_scale = v->as_double();
    a.skip_nan_updates = cfg.get_bool(s, c, "skip_nan_updates");
    own_lr = read_lr_value(cfg, s, c, "learning_rate");
    o.optimizer = std::make_shared<Adafactor>(a);
  } else if (c == "optimizers.chain") {
    // chain([clips..., optimizer]): t5x's recipe for the optax optimizers,
    // e.g. [@optax.clip(), @optax.lion()] in base_wmt_from_scratch_lion.gin.
    ChainedClips clips;
    std::optional<Reference> inner;
    const auto items = cfg.get_list(s, c, "transformations");
    const std::string kinds =
        "[@optax.clip(), @optax.adamw()]: any of optax.clip and optax.clip_by_global_norm, then one of "
        "optax.adamw, adam, sgd or lion";
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string at = "[trainer] optimizers.chain.transformations[" + std::to_string(i) + "]";
      if (items[i].kind() != ValueKind::kReference)
        throw std::invalid_argument(at + " is " + items[i].to_gin() + ", not a transformation\n  hint: write " +
                                    kinds);
      Reference r = items[i].as_reference();
      r.scope = gin::reference_scope(s, r.scope);
      const std::string rc = canonical_name(cfg, r);
      const bool last = i + 1 == items.size();
      const bool clip = rc == "optax.clip_by_global_norm" || rc == "optax.clip";
      if (clip && !last) {
        const char* param = rc == "optax.clip" ? "max_delta" : "max_norm";
        const double t = cfg.get_double(r.scope, rc, param);
        if (!(std::isfinite(t) && t > 0.0))
          throw std::invalid_argument(at + ": " + (r.scope.empty() ? "" : r.scope + "/") + rc + "." + param +
                                      " must be finite and > 0, got " + std::to_string(t));
        clips.push_back(rc == "optax.clip" ? ChainedClip::value(t) : ChainedClip::global_norm(t));
      } else if (last && optax_optimizer(rc)) {
        inner = r;
      } else if (clip) {
        throw std::invalid_argument(at + " = @" + rc + " ends the chain, which has no optimizer\n  hint: the last "
                                    "item is the optimizer: " + kinds);
      } else if (optax_optimizer(rc)) {
        throw std::invalid_argument(at + " = @" + rc + " is an optimizer before the chain's end\n  hint: the "
                                    "optimizer is the last item, after the clips: " + kinds);
      } else {
        throw std::invalid_argument(at + " = @" + rc + " is not supported there\n  hint: t5x.cpp runs " + kinds);
      }
    }
    if (!inner)
      throw std::invalid_argument("[trainer] optimizers.chain.transformations has no optimizer\n  hint: write " +
                                  kinds);
    o.optimizer = read_optax_optimizer(cfg, *inner, clips, &own_lr);
    lr_owner = *inner;
    std::string names;
    for (const auto& it : items) names += (names.empty() ? "" : ", ") + canonical_name(cfg, it.as_reference());
    o.description = c + "([" + names + "])";
  } else if (optax_optimizer(c)) {
    o.optimizer = read_optax_optimizer(cfg, ref, {}, &own_lr);
  } else {
    throw std::invalid_argument("[trainer] unsupported optimizer @" + c +
                                "; use adafactor.Adafactor, optimizers.adamw, optimizers.adam, optimizers.sgd, "
                                "optimizers.lion or optimizers.chain (optax.adamw, adam, sgd and lion as well)");
  }
  if (o.description.empty()) o.description = c;
  // t5x passes trainer.Trainer.learning_rate_fn(step) to Adafactor; optax
  // optimizers carry their own schedule.
  if (own_lr) {
    o.schedule = own_lr;
    const std::string owner = canonical_name(cfg, lr_owner);
    const Value v = cfg.resolve(*cfg.get_optional(lr_owner.scope, owner, "learning_rate"));
    o.description += ", learning rate " + (v.kind() == ValueKind::kReference
                                               ? "from " + canonical_name(cfg, v.as_reference())
                                               : v.to_gin() + " (constant)");
  } else {
    const std::string tc = trainer_class(cfg);
    auto v = cfg.get_optional("", tc, "learning_rate_fn");
    if (!v || v->is_none())
      throw std::invalid_argument("[trainer] no learning rate: bind " + tc + ".learning_rate_fn "
                                  "(e.g. @utils.create_learning_rate_scheduler())");
    o.schedule = read_schedule(cfg, cfg.resolve(*v).as_reference());
    o.description += ", learning rate from " + tc + ".learning_rate_fn";
  }
  return o;
}

EvaluatorConfig read_evaluator_config(const Config& cfg) {
  EvaluatorConfig e;
  auto count = [&](const std::string& conf, const std::string& param, const char* macro) -> std::optional<int64_t> {
    auto v = opt_value(cfg, "", conf, param);
    if (!v) return std::nullopt;
    const int64_t n = v->as_int();
    if (n < 0)
      throw std::invalid_argument("[trainer] " + conf + "." + param + " (" + macro + ") must be >= 0 or None, got " +
                                  std::to_string(n) + "\n  hint: None for all");
    return n;
  };
  if (auto n = count("seqio.Evaluator", "num_examples", "EVALUATOR_NUM_EXAMPLES")) e.num_examples = *n;
  if (auto n = count("seqio.JSONLogger", "write_n_results", "JSON_WRITE_N_RESULTS")) e.write_n_results = *n;
  return e;
}

namespace {
// An FNet / Sparse Mixer encoder mixes every position of its input: packed
// examples would be mixed together, and a linear mixer's W_seq has one
// length. Checked when the config is read, before the run writes anything
// (the model used to refuse the first batch, after checkpoint_0).
void check_mixing_encoder(const ModelConfig& m, const DatasetConfig& d, const Reference& ref, const Config& cfg) {
  using Mixing = T5Config::Mixing;
  if (m.decoder_only || m.network.encoder_mixing == Mixing::kAttention) return;
  const bool fourier = m.network.encoder_mixing == Mixing::kFourier;
  const std::string what = fourier ? "Fourier-mixing (FNet)" : "linear-mixing (Sparse Mixer)";
  const std::string binding = (ref.scope.empty() ? "" : ref.scope + "/") + canonical_name(cfg, ref);
  if (d.pack)
    throw std::invalid_argument("[trainer] the " + what + " encoder cannot take packed inputs: its mixing over the "
                                "length would mix the examples, but " + binding + ".pack is True\n  hint: --gin." +
                                binding + ".pack=False");
  const auto& lens = d.task_feature_lengths;
  // Without an inputs length (eval.gin's TASK_FEATURE_LENGTHS = None) the
  // batches take the longest example's length, which W_seq need not have.
  if (!fourier && !(lens && lens->count("inputs")))
    throw std::invalid_argument("[trainer] the linear-mixing (Sparse Mixer) encoder has W_seq of length " +
                                std::to_string(m.network.encoder_mixing_length) + ", but " + binding +
                                ".task_feature_lengths gives no 'inputs' length, so the inputs would take the "
                                "longest example's length\n  hint: --gin." + binding +
                                ".task_feature_lengths=\"{'inputs': " +
                                std::to_string(m.network.encoder_mixing_length) +
                                ", 'targets': N}\" (eval.gin and infer.gin read it from TASK_FEATURE_LENGTHS)");
  if (!fourier && lens->at("inputs") != m.network.encoder_mixing_length)
    throw std::invalid_argument("[trainer] the linear-mixing (Sparse Mixer) encoder has W_seq of length " +
                                std::to_string(m.network.encoder_mixing_length) + " but " + binding +
                                ".task_feature_lengths['inputs'] is " +
                                std::to_string(lens->at("inputs")) +
                                "\n  hint: make TASK_FEATURE_LENGTHS['inputs'] and "
                                "network.T5Config.encoder_mixing_length equal");
}

// The lengths name exactly the features the model's feature converter takes
// (seqio's check, which ran at the first batch: after checkpoint_0 was
// written). Checked by converting no examples.
void check_feature_lengths(const ModelConfig& m, const DatasetConfig& d) {
  if (!d.task_feature_lengths) return;
  bool has_inputs = false;
  for (const auto& t : seqio::get_subtasks(d.mixture_or_task_name)) has_inputs |= t->output_features().count("inputs") > 0;
  try {
    (void)(*make_feature_converter(m, d.pack, has_inputs))({}, *d.task_feature_lengths);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("[trainer] utils.DatasetConfig.task_feature_lengths (TASK_FEATURE_LENGTHS) of '" +
                                d.mixture_or_task_name + "': " + e.what() +
                                "\n  hint: give a length for each feature the model takes: " +
                                (m.decoder_only ? (has_inputs ? "'inputs' and 'targets' (a prefix LM)" : "'targets'")
                                                : "'inputs' and 'targets'"));
  }
}
}  // namespace

TrainRunConfig read_train_config(const Config& cfg, bool check_tasks) {
  const std::string f = "train_script.train";
  TrainRunConfig t;
  Reference model = cfg.get_reference("", f, "model");
  t.model = read_model_config(cfg, model);
  t.optimizer = read_optimizer_config(cfg, model);
  if (const auto& sc = t.model.network.scalable_checkpoint; sc.on)
    if (const auto* a = dynamic_cast<const Adafactor*>(t.optimizer.optimizer.get())) {
      // The layers scalable_t5 stacks or splits are factored as t5x factors
      // their checkpoint form (param_layout.h; its layer kernels are all matrices).
      AdafactorConfig c = a->config();
      c.factor_by_rule = [scan = sc.scan_layers](const std::string& path) {
        return scalable_t5_relaid(path, 2, scan);
      };
      t.optimizer.optimizer = std::make_shared<Adafactor>(c);
    }
  t.model_dir = cfg.get_string("", f, "model_dir");
  if (t.model_dir.empty())
    throw std::invalid_argument("[trainer] " + f + ".model_dir (MODEL_DIR) is empty\n  hint: name the directory "
                                "that holds the run's checkpoints, e.g. --gin.MODEL_DIR=/tmp/run");
  if (std::error_code ec; std::filesystem::exists(t.model_dir, ec) && !std::filesystem::is_directory(t.model_dir, ec))
    throw std::invalid_argument("[trainer] " + f + ".model_dir (MODEL_DIR) '" + t.model_dir +
                                "' is a file, not a directory\n  hint: name a directory (new or a run's) for the "
                                "checkpoints");
  // A checkpoint given as MODEL_DIR (meant: resume from it) would start a new
  // run inside it; MODEL_DIR is the directory that holds checkpoint_<step>/.
  if (std::error_code ec; std::filesystem::is_regular_file(t.model_dir + "/checkpoint", ec) ||
                          is_orbax_checkpoint(t.model_dir)) {
    std::filesystem::path p = std::filesystem::path(t.model_dir).lexically_normal();
    if (!p.has_filename()) p = p.parent_path();  // "run/checkpoint_20/"
    const std::string parent = p.has_parent_path() ? p.parent_path().string() : ".";
    throw std::invalid_argument("[trainer] " + f + ".model_dir (MODEL_DIR) '" + t.model_dir +
                                "' is a checkpoint, not a run's directory\n  hint: to resume its run, give the "
                                "directory that holds it (" + parent + "); to fine-tune from it, set "
                                "INITIAL_CHECKPOINT_PATH to it and MODEL_DIR to a new directory");
  }
  const Reference train_ref = cfg.get_reference("", f, "train_dataset_cfg");
  t.train_ds = read_dataset_config(cfg, train_ref);
  check_mixing_encoder(t.model, t.train_ds, train_ref, cfg);
  for (const char* p : {"train_eval_dataset_cfg", "infer_eval_dataset_cfg"}) {
    if (cfg.is_none("", f, p)) continue;
    const Reference r = cfg.get_reference("", f, p);
    auto& d = std::string(p) == "train_eval_dataset_cfg" ? t.train_eval_ds : t.infer_eval_ds;
    d = read_dataset_config(cfg, r);
    check_mixing_encoder(t.model, *d, r, cfg);
  }
  t.evaluator = read_evaluator_config(cfg);
  Reference ck = cfg.get_reference("", f, "checkpoint_cfg");
  const std::string ckc = canonical_name(cfg, ck);
  if (!cfg.is_none(ck.scope, ckc, "save")) {
    Reference sv = nested_reference(cfg, ck, "save");
    const std::string svc = canonical_name(cfg, sv);
    if (auto p = opt_value(cfg, sv.scope, svc, "period")) t.save.period = p->as_int();
    t.save.dtype = cfg.get_string(sv.scope, svc, "dtype");
    // Found only at the first save before, after the steps up to it.
    if (t.save.dtype != "float32" && t.save.dtype != "bfloat16" && t.save.dtype != "float16")
      throw gin::GinError(opt_value(cfg, sv.scope, svc, "dtype")->where(),
                          svc + ".dtype = '" + t.save.dtype + "' is not a parameter dtype",
                          "'float32' (exact resumes), 'bfloat16' or 'float16'");
    if (auto k = opt_value(cfg, sv.scope, svc, "keep")) {
      // t5x keeps every checkpoint with keep = None; 0 or a negative count did so silently.
      if (k->as_int() < 1)
        throw std::invalid_argument("[trainer] " + svc + ".keep must be >= 1, got " + std::to_string(k->as_int()) +
                                    "\n  hint: None keeps every checkpoint");
      t.save.keep = static_cast<int>(std::min<int64_t>(k->as_int(), std::numeric_limits<int>::max()));
    }
  }
  if (!cfg.is_none(ck.scope, ckc, "restore")) t.restore = read_restore(cfg, nested_reference(cfg, ck, "restore"));
  t.partitioner = read_partitioner(cfg, cfg.get_reference("", f, "partitioner"));
  check_expert_partitions(t.model, t.partitioner);
  t.total_steps = cfg.get_int("", f, "total_steps");
  // The checkpoints' state/step is int32, as t5x's.
  if (t.total_steps < 0 || t.total_steps > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("[trainer] " + f + ".total_steps (TRAIN_STEPS) must be in [0, 2^31 - 1], got " +
                                std::to_string(t.total_steps) + " (a checkpoint's step is int32)");
  if (auto v = opt_value(cfg, "", f, "relative_steps")) t.relative_steps = v->as_int();
  if (t.relative_steps && *t.relative_steps < 0)
    throw std::invalid_argument("[trainer] " + f + ".relative_steps must be >= 0, got " +
                                std::to_string(*t.relative_steps));
  t.eval_steps = cfg.get_int("", f, "eval_steps");
  t.eval_period = cfg.get_int("", f, "eval_period");
  if (auto v = opt_value(cfg, "", f, "stats_period")) t.stats_period = v->as_int();
  // Periods count steps; a negative one is a typo, not a setting.
  for (const auto& [name, v] : {std::pair<std::string, int64_t>{f + ".eval_period", t.eval_period},
                                {f + ".stats_period", t.stats_period},
                                {"utils.SaveCheckpointConfig.period", t.save.period}})
    if (v < 0)
      throw std::invalid_argument("[trainer] " + name + " must be >= 0, got " + std::to_string(v) +
                                  "\n  hint: a number of steps (0: the default)");
  if (auto v = opt_value(cfg, "", f, "random_seed")) t.random_seed = v->as_int();
  t.run_eval_before_training = cfg.get_bool("", f, "run_eval_before_training");
  const std::string tc = trainer_class(cfg);
  t.trainer_class = tc;
  if (auto v = opt_value(cfg, "", tc, "num_microbatches")) t.num_microbatches = std::max<int64_t>(1, v->as_int());
  if (tc == "trainer.MoeTrainer") {
    // t5x contrib/moe: MoeTrainer(num_expert_partitions) shards the expert
    // params' updates over the expert axis the MoE partitioner built.
    const int64_t n = cfg.get_int("", tc, "num_expert_partitions");
    if (!t.partitioner.moe() || n != t.partitioner.num_expert_partitions)
      throw std::invalid_argument(
          "[trainer] trainer.MoeTrainer.num_expert_partitions = " + std::to_string(n) +
          (t.partitioner.moe() ? " but " + t.partitioner.name + ".num_expert_partitions = " +
                                     std::to_string(t.partitioner.num_expert_partitions)
                               : " but the partitioner (" + t.partitioner.name + ") has no expert axis") +
          "\n  hint: bind both to %NUM_EXPERT_PARTITIONS with @moe_partitioning.MoePjitPartitioner(), as t5x's "
          "contrib/moe configs/runs/pretrain.gin does");
  }
  for (const auto* d : {&t.train_ds, t.train_eval_ds ? &*t.train_eval_ds : nullptr,
                        t.infer_eval_ds ? &*t.infer_eval_ds : nullptr})
    if (d && check_tasks) {
      check_model_vocabulary(t.model, *d);
      check_feature_lengths(t.model, *d);
    }
  return t;
}

EvalRunConfig read_eval_config(const Config& cfg) {
  const std::string f = "eval_script.evaluate";
  EvalRunConfig e;
  Reference model = cfg.get_reference("", f, "model");
  e.model = read_model_config(cfg, model);
  const Reference ds = cfg.get_reference("", f, "dataset_cfg");
  e.dataset = read_dataset_config(cfg, ds);
  check_mixing_encoder(e.model, e.dataset, ds, cfg);
  e.evaluator = read_evaluator_config(cfg);
  e.restore = read_restore(cfg, cfg.get_reference("", f, "restore_checkpoint_cfg"));
  e.partitioner = read_partitioner(cfg, cfg.get_reference("", f, "partitioner"));
  check_expert_partitions(e.model, e.partitioner);
  e.output_dir = cfg.get_string("", f, "output_dir");
  check_model_vocabulary(e.model, e.dataset);
  check_feature_lengths(e.model, e.dataset);
  return e;
}

InferRunConfig read_infer_config(const Config& cfg) {
  const std::string f = "infer_script.infer";
  InferRunConfig r;
  r.mode = cfg.get_string("", f, "mode");
  // predict_with_aux ran as predict, without the aux outputs t5x writes.
  if (r.mode != "predict" && r.mode != "score")
    throw std::invalid_argument("[infer] " + f + ".mode must be 'predict' or 'score', got '" + r.mode + "'" +
                                (r.mode == "predict_with_aux"
                                     ? "\n  hint: 'predict_with_aux' (predictions with their aux outputs) is not "
                                       "supported; 'predict' writes the predictions"
                                     : ""));
  Reference model = cfg.get_reference("", f, "model");
  r.model = read_model_config(cfg, model);
  const Reference ds = cfg.get_reference("", f, "dataset_cfg");
  r.dataset = read_dataset_config(cfg, ds);
  check_mixing_encoder(r.model, r.dataset, ds, cfg);
  r.restore = read_restore(cfg, cfg.get_reference("", f, "restore_checkpoint_cfg"));
  r.partitioner = read_partitioner(cfg, cfg.get_reference("", f, "partitioner"));
  check_expert_partitions(r.model, r.partitioner);
  r.output_dir = cfg.get_string("", f, "output_dir");
  r.checkpoint_period = cfg.get_int("", f, "checkpoint_period");
  r.shard_id = cfg.get_int("", f, "shard_id");
  r.num_shards = cfg.get_int("", f, "num_shards");
  if (r.num_shards < 1 || r.shard_id < 0 || r.shard_id >= r.num_shards)
    throw std::invalid_argument("[infer] " + f + ".shard_id = " + std::to_string(r.shard_id) + " with num_shards = " +
                                std::to_string(r.num_shards) + ": shard_id must be in [0, num_shards)" +
                                "\n  hint: shard_id picks which of num_shards parts of the split this run infers");
  check_model_vocabulary(r.model, r.dataset);
  check_feature_lengths(r.model, r.dataset);
  return r;
}

namespace {
std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
}  // namespace

namespace {
// The embedding must have a row for every id the tasks' vocabularies produce:
// a smaller vocab_size failed at the first batch, in the embedding lookup
// ("index 604 out of range for dim 'vocab' of size 10").
void check_vocab_size(const ModelConfig& m, const DatasetConfig& d) {
  // An unknown task name fails here (seqio's error, with the nearest names),
  // as the config is read: before, the run wrote config.gin and
  // model-info.txt first.
  const auto tasks = seqio::get_subtasks(d.mixture_or_task_name);
  const char* binding = m.decoder_only ? "network.TransformerConfig.vocab_size" : "network.T5Config.vocab_size";
  for (const auto& task : tasks)
    for (const auto& [name, feature] : task->output_features()) {
      if (!feature.vocabulary) continue;
      const int64_t ids = feature.vocabulary->vocab_size();
      if (ids > m.network.vocab_size)
        throw std::invalid_argument("[trainer] " + std::string(binding) + " = " + std::to_string(m.network.vocab_size) +
                                    " is smaller than the vocabulary of task '" + task->name() + "' feature '" + name +
                                    "' (" + std::to_string(ids) + " ids, " + feature.vocabulary->spec() +
                                    ")\n  hint: set " + binding + " to at least " + std::to_string(ids) +
                                    " (t5x rounds it up to a multiple of 128: 32128 for the 32000-piece T5 "
                                    "vocabulary)");
    }
}
}  // namespace

std::optional<std::string> check_model_vocabulary(const ModelConfig& m, const DatasetConfig& d) {
  check_vocab_size(m, d);
  if (m.vocabulary_file.empty()) return std::nullopt;
  const std::string binding = "seqio.SentencePieceVocabulary.sentencepiece_model_file (SENTENCEPIECE_MODEL_FILE) = '" +
                              m.vocabulary_file + "'";
  if (m.vocabulary_file.find("://") != std::string::npos)
    return "warning: " + binding + " is a remote path, which is not read here: the vocabulary of task '" +
           d.mixture_or_task_name + "' is used unchecked (point SENTENCEPIECE_MODEL_FILE at a local copy)";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(m.vocabulary_file, ec))
    throw std::invalid_argument("[trainer] " + binding + ": no such file\n  hint: point SENTENCEPIECE_MODEL_FILE at " +
                                "the SentencePiece model of the task's vocabulary (relative paths start at the " +
                                "working directory)");
  const std::string model_bytes = file_bytes(m.vocabulary_file);
  for (const auto& task : seqio::get_subtasks(d.mixture_or_task_name)) {
    auto it = task->output_features().find("targets");
    if (it == task->output_features().end() || !it->second.vocabulary) continue;
    const auto* spm = dynamic_cast<const seqio::SentencePieceVocabulary*>(it->second.vocabulary.get());
    const bool same = spm && spm->extra_ids() == m.vocabulary_extra_ids && file_bytes(spm->model_path()) == model_bytes;
    if (!same)
      throw std::invalid_argument(
          "[trainer] Model and Task vocabularies do not match: task '" + task->name() + "' uses " +
          it->second.vocabulary->spec() + ", the model " + binding + " with seqio.SentencePieceVocabulary.extra_ids = " +
          std::to_string(m.vocabulary_extra_ids) + "\n  hint: point SENTENCEPIECE_MODEL_FILE (and extra_ids) at the " +
          "task's vocabulary, as t5x requires");
  }
  return std::nullopt;
}

LogicalAxisRules logical_axis_rules(const PartitionerConfig& p) {
  if (p.explicit_rules) return *p.explicit_rules;
  return p.moe() ? moe_logical_axis_rules(p.activation_partitioning_dims, p.parameter_partitioning_dims,
                                          p.additional_rules)
                 : standard_logical_axis_rules(p.activation_partitioning_dims, p.parameter_partitioning_dims,
                                               p.additional_rules);
}

std::unique_ptr<seqio::FeatureConverter> make_feature_converter(const ModelConfig& m, bool pack,
                                                                bool task_has_inputs) {
  seqio::FeatureConverterOptions o;
  o.pack = pack;
  // Tasks already trimmed their features to the lengths (seqio trims before
  // converting); a longer feature would be a bug upstream.
  if (!m.decoder_only) return seqio::make_feature_converter("enc_dec", o);
  return seqio::make_feature_converter(task_has_inputs ? "prefix_lm" : "lm", o);
}

}  // namespace t5x::trainer
