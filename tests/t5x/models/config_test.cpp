// Configurations: t5x parameter names, counts computed from shapes, model-info listing.
#include <gtest/gtest.h>

#include <cmath>

#include "mesh/logical_axis_rules.h"
#include "t5x/models/models.h"

namespace t5x {
namespace {

// Closed form for a T5.1.1 encoder-decoder (gated GELU, untied logits).
int64_t t5_1_1_count(int64_t v, int64_t e, int64_t h, int64_t layers, int64_t d, int64_t m) {
  int64_t att = 4 * e * h * d, mlp = 3 * e * m;
  int64_t enc = layers * (att + mlp + 2 * e) + e + h * 32;
  int64_t dec = layers * (2 * att + mlp + 3 * e) + e + h * 32;
  return 2 * v * e + enc + dec;
}

TEST(ModelConfig, T5_1_1ParamCountsMatchT5x) {
  struct Case {
    const char* size;
    double approx;  // t5x's published sizes
  } cases[] = {{"small", 77e6}, {"base", 248e6}, {"large", 783e6}, {"xl", 2.85e9}, {"xxl", 11.3e9}};
  for (const auto& c : cases) {
    T5Config cfg = t5_1_1_config(c.size);
    EncoderDecoderModel m(cfg);
    int64_t n = m.num_params();  // from shapes only: nothing is allocated
    EXPECT_EQ(n, t5_1_1_count(cfg.vocab_size, cfg.emb_dim, cfg.num_heads, cfg.num_encoder_layers, cfg.head_dim,
                              cfg.mlp_dim))
        << c.size;
    EXPECT_NEAR(double(n) / c.approx, 1.0, 0.02) << c.size << ": " << n;
  }
  EXPECT_EQ(EncoderDecoderModel(t5_1_1_config("small")).num_params(), 76961152);
  EXPECT_EQ(EncoderDecoderModel(t5_1_1_config("base")).num_params(), 247577856);
}

TEST(ModelConfig, NonsenseSizesAreRefusedByTheirGinName) {
  auto message = [](const T5Config& c) {
    try {
      (void)EncoderDecoderModel(c).param_specs();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  T5Config c = t5_1_1_config("small");
  c.num_heads = 0;
  EXPECT_NE(message(c).find("num_heads = 0 must be >= 1"), std::string::npos) << message(c);
  EXPECT_NE(message(c).find("network.T5Config.num_heads"), std::string::npos) << message(c);
  c = t5_1_1_config("small");
  c.emb_dim = -3;
  EXPECT_NE(message(c).find("emb_dim = -3"), std::string::npos) << message(c);
  c = t5_1_1_config("small");
  c.num_encoder_layers = -1;
  EXPECT_NE(message(c).find("num_encoder_layers = -1"), std::string::npos) << message(c);
  for (double rate : {-0.5, 1.0, std::nan("")}) {
    c = t5_1_1_config("small");
    c.dropout_rate = rate;
    EXPECT_NE(message(c).find("dropout_rate"), std::string::npos) << rate << ": " << message(c);
  }
  c = t5_1_1_config("small");
  c.dropout_rate = 0.1;
  EXPECT_EQ(message(c), "no error");
  // The decoder-only model checks them too.
  T5Config d = decoder_only_config("small");
  d.head_dim = 0;
  EXPECT_THROW((void)DecoderOnlyModel(d).param_specs(), std::invalid_argument);
}

TEST(ModelConfig, T5_1_0AndDecoderOnly) {
  // T5.1.0 small (tied, relu): ~60.5M as in the T5 paper's "Small".
  int64_t n = EncoderDecoderModel(t5_1_0_config("small")).num_params();
  EXPECT_NEAR(double(n), 60.5e6, 0.5e6);
  auto specs = EncoderDecoderModel(t5_1_0_config("small")).param_specs();
  for (const auto& s : specs) EXPECT_EQ(s.name.find("logits_dense"), std::string::npos);
  EXPECT_EQ(specs[3].name, "encoder/layers_0/attention/query/kernel");  // wi, not wi_0
  bool has_wi = false;
  for (const auto& s : specs) has_wi = has_wi || s.name == "encoder/layers_0/mlp/wi/kernel";
  EXPECT_TRUE(has_wi);
  DecoderOnlyModel d(decoder_only_config("small"));
  auto ds = d.param_specs();
  EXPECT_EQ(ds.front().name, "decoder/token_embedder/embedding");
  EXPECT_EQ(ds[1].name, "decoder/relpos_bias/rel_embedding");
  EXPECT_EQ(d.num_params(), 32128 * 512 + 6 * 32 + 8 * (4 * 512 * 384 + 3 * 512 * 1024 + 2 * 512) + 512);
  EXPECT_THROW(t5_1_1_config("huge"), std::invalid_argument);
  EXPECT_EQ(model_config_by_name("t5_1_1/base").emb_dim, 768);
}

TEST(ModelConfig, T5xParamTreeNamesAndAxes) {
  EncoderDecoderModel m(t5_1_1_config("tiny"));
  auto axes = m.param_axes();
  using V = std::vector<std::string>;
  EXPECT_EQ(axes.at("token_embedder/embedding"), (V{"vocab", "embed"}));
  EXPECT_EQ(axes.at("encoder/relpos_bias/rel_embedding"), (V{"heads", "relpos_buckets"}));
  EXPECT_EQ(axes.at("encoder/layers_1/attention/out/kernel"), (V{"joined_kv", "embed"}));
  EXPECT_EQ(axes.at("encoder/layers_0/mlp/wi_1/kernel"), (V{"embed", "mlp"}));
  EXPECT_EQ(axes.at("decoder/layers_1/encoder_decoder_attention/key/kernel"), (V{"embed", "joined_kv"}));
  EXPECT_EQ(axes.at("decoder/layers_0/pre_cross_attention_layer_norm/scale"), (V{"embed"}));
  EXPECT_EQ(axes.at("decoder/logits_dense/kernel"), (V{"embed", "vocab"}));
  EXPECT_EQ(axes.at("encoder/encoder_norm/scale"), (V{"embed"}));
  EXPECT_EQ(axes.size(), size_t(6 + 2 * 9 + 2 * 14));
  // Init is a pure function of the key.
  ParamTree a = m.init(prng_key(0)), b = m.init(prng_key(0));
  for (const auto& [k, v] : a) EXPECT_TRUE(array_equal(v, b.at(k))) << k;
}

TEST(ModelConfig, ModelInfoPartitionSpecs) {
  auto specs = EncoderDecoderModel(t5_1_1_config("tiny")).param_specs();
  MeshDesc mesh{{"data", "model"}, {2, 2}, 0};
  std::string info = model_info(specs, standard_logical_axis_rules(), &mesh);
  EXPECT_NE(info.find("Variable encoder/layers_0/attention/query/kernel"), std::string::npos);
  EXPECT_NE(info.find("shape (embed=8, joined_kv=12)"), std::string::npos);
  EXPECT_NE(info.find("partition spec (None, 'model')"), std::string::npos);
  EXPECT_NE(info.find("partition spec ('model', None)"), std::string::npos);  // embedding, relpos
  EXPECT_NE(info.find("partition spec (None,)"), std::string::npos);          // norm scales
  EXPECT_NE(info.find("Total number of parameters: " + std::to_string(EncoderDecoderModel(t5_1_1_config("tiny")).num_params())),
            std::string::npos);
  // ZeRO-3-like rules shard embed over data.
  std::string z = model_info(specs, standard_logical_axis_rules(1, 2), &mesh);
  EXPECT_NE(z.find("partition spec ('data', 'model')"), std::string::npos);
  // A mesh that does not divide a dim is an error (heads=4 over model=8).
  MeshDesc bad{{"data", "model"}, {1, 8}, 0};
  // The chief's start-up check of `t5x train`: the error names the parameter.
  try {
    model_info(specs, standard_logical_axis_rules(), &bad);
    ADD_FAILURE() << "model_info accepted heads=4 over model=8";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("[sharding] parameter '", 0), 0u) << m;
    EXPECT_NE(m.find("is not divisible by 8, the size of mesh axis 'model'"), std::string::npos) << m;
    EXPECT_NE(m.find("hint: a dim that logical_axis_rules split over a mesh axis"), std::string::npos) << m;
  }
  // Grouped K/V kernels: kv_heads split when 'model' divides it, else replicated.
  for (int64_t g : {1, 2}) {
    T5Config c = t5_1_1_config("tiny");
    c.num_kv_heads = g;
    std::string q = model_info(EncoderDecoderModel(c).param_specs(), standard_logical_axis_rules(), &mesh);
    const std::string line = "decoder/layers_0/self_attention/key/kernel";
    std::string l = q.substr(q.find(line), q.find('\n', q.find(line)) - q.find(line));
    EXPECT_NE(l.find("shape (embed=8, kv_heads=" + std::to_string(g) + ", kv=3)"), std::string::npos) << l;
    EXPECT_NE(l.find(std::string("partition spec ") + (g == 2 ? "(None, 'model', None)" : "(None, None, None)")),
              std::string::npos)
        << l;
  }
  PartitionSpec two({{"data", "model"}, {}});
  EXPECT_EQ(partition_spec_text(two), "(('data', 'model'), None)");
}

}  // namespace
}  // namespace t5x
