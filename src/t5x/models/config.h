// T5 configurations (gin `network.T5Config` of t5x/examples/t5/network.py and
// `network.TransformerConfig` of t5x/examples/decoder_only; t5x.md 4) and the
// parameter declarations of both networks.
//
// Parameter trees (names exactly as t5x; dim names are logical axis names):
//   encoder-decoder: token_embedder/embedding [vocab, embed]
//     encoder/relpos_bias/rel_embedding [heads, relpos_buckets]
//       (relpos_per_layer: encoder/layers_i/relpos_bias/rel_embedding instead, and so in the decoder)
//     encoder/layers_i/{pre_attention_layer_norm/scale, attention/{query,key,value,out}/kernel,
//                       pre_mlp_layer_norm/scale, mlp/{wi_0,wi_1|wi,wo}/kernel}
//     encoder/encoder_norm/scale
//     decoder/relpos_bias/rel_embedding
//     decoder/layers_i/{pre_self_attention_layer_norm, self_attention/*, pre_cross_attention_layer_norm,
//                       encoder_decoder_attention/*, pre_mlp_layer_norm, mlp/*}
//     decoder/decoder_norm/scale;  decoder/logits_dense/kernel [embed, vocab] (untied only)
//   decoder-only (DecoderWrapper): decoder/token_embedder/embedding, decoder/relpos_bias/rel_embedding,
//     decoder/layers_i/{pre_self_attention_layer_norm, self_attention/*, pre_mlp_layer_norm, mlp/*},
//     decoder/decoder_norm/scale, decoder/logits_dense/kernel (untied only)
//   A sparse (Mixture-of-Experts) layer's mlp/ holds nn::moe_param_specs
//   instead (nn/moe.h; flaxformer moe_architecture names, moe.md 2.2):
//     <stack>/layers_i/mlp/router/router_weights/w/kernel [embed, expert]
//     <stack>/layers_i/mlp/expert/{wi_0,wi_1|wi,wo}/kernel [expert, mlp_embed, expert_mlp] / [expert, expert_mlp, mlp_embed]
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "nn/attention.h"
#include "nn/moe.h"
#include "nn/params.h"
#include "nn/relpos.h"

namespace t5x {

struct T5Config {
  int64_t vocab_size = 32128;
  int64_t emb_dim = 512;
  int64_t num_heads = 8;
  int64_t num_encoder_layers = 6;
  int64_t num_decoder_layers = 6;  // decoder-only models: TransformerConfig.num_layers
  int64_t head_dim = 64;
  int64_t mlp_dim = 2048;
  std::vector<std::string> mlp_activations = {"relu"};
  double dropout_rate = 0.1;
  bool logits_via_embedding = false;
  // Grouped-query attention (Ainslie et al. 2023; nn/attention.h): K/V heads
  // of the decoder's self- and cross-attention (the decoder-only model's
  // self-attention). 0 or num_heads: multi-head; 1: multi-query; else G
  // dividing num_heads. The decode cache holds these G heads.
  int64_t num_kv_heads = 0;
  // The same for the encoder's self-attention. 0 (default): multi-head, as
  // the GQA paper does for T5 (the encoder runs once per input, in parallel,
  // so K/V memory bandwidth is not its cost).
  int64_t encoder_num_kv_heads = 0;
  // The encoder's token-mixing sublayer. kAttention: T5 self-attention.
  // kFourier: FNet (Lee-Thorp et al. 2021, arXiv 2105.03824, section 3.1):
  // Re(DFT_length(DFT_embed(.))) of the layer-normed input (ops/fourier.h),
  // with no parameters, no mask and no relative position bias, so padding
  // is mixed like any other position and packed inputs are refused. The
  // rest of the layer (pre-norm residual, dropout, MLP) stays T5's; the
  // decoder keeps attention (a DFT over the length is not causal). Params:
  // encoder/layers_i/pre_mixing_layer_norm/scale replaces the attention and
  // its norm; no encoder/relpos_bias. Gin: T5Config.encoder_mixing =
  // 'attention' | 'fourier' | 'linear' (this port's addition).
  // kLinear: Sparse Mixer's LINEAR mixing (Lee-Thorp & Ainslie 2022, arXiv
  // 2205.12399; f_net LinearTransform): out[b] = W_seq . X[b] . W_hidden of
  // the layer-normed input, learned W_seq [L, L] and W_hidden [d, d], init
  // N(0, 0.02). Params encoder/layers_i/mixing/seq/kernel [length (in),
  // mixing_length (out)] = W_seq transposed (t5x's [in, out] kernels;
  // replicated) and mixing/hidden/kernel [embed, mlp] = W_hidden (split
  // like an MLP's wi). L = encoder_mixing_length is fixed: other encoder
  // lengths and packed inputs are refused, as for FNet.
  enum class Mixing { kAttention, kFourier, kLinear };
  Mixing encoder_mixing = Mixing::kAttention;
  int64_t encoder_mixing_length = 0;  // kLinear: L, the encoder length (> 0)
  // Hybrids (FNet / Sparse Mixer attention_layout): with mixing, these
  // encoder layers keep T5 self-attention (and the encoder its relpos
  // bias); the layout picks them as for sparse layers (is_sparse_layer;
  // Sparse Mixer: TOP). 0: every layer mixes.
  int64_t num_encoder_attention_layers = 0;
  enum class SparseLayout { kBottom, kMiddle, kMixed, kTop };
  SparseLayout encoder_attention_layout = SparseLayout::kTop;
  // Whether encoder layer `layer` uses self-attention (always, without mixing).
  bool encoder_attention_layer(int64_t layer) const;
  bool encoder_has_attention() const { return encoder_mixing == Mixing::kAttention || num_encoder_attention_layers > 0; }
  DType dtype = DType::f32;   // activation dtype (t5x gins use bfloat16); params stay float32
  nn::RelposConfig relpos;    // 32 buckets, max distance 128
  // umT5 (Chung et al. 2023, "UniMax", arXiv 2304.09151; its t5x network,
  // t5x/examples/scalable_t5/network.py, builds RelativePositionBiases inside
  // EncoderLayer / DecoderLayer): each layer's self-attention has its own
  // table, <stack>/layers_i/relpos_bias/rel_embedding [heads,
  // relpos_buckets], and the stacks have none. Cross-attention has no bias
  // either way. Gin: T5Config.relpos_per_layer (this port's addition; true
  // for Hugging Face umT5 imports). Default: T5's one table per stack.
  bool relpos_per_layer = false;
  // t5x/contrib/gpu/t5's MultiHeadDotProductAttention(scale_attn_logits):
  // the query projection's input divided by sqrt(head_dim) (in the
  // activation dtype), so the logits are scaled by 1/sqrt(head_dim) on top
  // of T5's query initialisation (which folds that factor in once). Every
  // attention block (self and cross). Gin: T5Config.scale_attn_logits.
  bool scale_attn_logits = false;
  // t5x's scalable_t5 checkpoint layout (checkpoints/param_layout.h): the
  // model keeps its per-layer parameters; its checkpoints hold attention
  // kernels as [embed, heads, kv] / [heads, kv, embed] and, with
  // scan_layers, every layer parameter stacked along a 'layers' dim at
  // param_scan_axis under <stack>/<stack>/ (network.py's nn.scan). Set by
  // scalable_t5.network.T5Config (scan_layers, param_scan_axis); the
  // trainer maps the leaves when it saves and restores.
  struct ScalableCheckpoint {
    bool on = false;
    bool scan_layers = false;
    int param_scan_axis = 1;
  };
  ScalableCheckpoint scalable_checkpoint;

  // Mixture-of-Experts (t5x contrib/moe with flaxformer architectures/moe;
  // moe.md 2.5): moe.num_experts > 0 and num_{encoder,decoder}_sparse_layers
  // make those layers' MLP an nn::moe_block. Which layers: the stack's
  // sparse layout (flaxformer LayerLayout, is_sparse_layer below). One
  // MoeConfig serves both stacks, except that the decoder never uses
  // batch-prioritized routing ("BPR breaks autoregressive behavior",
  // flaxformer moe.gin) and refuses experts-choose routing (it would see
  // future tokens). Gin: network.T5Config.num_experts, ... (docs/models.md).
  nn::MoeConfig moe;
  int64_t num_encoder_sparse_layers = 0;
  int64_t num_decoder_sparse_layers = 0;  // decoder-only models: the decoder's
  SparseLayout encoder_sparse_layout = SparseLayout::kMixed;
  SparseLayout decoder_sparse_layout = SparseLayout::kMixed;

  bool is_moe() const { return moe.num_experts > 0 && (num_encoder_sparse_layers > 0 || num_decoder_sparse_layers > 0); }
  // Whether layer `layer` of the encoder (else decoder) stack is sparse.
  bool sparse_layer(bool encoder, int64_t layer) const;
  // The MoE layer's config in that stack: moe with activations =
  // mlp_activations, expert_mlp_dim 0 -> mlp_dim, and, in the decoder, no BPR.
  nn::MoeConfig moe_config(bool encoder) const;

  // Decoder attention (self and cross).
  nn::AttentionConfig attention() const { return {num_heads, num_kv_heads, head_dim, dtype}; }
  nn::AttentionConfig encoder_attention() const { return {num_heads, encoder_num_kv_heads, head_dim, dtype}; }
};

// flaxformer moe_architecture._is_sparse_layer: layer l (0-based) of L, n
// sparse. BOTTOM: l < n; TOP: l >= L - n; MIDDLE: L - n <= 2l < L + n;
// MIXED: L % n == 0 required, sparse iff l % (L/n) == L/n - 1 (the last
// layer of each block: Switch-Base's 12 layers with 6 sparse -> 1, 3, ..., 11;
// 3 sparse -> 3, 7, 11). n = 0: no layer. Throws std::invalid_argument
// ("[T5Config] ...") for n < 0, n > L, or MIXED with L % n != 0.
bool is_sparse_layer(int64_t layer, int64_t num_layers, int64_t num_sparse_layers, T5Config::SparseLayout layout);
// "BOTTOM" / "MIDDLE" / "MIXED" / "TOP" (case-insensitive, optional
// "LayerLayout." prefix); throws std::invalid_argument otherwise.
T5Config::SparseLayout parse_sparse_layout(const std::string& name);
// Checks the MoE fields (sparse counts and layouts against the layer
// counts, E > 0 when a layer is sparse, k <= E, experts-choose only in the
// encoder). Throws std::invalid_argument("[T5Config] ...").
void validate_moe(const T5Config& cfg);
// Checks the sizes: vocab_size, emb_dim, num_heads, head_dim, mlp_dim >= 1;
// layer and kv-head counts >= 0; dropout_rate in [0, 1). Throws
// std::invalid_argument("[T5Config] <field> = ... must be ...") naming the
// gin binding. The param_specs functions call it.
void validate_sizes(const T5Config& cfg);
// Checks the mixing fields: kLinear needs encoder_mixing_length > 0;
// num_encoder_attention_layers in 0 .. num_encoder_layers, and > 0 only
// with mixing. Throws std::invalid_argument("[T5Config] ...").
void validate_mixing(const T5Config& cfg);

// t5x's model gins (configs/models/...): "tiny", "small", "base", "large",
// "xl", "xxl" for T5.1.1; "small", "base" for T5.1.0; "small" for the
// decoder-only model. Activations bfloat16 and dropout 0.0 (the pretrain
// value; the gins leave DROPOUT_RATE to the run file).
// Throws std::invalid_argument("[T5Config] unknown size 'x' ...").
T5Config t5_1_1_config(const std::string& size);
T5Config t5_1_0_config(const std::string& size);
T5Config decoder_only_config(const std::string& size);
// "t5_1_1/small", "t5_1_0/base", "decoder_only/small".
T5Config model_config_by_name(const std::string& name);

nn::ParamSpecs encoder_decoder_param_specs(const T5Config& cfg);
nn::ParamSpecs decoder_only_param_specs(const T5Config& cfg);

}  // namespace t5x
