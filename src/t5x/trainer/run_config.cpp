#include "t5x/trainer/run_config.h"

#include <stdexcept>

#include "seqio/preprocessors/noise.h"
#include "t5x/gin/registry.h"
#include "t5x/optim/adafactor.h"
#include "t5x/optim/adamw.h"

namespace t5x::trainer {

namespace {

using gin::Config;
using gin::Reference;
using gin::Value;
using gin::ValueKind;

// Canonical registry name of a reference (gin accepts shortened names).
std::string canonical(const Config& cfg, const Reference& ref) {
  if (cfg.registry())
    if (const auto* spec = cfg.registry()->find(ref.name)) return spec->name;
  return ref.name;
}

// The reference bound to `param`, in the scope the referenced configurable runs in.
Reference nested_ref(const Config& cfg, const Reference& outer, const std::string& param) {
  Reference r = cfg.get_reference(outer.scope, canonical(cfg, outer), param);
  r.scope = gin::join_scope(outer.scope, r.scope);
  return r;
}

std::optional<Value> opt_value(const Config& cfg, const std::string& scope, const std::string& conf,
                               const std::string& param) {
  auto v = cfg.get_optional(scope, conf, param);
  if (!v || v->is_none()) return std::nullopt;
  return v;
}

DType dtype_from_name(const std::string& s) {
  if (s == "float32") return DType::f32;
  if (s == "bfloat16") return DType::bf16;
  if (s == "float16") return DType::f16;
  throw std::invalid_argument("[gin] unsupported activation dtype '" + s + "' (float32, bfloat16, float16)");
}

std::optional<uint64_t> opt_seed(const Config& cfg, const std::string& scope, const std::string& conf,
                                 const std::string& param) {
  auto v = opt_value(cfg, scope, conf, param);
  if (!v) return std::nullopt;
  return static_cast<uint64_t>(v->as_int());
}

RestoreCheckpointConfig read_restore(const Config& cfg, const Reference& ref) {
  RestoreCheckpointConfig r;
  const std::string c = canonical(cfg, ref);
  if (auto p = opt_value(cfg, ref.scope, c, "path")) {
    if (p->is_sequence())
      for (const auto& item : p->as_list()) r.paths.push_back(item.as_string());
    else
      r.paths.push_back(p->as_string());
  }
  r.mode = cfg.get_string(ref.scope, c, "mode");
  if (auto d = opt_value(cfg, ref.scope, c, "dtype")) r.dtype = d->as_string();
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
  return r;
}

PartitionerConfig read_partitioner(const Config& cfg, const Reference& ref) {
  PartitionerConfig p;
  const std::string c = canonical(cfg, ref);
  auto np = opt_value(cfg, ref.scope, c, "num_partitions");
  auto sub = opt_value(cfg, ref.scope, c, "model_parallel_submesh");
  if (sub) {
    for (const auto& v : sub->as_list()) p.model_parallel_submesh.push_back(v.as_int());
    p.num_partitions = 0;
  }
  if (np) {
    p.num_partitions = np->as_int();
    if (p.num_partitions < 1)
      throw gin::GinError(np->where(), "partitioning.PjitPartitioner.num_partitions = " +
                                           std::to_string(p.num_partitions) + " must be at least 1",
                          "the size of the 'model' mesh axis: 1 for data parallelism only");
  }
  if (np && sub)
    throw std::invalid_argument(
        "[partitioning] set either num_partitions or model_parallel_submesh, not both (t5x raises the same)");
  if (!np && !sub) p.num_partitions = 1;
  if (auto inv = cfg.get_optional(ref.scope, c, "mesh_invariant")) {
    if (inv->is_none())
      throw gin::GinError(inv->where(), "partitioning.PjitPartitioner.mesh_invariant is None",
                          "write True (no sum split across processes) or False (GSPMD's partial sums)");
    p.mesh_invariant = inv->as_bool();
  }
  auto rules = cfg.get_optional(ref.scope, c, "logical_axis_rules");
  if (rules && rules->kind() == ValueKind::kReference) {
    const Reference& rr = rules->as_reference();
    const std::string rc = canonical(cfg, rr);
    const std::string scope = gin::join_scope(ref.scope, rr.scope);
    if (auto a = opt_value(cfg, scope, rc, "activation_partitioning_dims")) p.activation_partitioning_dims = int(a->as_int());
    if (auto b = opt_value(cfg, scope, rc, "parameter_partitioning_dims")) p.parameter_partitioning_dims = int(b->as_int());
  }
  return p;
}

LearningRateSchedule read_schedule(const Config& cfg, const Reference& ref) {
  const std::string c = canonical(cfg, ref);
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
    return create_learning_rate_scheduler(lc);
  }
  if (c == "optax.warmup_cosine_decay_schedule")
    return warmup_cosine_decay_schedule(cfg.get_double(s, c, "init_value"), cfg.get_double(s, c, "peak_value"),
                                        cfg.get_int(s, c, "warmup_steps"), cfg.get_int(s, c, "decay_steps"),
                                        cfg.get_double(s, c, "end_value"));
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
    r.scope = gin::join_scope(scope, r.scope);
    return read_schedule(cfg, r);
  }
  double lr = v->as_double();
  return [lr](int64_t) { return lr; };
}

std::shared_ptr<const Optimizer> read_adamw(const Config& cfg, const Reference& ref,
                                            std::optional<double> clip, LearningRateSchedule* lr) {
  const std::string c = canonical(cfg, ref);
  const std::string& s = ref.scope;
  AdamWConfig a;
  a.b1 = cfg.get_double(s, c, "b1");
  a.b2 = cfg.get_double(s, c, "b2");
  a.eps = cfg.get_double(s, c, "eps");
  a.eps_root = cfg.get_double(s, c, "eps_root");
  if (c.ends_with("adamw")) a.weight_decay = cfg.get_double(s, c, "weight_decay");
  else a.weight_decay = 0.0;
  a.clip_global_norm = clip;
  auto v = opt_value(cfg, s, c, "learning_rate");
  a.lr_is_schedule = v && v->kind() == ValueKind::kReference;
  *lr = read_lr_value(cfg, s, c, "learning_rate");
  return std::make_shared<AdamW>(a);
}

}  // namespace

DatasetConfig read_dataset_config(const Config& cfg, const Reference& ref) {
  DatasetConfig d;
  const std::string c = canonical(cfg, ref);
  const std::string& s = ref.scope;
  d.mixture_or_task_name = cfg.get_string(s, c, "mixture_or_task_name");
  if (auto v = opt_value(cfg, s, c, "task_feature_lengths")) {
    seqio::SequenceLengths lens;
    for (const auto& [k, len] : v->as_dict()) {
      // Caught here, before initialisation writes anything (a length of 0
      // used to surface as a bad record of the data file).
      if (len.as_int() < 1)
        throw std::invalid_argument("[trainer] " + c + ".task_feature_lengths['" + k.as_string() +
                                    "'] must be >= 1, got " + std::to_string(len.as_int()) +
                                    " (TASK_FEATURE_LENGTHS)");
      lens[k.as_string()] = static_cast<int>(len.as_int());
    }
    d.task_feature_lengths = lens;
  }
  d.split = cfg.get_string(s, c, "split");
  d.batch_size = cfg.get_int(s, c, "batch_size");
  d.shuffle = cfg.get_bool(s, c, "shuffle");
  d.seed = opt_seed(cfg, s, c, "seed");
  d.use_cached = cfg.get_bool(s, c, "use_cached");
  d.pack = cfg.get_bool(s, c, "pack");
  // A process-wide gin binding in T5, so a process-wide default here.
  seqio::preprocessors::set_random_spans_random_roll(
      cfg.get_bool("", "preprocessors.random_spans_noise_mask", "random_roll"));
  if (d.batch_size < 1)
    throw std::invalid_argument("[trainer] utils.DatasetConfig.batch_size must be >= 1, got " +
                                std::to_string(d.batch_size));
  return d;
}

ModelConfig read_model_config(const Config& cfg, const Reference& model_ref) {
  ModelConfig m;
  const std::string c = canonical(cfg, model_ref);
  const std::string& s = model_ref.scope;
  if (c == "models.DecoderOnlyModel") {
    m.decoder_only = true;
    m.inputs_bidirectional_attention = cfg.get_bool(s, c, "inputs_bidirectional_attention");
  } else if (c != "models.EncoderDecoderModel") {
    throw std::invalid_argument("[trainer] MODEL must be @models.EncoderDecoderModel() or "
                                "@models.DecoderOnlyModel(), got @" + c + "()");
  }
  m.loss.z_loss = cfg.get_double(s, c, "z_loss");
  m.loss.label_smoothing = cfg.get_double(s, c, "label_smoothing");
  if (auto v = opt_value(cfg, s, c, "loss_normalizing_factor")) {
    if (v->kind() == ValueKind::kString) m.loss.loss_normalizing_factor = LossNormalizingFactor::parse(v->as_string());
    else m.loss.loss_normalizing_factor = LossNormalizingFactor::constant(v->as_double());
  }
  Reference module = nested_ref(cfg, model_ref, "module");
  Reference net = nested_ref(cfg, module, "config");
  const std::string nc = canonical(cfg, net);
  const std::string& ns = net.scope;
  T5Config& t = m.network;
  t.vocab_size = cfg.get_int(ns, nc, "vocab_size");
  t.emb_dim = cfg.get_int(ns, nc, "emb_dim");
  t.num_heads = cfg.get_int(ns, nc, "num_heads");
  if (m.decoder_only) {
    t.num_decoder_layers = cfg.get_int(ns, nc, "num_layers");
    t.num_encoder_layers = 0;
  } else {
    t.num_encoder_layers = cfg.get_int(ns, nc, "num_encoder_layers");
    t.num_decoder_layers = cfg.get_int(ns, nc, "num_decoder_layers");
  }
  t.head_dim = cfg.get_int(ns, nc, "head_dim");
  t.mlp_dim = cfg.get_int(ns, nc, "mlp_dim");
  t.mlp_activations.clear();
  for (const auto& a : cfg.get_list(ns, nc, "mlp_activations")) t.mlp_activations.push_back(a.as_string());
  t.dropout_rate = cfg.get_double(ns, nc, "dropout_rate");
  t.logits_via_embedding = cfg.get_bool(ns, nc, "logits_via_embedding");
  t.dtype = dtype_from_name(cfg.get_string(ns, nc, "dtype"));
  // Decoding: models.*.predict_batch_with_aux.num_decodes, decoding.beam_search.alpha.
  const std::string pc = c + ".predict_batch_with_aux";
  if (cfg.registry() && cfg.registry()->find(pc)) {
    int64_t n = cfg.get_int(s, pc, "num_decodes");
    m.decode.beam.num_decodes = n;
    m.decode.sampling.num_decodes = n;
  }
  if (cfg.registry() && cfg.registry()->find("decoding.beam_search"))
    m.decode.beam.alpha = cfg.get_double("", "decoding.beam_search", "alpha");
  return m;
}

OptimizerConfig read_optimizer_config(const Config& cfg, const Reference& model_ref) {
  OptimizerConfig o;
  Reference ref = nested_ref(cfg, model_ref, "optimizer_def");
  const std::string c = canonical(cfg, ref);
  const std::string& s = ref.scope;
  LearningRateSchedule own_lr;
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
    if (opt_value(cfg, s, c, "logical_factor_rules")) a.logical_factor_rules = standard_logical_factor_rules();
    if (auto v = opt_value(cfg, s, c, "global_norm_clip_threshold")) a.global_norm_clip_threshold = v->as_double();
    if (auto v = opt_value(cfg, s, c, "max_parameter_scale")) a.max_parameter_scale = v->as_double();
    a.skip_nan_updates = cfg.get_bool(s, c, "skip_nan_updates");
    own_lr = read_lr_value(cfg, s, c, "learning_rate");
    o.optimizer = std::make_shared<Adafactor>(a);
  } else if (c == "optimizers.adamw" || c == "optax.adamw" || c == "optimizers.adam" || c == "optax.adam") {
    o.optimizer = read_adamw(cfg, ref, std::nullopt, &own_lr);
  } else if (c == "optimizers.chain") {
    // chain([clip_by_global_norm(x), adamw(...)]): the t5x recipe for AdamW.
    std::optional<double> clip;
    std::optional<Reference> adam;
    for (const auto& item : cfg.get_list(s, c, "transformations")) {
      Reference r = item.as_reference();
      r.scope = gin::join_scope(s, r.scope);
      const std::string rc = canonical(cfg, r);
      if (rc == "optax.clip_by_global_norm") clip = cfg.get_double(r.scope, rc, "max_norm");
      else if (rc.ends_with("adamw") || rc.ends_with("adam")) adam = r;
      else throw std::invalid_argument("[trainer] unsupported transformation @" + rc + " in optimizers.chain");
    }
    if (!adam) throw std::invalid_argument("[trainer] optimizers.chain needs an adamw/adam transformation");
    o.optimizer = read_adamw(cfg, *adam, clip, &own_lr);
  } else {
    throw std::invalid_argument("[trainer] unsupported optimizer @" + c +
                                "; use adafactor.Adafactor, optimizers.adamw or optimizers.chain");
  }
  // t5x passes trainer.Trainer.learning_rate_fn(step) to Adafactor; optax
  // optimizers carry their own schedule.
  if (own_lr) {
    o.schedule = own_lr;
  } else {
    auto v = cfg.get_optional("", "trainer.Trainer", "learning_rate_fn");
    if (!v || v->is_none())
      throw std::invalid_argument("[trainer] no learning rate: bind trainer.Trainer.learning_rate_fn "
                                  "(e.g. @utils.create_learning_rate_scheduler())");
    o.schedule = read_schedule(cfg, cfg.resolve(*v).as_reference());
  }
  return o;
}

TrainRunConfig read_train_config(const Config& cfg) {
  const std::string f = "train_script.train";
  TrainRunConfig t;
  Reference model = cfg.get_reference("", f, "model");
  t.model = read_model_config(cfg, model);
  t.optimizer = read_optimizer_config(cfg, model);
  t.model_dir = cfg.get_string("", f, "model_dir");
  t.train_ds = read_dataset_config(cfg, cfg.get_reference("", f, "train_dataset_cfg"));
  if (!cfg.is_none("", f, "train_eval_dataset_cfg"))
    t.train_eval_ds = read_dataset_config(cfg, cfg.get_reference("", f, "train_eval_dataset_cfg"));
  if (!cfg.is_none("", f, "infer_eval_dataset_cfg"))
    t.infer_eval_ds = read_dataset_config(cfg, cfg.get_reference("", f, "infer_eval_dataset_cfg"));
  Reference ck = cfg.get_reference("", f, "checkpoint_cfg");
  const std::string ckc = canonical(cfg, ck);
  if (!cfg.is_none(ck.scope, ckc, "save")) {
    Reference sv = nested_ref(cfg, ck, "save");
    const std::string svc = canonical(cfg, sv);
    if (auto p = opt_value(cfg, sv.scope, svc, "period")) t.save.period = p->as_int();
    t.save.dtype = cfg.get_string(sv.scope, svc, "dtype");
    if (auto k = opt_value(cfg, sv.scope, svc, "keep")) t.save.keep = static_cast<int>(k->as_int());
  }
  if (!cfg.is_none(ck.scope, ckc, "restore")) t.restore = read_restore(cfg, nested_ref(cfg, ck, "restore"));
  t.partitioner = read_partitioner(cfg, cfg.get_reference("", f, "partitioner"));
  t.total_steps = cfg.get_int("", f, "total_steps");
  if (t.total_steps < 0)
    throw std::invalid_argument("[trainer] " + f + ".total_steps (TRAIN_STEPS) must be >= 0, got " +
                                std::to_string(t.total_steps));
  if (auto v = opt_value(cfg, "", f, "relative_steps")) t.relative_steps = v->as_int();
  if (t.relative_steps && *t.relative_steps < 0)
    throw std::invalid_argument("[trainer] " + f + ".relative_steps must be >= 0, got " +
                                std::to_string(*t.relative_steps));
  t.eval_steps = cfg.get_int("", f, "eval_steps");
  t.eval_period = cfg.get_int("", f, "eval_period");
  if (auto v = opt_value(cfg, "", f, "stats_period")) t.stats_period = v->as_int();
  if (auto v = opt_value(cfg, "", f, "random_seed")) t.random_seed = v->as_int();
  t.run_eval_before_training = cfg.get_bool("", f, "run_eval_before_training");
  if (auto v = opt_value(cfg, "", "trainer.Trainer", "num_microbatches")) t.num_microbatches = std::max<int64_t>(1, v->as_int());
  return t;
}

EvalRunConfig read_eval_config(const Config& cfg) {
  const std::string f = "eval_script.evaluate";
  EvalRunConfig e;
  Reference model = cfg.get_reference("", f, "model");
  e.model = read_model_config(cfg, model);
  e.dataset = read_dataset_config(cfg, cfg.get_reference("", f, "dataset_cfg"));
  e.restore = read_restore(cfg, cfg.get_reference("", f, "restore_checkpoint_cfg"));
  e.partitioner = read_partitioner(cfg, cfg.get_reference("", f, "partitioner"));
  e.output_dir = cfg.get_string("", f, "output_dir");
  return e;
}

InferRunConfig read_infer_config(const Config& cfg) {
  const std::string f = "infer_script.infer";
  InferRunConfig r;
  r.mode = cfg.get_string("", f, "mode");
  if (r.mode != "predict" && r.mode != "score" && r.mode != "predict_with_aux")
    throw std::invalid_argument("[infer] mode must be 'predict' or 'score', got '" + r.mode + "'");
  if (r.mode == "predict_with_aux") r.mode = "predict";
  Reference model = cfg.get_reference("", f, "model");
  r.model = read_model_config(cfg, model);
  r.dataset = read_dataset_config(cfg, cfg.get_reference("", f, "dataset_cfg"));
  r.restore = read_restore(cfg, cfg.get_reference("", f, "restore_checkpoint_cfg"));
  r.partitioner = read_partitioner(cfg, cfg.get_reference("", f, "partitioner"));
  r.output_dir = cfg.get_string("", f, "output_dir");
  r.checkpoint_period = cfg.get_int("", f, "checkpoint_period");
  r.shard_id = cfg.get_int("", f, "shard_id");
  r.num_shards = cfg.get_int("", f, "num_shards");
  return r;
}

std::unique_ptr<BaseTransformerModel> make_model(const ModelConfig& m) {
  if (m.decoder_only) return std::make_unique<DecoderOnlyModel>(m.network, m.loss);
  return std::make_unique<EncoderDecoderModel>(m.network, m.loss);
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
