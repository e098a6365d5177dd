#include "t5x/models/network.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype_bf16.h"
#include "nn/constraint.h"
#include "nn/layers.h"
#include "nn/relpos.h"
#include "ops/fourier.h"
#include "ops/ops.h"

namespace t5x {

namespace {

std::string layer_name(const char* stack, int64_t i) { return std::string(stack) + "/layers_" + std::to_string(i); }

Array positive(const Array& tokens) { return tokens.valid() ? gt(tokens, 0.0) : Array(); }

void check_tokens(const Array& t, const char* what) {
  if (!t.valid() || t.rank() != 2 || !t.has_dim("batch") || !t.has_dim("length") || !is_integer(t.dtype()))
    throw std::invalid_argument(std::string("[t5x model] ") + what + " must be int32/int64 [batch, length], got " +
                                (t.valid() ? t.shape().to_string() : std::string("null")));
}

Array logits_from(const T5Config& cfg, const ParamTree& p, const std::string& embedding_name, const Array& y) {
  if (cfg.logits_via_embedding)
    return div(nn::embed_attend(nn::get(p, embedding_name), y), std::sqrt(double(cfg.emb_dim)));
  Array yf = y.dtype() == DType::f32 ? y : cast(y, DType::f32);
  return nn::dense(yf, nn::get(p, "decoder/logits_dense/kernel"), "embed");
}

// Self-attention cache write: cache [batch, kv_length, heads, kv] gets
// new_kv [batch, kv_length=1, heads, kv] at position index[b]. When every
// row writes the same position (`pos`: encoder-decoder decoding, prompts of
// one length) it is one dynamic_update_slice, in the cache's buffer when the
// step holds the only handle (the decode step moves it in), else a copy; rows
// at different positions take the masked select over the whole cache.
void write_cache(Array& cache, const Array& new_kv, const Array& at, std::optional<int64_t> pos) {
  if (pos) return dynamic_update_slice_into(cache, transpose_like(new_kv, cache), {{"kv_length", *pos}});
  std::vector<Dim> d;
  for (const auto& dim : new_kv.shape().dims())
    if (dim.name != "kv_length") d.push_back(dim);
  Array row = reshape(new_kv, Shape(d));
  Array upd = where(at, row, cache);
  cache = transpose_like(upd, cache);
}

// What a stack's layers share: the encoder's names and masks, or the
// decoder's, with cross-attention and the decode cache as options.
struct LayerArgs {
  bool encoder = false;  // encoder names ("attention"), no cross-attention
  nn::MaskSpec self_mask;
  Array self_bias;       // relative position bias (the stack's table)
  Array self_buckets;    // ... or, relpos_per_layer, the buckets each layer's table reads
  bool bias_in_dtype = false;  // a per-layer bias cast to the activation dtype (decode step)
  Array cache_at;        // decode step: bool [batch, kv_length], the position written
  std::optional<int64_t> cache_pos;  // ... when it is the same for every row
  bool cross = false;    // encoder-decoder attention
  Array encoded;         // [batch, kv_length, embed]: cross keys / values unless cached
  nn::MaskSpec cross_mask;
  const MoeContext* moe = nullptr;  // sparse layers: mode, jitter, metrics (null: eval)
};

// One layer's keys and values. In: the decode cache (self; cross when
// cached). Out: the self-attention keys / values attended over (the prefill
// keeps them; the decode step stores them back).
struct LayerKV {
  Array self_key, self_value;
  Array cross_key, cross_value;
};

// The self-attention bias of the layer or stack `owner` from its own table.
Array relpos_bias(const T5Config& cfg, const ParamTree& p, const std::string& owner, const Array& buckets,
                  bool in_dtype) {
  Array b = nn::relative_position_bias(nn::get(p, owner + "/relpos_bias/rel_embedding"), buckets);
  return in_dtype ? cast(b, cfg.dtype) : b;
}

// The query projection's input: scale_attn_logits divides it by
// sqrt(head_dim) in the activation dtype (t5x's jnp.sqrt(head_dim).astype(dtype)).
Array query_input(const T5Config& cfg, const Array& h) {
  if (!cfg.scale_attn_logits) return h;
  const float s = float(std::sqrt(double(cfg.head_dim)));
  const double depth_scaling = cfg.dtype == DType::bf16   ? double(float(bfloat16(s)))
                               : cfg.dtype == DType::f16 ? double(float(float16(s)))
                                                         : double(s);
  return div(h, depth_scaling);
}

// The one Transformer layer of every path (t5x's EncoderLayer /
// DecoderLayer; training, prefill and cached decoding): LN, self-attention,
// dropout, residual; [LN, cross-attention, dropout, residual]; LN, MLP
// (the MoE layer in sparse layers: flaxformer SparseEncoderLayer /
// SparseDecoderLayer), dropout, residual.
Array layer(const T5Config& cfg, const ParamTree& p, int64_t index, Array x, const LayerArgs& a, LayerKV& kv,
            nn::Dropout& drop) {
  const std::string l = layer_name(a.encoder ? "encoder" : "decoder", index);
  auto att = a.encoder ? cfg.encoder_attention() : cfg.attention();
  Array h;
  if (a.encoder && !cfg.encoder_attention_layer(index)) {
    h = nn::layer_norm(p, l + "/pre_mixing_layer_norm", x);
    h = cfg.encoder_mixing == T5Config::Mixing::kFourier ? fourier_mix(h, "length", "embed")
                                                          : linear_mix(p, l + "/mixing", h);
  } else {
    const std::string sa = l + (a.encoder ? "/attention" : "/self_attention");
    h = nn::layer_norm(p, l + (a.encoder ? "/pre_attention_layer_norm" : "/pre_self_attention_layer_norm"), x);
    Array q = nn::project_query(p, sa, query_input(cfg, h), att);
    auto [k, v] = nn::project_key_value(p, sa, h, att);
    if (a.cache_at.valid()) {
      write_cache(kv.self_key, cast(k, kv.self_key.dtype()), a.cache_at, a.cache_pos);
      write_cache(kv.self_value, cast(v, kv.self_value.dtype()), a.cache_at, a.cache_pos);
    } else {
      kv.self_key = k;
      kv.self_value = v;
    }
    const Array bias = a.self_buckets.valid() ? relpos_bias(cfg, p, l, a.self_buckets, a.bias_in_dtype) : a.self_bias;
    h = nn::project_out(p, sa, nn::attend(q, kv.self_key, kv.self_value, a.self_mask, bias, att, drop), att);
  }
  x = nn::constrain(add(x, drop(h)));
  if (a.cross) {
    const std::string ca = l + "/encoder_decoder_attention";
    h = nn::layer_norm(p, l + "/pre_cross_attention_layer_norm", x);
    Array q = nn::project_query(p, ca, query_input(cfg, h), att);
    if (!kv.cross_key.valid()) std::tie(kv.cross_key, kv.cross_value) = nn::project_key_value(p, ca, a.encoded, att);
    h = nn::project_out(p, ca, nn::attend(q, kv.cross_key, kv.cross_value, a.cross_mask, Array(), att, drop), att);
    x = nn::constrain(add(x, drop(h)));
  }
  h = nn::layer_norm(p, l + "/pre_mlp_layer_norm", x);
  if (cfg.sparse_layer(a.encoder, index)) {
    const bool train = a.moe && a.moe->train;
    std::optional<PRNGKey> jitter;
    if (train && a.moe->jitter && cfg.moe.jitter_noise > 0.0)
      jitter = fold_in(fold_in(*a.moe->jitter, a.encoder ? 0u : 1u), uint32_t(index));
    nn::MoeMetrics m;
    const bool want = a.moe && a.moe->metrics;
    h = nn::moe_block(p, l + "/mlp", h, cfg.moe_config(a.encoder), train, jitter, drop, want ? &m : nullptr);
    if (want) a.moe->metrics->push_back(std::move(m));
  } else {
    h = nn::mlp_block(p, l + "/mlp", h, cfg.mlp_activations, drop);
  }
  return nn::constrain(add(x, drop(h)));
}

// A stack ("encoder" / "decoder") on embedded inputs x [batch, length,
// embed] -> final normed hidden state. kv: one entry per layer (in and out),
// or null (each layer's keys / values dropped after it).
Array stack(const T5Config& cfg, const ParamTree& p, const std::string& name, Array x, const LayerArgs& a,
            std::vector<LayerKV>* kv, nn::Dropout& drop) {
  const int64_t n = a.encoder ? cfg.num_encoder_layers : cfg.num_decoder_layers;
  for (int64_t i = 0; i < n; ++i) {
    LayerKV scratch;
    x = layer(cfg, p, i, x, a, kv ? (*kv)[size_t(i)] : scratch, drop);
  }
  return drop(nn::layer_norm(p, name + (a.encoder ? "/encoder_norm" : "/decoder_norm"), x));
}

nn::MaskSpec decoder_self_mask(const Array& target, const Array& seg, const Array& causal_attention) {
  nn::MaskSpec m;
  m.causal = true;
  if (target.valid()) m.q_mask = m.kv_mask = positive(target);
  if (seg.valid()) m.q_segment_ids = m.kv_segment_ids = seg;
  if (causal_attention.valid()) m.bidirectional_prefix = causal_attention;
  return m;
}

// The self-attention bias over `buckets`: the stack's table once, or with
// relpos_per_layer each layer's own (left to layer()).
void set_self_bias(LayerArgs& a, const T5Config& cfg, const ParamTree& p, const std::string& stack,
                   const Array& buckets, bool in_dtype) {
  if (cfg.relpos_per_layer) {
    a.self_buckets = buckets;
    a.bias_in_dtype = in_dtype;
  } else {
    a.self_bias = relpos_bias(cfg, p, stack, buckets, in_dtype);
  }
}

// The buckets of a stack's self-attention over `len` positions
// (bidirectional in the encoder).
Array stack_buckets(const T5Config& cfg, const std::string& stack, int64_t len) {
  return nn::relative_position_buckets(len, len, stack == "encoder", cfg.relpos);
}

// What a decode step gives: the logits {f32 [batch, vocab]}, greedy
// decoding's next tokens {int32 [batch]} (decode_step_tokens), or sampling's
// top-k candidates {index, value, vocab size (a scalar)}
// (decode_step_candidates; keep = k).
struct StepHead {
  enum Kind { kLogits, kArgmax, kCandidates } kind = kLogits;
  int64_t keep = 0;
};

// One decode step, ending in `head`.
std::vector<Array> decode_step(const T5Config& cfg, const ParamTree& p, DecoderCache& c, const Array& tokens,
                               const std::string& embedding_name, bool cross, StepHead head = {}) {
  int64_t b = c.batch();
  if (!tokens.valid() || tokens.size() != b)
    throw std::invalid_argument("[decode_step] tokens must be int [batch=" + std::to_string(b) + "]");
  Array tok = reshape(cast(tokens, DType::i32), Shape{{"batch", b}, {"length", 1}});
  // On a mesh the step's rows take the batch layout (split over 'data'), as
  // the cache they meet.
  Array x = nn::constrain(nn::embed_lookup(nn::get(p, embedding_name), tok, cfg.dtype));
  LayerArgs a;
  a.cache_at = ne(one_hot(c.index, c.max_length, "kv_length"), 0.0);  // [batch, kv_length]
  if (c.index.is_fully_local()) {
    const std::vector<int64_t> at = c.index.to_ints();
    if (!at.empty() && at.front() >= 0 && at.front() < c.max_length &&
        std::all_of(at.begin(), at.end(), [&](int64_t i) { return i == at.front(); }))
      a.cache_pos = at.front();
  }
  a.self_mask.kv_mask =
      transpose(le(iota(Shape{{"kv_length", c.max_length}}, "kv_length"), c.index), {"batch", "kv_length"});
  // In the activation dtype, as each layer's attention takes it (the same
  // values; one cast per step instead of one per layer for a stack's table).
  set_self_bias(a, cfg, p, "decoder", nn::relative_position_buckets_at(c.index, c.max_length, false, cfg.relpos),
                /*in_dtype=*/true);
  a.cross = cross;
  if (cross) a.cross_mask.kv_mask = c.encoder_mask;
  std::vector<LayerKV> kv(size_t(cfg.num_decoder_layers));
  for (size_t i = 0; i < kv.size(); ++i)
    kv[i] = {std::move(c.self_key[i]), std::move(c.self_value[i]), cross ? c.cross_key[i] : Array(),
             cross ? c.cross_value[i] : Array()};
  nn::Dropout none;
  x = stack(cfg, p, "decoder", x, a, &kv, none);
  for (size_t i = 0; i < kv.size(); ++i) {
    c.self_key[i] = std::move(kv[i].self_key);
    c.self_value[i] = std::move(kv[i].self_value);
  }
  c.index = add(c.index, 1.0);
  if (head.kind != StepHead::kLogits) {
    // The logits kernel's screen (BaseTransformerModel::decode_params) where
    // this process holds the whole product; otherwise the logits.
    auto screen = p.find(std::string(kLogitsScreenName)), bounds = p.find(std::string(kLogitsScreenBoundsName));
    Array xf = reshape(transpose(x.dtype() == DType::f32 ? x : cast(x, DType::f32), {"batch", "length", "embed"}),
                       Shape{{"batch", b}, {"embed", x.dim("embed")}});
    if (!cfg.logits_via_embedding && screen != p.end() && bounds != p.end() && xf.is_fully_local()) {
      const Array& kernel = nn::get(p, "decoder/logits_dense/kernel");
      if (kernel.is_fully_local() && kernel.shape() == screen->second.shape()) {
        const LogitsScreen ls{screen->second, bounds->second};
        if (head.kind == StepHead::kArgmax) return {screened_dense_argmax(xf, kernel, ls)};
        ScreenedCandidateArrays cand = screened_dense_candidates(xf, kernel, ls, head.keep);
        return {cand.index, cand.value, Array::scalar(double(cand.vocab), DType::i32)};
      }
    }
    Array logits = transpose(logits_from(cfg, p, embedding_name, xf), {"batch", "vocab"});
    if (head.kind == StepHead::kArgmax) return {argmax(logits, "vocab")};
    // Every entry a candidate (no index array).
    const int64_t n = logits.dim("vocab");
    return {Array(), rename(logits, {{"vocab", "candidates"}}), Array::scalar(double(n), DType::i32)};
  }
  Array logits = logits_from(cfg, p, embedding_name, x);
  return {reshape(transpose(logits, {"batch", "length", "vocab"}),
                  Shape{{"batch", b}, {"vocab", logits.dim("vocab")}})};
}

DecoderCache empty_cache(const T5Config& cfg, int64_t batch, int64_t max_length) {
  DecoderCache c;
  c.max_length = max_length;
  auto att = cfg.attention();
  const char* hn = att.grouped() ? "kv_heads" : "heads";
  Shape s{{"batch", batch}, {"kv_length", max_length}, {hn, att.kv_heads()}, {"kv", cfg.head_dim}};
  // On a mesh the cache takes its logical layout (batch -> 'data', heads -> 'model').
  // It holds the keys and values in the activation dtype, as t5x's cache: the
  // attention kernel reads bf16 keys / values as they are (widening them as it
  // loads its tiles), so a step reads half the bytes of an f32 copy.
  for (int64_t i = 0; i < cfg.num_decoder_layers; ++i) {
    c.self_key.push_back(nn::constrain(Array::zeros(s, cfg.dtype)));
    c.self_value.push_back(nn::constrain(Array::zeros(s, cfg.dtype)));
  }
  c.index = Array::zeros(Shape{{"batch", batch}}, DType::i32);
  return c;
}

}  // namespace

Array linear_mix(const ParamTree& p, const std::string& prefix, const Array& x) {
  Array y = rename(nn::dense(x, nn::get(p, prefix + "/hidden/kernel"), "embed"), {{"mlp", "embed"}});
  y = rename(nn::dense(y, nn::get(p, prefix + "/seq/kernel"), "length"), {{"mixing_length", "length"}});
  return transpose(y, x.names());
}

Array t5_encode(const T5Config& cfg, const ParamTree& p, const Array& tokens, const Array& seg, nn::Dropout& drop,
                const MoeContext* moe) {
  check_tokens(tokens, "encoder_input_tokens");
  Array x = nn::constrain(drop(nn::embed_lookup(nn::get(p, "token_embedder/embedding"), tokens, cfg.dtype)));
  LayerArgs a;
  a.encoder = true;
  a.moe = moe;
  if (cfg.encoder_mixing != T5Config::Mixing::kAttention) {
    // Mixing over the length mixes every position, across packed examples too.
    const bool fourier = cfg.encoder_mixing == T5Config::Mixing::kFourier;
    if (seg.valid())
      throw std::invalid_argument(std::string("[t5x model] the ") +
                                  (fourier ? "Fourier-mixing (FNet)" : "linear-mixing (Sparse Mixer)") +
                                  " encoder cannot take packed inputs (encoder_segment_ids): its " +
                                  (fourier ? "DFT" : "W_seq") + " over the length would mix the examples\n"
                                  "  hint: set the feature converter's pack = False");
    if (!fourier && tokens.dim("length") != cfg.encoder_mixing_length)
      throw std::invalid_argument("[t5x model] the linear-mixing (Sparse Mixer) encoder has W_seq of length " +
                                  std::to_string(cfg.encoder_mixing_length) + " but the encoder inputs have length " +
                                  std::to_string(tokens.dim("length")) +
                                  "\n  hint: make TASK_FEATURE_LENGTHS['inputs'] and "
                                  "network.T5Config.encoder_mixing_length equal (a trained model's W_seq fixes the "
                                  "length)");
    if (!cfg.encoder_has_attention()) return stack(cfg, p, "encoder", x, a, nullptr, drop);
  }
  a.self_mask.q_mask = a.self_mask.kv_mask = positive(tokens);
  if (seg.valid()) a.self_mask.q_segment_ids = a.self_mask.kv_segment_ids = seg;
  set_self_bias(a, cfg, p, "encoder", stack_buckets(cfg, "encoder", tokens.dim("length")), false);
  return stack(cfg, p, "encoder", x, a, nullptr, drop);
}

Array t5_decode(const T5Config& cfg, const ParamTree& p, const Array& encoded, const Array& enc_tokens,
                const Array& dec_inputs, const Array& dec_targets, const Array& enc_seg, const Array& dec_seg,
                nn::Dropout& drop, const MoeContext* moe) {
  check_tokens(dec_inputs, "decoder_input_tokens");
  LayerArgs a;
  a.moe = moe;
  a.self_mask = decoder_self_mask(dec_targets, dec_seg, Array());
  set_self_bias(a, cfg, p, "decoder", stack_buckets(cfg, "decoder", dec_inputs.dim("length")), false);
  a.cross = true;
  a.encoded = rename(encoded, {{"length", "kv_length"}});
  if (dec_targets.valid()) a.cross_mask.q_mask = positive(dec_targets);
  a.cross_mask.kv_mask = positive(enc_tokens);
  if (dec_seg.valid() && enc_seg.valid()) {
    a.cross_mask.q_segment_ids = dec_seg;
    a.cross_mask.kv_segment_ids = rename(enc_seg, {{"length", "kv_length"}});
  }
  Array x = nn::constrain(drop(nn::embed_lookup(nn::get(p, "token_embedder/embedding"), dec_inputs, cfg.dtype)));
  return logits_from(cfg, p, "token_embedder/embedding", stack(cfg, p, "decoder", x, a, nullptr, drop));
}

Array decoder_only_forward(const T5Config& cfg, const ParamTree& p, const Array& dec_inputs, const Array& dec_targets,
                           const Array& dec_seg, const Array& causal_attention, nn::Dropout& drop,
                           const MoeContext* moe) {
  check_tokens(dec_inputs, "decoder_input_tokens");
  LayerArgs a;
  a.moe = moe;
  a.self_mask = decoder_self_mask(dec_targets, dec_seg, causal_attention);
  set_self_bias(a, cfg, p, "decoder", stack_buckets(cfg, "decoder", dec_inputs.dim("length")), false);
  Array x = nn::constrain(drop(nn::embed_lookup(nn::get(p, "decoder/token_embedder/embedding"), dec_inputs, cfg.dtype)));
  return logits_from(cfg, p, "decoder/token_embedder/embedding", stack(cfg, p, "decoder", x, a, nullptr, drop));
}

void DecoderCache::gather_rows(const std::vector<int64_t>& rows) {
  Array idx = Array::from_ints(Shape{{"batch", int64_t(rows.size())}}, rows);
  // On a mesh the rows come back whole (the spmd take of a split dim) and
  // take the cache's layout again; bool masks move as int32.
  auto g = [&](Array& a) {
    if (!a.valid()) return;
    if (a.is_fully_local()) {
      a = take(a, idx, "batch");
    } else if (a.dtype() == DType::boolean) {
      a = nn::constrain(ne(take(cast(a, DType::i32), idx, "batch"), 0.0));
    } else {
      a = nn::constrain(take(a, idx, "batch"));
    }
  };
  for (auto& a : self_key) g(a);
  for (auto& a : self_value) g(a);
  for (auto& a : cross_key) g(a);
  for (auto& a : cross_value) g(a);
  g(encoder_mask);
  g(index);
}

DecoderCache t5_init_decoder_cache(const T5Config& cfg, const ParamTree& p, const Array& encoded,
                                   const Array& enc_tokens, int64_t max_length) {
  check_tokens(enc_tokens, "encoder_input_tokens");
  DecoderCache c = empty_cache(cfg, enc_tokens.dim("batch"), max_length);
  auto att = cfg.attention();
  for (int64_t i = 0; i < cfg.num_decoder_layers; ++i) {
    auto [k, v] = nn::project_key_value(p, layer_name("decoder", i) + "/encoder_decoder_attention", encoded, att);
    c.cross_key.push_back(k);  // activation dtype, as the self-attention cache
    c.cross_value.push_back(v);
  }
  c.encoder_mask = rename(positive(enc_tokens), {{"length", "kv_length"}});
  return c;
}

DecoderCache decoder_only_prefill(const T5Config& cfg, const ParamTree& p, const Array& dec_inputs,
                                  const Array& causal_attention, const Array& start_index, int64_t max_length) {
  check_tokens(dec_inputs, "decoder_input_tokens");
  int64_t len = dec_inputs.dim("length");
  if (len > max_length)
    throw std::invalid_argument("[decoder_only_prefill] prompt length " + std::to_string(len) +
                                " exceeds max_length " + std::to_string(max_length));
  DecoderCache c = empty_cache(cfg, dec_inputs.dim("batch"), max_length);
  LayerArgs a;
  a.self_mask = decoder_self_mask(Array(), Array(), causal_attention);
  set_self_bias(a, cfg, p, "decoder", stack_buckets(cfg, "decoder", len), false);
  std::vector<LayerKV> kv(size_t(cfg.num_decoder_layers));
  nn::Dropout none;
  Array x = nn::constrain(nn::embed_lookup(nn::get(p, "decoder/token_embedder/embedding"), dec_inputs, cfg.dtype));
  stack(cfg, p, "decoder", x, a, &kv, none);
  for (size_t i = 0; i < kv.size(); ++i) {
    auto order = c.self_key[i].names();
    c.self_key[i] = transpose(pad(cast(kv[i].self_key, cfg.dtype), "kv_length", 0, max_length - len), order);
    c.self_value[i] = transpose(pad(cast(kv[i].self_value, cfg.dtype), "kv_length", 0, max_length - len), order);
  }
  c.index = cast(start_index, DType::i32);
  return c;
}

Array t5_decode_step(const T5Config& cfg, const ParamTree& p, DecoderCache& c, const Array& tokens) {
  return decode_step(cfg, p, c, tokens, "token_embedder/embedding", true)[0];
}

Array decoder_only_decode_step(const T5Config& cfg, const ParamTree& p, DecoderCache& c, const Array& tokens) {
  return decode_step(cfg, p, c, tokens, "decoder/token_embedder/embedding", false)[0];
}

namespace {
std::vector<Array> decode_step_to(const T5Config& cfg, const ParamTree& p, DecoderCache& c, const Array& tokens,
                                  bool encoder_decoder, StepHead head) {
  return encoder_decoder ? decode_step(cfg, p, c, tokens, "token_embedder/embedding", true, head)
                         : decode_step(cfg, p, c, tokens, "decoder/token_embedder/embedding", false, head);
}
}  // namespace

Array decode_step_tokens(const T5Config& cfg, const ParamTree& p, DecoderCache& c, const Array& tokens,
                         bool encoder_decoder) {
  return decode_step_to(cfg, p, c, tokens, encoder_decoder, {StepHead::kArgmax, 1})[0];
}

ScreenedCandidateArrays decode_step_candidates(const T5Config& cfg, const ParamTree& p, DecoderCache& c,
                                               const Array& tokens, bool encoder_decoder, int64_t keep) {
  if (keep < 1) throw std::invalid_argument("[decode_step_candidates] keep must be >= 1, got " + std::to_string(keep));
  std::vector<Array> out = decode_step_to(cfg, p, c, tokens, encoder_decoder, {StepHead::kCandidates, keep});
  return {out[0], out[1], int64_t(out[2].item())};
}

}  // namespace t5x
