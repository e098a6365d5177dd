#include "t5x/models/models.h"

#include <algorithm>
#include <stdexcept>

#include "mesh/partition_spec.h"
#include "nn/layers.h"
#include "ops/ops.h"
#include "spmd/params.h"
#include "t5x/checkpoints/model_info.h"

namespace t5x {

namespace {

Array feature(const Batch& b, const char* key, bool required = true) {
  auto it = b.find(key);
  if (it == b.end() || !it->second.valid()) {
    if (required) throw std::invalid_argument(std::string("[model] batch has no feature '") + key + "'");
    return Array();
  }
  return it->second;
}

// Host rows [batch, length] of an int array.
std::vector<int64_t> rows_of(const Array& a) { return transpose(gather_if_split(a), {"batch", "length"}).to_ints(); }

// Logits at one position per row: full [batch, length, vocab] -> [batch, vocab].
Array pick_positions(const Array& logits, const std::vector<int64_t>& index) {
  int64_t b = logits.dim("batch"), l = logits.dim("length"), v = logits.dim("vocab");
  auto f = transpose(gather_if_split(logits), {"batch", "length", "vocab"}).to_floats();
  std::vector<float> out(size_t(b * v));
  for (int64_t r = 0; r < b; ++r)
    std::copy(f.begin() + (r * l + index[size_t(r)]) * v, f.begin() + (r * l + index[size_t(r)] + 1) * v,
              out.begin() + r * v);
  return Array::from_vector(Shape{{"batch", b}, {"vocab", v}}, out);
}

Array current_tokens(const Array& dec_inputs, const std::vector<int64_t>& index) {
  auto d = rows_of(dec_inputs);
  int64_t b = dec_inputs.dim("batch"), l = dec_inputs.dim("length");
  std::vector<int32_t> t(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r) t[size_t(r)] = int32_t(d[size_t(r * l + std::min(index[size_t(r)], l - 1))]);
  return Array::from_vector(Shape{{"batch", b}}, t);
}

Array take_rows(const Array& a, const std::vector<int64_t>& rows) {
  if (!a.valid()) return a;
  return take(a, Array::from_ints(Shape{{"batch", int64_t(rows.size())}}, rows), "batch");
}

// BaseTransformerModel::decode_params (models.h). Idempotent: what is
// already in the decode layout is kept as it is (the same buffers), so a
// decode on prepared parameters copies nothing.
ParamTree decode_layout(const T5Config& cfg, const ParamTree& p) {
  ParamTree out = p;
  // The logits kernel [vocab, embed]: a few-row logits product then reads it
  // as one stream (skinny_gemm_bt) instead of 512 strided strips per column
  // block; the same sums in the same order.
  if (auto it = out.find("decoder/logits_dense/kernel"); it != out.end()) {
    Array& k = it->second;
    if (k.rank() == 2 && k.has_dim("vocab") && k.has_dim("embed") && k.names().front() != "vocab")
      k = transpose(k, {"vocab", "embed"});
  }
  // A gated MLP's wi_0 and wi_1 as one kernel (nn::fuse_gated_wi, after the
  // casts below): a decode step's two input products become one, each
  // output the same sum.
  auto fuse = [&cfg](ParamTree t) {
    return cfg.mlp_activations == std::vector<std::string>{"gelu", "linear"} ? nn::fuse_gated_wi(t) : t;
  };
  if (cfg.dtype == DType::f32) return fuse(std::move(out));
  // The encoder's and the decoder layers' kernels in the activation dtype
  // (their products, nn::in_dtype, then find them cast; the values the
  // per-use cast gives): each
  // decode would otherwise cast the encoder's and the cross-attention key /
  // value kernels once more (T5.1.1 small, batch 1, AVX2: 4.5 ms of a 230 ms
  // greedy decode), for about 2 bytes per parameter kept while decoding.
  // Only the kernels that are cast at every use (nn::in_dtype: attention
  // projections, MLP wi / wo): the logits kernel stays f32 (t5x computes the
  // logits in f32), and so do an MoE router's (routed in f32) and the linear
  // mixing kernels (used as they are).
  auto cast_at_use = [](const std::string& name) {
    if (!(name.starts_with("encoder/layers_") || name.starts_with("decoder/layers_")) || !name.ends_with("/kernel"))
      return false;
    const std::string owner = name.substr(0, name.size() - std::string("/kernel").size());
    const std::string layer = owner.substr(owner.rfind('/') + 1);
    return layer == "query" || layer == "key" || layer == "value" || layer == "out" || layer == "wi" ||
           layer.starts_with("wi_") || layer == "wo";
  };
  for (auto& [name, a] : out)
    if (a.dtype() == DType::f32 && a.rank() == 2 && cast_at_use(name)) a = cast(a, cfg.dtype);
  return fuse(std::move(out));
}

class CachedStep : public DecodeStepFn {
 public:
  // p: in the decode layout (decode_layout), as the cache was made with.
  CachedStep(const T5Config& cfg, ParamTree p, DecoderCache cache, bool enc_dec)
      : cfg_(cfg), p_(std::move(p)), cache_(std::move(cache)), enc_dec_(enc_dec) {}
  Array logits(const Array& dec_inputs, const std::vector<int64_t>& index) override {
    NoGradGuard ng;
    Array tok = current_tokens(dec_inputs, index);
    return enc_dec_ ? t5_decode_step(cfg_, p_, cache_, tok) : decoder_only_decode_step(cfg_, p_, cache_, tok);
  }
  std::vector<int64_t> greedy_tokens(const Array& dec_inputs, const std::vector<int64_t>& index) override {
    NoGradGuard ng;
    return gather_if_split(decode_step_tokens(cfg_, p_, cache_, current_tokens(dec_inputs, index), enc_dec_))
        .to_ints();
  }
  Candidates top_candidates(const Array& dec_inputs, const std::vector<int64_t>& index, int64_t keep) override {
    NoGradGuard ng;
    const ScreenedCandidateArrays sc =
        decode_step_candidates(cfg_, p_, cache_, current_tokens(dec_inputs, index), enc_dec_, keep);
    const int64_t rows = dec_inputs.dim("batch");
    const std::vector<float> value =
        transpose(gather_if_split(sc.value), {"batch", "candidates"}).to_floats();
    const int64_t width = rows ? int64_t(value.size()) / rows : 0;
    std::vector<int64_t> at;
    if (sc.index.valid()) at = transpose(gather_if_split(sc.index), {"batch", "candidates"}).to_ints();
    Candidates c;
    c.vocab = sc.vocab;
    c.index.resize(size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
      int64_t n = width;  // a screened row ends at its first index -1
      if (!at.empty()) {
        n = 0;
        while (n < width && at[size_t(r * width + n)] >= 0) ++n;
        for (int64_t i = 0; i < n; ++i) c.index[size_t(r)].push_back(int32_t(at[size_t(r * width + i)]));
        // A row of every entry: index is implied.
        if (n == sc.vocab) c.index[size_t(r)].clear();
      }
      c.value.emplace_back(value.begin() + r * width, value.begin() + r * width + n);
    }
    return c;
  }
  void gather_rows(const std::vector<int64_t>& rows) override { cache_.gather_rows(rows); }

 private:
  const T5Config& cfg_;
  ParamTree p_;
  DecoderCache cache_;
  bool enc_dec_;
};

class EncDecFullStep : public DecodeStepFn {
 public:
  EncDecFullStep(const T5Config& cfg, const ParamTree& p, Array enc) : cfg_(cfg), p_(p), enc_(std::move(enc)) {}
  Array logits(const Array& dec_inputs, const std::vector<int64_t>& index) override {
    NoGradGuard ng;
    nn::Dropout none;
    Array encoded = t5_encode(cfg_, p_, enc_, Array(), none);
    return pick_positions(t5_decode(cfg_, p_, encoded, enc_, dec_inputs, Array(), Array(), Array(), none), index);
  }
  void gather_rows(const std::vector<int64_t>& rows) override { enc_ = take_rows(enc_, rows); }

 private:
  const T5Config& cfg_;
  const ParamTree& p_;
  Array enc_;
};

class DecOnlyFullStep : public DecodeStepFn {
 public:
  DecOnlyFullStep(const T5Config& cfg, const ParamTree& p, Array ca) : cfg_(cfg), p_(p), ca_(std::move(ca)) {}
  Array logits(const Array& dec_inputs, const std::vector<int64_t>& index) override {
    NoGradGuard ng;
    nn::Dropout none;
    return pick_positions(decoder_only_forward(cfg_, p_, dec_inputs, Array(), Array(), ca_, none), index);
  }
  void gather_rows(const std::vector<int64_t>& rows) override { ca_ = take_rows(ca_, rows); }

 private:
  const T5Config& cfg_;
  const ParamTree& p_;
  Array ca_;
};

PredictOutput finish(const DecodeResult& r, bool all) {
  if (all) return {r.sequences, r.scores};
  int64_t n = r.sequences.dim("decodes");
  auto best = [&](const Array& a) {
    Array s = slice(a, "decodes", n - 1, 1);
    std::vector<Dim> d;
    for (const auto& dim : s.shape().dims())
      if (dim.name != "decodes") d.push_back(dim);
    return reshape(s, Shape(d));
  };
  return {best(r.sequences), best(r.scores)};
}

// The MoE layers' context of one forward. The jitter stream is a key of
// its own derived from the (first block's) dropout key (flax's separate
// 'jitter' rng), so a forward stays a pure function of its keys and the
// dropout masks do not move. With per-block keys (a global batch on a mesh,
// mesh_invariant = False) the jitter is one draw over the whole batch, not
// the microbatched run's; t5x's MoE gins keep jitter at 0.
MoeContext moe_context(const nn::DropoutKeys& dropout_rng, std::vector<nn::MoeMetrics>* metrics) {
  MoeContext c;
  c.train = !dropout_rng.blocks.empty();
  if (c.train) c.jitter = fold_in(dropout_rng.blocks.front(), 0x6a697474u);  // "jitt"
  c.metrics = metrics;
  return c;
}

}  // namespace

Array add_expert_losses(const Array& loss, const std::vector<nn::MoeMetrics>& layers, const LossOptions& opts,
                        const Array& z_loss, Metrics& metrics) {
  if (layers.empty()) return loss;
  // t5x _extract_diversity_metrics: the mean of each sown scalar over the layers.
  auto mean_of = [&](Array nn::MoeMetrics::*field) {
    Array s = layers.front().*field;
    for (size_t i = 1; i < layers.size(); ++i) s = add(s, layers[i].*field);
    return div(s, double(layers.size()));
  };
  const Array aux = mul(mean_of(&nn::MoeMetrics::auxiliary_loss), opts.aux_loss_factor);
  const Array rz = mul(mean_of(&nn::MoeMetrics::router_z_loss), opts.router_z_loss_factor);
  const Array total = add(add(loss, aux), rz);
  NoGradGuard ng;
  const double a = aux.item(), r = rz.item(), t = total.item();
  const double z = z_loss.valid() ? z_loss.item() : 0.0;
  metrics["experts/auxiliary_loss"] = Metric::step(a);
  metrics["experts/router_z_loss"] = Metric::step(r);
  metrics["experts/fraction_tokens_left_behind"] = Metric::step(mean_of(&nn::MoeMetrics::fraction_tokens_left_behind).item());
  metrics["experts/expert_usage"] = Metric::step(mean_of(&nn::MoeMetrics::expert_usage).item());
  metrics["experts/router_confidence"] = Metric::step(mean_of(&nn::MoeMetrics::router_confidence).item());
  // loss and its per-token forms are the total, as t5x's _compute_metrics gets it.
  const double ce = t - z - a - r;
  metrics["loss"] = Metric::step(t);
  const double nonpad = metrics.count("loss_per_nonpadding_target_token")
                            ? metrics["loss_per_nonpadding_target_token"].count : 1.0;
  const double tokens = metrics.count("loss_per_all_target_tokens") ? metrics["loss_per_all_target_tokens"].count : 1.0;
  metrics["loss_per_nonpadding_target_token"] = Metric::average(t, nonpad);
  metrics["loss_per_all_target_tokens"] = Metric::average(t, tokens);
  metrics["cross_ent_loss"] = Metric::step(ce);
  metrics["cross_ent_loss_per_all_target_tokens"] = Metric::average(ce, tokens);
  return total;
}

ParamTree BaseTransformerModel::decode_params(const ParamTree& params) const {
  NoGradGuard ng;
  ParamTree out = decode_layout(cfg_, params);
  // Made here, once per parameter set, and not in decode_layout (which
  // cached_step_fn runs on every batch): the screen reads the whole kernel.
  auto k = out.find("decoder/logits_dense/kernel");
  if (!cfg_.logits_via_embedding && k != out.end() && !out.contains(kLogitsScreenName) &&
      k->second.dtype() == DType::f32 && k->second.rank() == 2 && k->second.names().front() == "vocab" &&
      k->second.is_fully_local()) {
    LogitsScreen s = make_logits_screen(k->second);
    out[kLogitsScreenName] = std::move(s.screen);
    out[kLogitsScreenBoundsName] = std::move(s.bounds);
  }
  return out;
}

std::pair<Array, Metrics> BaseTransformerModel::loss_fn(const ParamTree& params, const Batch& batch,
                                                        nn::DropoutKeys dropout_rng) const {
  std::vector<nn::MoeMetrics> moe;
  Array lg = forward(params, batch, dropout_rng, &moe);
  LossOutput o = t5x_loss(lg, batch, loss_);
  Metrics m = compute_base_metrics(lg, feature(batch, "decoder_target_tokens"), o.weights, o,
                                   feature(batch, "decoder_segment_ids", false));
  return {add_expert_losses(o.loss, moe, loss_, o.z_loss, m), m};
}

Array BaseTransformerModel::score_batch(const ParamTree& params, const Batch& batch) const {
  NoGradGuard ng;
  Array lg = logits(params, batch);
  Array targets = feature(batch, "decoder_target_tokens");
  Array w = feature(batch, "decoder_loss_weights", false);
  w = w.valid() ? cast(w, DType::f32) : cast(gt(targets, 0.0), DType::f32);
  CrossEntropy ce = softmax_cross_entropy_with_integer_labels(lg, targets, 0.0, 0.0);
  return sum(mul(neg(ce.loss), w), {"length"});
}

Array EncoderDecoderModel::forward(const ParamTree& p, const Batch& b, const nn::DropoutKeys& rng,
                                  std::vector<nn::MoeMetrics>* moe_metrics) const {
  nn::Dropout drop(cfg_.dropout_rate, rng);
  const MoeContext moe = moe_context(rng, moe_metrics);
  Array enc_tokens = feature(b, "encoder_input_tokens");
  Array enc_seg = feature(b, "encoder_segment_ids", false), dec_seg = feature(b, "decoder_segment_ids", false);
  Array encoded = t5_encode(cfg_, p, enc_tokens, enc_seg, drop, &moe);
  return t5_decode(cfg_, p, encoded, enc_tokens, feature(b, "decoder_input_tokens"),
                   feature(b, "decoder_target_tokens", false), enc_seg, dec_seg, drop, &moe);
}

std::unique_ptr<DecodeStepFn> EncoderDecoderModel::cached_step_fn(const ParamTree& p, const Array& enc_tokens,
                                                                  int64_t max_length) const {
  NoGradGuard ng;
  nn::Dropout none;
  const ParamTree lp = decode_layout(cfg_, p);  // one layout for the encoder, the cache and the steps
  Array encoded = t5_encode(cfg_, lp, enc_tokens, Array(), none);
  return std::make_unique<CachedStep>(cfg_, lp, t5_init_decoder_cache(cfg_, lp, encoded, enc_tokens, max_length),
                                      true);
}

std::unique_ptr<DecodeStepFn> EncoderDecoderModel::full_forward_step_fn(const ParamTree& p,
                                                                        const Array& enc_tokens) const {
  return std::make_unique<EncDecFullStep>(cfg_, p, enc_tokens);
}

PredictOutput EncoderDecoderModel::predict_batch(const ParamTree& p, const Batch& b, const DecodeOptions& o) const {
  Array shape_src = feature(b, "decoder_input_tokens", false);
  if (!shape_src.valid()) shape_src = feature(b, "decoder_target_tokens");
  Array inputs = Array::zeros(Shape{{"batch", shape_src.dim("batch")}, {"length", shape_src.dim("length")}}, DType::i32);
  auto step = cached_step_fn(p, feature(b, "encoder_input_tokens"), shape_src.dim("length"));
  DecodeResult r = o.method == DecodeOptions::Method::temperature_sample
                       ? temperature_sample(inputs, {}, *step, o.sampling)
                       : beam_search(inputs, *step, o.beam);
  return finish(r, o.return_all_decodes);
}

Array DecoderOnlyModel::forward(const ParamTree& p, const Batch& b, const nn::DropoutKeys& rng,
                               std::vector<nn::MoeMetrics>* moe_metrics) const {
  nn::Dropout drop(cfg_.dropout_rate, rng);
  const MoeContext moe = moe_context(rng, moe_metrics);
  return decoder_only_forward(cfg_, p, feature(b, "decoder_input_tokens"), feature(b, "decoder_target_tokens", false),
                              feature(b, "decoder_segment_ids", false),
                              bidirectional_ ? feature(b, "decoder_causal_attention", false) : Array(), drop, &moe);
}

std::unique_ptr<DecodeStepFn> DecoderOnlyModel::cached_step_fn(const ParamTree& p, const Array& prompt,
                                                               const Array& causal_attention,
                                                               const std::vector<int64_t>& start) const {
  NoGradGuard ng;
  Array idx = Array::from_ints(Shape{{"batch", int64_t(start.size())}}, start);
  const ParamTree lp = decode_layout(cfg_, p);  // one layout for the prefill and the steps
  return std::make_unique<CachedStep>(
      cfg_, lp, decoder_only_prefill(cfg_, lp, prompt, causal_attention, idx, prompt.dim("length")), false);
}

std::unique_ptr<DecodeStepFn> DecoderOnlyModel::full_forward_step_fn(const ParamTree& p,
                                                                     const Array& causal_attention) const {
  return std::make_unique<DecOnlyFullStep>(cfg_, p, causal_attention);
}

PredictOutput DecoderOnlyModel::predict_batch(const ParamTree& p, const Batch& b, const DecodeOptions& o) const {
  Array dit = feature(b, "decoder_input_tokens");
  Array ca = feature(b, "decoder_causal_attention", false);
  int64_t B = dit.dim("batch"), L = dit.dim("length");
  auto tok = rows_of(dit);
  std::vector<int64_t> plen(static_cast<size_t>(B), 1);
  if (ca.valid()) {
    auto c = rows_of(ca);
    for (int64_t r = 0; r < B; ++r) {
      int64_t n = 0;
      for (int64_t j = 0; j < L; ++j) n += c[size_t(r * L + j)] != 0;
      plen[size_t(r)] = std::max<int64_t>(1, n);
    }
  }
  std::vector<int64_t> prompt(size_t(B * L), 0), inputs(size_t(B * L), 0), start(static_cast<size_t>(B));
  for (int64_t r = 0; r < B; ++r) {
    for (int64_t j = 0; j < plen[size_t(r)]; ++j) prompt[size_t(r * L + j)] = tok[size_t(r * L + j)];
    for (int64_t j = 0; j + 1 < plen[size_t(r)]; ++j) inputs[size_t(r * L + j)] = tok[size_t(r * L + j + 1)];
    start[size_t(r)] = plen[size_t(r)] - 1;
  }
  Shape s{{"batch", B}, {"length", L}};
  auto step = cached_step_fn(p, Array::from_ints(s, prompt), bidirectional_ ? ca : Array(), start);
  Array in = Array::from_ints(s, inputs);
  DecodeResult r = o.method == DecodeOptions::Method::beam_search ? beam_search(in, *step, o.beam)
                                                                  : temperature_sample(in, start, *step, o.sampling);
  // Drop the prompt: row b's continuation starts at target position P_b - 1.
  int64_t n = r.sequences.dim("decodes");
  auto seq = transpose(r.sequences, {"batch", "decodes", "length"}).to_ints();
  std::vector<int64_t> cont(seq.size(), 0);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t d = 0; d < n; ++d)
      for (int64_t j = start[size_t(bb)]; j < L; ++j)
        cont[size_t((bb * n + d) * L + j - start[size_t(bb)])] = seq[size_t((bb * n + d) * L + j)];
  r.sequences = Array::from_ints(r.sequences.shape(), cont);
  return finish(r, o.return_all_decodes);
}

std::string partition_spec_text(const PartitionSpec& spec) {
  std::string s = "(";
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    if (i) s += ", ";
    const auto& axes = spec.dims[i];
    if (axes.empty()) {
      s += "None";
    } else if (axes.size() == 1) {
      s += "'" + axes[0] + "'";
    } else {
      s += "(";
      for (size_t k = 0; k < axes.size(); ++k) s += (k ? ", '" : "'") + axes[k] + "'";
      s += ")";
    }
  }
  if (spec.dims.size() == 1) s += ",";
  return s + ")";
}

std::string model_info(const nn::ParamSpecs& specs, const LogicalAxisRules& rules, const MeshDesc* mesh) {
  std::vector<ModelInfoEntry> entries;
  for (const auto& s : specs) {
    ModelInfoEntry e;
    e.name = s.name;
    e.shape = s.shape.sizes();
    e.logical_axes = s.shape.names();
    PartitionSpec ps = logical_to_mesh_axes(e.logical_axes, rules);
    if (mesh) {
      NamedShape ns;
      for (const auto& d : s.shape.dims()) ns.push_back({d.name, d.size});
      try {
        replicate_indivisible_kv_heads(*mesh, ns, ps);
        validate_partition_spec(*mesh, ns, ps);
      } catch (const std::invalid_argument& e) {
        spmd::throw_param_sharding_error(s.name, e);
      }
    }
    e.partition_spec = partition_spec_text(ps);
    e.dtype = dtype_name(s.dtype);
    entries.push_back(std::move(e));
  }
  return format_model_info(entries);
}

}  // namespace t5x
