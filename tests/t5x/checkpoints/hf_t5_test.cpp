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

// umT5's shapes: T5.1.1's with each layer's table for the stacks'.
std::vector<ParamShape> umt5_param_shapes(int64_t heads, int64_t enc_layers, int64_t dec_layers) {
  auto shapes = t5_param_shapes(40, 8, heads, 3, 16, enc_layers, dec_layers, true, false);
  std::erase_if(shapes, [](const ParamShape& p) { return p.name.find("relpos_bias") != std::string::npos; });
  for (const char* stack : {"encoder", "decoder"})
    for (int64_t i = 0; i < (stack == std::string("encoder") ? enc_layers : dec_layers); ++i)
      shapes.push_back({std::string(stack) + "/layers_" + std::to_string(i) + "/relpos_bias/rel_embedding", {heads, 32}});
  return shapes;
}

TEST(HfT5, Umt5NamesTablesPerLayerAndRoundTripsBitwise) {
  EXPECT_EQ(t5x_to_hf_name("decoder/layers_3/relpos_bias/rel_embedding")->name,
            "decoder.block.3.layer.0.SelfAttention.relative_attention_bias.weight");
  EXPECT_TRUE(t5x_to_hf_name("encoder/layers_0/relpos_bias/rel_embedding")->transpose);
  const std::string block0 = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
  EXPECT_EQ(hf_to_t5x_name(block0)->name, "encoder/relpos_bias/rel_embedding");  // T5: the stack's
  EXPECT_EQ(hf_to_t5x_name(block0, /*relpos_per_layer=*/true)->name, "encoder/layers_0/relpos_bias/rel_embedding");
  EXPECT_EQ(hf_to_t5x_name("decoder.block.2.layer.0.SelfAttention.relative_attention_bias.weight", true)->name,
            "decoder/layers_2/relpos_bias/rel_embedding");

  const auto shapes = umt5_param_shapes(4, 2, 3);
  HfT5Config cfg = infer_hf_t5_config(shapes);
  EXPECT_TRUE(cfg.relpos_per_layer);
  EXPECT_EQ(cfg.num_heads, 4);
  EXPECT_EQ(cfg.d_kv, 3);
  EXPECT_EQ(cfg.num_decoder_layers, 3);
  const auto j = nlohmann::json::parse(cfg.to_json());
  EXPECT_EQ(j["model_type"], "umt5");
  EXPECT_EQ(j["architectures"][0], "UMT5ForConditionalGeneration");
  EXPECT_TRUE(HfT5Config::from_json(cfg.to_json(), "config.json").relpos_per_layer);
  NamedTensors params = random_params(shapes);
  NamedTensors hf = t5x_params_to_hf(params);
  int tables = 0;
  for (const auto& [n, t] : hf) tables += n.find("relative_attention_bias") != std::string::npos;
  EXPECT_EQ(tables, 5);
  NamedTensors back = hf_params_to_t5x(hf, cfg);
  std::sort(back.begin(), back.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::sort(params.begin(), params.end(), [](auto& a, auto& b) { return a.first < b.first; });
  EXPECT_EQ(back, params);

  // A table missing from one layer (or a stack's table besides the layers') has no Hugging Face model.
  auto missing = shapes;
  std::erase_if(missing, [](const ParamShape& p) { return p.name == "decoder/layers_1/relpos_bias/rel_embedding"; });
  EXPECT_THROW(infer_hf_t5_config(missing), CheckpointError);
  auto both = t5_param_shapes(40, 8, 4, 3, 16, 2, 3, true, false);
  both.push_back({"decoder/layers_1/relpos_bias/rel_embedding", {4, 32}});
  EXPECT_THROW(infer_hf_t5_config(both), CheckpointError);
}

TEST(HfT5, Mt5AndUmt5ConfigJson) {
  // mT5 as published (google/mt5-small: tie_word_embeddings false), and one
  // tied: transformers' MT5 never scales the decoder output.
  const std::string mt5 = R"({"model_type":"mt5","d_model":512,"d_ff":1024,"num_layers":8,"num_heads":6,"d_kv":64,)"
                          R"("vocab_size":250112,"feed_forward_proj":"gated-gelu","tie_word_embeddings":)";
  HfT5Config m = HfT5Config::from_json(mt5 + "false}", "mt5/config.json");
  EXPECT_FALSE(m.relpos_per_layer);
  EXPECT_FALSE(m.scale_decoder_outputs);
  EXPECT_EQ(m.vocab_size, 250112);
  EXPECT_FALSE(HfT5Config::from_json(mt5 + "true}", "mt5/config.json").scale_decoder_outputs);
  // umT5 as published (google/umt5-small) and without model_type.
  HfT5Config u = HfT5Config::from_json(
      R"({"model_type":"umt5","d_model":512,"num_layers":8,"num_heads":6,"feed_forward_proj":"gated-gelu",)"
      R"("tie_word_embeddings":false})",
      "umt5/config.json");
  EXPECT_TRUE(u.relpos_per_layer);
  EXPECT_FALSE(u.scale_decoder_outputs);
  EXPECT_TRUE(HfT5Config::from_json(R"({"architectures":["UMT5ForConditionalGeneration"]})", "c").relpos_per_layer);
  EXPECT_FALSE(HfT5Config::from_json(R"({"model_type":"t5"})", "c").relpos_per_layer);
}

// A Switch model's t5x shapes: t5_param_shapes' MLPs of the sparse layers
// replaced by nn::moe_param_specs' router and stacked experts (config.h).
std::vector<ParamShape> switch_param_shapes(int64_t E, int64_t layers, const std::vector<int64_t>& sparse,
                                            bool gated_experts = false) {
  const int64_t emb = 8, mlp = 12;
  std::vector<ParamShape> out;
  for (auto& p : t5_param_shapes(40, emb, 2, 4, mlp, layers, layers, false, false)) {
    bool is_sparse = false;
    for (const std::string stack : {"encoder", "decoder"})
      for (int64_t i : sparse) is_sparse |= p.name.rfind(stack + "/layers_" + std::to_string(i) + "/mlp/", 0) == 0;
    if (!is_sparse) { out.push_back(p); continue; }
    if (!p.name.ends_with("/wo/kernel")) continue;  // one set per layer, added at wo
    const std::string pre = p.name.substr(0, p.name.size() - std::string("wo/kernel").size());
    out.push_back({pre + "router/router_weights/w/kernel", {emb, E}});
    if (gated_experts) {
      out.push_back({pre + "expert/wi_0/kernel", {E, emb, mlp}});
      out.push_back({pre + "expert/wi_1/kernel", {E, emb, mlp}});
    } else {
      out.push_back({pre + "expert/wi/kernel", {E, emb, mlp}});
    }
    out.push_back({pre + "expert/wo/kernel", {E, mlp, emb}});
  }
  return out;
}

const HostTensor& find(const NamedTensors& t, const std::string& name) {
  for (const auto& [n, x] : t) if (n == name) return x;
  throw std::runtime_error("no tensor " + name);
}

TEST(HfSwitch, ExpertsSplitAndStackBitwise) {
  auto shapes = switch_param_shapes(4, 4, {1, 3});
  NamedTensors params = random_params(shapes);
  HfT5Config cfg = infer_hf_t5_config(shapes);
  EXPECT_TRUE(cfg.switch_transformers);
  EXPECT_EQ(cfg.num_experts, 4);
  EXPECT_EQ(cfg.num_sparse_encoder_layers, 2);  // step 2: transformers' 1, 3 = t5x MIXED
  EXPECT_EQ(cfg.num_sparse_decoder_layers, 2);
  EXPECT_EQ(cfg.d_ff, 12);
  EXPECT_EQ(cfg.feed_forward_proj, "relu");
  NamedTensors hf = t5x_params_to_hf(params);
  // Switch names: .mlp. for dense MLPs, per-expert tensors, the router classifier.
  EXPECT_EQ(find(hf, "encoder.block.0.layer.1.mlp.wi.weight").shape, (std::vector<int64_t>{12, 8}));
  const HostTensor& router = find(hf, "decoder.block.3.layer.2.mlp.router.classifier.weight");
  EXPECT_EQ(router.shape, (std::vector<int64_t>{4, 8}));  // [E, d_model]
  const HostTensor& e2 = find(hf, "encoder.block.1.layer.1.mlp.experts.expert_2.wi.weight");
  EXPECT_EQ(e2.shape, (std::vector<int64_t>{12, 8}));  // [d_ff, d_model]
  const HostTensor& stacked = find(params, "encoder/layers_1/mlp/expert/wi/kernel");  // [E, 8, 12]
  EXPECT_EQ(e2.values<float>()[5 * 8 + 3], stacked.values<float>()[2 * 96 + 3 * 12 + 5]);
  const HostTensor& rk = find(params, "decoder/layers_3/mlp/router/router_weights/w/kernel");  // [8, E]
  EXPECT_EQ(router.values<float>()[1 * 8 + 6], rk.values<float>()[6 * 4 + 1]);
  for (auto& [n, t] : hf) EXPECT_EQ(n.find("DenseReluDense"), std::string::npos) << n;
  // 4 sparse layers x 2 kernels split into 4; the embedding copied into both embed_tokens.
  EXPECT_EQ(hf.size(), params.size() + 4 * (4 - 1) * 2 + 2);
  EXPECT_EQ(find(hf, "decoder.embed_tokens.weight"), find(params, "token_embedder/embedding"));

  // The config.json round trip keeps the Switch fields.
  HfT5Config back_cfg = HfT5Config::from_json(cfg.to_json(), "config.json");
  EXPECT_TRUE(back_cfg.switch_transformers);
  EXPECT_EQ(back_cfg.num_experts, 4);
  EXPECT_EQ(back_cfg.num_sparse_encoder_layers, 2);
  EXPECT_EQ(back_cfg.expert_capacity, 64);
  EXPECT_EQ(nlohmann::json::parse(cfg.to_json())["architectures"][0], "SwitchTransformersForConditionalGeneration");

  NamedTensors back = hf_params_to_t5x(hf, back_cfg);
  std::sort(back.begin(), back.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::sort(params.begin(), params.end(), [](auto& a, auto& b) { return a.first < b.first; });
  EXPECT_EQ(back, params);

  // One expert missing, one too many: the layer and both counts are named.
  NamedTensors fewer;
  for (auto& nt : hf) if (nt.first != "encoder.block.3.layer.1.mlp.experts.expert_3.wo.weight") fewer.push_back(nt);
  try {
    hf_params_to_t5x(fewer, back_cfg);
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'encoder/layers_3/mlp/expert/wo/kernel': the Hugging Face files hold 3 "
                                         "experts of this layer, config.json has num_experts = 4"), std::string::npos)
        << e.what();
  }
  HfT5Config three = back_cfg;
  three.num_experts = 3;
  try {
    hf_params_to_t5x(hf, three);
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("is expert 3 but config.json has num_experts = 3"), std::string::npos) << e.what();
  }
}

TEST(HfSwitch, PlacementsTransformersCannotExpressAreRefused) {
  // transformers: i % (L / n) == 1, so step 1 (every layer) converts ...
  HfT5Config all = infer_hf_t5_config(switch_param_shapes(2, 3, {0, 1, 2}));
  EXPECT_EQ(all.num_sparse_encoder_layers, 3);
  EXPECT_EQ(all.d_ff, 12);  // from the experts: no dense MLP left
  // ... as does 3 layers with layer 1 sparse (transformers n = 1, step 3) ...
  EXPECT_EQ(infer_hf_t5_config(switch_param_shapes(2, 3, {1})).num_sparse_encoder_layers, 1);
  // ... but flaxformer's MIXED step 4 (3, 7, 11; here 3 of 4) is not transformers' 1, 5, 9.
  try {
    infer_hf_t5_config(switch_param_shapes(2, 4, {3}));
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("sparse encoder layers {3} of 4 have no Hugging Face Switch Transformers "
                                         "placement"), std::string::npos) << e.what();
  }
  EXPECT_THROW(infer_hf_t5_config(switch_param_shapes(2, 2, {1}, /*gated_experts=*/true)), CheckpointError);
  EXPECT_THROW(t5x_params_to_hf(random_params(switch_param_shapes(2, 2, {1}, true))), CheckpointError);
  // transformers' quirk: 0 sparse layers still makes layer 1 sparse.
  HfT5Config c;
  c.switch_transformers = true;
  c.num_layers = 4;
  c.num_sparse_encoder_layers = 0;
  EXPECT_TRUE(c.hf_sparse_layer(true, 1));
  EXPECT_FALSE(c.hf_sparse_layer(true, 0));
}

TEST(HfSwitch, ConfigJsonErrors) {
  const std::string base = R"({"model_type":"switch_transformers","d_model":8,"num_layers":2,"num_experts":4,)";
  auto err = [&](const std::string& rest) {
    try {
      HfT5Config::from_json(base + rest, "m/config.json");
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(R"("router_bias":true})").find("m/config.json: router_bias = true"), std::string::npos);
  EXPECT_NE(err(R"("router_dtype":"bfloat16"})").find("router_dtype = \"bfloat16\""), std::string::npos);
  EXPECT_NE(err(R"("num_experts":0})").find("num_experts = 0"), std::string::npos);
  EXPECT_NE(err(R"("dense_act_fn":"gated-gelu"})").find("gated activation"), std::string::npos);
  HfT5Config ok = HfT5Config::from_json(base + R"("dense_act_fn":"gelu_new","expert_capacity":16})", "c");
  EXPECT_TRUE(ok.switch_transformers);
  EXPECT_EQ(ok.feed_forward_proj, "gelu_new");
  EXPECT_EQ(ok.expert_capacity, 16);
  EXPECT_EQ(ok.num_sparse_encoder_layers, 3);  // transformers' default
  EXPECT_TRUE(ok.tie_word_embeddings);
}

}  // namespace
}  // namespace t5x
