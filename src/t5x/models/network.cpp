#include "t5x/models/network.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "nn/constraint.h"
#include "nn/layers.h"
#include "nn/relpos.h"
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

struct DecoderPass {
  const Array* encoded = nullptr;  // enc-dec only
  nn::MaskSpec self_mask, cross_mask;
  std::vector<Array>* keys = nullptr;  // capture self-attention keys / values (prefill)
  std::vector<Array>* values = nullptr;
};

// Decoder stack on embedded inputs x [batch, length, embed] -> final hidden state.
Array decoder_stack(const T5Config& cfg, const ParamTree& p, Array x, const DecoderPass& a, nn::Dropout& drop) {
  auto att = cfg.attention();
  int64_t len = x.dim("length");
  Array bias = nn::relative_position_bias(nn::get(p, "decoder/relpos_bias/rel_embedding"),
                                          nn::relative_position_buckets(len, len, false, cfg.relpos));
  Array enc_kv = a.encoded ? rename(*a.encoded, {{"length", "kv_length"}}) : Array();
  for (int64_t i = 0; i < cfg.num_decoder_layers; ++i) {
    std::string l = layer_name("decoder", i);
    Array h = nn::layer_norm(p, l + "/pre_self_attention_layer_norm", x);
    Array q = nn::project_query(p, l + "/self_attention", h, att);
    auto [k, v] = nn::project_key_value(p, l + "/self_attention", h, att);
    if (a.keys) {
      a.keys->push_back(k);
      a.values->push_back(v);
    }
    h = nn::project_out(p, l + "/self_attention", nn::attend(q, k, v, a.self_mask, bias, att, drop), att);
    x = nn::constrain(add(x, drop(h)));
    if (a.encoded) {
      h = nn::layer_norm(p, l + "/pre_cross_attention_layer_norm", x);
      h = nn::multi_head_attention(p, l + "/encoder_decoder_attention", h, enc_kv, a.cross_mask, Array(), att, drop);
      x = nn::constrain(add(x, drop(h)));
    }
    h = nn::layer_norm(p, l + "/pre_mlp_layer_norm", x);
    h = nn::mlp_block(p, l + "/mlp", h, cfg.mlp_activations, drop);
    x = nn::constrain(add(x, drop(h)));
  }
  return drop(nn::layer_norm(p, "decoder/decoder_norm", x));
}

nn::MaskSpec decoder_self_mask(const Array& target, const Array& seg, const Array& causal_attention) {
  nn::MaskSpec m;
  m.causal = true;
  if (target.valid()) m.q_mask = m.kv_mask = positive(target);
  if (seg.valid()) m.q_segment_ids = m.kv_segment_ids = seg;
  if (causal_attention.valid()) m.bidirectional_prefix = causal_attention;
  return m;
}

// Self-attention cache write: cache [batch, kv_length, heads, kv] gets
// new_kv [batch, kv_length=1, heads, kv] at position index[b].
Array write_cache(const Array& cache, const Array& new_kv, const Array& at) {
  std::vector<Dim> d;
  for (const auto& dim : new_kv.shape().dims())
    if (dim.name != "kv_length") d.push_back(dim);
  Array row = reshape(new_kv, Shape(d));
  Array upd = where(at, row, cache);
  return transpose(upd, cache.names());
}

Array decode_step(const T5Config& cfg, const ParamTree& p, DecoderCache& c, const Array& tokens,
                  const std::string& embedding_name, bool cross) {
  auto att = cfg.attention();
  int64_t b = c.batch();
  if (!tokens.valid() || tokens.size() != b)
    throw std::invalid_argument("[decode_step] tokens must be int [batch=" + std::to_string(b) + "]");
  Array tok = reshape(cast(tokens, DType::i32), Shape{{"batch", b}, {"length", 1}});
  Array x = nn::embed_lookup(nn::get(p, embedding_name), tok, cfg.dtype);
  Array at = ne(one_hot(c.index, c.max_length, "kv_length"), 0.0);  // [batch, kv_length]
  nn::MaskSpec self_mask;
  self_mask.kv_mask =
      transpose(le(iota(Shape{{"kv_length", c.max_length}}, "kv_length"), c.index), {"batch", "kv_length"});
  Array bias = nn::relative_position_bias(nn::get(p, "decoder/relpos_bias/rel_embedding"),
                                          nn::relative_position_buckets_at(c.index, c.max_length, false, cfg.relpos));
  nn::MaskSpec cross_mask;
  if (cross) cross_mask.kv_mask = c.encoder_mask;
  nn::Dropout none;
  for (int64_t i = 0; i < cfg.num_decoder_layers; ++i) {
    std::string l = layer_name("decoder", i);
    Array h = nn::layer_norm(p, l + "/pre_self_attention_layer_norm", x);
    Array q = nn::project_query(p, l + "/self_attention", h, att);
    auto [k, v] = nn::project_key_value(p, l + "/self_attention", h, att);
    c.self_key[size_t(i)] = write_cache(c.self_key[size_t(i)], k, at);
    c.self_value[size_t(i)] = write_cache(c.self_value[size_t(i)], v, at);
    h = nn::attend(q, c.self_key[size_t(i)], c.self_value[size_t(i)], self_mask, bias, att, none);
    x = add(x, nn::project_out(p, l + "/self_attention", h, att));
    if (cross) {
      h = nn::layer_norm(p, l + "/pre_cross_attention_layer_norm", x);
      q = nn::project_query(p, l + "/encoder_decoder_attention", h, att);
      h = nn::attend(q, c.cross_key[size_t(i)], c.cross_value[size_t(i)], cross_mask, Array(), att, none);
      x = add(x, nn::project_out(p, l + "/encoder_decoder_attention", h, att));
    }
    h = nn::layer_norm(p, l + "/pre_mlp_layer_norm", x);
    x = add(x, nn::mlp_block(p, l + "/mlp", h, cfg.mlp_activations, none));
  }
  x = nn::layer_norm(p, "decoder/decoder_norm", x);
  Array logits = logits_from(cfg, p, embedding_name, x);
  c.index = add(c.index, 1.0);
  return reshape(transpose(logits, {"batch", "length", "vocab"}), Shape{{"batch", b}, {"vocab", logits.dim("vocab")}});
}

DecoderCache empty_cache(const T5Config& cfg, int64_t batch, int64_t max_length) {
  DecoderCache c;
  c.max_length = max_length;
  auto att = cfg.attention();
  const char* hn = att.kv_heads() == att.num_heads ? "heads" : "kv_heads";
  Shape s{{"batch", batch}, {"kv_length", max_length}, {hn, att.kv_heads()}, {"kv", cfg.head_dim}};
  for (int64_t i = 0; i < cfg.num_decoder_layers; ++i) {
    c.self_key.push_back(Array::zeros(s, cfg.dtype));
    c.self_value.push_back(Array::zeros(s, cfg.dtype));
  }
  c.index = Array::zeros(Shape{{"batch", batch}}, DType::i32);
  return c;
}

}  // namespace

Array t5_encode(const T5Config& cfg, const ParamTree& p, const Array& tokens, const Array& seg, nn::Dropout& drop) {
  check_tokens(tokens, "encoder_input_tokens");
  auto att = cfg.attention();
  Array x = nn::constrain(drop(nn::embed_lookup(nn::get(p, "token_embedder/embedding"), tokens, cfg.dtype)));
  int64_t len = tokens.dim("length");
  Array bias = nn::relative_position_bias(nn::get(p, "encoder/relpos_bias/rel_embedding"),
                                          nn::relative_position_buckets(len, len, true, cfg.relpos));
  nn::MaskSpec m;
  m.q_mask = m.kv_mask = positive(tokens);
  if (seg.valid()) m.q_segment_ids = m.kv_segment_ids = seg;
  for (int64_t i = 0; i < cfg.num_encoder_layers; ++i) {
    std::string l = layer_name("encoder", i);
    Array h = nn::layer_norm(p, l + "/pre_attention_layer_norm", x);
    h = nn::multi_head_attention(p, l + "/attention", h, h, m, bias, att, drop);
    x = nn::constrain(add(x, drop(h)));
    h = nn::layer_norm(p, l + "/pre_mlp_layer_norm", x);
    h = nn::mlp_block(p, l + "/mlp", h, cfg.mlp_activations, drop);
    x = nn::constrain(add(x, drop(h)));
  }
  return drop(nn::layer_norm(p, "encoder/encoder_norm", x));
}

Array t5_decode(const T5Config& cfg, const ParamTree& p, const Array& encoded, const Array& enc_tokens,
                const Array& dec_inputs, const Array& dec_targets, const Array& enc_seg, const Array& dec_seg,
                nn::Dropout& drop) {
  check_tokens(dec_inputs, "decoder_input_tokens");
  DecoderPass a;
  a.encoded = &encoded;
  a.self_mask = decoder_self_mask(dec_targets, dec_seg, Array());
  if (dec_targets.valid()) a.cross_mask.q_mask = positive(dec_targets);
  a.cross_mask.kv_mask = positive(enc_tokens);
  if (dec_seg.valid() && enc_seg.valid()) {
    a.cross_mask.q_segment_ids = dec_seg;
    a.cross_mask.kv_segment_ids = rename(enc_seg, {{"length", "kv_length"}});
  }
  Array x = nn::constrain(drop(nn::embed_lookup(nn::get(p, "token_embedder/embedding"), dec_inputs, cfg.dtype)));
  return logits_from(cfg, p, "token_embedder/embedding", decoder_stack(cfg, p, x, a, drop));
}

Array decoder_only_forward(const T5Config& cfg, const ParamTree& p, const Array& dec_inputs, const Array& dec_targets,
                           const Array& dec_seg, const Array& causal_attention, nn::Dropout& drop) {
  check_tokens(dec_inputs, "decoder_input_tokens");
  DecoderPass a;
  a.self_mask = decoder_self_mask(dec_targets, dec_seg, causal_attention);
  Array x = nn::constrain(drop(nn::embed_lookup(nn::get(p, "decoder/token_embedder/embedding"), dec_inputs, cfg.dtype)));
  return logits_from(cfg, p, "decoder/token_embedder/embedding", decoder_stack(cfg, p, x, a, drop));
}

void DecoderCache::gather_rows(const std::vector<int64_t>& rows) {
  Array idx = Array::from_ints(Shape{{"batch", int64_t(rows.size())}}, rows);
  auto g = [&](Array& a) {
    if (a.valid()) a = take(a, idx, "batch");
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
    // Widened to f32 once (exact): the attention kernel runs in f32 and would
    // otherwise widen these [batch, enc length, heads, kv] arrays every step.
    c.cross_key.push_back(cast(k, DType::f32));
    c.cross_value.push_back(cast(v, DType::f32));
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
  std::vector<Array> keys, values;
  DecoderPass a;
  a.self_mask = decoder_self_mask(Array(), Array(), causal_attention);
  a.keys = &keys;
  a.values = &values;
  nn::Dropout none;
  Array x = nn::embed_lookup(nn::get(p, "decoder/token_embedder/embedding"), dec_inputs, cfg.dtype);
  decoder_stack(cfg, p, x, a, none);
  for (int64_t i = 0; i < cfg.num_decoder_layers; ++i) {
    auto order = c.self_key[size_t(i)].names();
    c.self_key[size_t(i)] = transpose(pad(keys[size_t(i)], "kv_length", 0, max_length - len), order);
    c.self_value[size_t(i)] = transpose(pad(values[size_t(i)], "kv_length", 0, max_length - len), order);
  }
  c.index = cast(start_index, DType::i32);
  return c;
}

Array t5_decode_step(const T5Config& cfg, const ParamTree& p, DecoderCache& c, const Array& tokens) {
  return decode_step(cfg, p, c, tokens, "token_embedder/embedding", true);
}

Array decoder_only_decode_step(const T5Config& cfg, const ParamTree& p, DecoderCache& c, const Array& tokens) {
  return decode_step(cfg, p, c, tokens, "decoder/token_embedder/embedding", false);
}

}  // namespace t5x
