#include "t5x/models/gin_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "t5x/gin/registry.h"

namespace t5x {

namespace {

// `binding` (e.g. "network.T5Config.dtype") names the gin key in the error.
DType dtype_from(const std::string& s, const std::string& binding) {
  if (s == "float32") return DType::f32;
  if (s == "bfloat16") return DType::bf16;
  if (s == "float16") return DType::f16;
  throw std::invalid_argument("[model_from_gin] " + binding + " = '" + s +
                              "': unsupported activation dtype\n  hint: use 'float32', 'bfloat16' or 'float16'");
}

// num_kv_heads / encoder_num_kv_heads: None -> 0 (multi-head); else a
// positive divisor of num_heads, checked at the binding.
int64_t read_kv_heads(const gin::Config& cfg, const std::string& scope, const std::string& net,
                      const std::string& param, int64_t num_heads) {
  auto v = cfg.get_optional(scope, net, param);
  if (!v || v->is_none()) return 0;
  const int64_t g = cfg.get_int(scope, net, param);
  if (g <= 0 || num_heads % g != 0)
    throw gin::GinError(v->where(),
                        net + "." + param + " = " + std::to_string(g) + " must divide num_heads = " +
                            std::to_string(num_heads),
                        "use a divisor of num_heads (1: multi-query; num_heads or None: multi-head)");
  return g;
}

// The Mixture-of-Experts parameters of network.T5Config /
// network.TransformerConfig (this port puts them on the config; flaxformer
// spreads them over SparseEncoder / MoeLayer / routers, moe.md 2.5-2.6). A
// bad value throws GinError at its binding.
void read_moe(const gin::Config& cfg, const std::string& ns, const std::string& nc, bool decoder_only, T5Config& t) {
  auto where = [&](const char* param) {
    auto v = cfg.get_optional(ns, nc, param);
    return v ? v->where() : gin::SourceLocation{};
  };
  auto bad = [&](const char* param, const std::string& msg, const std::string& hint) {
    throw gin::GinError(where(param), nc + "." + param + " " + msg, hint);
  };
  nn::MoeConfig& m = t.moe;
  m.num_experts = cfg.get_int(ns, nc, "num_experts");
  if (m.num_experts < 0) bad("num_experts", "= " + std::to_string(m.num_experts) + " is negative", "use 0 (dense) or E > 0");
  auto layers = [&](const char* param, int64_t num_layers) {
    const int64_t n = cfg.get_int(ns, nc, param);
    if (n < 0 || n > num_layers)
      bad(param, "= " + std::to_string(n) + " is not in 0 .. " + std::to_string(num_layers) + " (the stack's layers)",
          "give how many of the stack's layers have an MoE feed-forward");
    if (n > 0 && m.num_experts == 0)
      bad(param, "= " + std::to_string(n) + " but num_experts = 0", "set network config num_experts (NUM_EXPERTS)");
    return n;
  };
  auto layout = [&](const char* param, int64_t num_layers, int64_t n) {
    const std::string name = cfg.get_string(ns, nc, param);
    T5Config::SparseLayout l{};
    try {
      l = parse_sparse_layout(name);
      (void)is_sparse_layer(0, num_layers, n, l);
    } catch (const std::invalid_argument& e) {
      bad(param, "= '" + name + "': " + std::string(e.what()).substr(std::string("[T5Config] ").size()),
          "MIXED (every num_layers/n-th layer) needs num_layers % n == 0; BOTTOM, MIDDLE and TOP take any n");
    }
    return l;
  };
  if (decoder_only) {
    t.num_decoder_sparse_layers = layers("num_sparse_layers", t.num_decoder_layers);
    t.decoder_sparse_layout = layout("sparse_layout", t.num_decoder_layers, t.num_decoder_sparse_layers);
  } else {
    t.num_encoder_sparse_layers = layers("num_encoder_sparse_layers", t.num_encoder_layers);
    t.num_decoder_sparse_layers = layers("num_decoder_sparse_layers", t.num_decoder_layers);
    t.encoder_sparse_layout = layout("encoder_sparse_layout", t.num_encoder_layers, t.num_encoder_sparse_layers);
    t.decoder_sparse_layout = layout("decoder_sparse_layout", t.num_decoder_layers, t.num_decoder_sparse_layers);
  }
  if (!cfg.is_none(ns, nc, "expert_mlp_dim")) m.expert_mlp_dim = cfg.get_int(ns, nc, "expert_mlp_dim");
  const std::string router = cfg.get_string(ns, nc, "router_type");
  if (router == "tokens_choose_masked") m.router = nn::RouterType::kTokensChooseMasked;
  else if (router == "tokens_choose_scatter") m.router = nn::RouterType::kTokensChooseScatter;
  else if (router == "experts_choose_masked") m.router = nn::RouterType::kExpertsChooseMasked;
  else
    bad("router_type", "= '" + router + "' is not a router",
        "use 'tokens_choose_masked' (Switch, GShard-style top-k), 'tokens_choose_scatter' or 'experts_choose_masked'");
  m.num_selected_experts = cfg.get_int(ns, nc, "num_selected_experts");
  if (m.num_experts > 0 && (m.num_selected_experts < 1 || m.num_selected_experts > m.num_experts))
    bad("num_selected_experts", "= " + std::to_string(m.num_selected_experts) + " is not in 1 .. num_experts = " +
        std::to_string(m.num_experts), "Switch routes each token to 1 expert, GShard-style top-2 to 2");
  if (m.router == nn::RouterType::kExpertsChooseMasked && t.num_decoder_sparse_layers > 0)
    bad("router_type", "= 'experts_choose_masked' with decoder sparse layers: expert-choice routing sees future tokens",
        "use it in encoder-only sparse configs (decoder sparse layers = 0), or a tokens-choose router");
  m.batch_prioritized_routing = cfg.get_bool(ns, nc, "batch_prioritized_routing");
  m.jitter_noise = cfg.get_double(ns, nc, "jitter_noise");
  m.ignore_padding_tokens = cfg.get_bool(ns, nc, "ignore_padding_tokens");
  m.train_capacity_factor = cfg.get_double(ns, nc, "train_capacity_factor");
  m.eval_capacity_factor = cfg.get_double(ns, nc, "eval_capacity_factor");
  // nan, 0 and negative factors all gave min_expert_capacity silently.
  for (const auto& [param, f] : {std::pair{"train_capacity_factor", m.train_capacity_factor},
                                 std::pair{"eval_capacity_factor", m.eval_capacity_factor}})
    if (!(f > 0) || !std::isfinite(f))
      bad(param, "= " + gin::Value::real(f).to_gin() + " must be a finite number > 0",
          "t5x's MoE gins use 1.25 for training and 2.0 for evaluation");
  if (!(m.jitter_noise >= 0) || !std::isfinite(m.jitter_noise))
    bad("jitter_noise", "= " + gin::Value::real(m.jitter_noise).to_gin() + " must be finite and >= 0",
        "0 (t5x's MoE gins) or a small multiplicative noise such as 0.01");
  m.min_expert_capacity = cfg.get_int(ns, nc, "min_expert_capacity");
  m.max_group_size = cfg.get_int(ns, nc, "group_size");
  if (m.max_group_size <= 0) bad("group_size", "= " + std::to_string(m.max_group_size) + " must be positive", "flaxformer uses 4096");
  m.strict_group_size = cfg.get_bool(ns, nc, "strict_group_size");
  m.num_expert_partitions = cfg.get_int(ns, nc, "num_expert_partitions");
  if (m.num_expert_partitions <= 0)
    bad("num_expert_partitions", "= " + std::to_string(m.num_expert_partitions) + " must be positive",
        "t5x's pretrain.gin uses NUM_EXPERT_PARTITIONS = NUM_EXPERTS");
  m.expert_init_scale = cfg.get_double(ns, nc, "expert_init_scale");
  // A negative or nan scale drew nan kernels, saved as checkpoint_0.
  if (!(m.expert_init_scale > 0) || !std::isfinite(m.expert_init_scale))
    bad("expert_init_scale", "= " + gin::Value::real(m.expert_init_scale).to_gin() + " must be a finite number > 0",
        "flaxformer's default is 1.0 (EXPERT_INIT_SCALE)");
  m.dtype = dtype_from(cfg.get_string(ns, nc, "expert_dtype"), nc + ".expert_dtype");
}

bool registered(const gin::Config& cfg, const std::string& name) {
  return cfg.registry() && cfg.registry()->by_name(name);
}

// encoder_mixing_length and the hybrid attention layers (config.h); a bad
// value throws GinError at its binding.
void read_mixing(const gin::Config& cfg, const std::string& ns, const std::string& nc, T5Config& t) {
  auto bad = [&](const char* param, const std::string& msg, const std::string& hint) {
    auto v = cfg.get_optional(ns, nc, param);
    throw gin::GinError(v ? v->where() : gin::SourceLocation{}, nc + "." + param + " " + msg, hint);
  };
  const bool mixing = t.encoder_mixing != T5Config::Mixing::kAttention;
  if (!cfg.is_none(ns, nc, "encoder_mixing_length")) t.encoder_mixing_length = cfg.get_int(ns, nc, "encoder_mixing_length");
  if (t.encoder_mixing == T5Config::Mixing::kLinear && t.encoder_mixing_length <= 0)
    bad("encoder_mixing_length", "= " + std::to_string(t.encoder_mixing_length) + " must be positive with encoder_mixing = 'linear'",
        "set it to the encoder length (TASK_FEATURE_LENGTHS['inputs']): W_seq is [length, length]");
  const int64_t n = cfg.get_int(ns, nc, "num_encoder_attention_layers");
  if (n < 0 || n > t.num_encoder_layers)
    bad("num_encoder_attention_layers", "= " + std::to_string(n) + " is not in 0 .. " +
        std::to_string(t.num_encoder_layers) + " (the encoder's layers)",
        "give how many encoder layers keep self-attention (Sparse Mixer base: 4 of 14)");
  if (n > 0 && !mixing)
    bad("num_encoder_attention_layers", "= " + std::to_string(n) + " but encoder_mixing = 'attention'",
        "set encoder_mixing = 'fourier' or 'linear': the other encoder layers mix");
  t.num_encoder_attention_layers = n;
  const std::string name = cfg.get_string(ns, nc, "encoder_attention_layout");
  try {
    t.encoder_attention_layout = parse_sparse_layout(name);
    (void)is_sparse_layer(0, t.num_encoder_layers, n, t.encoder_attention_layout);
  } catch (const std::invalid_argument& e) {
    bad("encoder_attention_layout", "= '" + name + "': " + std::string(e.what()).substr(std::string("[T5Config] ").size()),
        "TOP (Sparse Mixer), BOTTOM, MIDDLE, or MIXED with num_encoder_layers % n == 0");
  }
}

// scalable_t5's T5Config: T5's fields, a relative position table in each
// layer, and its checkpoint layout: attention kernels with separate heads and
// kv dims, stacked over the layers with scan_layers (param_layout.h).
void read_scalable(const gin::Config& cfg, const std::string& ns, const std::string& nc, T5Config& t) {
  t.relpos_per_layer = true;
  t.scalable_checkpoint.on = true;
  t.scalable_checkpoint.scan_layers = cfg.get_bool(ns, nc, "scan_layers");
  const int64_t axis = cfg.get_int(ns, nc, "param_scan_axis");
  if (axis != 0 && axis != 1)
    throw gin::GinError(cfg.get_optional(ns, nc, "param_scan_axis")->where(),
                        nc + ".param_scan_axis = " + std::to_string(axis) +
                            " is not a dim every layer parameter has (the norms' scales are [embed])",
                        "use 1 (its default: [embed, layers, ...]) or 0 ([layers, ...])");
  t.scalable_checkpoint.param_scan_axis = int(axis);
  const std::string remat = cfg.get_string(ns, nc, "remat_policy");
  if (remat != "none" && remat != "minimal" && remat != "full")
    throw gin::GinError(cfg.get_optional(ns, nc, "remat_policy")->where(),
                        nc + ".remat_policy = '" + remat + "' is not a policy",
                        "use 'none', 'minimal' or 'full' (t5x.cpp keeps what its backward needs either way)");
}

void read_network(const gin::Config& cfg, const gin::Reference& net, bool decoder_only, T5Config& t) {
  const std::string nc = canonical_name(cfg, net);
  const std::string& ns = net.scope;
  t.vocab_size = cfg.get_int(ns, nc, "vocab_size");
  t.emb_dim = cfg.get_int(ns, nc, "emb_dim");
  t.num_heads = cfg.get_int(ns, nc, "num_heads");
  if (decoder_only) {
    t.num_encoder_layers = 0;
    t.num_decoder_layers = cfg.get_int(ns, nc, "num_layers");
  } else {
    t.num_encoder_layers = cfg.get_int(ns, nc, "num_encoder_layers");
    t.num_decoder_layers = cfg.get_int(ns, nc, "num_decoder_layers");
  }
  t.head_dim = cfg.get_int(ns, nc, "head_dim");
  t.mlp_dim = cfg.get_int(ns, nc, "mlp_dim");
  t.mlp_activations.clear();
  for (const auto& a : cfg.get_list(ns, nc, "mlp_activations")) {
    // Found only in the first forward before, after checkpoint_0 was written.
    const std::string& name = a.as_string();
    if (name != "gelu" && name != "relu" && name != "silu" && name != "swish" && name != "linear")
      throw gin::GinError(a.where(), nc + ".mlp_activations: '" + name + "' is not an activation",
                          "use 'gelu', 'relu', 'silu' (or 'swish') or 'linear', e.g. ('gelu', 'linear') for "
                          "T5.1.1's gated GELU");
    t.mlp_activations.push_back(name);
  }
  t.dropout_rate = cfg.get_double(ns, nc, "dropout_rate");
  t.logits_via_embedding = cfg.get_bool(ns, nc, "logits_via_embedding");
  t.dtype = dtype_from(cfg.get_string(ns, nc, "dtype"), nc + ".dtype");
  if (nc == "scalable_t5.network.T5Config") return read_scalable(cfg, ns, nc, t);
  t.num_kv_heads = read_kv_heads(cfg, ns, nc, "num_kv_heads", t.num_heads);
  t.relpos_per_layer = cfg.get_bool(ns, nc, "relpos_per_layer");
  if (!decoder_only) t.scale_attn_logits = cfg.get_bool(ns, nc, "scale_attn_logits");
  read_moe(cfg, ns, nc, decoder_only, t);
  if (!decoder_only) {
    t.encoder_num_kv_heads = read_kv_heads(cfg, ns, nc, "encoder_num_kv_heads", t.num_heads);
    auto v = cfg.get_optional(ns, nc, "encoder_mixing");
    const std::string mixing = v ? cfg.get_string(ns, nc, "encoder_mixing") : "attention";
    if (mixing == "fourier") t.encoder_mixing = T5Config::Mixing::kFourier;
    else if (mixing == "linear") t.encoder_mixing = T5Config::Mixing::kLinear;
    else if (mixing != "attention")
      throw gin::GinError(v->where(), nc + ".encoder_mixing = '" + mixing + "' is not a mixing sublayer",
                          "use 'attention' (T5), 'fourier' (FNet) or 'linear' (Sparse Mixer)");
    read_mixing(cfg, ns, nc, t);
  }
}

// The model's decode_fn (t5x: EncoderDecoderModel defaults to
// decoding.beam_search, DecoderOnlyModel to decoding.temperature_sample) and
// both functions' arguments. decode_fn is a function reference that
// predict_batch calls outside any scope: its arguments are read in the
// reference's own scope (unscoped for a plain @decoding.beam_search).
void read_decoding(const gin::Config& cfg, const std::string& model, const std::string& scope, DecodeOptions& d) {
  const std::string pc = model + ".predict_batch_with_aux";
  if (registered(cfg, pc)) {
    d.beam.num_decodes = d.sampling.num_decodes = cfg.get_int(scope, pc, "num_decodes");
    if (cfg.get_bool(scope, pc, "return_all_decodes"))
      throw gin::GinError(cfg.get_optional(scope, pc, "return_all_decodes")->where(),
                          pc + ".return_all_decodes = True is not supported: infer and eval write one prediction "
                               "per example (the best decode)",
                          "leave it False; num_decodes still sets the beams or samples searched");
  }
  std::string fn_scope;
  if (auto v = cfg.get_optional(scope, model, "decode_fn"); v && !cfg.resolve(*v).is_none()) {
    const gin::Value f = cfg.resolve(*v);
    const std::string name = f.kind() == gin::ValueKind::kReference ? canonical_name(cfg, f.as_reference()) : "";
    if (name == "decoding.beam_search") d.method = DecodeOptions::Method::beam_search;
    else if (name == "decoding.temperature_sample") d.method = DecodeOptions::Method::temperature_sample;
    else
      throw gin::GinError(v->where(), model + ".decode_fn is " + f.describe() + ", not a decoding function",
                          "write @decoding.beam_search or @decoding.temperature_sample");
    fn_scope = f.as_reference().scope;
  }
  // A value out of range is named at its binding (nan passed every
  // comparison: a nan temperature decoded empty predictions).
  auto require = [&](const char* fn, const char* param, bool ok, const std::string& got, const std::string& range) {
    if (ok) return;
    auto v = cfg.get_optional(fn_scope, fn, param);
    throw gin::GinError(v ? v->where() : gin::SourceLocation{},
                        std::string(fn) + "." + param + " = " + got + " is out of range", "write " + range);
  };
  auto num = [](double x) { return gin::Value::real(x).to_gin(); };
  if (registered(cfg, "decoding.beam_search")) {
    d.beam.alpha = cfg.get_double(fn_scope, "decoding.beam_search", "alpha");
    d.beam.eos_id = cfg.get_int(fn_scope, "decoding.beam_search", "eos_id");
    require("decoding.beam_search", "alpha", std::isfinite(d.beam.alpha), num(d.beam.alpha),
            "a finite brevity penalty exponent (t5x: 0.6)");
  }
  const char* ts = "decoding.temperature_sample";
  if (registered(cfg, ts)) {
    d.sampling.temperature = cfg.get_double(fn_scope, ts, "temperature");
    d.sampling.topk = cfg.get_int(fn_scope, ts, "topk");
    d.sampling.topp = cfg.get_double(fn_scope, ts, "topp");
    d.sampling.eos_id = cfg.get_int(fn_scope, ts, "eos_id");
    if (!cfg.is_none(fn_scope, ts, "max_decode_steps"))
      d.sampling.max_decode_steps = cfg.get_int(fn_scope, ts, "max_decode_steps");
    const SamplingOptions& o = d.sampling;
    require(ts, "temperature", std::isfinite(o.temperature) && o.temperature >= 0, num(o.temperature),
            "a finite temperature >= 0 (0: greedy)");
    require(ts, "topk", o.topk >= 0, std::to_string(o.topk), "topk >= 0 (0: no top-k cut)");
    require(ts, "topp", o.topp >= 0 && o.topp <= 1, num(o.topp), "topp in [0, 1] (0: no nucleus cut)");
    if (o.topk > 0 && o.topp > 0)
      throw gin::GinError(cfg.get_optional(fn_scope, ts, "topp")->where(),
                          std::string(ts) + ": topk = " + std::to_string(o.topk) + " and topp = " + num(o.topp) +
                              " are mutually exclusive (as in t5x)",
                          "set topk = 0 to sample by topp, or topp = 0.0 to sample by topk");
  }
}

}  // namespace

std::string canonical_name(const gin::Config& cfg, const gin::Reference& ref) {
  if (cfg.registry())
    if (const auto* spec = cfg.registry()->by_name(ref.name)) return spec->name;
  return ref.name;
}

gin::Reference nested_reference(const gin::Config& cfg, const gin::Reference& outer, const std::string& param,
                                const std::vector<std::string>& kinds) {
  const std::string oc = canonical_name(cfg, outer);
  gin::Reference r = cfg.get_reference(outer.scope, oc, param);
  // Another configurable in its place would be read for parameters it does
  // not have ("no value bound for network.Transformer.vocab_size").
  if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), canonical_name(cfg, r)) == kinds.end()) {
    std::string want;
    for (const std::string& k : kinds) want += (want.empty() ? "@" : " or @") + k + "()";
    throw gin::GinError(cfg.get_optional(outer.scope, oc, param)->where(),
                        oc + "." + param + " = " + r.str() + " is not what t5x passes there",
                        "write " + oc + "." + param + " = " + want);
  }
  // t5x passes these objects (a module, a config, an optimizer): `@x` would
  // hand Python the class and fail there, so a config written here would not
  // run under t5x.
  if (!r.call)
    throw gin::GinError(cfg.get_optional(outer.scope, oc, param)->where(),
                        oc + "." + param + " = " + r.str() + " passes the configurable itself, not an instance",
                        "write " + r.str() + "() (gin calls it), as t5x's configs do");
  r.scope = gin::reference_scope(outer.scope, r.scope);
  return r;
}

ModelConfig read_model_config(const gin::Config& cfg, const gin::Reference& model_ref) {
  ModelConfig m;
  const std::string c = canonical_name(cfg, model_ref);
  const std::string& s = model_ref.scope;
  const bool moe = c == "models.MoeEncoderDecoderModel" || c == "models.MoeDecoderOnlyModel";
  if (c == "models.DecoderOnlyModel" || c == "models.MoeDecoderOnlyModel") {
    m.decoder_only = true;
    m.inputs_bidirectional_attention = cfg.get_bool(s, c, "inputs_bidirectional_attention");
  } else if (c != "models.EncoderDecoderModel" && c != "models.MoeEncoderDecoderModel") {
    throw std::invalid_argument("[model_from_gin] MODEL must be @models.EncoderDecoderModel(), "
                                "@models.DecoderOnlyModel() or their Moe* versions, got @" + c + "()");
  }
  if (moe) {
    // t5x contrib/moe MoeEncoderDecoderModel / MoeDecoderOnlyModel (defaults 0.0).
    m.loss.aux_loss_factor = cfg.get_double(s, c, "aux_loss_factor");
    m.loss.router_z_loss_factor = cfg.get_double(s, c, "router_z_loss_factor");
  }
  m.loss.z_loss = cfg.get_double(s, c, "z_loss");
  m.loss.label_smoothing = cfg.get_double(s, c, "label_smoothing");
  auto nonnegative = [&](const char* param, double x, const char* hint) {
    if (x >= 0 && std::isfinite(x)) return;
    auto v = cfg.get_optional(s, c, param);
    throw gin::GinError(v ? v->where() : gin::SourceLocation{},
                        c + "." + param + " = " + gin::Value::real(x).to_gin() + " must be finite and >= 0", hint);
  };
  // A negative factor trained toward a negative loss, exit 0.
  nonnegative("z_loss", m.loss.z_loss, "t5x's default is 1e-4 (Z_LOSS); 0 turns it off");
  if (moe) {
    nonnegative("aux_loss_factor", m.loss.aux_loss_factor, "t5x's MoE gins use 0.01 (AUX_LOSS_FACTOR)");
    nonnegative("router_z_loss_factor", m.loss.router_z_loss_factor, "t5x's MoE gins use 0.0001");
  }
  if (auto v = cfg.get_optional(s, c, "loss_normalizing_factor"); v && !v->is_none()) {
    if (v->kind() == gin::ValueKind::kString) {
      m.loss.loss_normalizing_factor = LossNormalizingFactor::parse(v->as_string());
    } else {
      const double f = v->as_double();
      if (!(f > 0) || !std::isfinite(f))
        throw gin::GinError(v->where(), c + ".loss_normalizing_factor = " + gin::Value::real(f).to_gin() +
                                            " must be a finite number > 0",
                            "None (the sum), a positive constant, or a strategy such as "
                            "'NUM_REAL_TARGET_TOKENS'");
      m.loss.loss_normalizing_factor = LossNormalizingFactor::constant(f);
    }
  }
  // network.Transformer(config=T5Config) / network.DecoderWrapper(config=TransformerConfig),
  // or scalable_t5's Transformer and T5Config.
  const std::vector<std::string> module =
      m.decoder_only ? std::vector<std::string>{"network.DecoderWrapper"}
                     : std::vector<std::string>{"network.Transformer", "scalable_t5.network.Transformer"};
  const gin::Reference net = nested_reference(cfg, model_ref, "module", module);
  const bool scalable = canonical_name(cfg, net) == "scalable_t5.network.Transformer";
  const std::vector<std::string> config = {m.decoder_only ? "network.TransformerConfig"
                                           : scalable     ? "scalable_t5.network.T5Config"
                                                          : "network.T5Config"};
  read_network(cfg, nested_reference(cfg, net, "config", config), m.decoder_only, m.network);
  read_decoding(cfg, c, s, m.decode);
  const char* vocab_param = m.decoder_only ? "vocabulary" : "output_vocabulary";
  if (auto v = cfg.get_optional(s, c, vocab_param); v && cfg.resolve(*v).kind() == gin::ValueKind::kReference) {
    gin::Reference vr = cfg.resolve(*v).as_reference();
    vr.scope = gin::reference_scope(s, vr.scope);
    if (canonical_name(cfg, vr) == "seqio.SentencePieceVocabulary") {
      m.vocabulary_file = cfg.get_path(vr.scope, "seqio.SentencePieceVocabulary", "sentencepiece_model_file");
      m.vocabulary_extra_ids = int(cfg.get_int(vr.scope, "seqio.SentencePieceVocabulary", "extra_ids"));
    }
  }
  return m;
}

ModelConfig read_model_config(const gin::Config& cfg) {
  if (cfg.find_macro("MODEL")) {
    gin::Value v = cfg.macro_value("MODEL");
    if (v.kind() != gin::ValueKind::kReference)
      throw gin::GinError(v.where(), "MODEL is " + v.describe(),
                          "write MODEL = @models.EncoderDecoderModel() or @models.DecoderOnlyModel()");
    if (!v.as_reference().call)
      throw gin::GinError(v.where(), "MODEL = " + v.as_reference().str() + " is the model class, not a model",
                          "write MODEL = " + v.as_reference().str() + "() (gin calls it), as t5x's configs do");
    return read_model_config(cfg, v.as_reference());
  }
  for (const char* script : {"train_script.train", "eval_script.evaluate", "infer_script.infer"})
    if (cfg.has("", script, "model")) return read_model_config(cfg, cfg.get_reference("", script, "model"));
  throw std::invalid_argument("[model_from_gin] the gin files configure no model: include a "
                              "configs/models/*.gin file (it sets MODEL = @models.EncoderDecoderModel())");
}

std::unique_ptr<BaseTransformerModel> make_model(const ModelConfig& m) {
  if (m.decoder_only) return std::make_unique<DecoderOnlyModel>(m.network, m.loss, m.inputs_bidirectional_attention);
  return std::make_unique<EncoderDecoderModel>(m.network, m.loss);
}

}  // namespace t5x
