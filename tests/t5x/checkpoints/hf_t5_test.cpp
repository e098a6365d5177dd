#include "t5x/checkpoints/hf_t5.h"
#include "t5_test_shapes.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

namespace t5x {
namespace {

using testing_util::random_params;
using testing_util::t5_param_shapes;

TEST(HfT5, NamesBothWays) {
  auto m = t5x_to_hf_name("encoder/layers_3/attention/query/kernel");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->name, "encoder.block.3.layer.0.SelfAttention.q.weight");
  EXPECT_TRUE(m->transpose);
  EXPECT_EQ(t5x_to_hf_name("decoder/layers_11/encoder_decoder_attention/out/kernel")->name,
            "decoder.block.11.layer.1.EncDecAttention.o.weight");
  EXPECT_EQ(t5x_to_hf_name("decoder/layers_0/mlp/wi_1/kernel")->name,
            "decoder.block.0.layer.2.DenseReluDense.wi_1.weight");
  EXPECT_EQ(t5x_to_hf_name("encoder/layers_2/mlp/wi/kernel")->name,
            "encoder.block.2.layer.1.DenseReluDense.wi.weight");
  EXPECT_EQ(t5x_to_hf_name("decoder/layers_1/pre_cross_attention_layer_norm/scale")->name,
            "decoder.block.1.layer.1.layer_norm.weight");
  EXPECT_FALSE(t5x_to_hf_name("decoder/layers_1/pre_cross_attention_layer_norm/scale")->transpose);
  EXPECT_EQ(t5x_to_hf_name("token_embedder/embedding")->name, "shared.weight");
  EXPECT_EQ(t5x_to_hf_name("decoder/logits_dense/kernel")->name, "lm_head.weight");
  EXPECT_EQ(hf_to_t5x_name("decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight")->name,
            "decoder/relpos_bias/rel_embedding");
  EXPECT_EQ(hf_to_t5x_name("encoder.block.7.layer.0.SelfAttention.v.weight")->name,
            "encoder/layers_7/attention/value/kernel");
  EXPECT_FALSE(t5x_to_hf_name("encoder/layers_0/attention/query/bias"));
  EXPECT_FALSE(hf_to_t5x_name("encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"));
}

TEST(HfT5, T511RoundTripIsBitwiseAndTransposes) {
  auto shapes = t5_param_shapes(40, 8, 4, 3, 16, 2, 2, true, false);  // T5.1.1 tiny
  NamedTensors params = random_params(shapes);
  NamedTensors hf = t5x_params_to_hf(params);
  ASSERT_EQ(hf.size(), params.size());
  const HostTensor* q = nullptr;
  for (auto& [n, t] : hf) if (n == "encoder.block.1.layer.0.SelfAttention.q.weight") q = &t;
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{12, 8}));  // [heads*d_kv, d_model]
  // hf[j][i] == t5x[i][j]
  const HostTensor* k = nullptr;
  for (auto& [n, t] : params) if (n == "encoder/layers_1/attention/query/kernel") k = &t;
  EXPECT_EQ(q->values<float>()[5 * 8 + 2], k->values<float>()[2 * 12 + 5]);
  HfT5Config cfg = infer_hf_t5_config(shapes);
  EXPECT_EQ(cfg.d_model, 8);
  EXPECT_EQ(cfg.d_kv, 3);
  EXPECT_EQ(cfg.num_heads, 4);
  EXPECT_EQ(cfg.d_ff, 16);
  EXPECT_EQ(cfg.num_layers, 2);
  EXPECT_EQ(cfg.feed_forward_proj, "gated-gelu");
  EXPECT_FALSE(cfg.tie_word_embeddings);
  NamedTensors back = hf_params_to_t5x(hf, cfg);
  std::sort(back.begin(), back.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::sort(params.begin(), params.end(), [](auto& a, auto& b) { return a.first < b.first; });
  EXPECT_EQ(back, params);
}

TEST(HfT5, T510TiedReluAndEmbedCopies) {
  auto shapes = t5_param_shapes(40, 8, 2, 4, 12, 1, 3, false, true);  // asymmetric depth
  NamedTensors params = random_params(shapes);
  NamedTensors hf = t5x_params_to_hf(params);
  for (auto& [n, t] : hf) EXPECT_EQ(n.find("lm_head"), std::string::npos);
  HfT5Config cfg = infer_hf_t5_config(shapes);
  EXPECT_TRUE(cfg.tie_word_embeddings);
  EXPECT_EQ(cfg.feed_forward_proj, "relu");
  EXPECT_EQ(cfg.num_layers, 1);
  EXPECT_EQ(cfg.num_decoder_layers, 3);
  // transformers checkpoints may also carry tied copies of the embedding.
  hf.emplace_back("encoder.embed_tokens.weight", hf[0].second);
  NamedTensors back = hf_params_to_t5x(hf, cfg);
  EXPECT_EQ(back.size(), params.size());
  hf.emplace_back("encoder.block.0.layer.0.SelfAttention.bogus", hf[0].second);
  EXPECT_THROW(hf_params_to_t5x(hf, cfg), CheckpointError);
}

TEST(HfT5, ConfigJsonRoundTrip) {
  HfT5Config c;  // T5.1.1 base
  auto j = nlohmann::json::parse(c.to_json());
  EXPECT_EQ(j["feed_forward_proj"], "gated-gelu");
  EXPECT_EQ(j["is_gated_act"], true);
  EXPECT_EQ(j["dense_act_fn"], "gelu_new");  // transformers' mapping of gated-gelu
  HfT5Config silu;
  silu.feed_forward_proj = "gated-silu";
  EXPECT_EQ(nlohmann::json::parse(silu.to_json())["dense_act_fn"], "silu");
  HfT5Config relu;
  relu.feed_forward_proj = "relu";
  EXPECT_EQ(nlohmann::json::parse(relu.to_json())["dense_act_fn"], "relu");
  EXPECT_EQ(j["relative_attention_max_distance"], 128);
  EXPECT_EQ(j["architectures"][0], "T5ForConditionalGeneration");
  HfT5Config back = HfT5Config::from_json(c.to_json(), "config.json");
  EXPECT_EQ(back.d_ff, 2048);
  EXPECT_EQ(back.num_decoder_layers, 12);
  EXPECT_FALSE(back.tie_word_embeddings);
  // A T5.1.0 config as published (t5-base) leaves tie_word_embeddings at its default.
  HfT5Config t5 = HfT5Config::from_json(
      R"({"model_type":"t5","d_model":768,"d_ff":3072,"num_layers":12,"num_heads":12,"d_kv":64,"vocab_size":32128})",
      "t5-base/config.json");
  EXPECT_TRUE(t5.tie_word_embeddings);
  EXPECT_EQ(t5.feed_forward_proj, "relu");
  EXPECT_EQ(t5.num_decoder_layers, 12);
  EXPECT_THROW(HfT5Config::from_json(R"({"model_type":"bert"})", "c"), CheckpointError);
}

}  // namespace
}  // namespace t5x
