// Models built from the repository's gin model files (configs/models/*.gin).
#include <gtest/gtest.h>

#include <filesystem>

#include "t5x/gin/config.h"
#include "t5x/gin/registry.h"
#include "t5x/models/gin_model.h"

namespace t5x {
namespace {

const gin::Registry& registry() {
  static gin::Registry r = [] {
    gin::Registry reg;
    gin::register_t5x_configurables(reg);
    return reg;
  }();
  return r;
}

ModelSpec load(const std::string& rel, const std::vector<std::string>& bindings) {
  std::string path = (std::filesystem::path(T5X_SOURCE_DIR) / "configs" / "models" / rel).string();
  return model_spec_from_gin(gin::parse_config_files_and_bindings({path}, bindings, {}, &registry()));
}

TEST(GinModel, T5_1_1SmallFromGin) {
  ModelSpec s = load("t5_1_1/small.gin", {"DROPOUT_RATE = 0.1"});
  EXPECT_EQ(s.kind, ModelSpec::Kind::encoder_decoder);
  T5Config want = t5_1_1_config("small");
  EXPECT_EQ(s.config.emb_dim, want.emb_dim);
  EXPECT_EQ(s.config.num_heads, want.num_heads);
  EXPECT_EQ(s.config.mlp_dim, want.mlp_dim);
  EXPECT_EQ(s.config.mlp_activations, want.mlp_activations);
  EXPECT_EQ(s.config.dtype, DType::bf16);
  EXPECT_DOUBLE_EQ(s.config.dropout_rate, 0.1);
  EXPECT_FALSE(s.config.logits_via_embedding);
  EXPECT_DOUBLE_EQ(s.loss.z_loss, 1e-4);
  EXPECT_EQ(s.loss.loss_normalizing_factor.kind, LossNormalizingFactor::Kind::none);
  EXPECT_EQ(make_model(s)->num_params(), 76961152);
  // Bindings override the file (t5x's --gin.* flags).
  ModelSpec o = load("t5_1_1/small.gin", {"DROPOUT_RATE = 0.0", "LOSS_NORMALIZING_FACTOR = 233472",
                                          "network.T5Config.num_decoder_layers = 2"});
  EXPECT_EQ(o.loss.loss_normalizing_factor.kind, LossNormalizingFactor::Kind::constant);
  EXPECT_DOUBLE_EQ(o.loss.loss_normalizing_factor.value, 233472.0);
  EXPECT_EQ(o.config.num_decoder_layers, 2);
  ModelSpec a = load("t5_1_1/small.gin", {"DROPOUT_RATE = 0.0", "LOSS_NORMALIZING_FACTOR = 'AVERAGE_PER_SEQUENCE'"});
  EXPECT_EQ(a.loss.loss_normalizing_factor.kind, LossNormalizingFactor::Kind::average_per_sequence);
}

TEST(GinModel, T5_1_0AndDecoderOnlyFromGin) {
  ModelSpec t = load("t5_1_0/base.gin", {"DROPOUT_RATE = 0.0"});
  EXPECT_TRUE(t.config.logits_via_embedding);
  EXPECT_EQ(t.config.mlp_activations, (std::vector<std::string>{"relu"}));
  EXPECT_EQ(make_model(t)->num_params(), EncoderDecoderModel(t5_1_0_config("base")).num_params());
  ModelSpec d = load("decoder_only/small.gin", {"DROPOUT_RATE = 0.0"});
  EXPECT_EQ(d.kind, ModelSpec::Kind::decoder_only);
  EXPECT_EQ(d.config.num_decoder_layers, 8);
  EXPECT_EQ(d.decode.sampling.topk, 40);
  EXPECT_FALSE(d.inputs_bidirectional_attention);
  EXPECT_EQ(make_model(d)->num_params(), DecoderOnlyModel(decoder_only_config("small")).num_params());
}

TEST(GinModel, MissingDropoutRateIsAGinError) {
  EXPECT_THROW(load("t5_1_1/small.gin", {}), gin::GinError);
}

}  // namespace
}  // namespace t5x
