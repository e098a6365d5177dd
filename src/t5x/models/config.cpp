#include "t5x/models/config.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "nn/layers.h"

namespace t5x {

namespace {
T5Config shape(int64_t emb, int64_t heads, int64_t enc, int64_t dec, int64_t head_dim, int64_t mlp) {
  T5Config c;
  c.emb_dim = emb;
  c.num_heads = heads;
  c.num_encoder_layers = enc;
  c.num_decoder_layers = dec;
  c.head_dim = head_dim;
  c.mlp_dim = mlp;
  c.dtype = DType::bf16;
  c.dropout_rate = 0.0;
  return c;
}
[[noreturn]] void unknown(const std::string& family, const std::string& size, const std::string& known) {
  throw std::invalid_argument("[T5Config] unknown " + family + " size '" + size + "'; known: " + known);
}
}  // namespace

T5Config t5_1_1_config(const std::string& size) {
  T5Config c;
  if (size == "tiny") c = shape(8, 4, 2, 2, 3, 16);
  else if (size == "small") c = shape(512, 6, 8, 8, 64, 1024);
  else if (size == "base") c = shape(768, 12, 12, 12, 64, 2048);
  else if (size == "large") c = shape(1024, 16, 24, 24, 64, 2816);
  else if (size == "xl") c = shape(2048, 32, 24, 24, 64, 5120);
  else if (size == "xxl") c = shape(4096, 64, 24, 24, 64, 10240);
  else unknown("T5.1.1", size, "tiny, small, base, large, xl, xxl");
  c.mlp_activations = {"gelu", "linear"};
  c.logits_via_embedding = false;
  return c;
}

T5Config t5_1_0_config(const std::string& size) {
  T5Config c;
  if (size == "small") c = shape(512, 8, 6, 6, 64, 2048);
  else if (size == "base") c = shape(768, 12, 12, 12, 64, 3072);
  else unknown("T5.1.0", size, "small, base");
  c.mlp_activations = {"relu"};
  c.logits_via_embedding = true;
  return c;
}

T5Config decoder_only_config(const std::string& size) {
  T5Config c;
  if (size == "small") c = shape(512, 6, 0, 8, 64, 1024);
  else unknown("decoder-only", size, "small");
  c.mlp_activations = {"gelu", "linear"};
  c.logits_via_embedding = true;
  return c;
}

T5Config model_config_by_name(const std::string& name) {
  auto slash = name.find('/');
  if (slash == std::string::npos)
    throw std::invalid_argument("[T5Config] expected 'family/size' (e.g. t5_1_1/small), got '" + name + "'");
  std::string fam = name.substr(0, slash), size = name.substr(slash + 1);
  if (fam == "t5_1_1") return t5_1_1_config(size);
  if (fam == "t5_1_0") return t5_1_0_config(size);
  if (fam == "decoder_only") return decoder_only_config(size);
  throw std::invalid_argument("[T5Config] unknown family '" + fam + "'; known: t5_1_1, t5_1_0, decoder_only");
}

bool is_sparse_layer(int64_t l, int64_t L, int64_t n, T5Config::SparseLayout layout) {
  if (n < 0 || n > L)
    throw std::invalid_argument("[T5Config] " + std::to_string(n) + " sparse layers in a stack of " +
                                std::to_string(L) + "; use 0 .. num_layers");
  if (n == 0) return false;
  switch (layout) {
    case T5Config::SparseLayout::kBottom: return l < n;
    case T5Config::SparseLayout::kTop: return l >= L - n;
    case T5Config::SparseLayout::kMiddle: return L - n <= 2 * l && 2 * l < L + n;
    case T5Config::SparseLayout::kMixed: break;
  }
  if (L % n != 0)
    throw std::invalid_argument("[T5Config] the MIXED sparse layout needs num_layers (" + std::to_string(L) +
                                ") to be a multiple of the number of sparse layers (" + std::to_string(n) +
                                "); use a divisor, or BOTTOM / MIDDLE / TOP");
  const int64_t step = L / n;
  return l % step == step - 1;
}

T5Config::SparseLayout parse_sparse_layout(const std::string& name) {
  std::string u = name;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  if (u.rfind("LAYERLAYOUT.", 0) == 0) u = u.substr(12);
  if (u == "BOTTOM") return T5Config::SparseLayout::kBottom;
  if (u == "MIDDLE") return T5Config::SparseLayout::kMiddle;
  if (u == "MIXED") return T5Config::SparseLayout::kMixed;
  if (u == "TOP") return T5Config::SparseLayout::kTop;
  throw std::invalid_argument("[T5Config] unknown sparse layout '" + name + "'; use 'BOTTOM', 'MIDDLE', 'MIXED' or 'TOP'");
}

bool T5Config::sparse_layer(bool encoder, int64_t layer) const {
  if (moe.num_experts <= 0) return false;
  return encoder ? is_sparse_layer(layer, num_encoder_layers, num_encoder_sparse_layers, encoder_sparse_layout)
                 : is_sparse_layer(layer, num_decoder_layers, num_decoder_sparse_layers, decoder_sparse_layout);
}

bool T5Config::encoder_attention_layer(int64_t layer) const {
  if (encoder_mixing == Mixing::kAttention) return true;
  return is_sparse_layer(layer, num_encoder_layers, num_encoder_attention_layers, encoder_attention_layout);
}

void validate_sizes(const T5Config& c) {
  auto at_least = [](const char* field, int64_t v, int64_t lo) {
    if (v < lo)
      throw std::invalid_argument("[T5Config] " + std::string(field) + " = " + std::to_string(v) + " must be >= " +
                                  std::to_string(lo) + "\n  hint: check the gin binding network.T5Config." + field +
                                  " (network.TransformerConfig." + field + " for a decoder-only model)");
  };
  at_least("vocab_size", c.vocab_size, 1);
  at_least("emb_dim", c.emb_dim, 1);
  at_least("num_heads", c.num_heads, 1);
  at_least("head_dim", c.head_dim, 1);
  at_least("mlp_dim", c.mlp_dim, 1);
  at_least("num_encoder_layers", c.num_encoder_layers, 0);
  at_least("num_decoder_layers", c.num_decoder_layers, 0);
  at_least("num_kv_heads", c.num_kv_heads, 0);
  at_least("encoder_num_kv_heads", c.encoder_num_kv_heads, 0);
  if (!(c.dropout_rate >= 0.0 && c.dropout_rate < 1.0))  // NaN fails too
    throw std::invalid_argument("[T5Config] dropout_rate = " + std::to_string(c.dropout_rate) +
                                " must be in [0, 1)\n  hint: check the gin binding network.T5Config.dropout_rate "
                                "(DROPOUT_RATE in the t5x gins)");
}

void validate_mixing(const T5Config& c) {
  if (c.encoder_mixing == T5Config::Mixing::kLinear && c.encoder_mixing_length <= 0)
    throw std::invalid_argument("[T5Config] encoder_mixing = 'linear' needs encoder_mixing_length > 0 (got " +
                                std::to_string(c.encoder_mixing_length) +
                                "); set it to the encoder length, e.g. TASK_FEATURE_LENGTHS['inputs']");
  const int64_t n = c.num_encoder_attention_layers;
  if (n < 0 || n > c.num_encoder_layers)
    throw std::invalid_argument("[T5Config] num_encoder_attention_layers = " + std::to_string(n) + " is not in 0 .. " +
                                std::to_string(c.num_encoder_layers) + " (the encoder's layers)");
  if (n > 0 && c.encoder_mixing == T5Config::Mixing::kAttention)
    throw std::invalid_argument("[T5Config] num_encoder_attention_layers = " + std::to_string(n) +
                                " needs a mixing encoder; set encoder_mixing = 'fourier' or 'linear' (or 0 layers)");
  (void)is_sparse_layer(0, c.num_encoder_layers, n, c.encoder_attention_layout);
}

nn::MoeConfig T5Config::moe_config(bool encoder) const {
  nn::MoeConfig m = moe;
  if (m.expert_mlp_dim <= 0) m.expert_mlp_dim = mlp_dim;
  m.activations = mlp_activations;  // the experts are the dense MLP's shape (what upcycling copies)
  if (!encoder) m.batch_prioritized_routing = false;
  return m;
}

void validate_moe(const T5Config& c) {
  const int64_t ns = c.num_encoder_sparse_layers + c.num_decoder_sparse_layers;
  if (ns > 0 && c.moe.num_experts <= 0)
    throw std::invalid_argument("[T5Config] " + std::to_string(ns) +
                                " sparse layers but num_experts = " + std::to_string(c.moe.num_experts) +
                                "; set num_experts > 0 (or no sparse layers)");
  if (c.moe.num_experts <= 0) return;
  (void)is_sparse_layer(0, c.num_encoder_layers, c.num_encoder_sparse_layers, c.encoder_sparse_layout);
  (void)is_sparse_layer(0, c.num_decoder_layers, c.num_decoder_sparse_layers, c.decoder_sparse_layout);
  if (c.moe.num_selected_experts < 1 || c.moe.num_selected_experts > c.moe.num_experts)
    throw std::invalid_argument("[T5Config] num_selected_experts = " + std::to_string(c.moe.num_selected_experts) +
                                " must be in 1 .. num_experts = " + std::to_string(c.moe.num_experts));
  if (c.moe.router == nn::RouterType::kExpertsChooseMasked && c.num_decoder_sparse_layers > 0)
    throw std::invalid_argument("[T5Config] experts-choose routing in the decoder would see future tokens "
                                "(flaxformer forbids it); use it with decoder sparse layers = 0, or a tokens-choose router");
}

namespace {
// A layer's feed-forward: the dense MLP, or the MoE layer's router and experts.
void append_mlp(nn::ParamSpecs& s, const T5Config& c, bool encoder, int64_t i, const std::string& l) {
  if (c.sparse_layer(encoder, i)) {
    const auto m = nn::moe_param_specs(l + "/mlp", c.emb_dim, c.moe_config(encoder));
    s.insert(s.end(), m.begin(), m.end());
  } else {
    const auto m = nn::mlp_param_specs(l + "/mlp", c.emb_dim, c.mlp_dim, c.mlp_activations);
    s.insert(s.end(), m.begin(), m.end());
  }
}

nn::ParamSpec relpos_spec(const std::string& prefix, const T5Config& c) {
  return {prefix + "/relpos_bias/rel_embedding",
          Shape{{"heads", c.num_heads}, {"relpos_buckets", c.relpos.num_buckets}},
          nn::InitSpec::variance_scaling(1.0, "fan_avg", "uniform")};
}
void append(nn::ParamSpecs& a, const nn::ParamSpecs& b) { a.insert(a.end(), b.begin(), b.end()); }
// Decoder stack of t5x's network.Decoder: per layer self-attention, cross-
// attention (encoder-decoder only) and MLP, then decoder_norm and, when
// untied, logits_dense.
void append_decoder(nn::ParamSpecs& s, const T5Config& c, bool cross_attention) {
  auto att = c.attention();
  if (!c.relpos_per_layer) s.push_back(relpos_spec("decoder", c));
  for (int64_t i = 0; i < c.num_decoder_layers; ++i) {
    std::string l = "decoder/layers_" + std::to_string(i);
    if (c.relpos_per_layer) s.push_back(relpos_spec(l, c));
    s.push_back(nn::norm_param_spec(l + "/pre_self_attention_layer_norm/scale", c.emb_dim));
    append(s, nn::attention_param_specs(l + "/self_attention", c.emb_dim, att));
    if (cross_attention) {
      s.push_back(nn::norm_param_spec(l + "/pre_cross_attention_layer_norm/scale", c.emb_dim));
      append(s, nn::attention_param_specs(l + "/encoder_decoder_attention", c.emb_dim, att));
    }
    s.push_back(nn::norm_param_spec(l + "/pre_mlp_layer_norm/scale", c.emb_dim));
    append_mlp(s, c, /*encoder=*/false, i, l);
  }
  s.push_back(nn::norm_param_spec("decoder/decoder_norm/scale", c.emb_dim));
  if (!c.logits_via_embedding)
    s.push_back(nn::dense_param_spec("decoder/logits_dense/kernel", {"embed", c.emb_dim}, {"vocab", c.vocab_size}));
}
}  // namespace

nn::ParamSpecs encoder_decoder_param_specs(const T5Config& c) {
  validate_sizes(c);
  validate_moe(c);
  validate_mixing(c);
  nn::ParamSpecs s;
  auto att = c.encoder_attention();
  s.push_back(nn::embedding_param_spec("token_embedder/embedding", c.vocab_size, c.emb_dim));
  if (c.encoder_has_attention() && !c.relpos_per_layer) s.push_back(relpos_spec("encoder", c));
  for (int64_t i = 0; i < c.num_encoder_layers; ++i) {
    std::string l = "encoder/layers_" + std::to_string(i);
    if (c.relpos_per_layer && c.encoder_attention_layer(i)) s.push_back(relpos_spec(l, c));
    if (!c.encoder_attention_layer(i)) {
      s.push_back(nn::norm_param_spec(l + "/pre_mixing_layer_norm/scale", c.emb_dim));
      if (c.encoder_mixing == T5Config::Mixing::kLinear) {
        const int64_t len = c.encoder_mixing_length;
        s.push_back({l + "/mixing/seq/kernel", Shape{{"length", len}, {"mixing_length", len}}, nn::InitSpec::normal(0.02)});
        s.push_back({l + "/mixing/hidden/kernel", Shape{{"embed", c.emb_dim}, {"mlp", c.emb_dim}},
                     nn::InitSpec::normal(0.02)});
      }
    } else {
      s.push_back(nn::norm_param_spec(l + "/pre_attention_layer_norm/scale", c.emb_dim));
      append(s, nn::attention_param_specs(l + "/attention", c.emb_dim, att));
    }
    s.push_back(nn::norm_param_spec(l + "/pre_mlp_layer_norm/scale", c.emb_dim));
    append_mlp(s, c, /*encoder=*/true, i, l);
  }
  s.push_back(nn::norm_param_spec("encoder/encoder_norm/scale", c.emb_dim));
  append_decoder(s, c, /*cross_attention=*/true);
  return s;
}

nn::ParamSpecs decoder_only_param_specs(const T5Config& c) {
  if (c.num_encoder_sparse_layers > 0)
    throw std::invalid_argument("[T5Config] a decoder-only model has no encoder; set num_encoder_sparse_layers = 0");
  validate_sizes(c);
  validate_moe(c);
  nn::ParamSpecs s;
  s.push_back(nn::embedding_param_spec("decoder/token_embedder/embedding", c.vocab_size, c.emb_dim));
  append_decoder(s, c, /*cross_attention=*/false);
  return s;
}

}  // namespace t5x
