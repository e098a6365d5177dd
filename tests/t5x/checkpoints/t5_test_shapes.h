// Shared by the Hugging Face tests: T5 parameter shapes and random values.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "t5x/checkpoints/hf_t5.h"

namespace t5x::testing_util {

// Parameter shapes of a T5 model as built by t5x/examples/t5/network.py (t5x.md §4).
inline std::vector<ParamShape> t5_param_shapes(int64_t vocab, int64_t emb, int64_t heads, int64_t hd, int64_t mlp,
                                        int64_t enc_layers, int64_t dec_layers, bool gated, bool tied) {
  std::vector<ParamShape> p;
  const int64_t inner = heads * hd;
  p.push_back({"token_embedder/embedding", {vocab, emb}});
  p.push_back({"encoder/relpos_bias/rel_embedding", {heads, 32}});
  p.push_back({"decoder/relpos_bias/rel_embedding", {heads, 32}});
  auto attn = [&](const std::string& pre) {
    for (auto n : {"query", "key", "value"}) p.push_back({pre + "/" + n + "/kernel", {emb, inner}});
    p.push_back({pre + "/out/kernel", {inner, emb}});
  };
  auto mlp_block = [&](const std::string& pre) {
    if (gated) {
      p.push_back({pre + "/wi_0/kernel", {emb, mlp}});
      p.push_back({pre + "/wi_1/kernel", {emb, mlp}});
    } else {
      p.push_back({pre + "/wi/kernel", {emb, mlp}});
    }
    p.push_back({pre + "/wo/kernel", {mlp, emb}});
  };
  for (int64_t i = 0; i < enc_layers; ++i) {
    std::string l = "encoder/layers_" + std::to_string(i);
    p.push_back({l + "/pre_attention_layer_norm/scale", {emb}});
    attn(l + "/attention");
    p.push_back({l + "/pre_mlp_layer_norm/scale", {emb}});
    mlp_block(l + "/mlp");
  }
  p.push_back({"encoder/encoder_norm/scale", {emb}});
  for (int64_t i = 0; i < dec_layers; ++i) {
    std::string l = "decoder/layers_" + std::to_string(i);
    p.push_back({l + "/pre_self_attention_layer_norm/scale", {emb}});
    attn(l + "/self_attention");
    p.push_back({l + "/pre_cross_attention_layer_norm/scale", {emb}});
    attn(l + "/encoder_decoder_attention");
    p.push_back({l + "/pre_mlp_layer_norm/scale", {emb}});
    mlp_block(l + "/mlp");
  }
  p.push_back({"decoder/decoder_norm/scale", {emb}});
  if (!tied) p.push_back({"decoder/logits_dense/kernel", {emb, vocab}});
  return p;
}

inline NamedTensors random_params(const std::vector<ParamShape>& shapes) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  NamedTensors out;
  for (const auto& s : shapes) {
    HostTensor t = HostTensor::zeros("float32", s.shape);
    float* d = reinterpret_cast<float*>(t.data.data());
    for (int64_t i = 0; i < t.numel(); ++i) d[i] = nd(rng);
    out.emplace_back(s.name, std::move(t));
  }
  return out;
}

}  // namespace t5x::testing_util
