// A relative position table in each layer (T5Config::relpos_per_layer, umT5;
// t5x/examples/scalable_t5/network.py): the parameters, equal tables giving
// the shared table's logits and gradient (the sum of the layers' gradients),
// cached decoding equal to teacher forcing, and the gin binding. The values
// against Hugging Face's UMT5 are checked by t5x_ckpt_hf_t5_import.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "ops/autodiff.h"
#include "t5x/gin/config.h"
#include "t5x/models/gin_model.h"
#include "ops/ops.h"
#include "t5x/models/models.h"
#include "t5x/models/network.h"
#include "gin_test_util.h"
#include "test_util.h"

namespace t5x {
namespace {

using testing::small_test_config;
using testing::decoder_only_batch;
using testing::enc_dec_batch;
using testing::tokens;

T5Config per_layer(T5Config c = small_test_config()) {
  c.relpos_per_layer = true;
  return c;
}

std::string table(const std::string& owner) { return owner + "/relpos_bias/rel_embedding"; }
std::string layer(const char* stack, int i) { return std::string(stack) + "/layers_" + std::to_string(i); }

// The shared-table model's params with each layer given a copy of its stack's table.
ParamTree spread_tables(ParamTree p, const T5Config& c, bool encoder) {
  for (const char* stack : {"encoder", "decoder"}) {
    if (!encoder && std::string(stack) == "encoder") continue;
    const Array t = p.at(table(stack));
    p.erase(table(stack));
    const int64_t n = std::string(stack) == "encoder" ? c.num_encoder_layers : c.num_decoder_layers;
    for (int i = 0; i < n; ++i) p[table(layer(stack, i))] = t;
  }
  return p;
}

TEST(RelposPerLayer, ParamsAreOneTablePerSelfAttentionLayer) {
  const T5Config c = per_layer();
  const ParamTree shared = EncoderDecoderModel(small_test_config()).init(prng_key(1));
  const ParamTree p = EncoderDecoderModel(c).init(prng_key(1));
  EXPECT_EQ(p.count(table("encoder")), 0u);
  EXPECT_EQ(p.count(table("decoder")), 0u);
  for (const char* stack : {"encoder", "decoder"})
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(p.count(table(layer(stack, i))), 1u) << stack << " layer " << i;
      EXPECT_EQ(p.at(table(layer(stack, i))).shape().to_string(), "[heads=2, relpos_buckets=32]");
    }
  EXPECT_EQ(p.size(), shared.size() + 2u);  // 4 layer tables for 2 stack tables
  // Initialised apart (each its own key), as flax's per-layer modules are.
  EXPECT_GT(max_abs_diff(p.at(table(layer("decoder", 0))), p.at(table(layer("decoder", 1)))), 0.0);
  const ParamTree d = DecoderOnlyModel(c).init(prng_key(1));
  EXPECT_EQ(d.count(table("decoder")), 0u);
  EXPECT_EQ(d.count(table(layer("decoder", 1))), 1u);
  // Mixing encoder layers (FNet) have no attention and so no table.
  T5Config f = c;
  f.encoder_mixing = T5Config::Mixing::kFourier;
  const ParamTree fp = EncoderDecoderModel(f).init(prng_key(1));
  EXPECT_EQ(fp.count(table(layer("encoder", 0))), 0u);
  EXPECT_EQ(fp.count(table(layer("decoder", 0))), 1u);
}

// With every layer's table equal to the stack's, the logits are the shared
// table's bit for bit, and the stack table's gradient is the sum of the
// layers' gradients (each layer reads its own table, and every layer reads one).
TEST(RelposPerLayer, EqualTablesGiveTheSharedTablesLogitsAndGradientSum) {
  for (bool decoder_only : {false, true}) {
    SCOPED_TRACE(decoder_only ? "decoder-only" : "encoder-decoder");
    const T5Config base = small_test_config();
    const T5Config c = per_layer(base);
    std::unique_ptr<BaseTransformerModel> shared_model, layer_model;
    if (decoder_only) {
      shared_model = std::make_unique<DecoderOnlyModel>(base, LossOptions{}, true);
      layer_model = std::make_unique<DecoderOnlyModel>(c, LossOptions{}, true);
    } else {
      shared_model = std::make_unique<EncoderDecoderModel>(base);
      layer_model = std::make_unique<EncoderDecoderModel>(c);
    }
    const Batch b = decoder_only ? decoder_only_batch() : enc_dec_batch();
    const ParamTree p = shared_model->init(prng_key(2));
    const ParamTree q = spread_tables(p, c, !decoder_only);
    ASSERT_EQ(q.size(), layer_model->init(prng_key(2)).size());
    auto loss = [&](const BaseTransformerModel& m) {
      return [&](const ParamTree& x) { return m.loss_fn(x, b).first; };
    };
    const ValueAndGrad gs = value_and_grad(loss(*shared_model), p);
    const ValueAndGrad gl = value_and_grad(loss(*layer_model), q);
    EXPECT_EQ(gs.value.item(), gl.value.item());
    for (const char* stack : {"encoder", "decoder"}) {
      if (decoder_only && std::string(stack) == "encoder") continue;
      for (int i = 0; i < 2; ++i) {
        const Array& g = gl.grads.at(table(layer(stack, i)));
        EXPECT_GT(max_abs_diff(g, mul(g, 0.0)), 1e-6) << stack << ": layer " << i << "'s table gets no gradient";
      }
      const Array sum_of_layers = add(gl.grads.at(table(layer(stack, 0))), gl.grads.at(table(layer(stack, 1))));
      EXPECT_LT(max_abs_diff(sum_of_layers, gs.grads.at(table(stack))), 1e-6) << stack;
      // The layers' gradients differ: each is its own layer's.
      EXPECT_GT(max_abs_diff(gl.grads.at(table(layer(stack, 0))), gl.grads.at(table(layer(stack, 1)))), 1e-7);
    }
  }
}

// Step-by-step cached decoding (the step's bias at the cache index, per
// layer) gives the teacher-forced logits, with the layers' tables apart.
TEST(RelposPerLayer, CachedDecodingEqualsTeacherForcedLogits) {
  const T5Config c = per_layer();
  const std::vector<int64_t> dec = {0, 4, 8, 12, 3, 0, 6, 9, 1, 5};
  nn::Dropout none;
  {
    const ParamTree p = EncoderDecoderModel(c).init(prng_key(3));
    Array enc = tokens(2, 6, {5, 7, 9, 3, 1, 0, 2, 4, 6, 8, 11, 1});
    Array encoded = t5_encode(c, p, enc, Array(), none);
    Array full = t5_decode(c, p, encoded, enc, tokens(2, 5, dec), Array(), Array(), Array(), none);
    DecoderCache cache = t5_init_decoder_cache(c, p, encoded, enc, 5);
    for (int64_t i = 0; i < 5; ++i) {
      Array step = t5_decode_step(c, p, cache, Array::from_ints(Shape{{"batch", 2}}, {dec[size_t(i)], dec[size_t(5 + i)]}));
      Array want = transpose(slice(full, "length", i, 1), {"batch", "length", "vocab"});
      EXPECT_LT(max_abs_diff(step, reshape(want, step.shape())), 1e-5) << "encoder-decoder position " << i;
    }
  }
  {
    const ParamTree p = DecoderOnlyModel(c).init(prng_key(4));
    Array full = decoder_only_forward(c, p, tokens(2, 5, dec), Array(), Array(), Array(), none);
    DecoderCache cache = decoder_only_prefill(c, p, tokens(2, 2, {dec[0], dec[1], dec[5], dec[6]}), Array(),
                                              Array::from_ints(Shape{{"batch", 2}}, {2, 2}), 5);
    for (int64_t i = 2; i < 5; ++i) {
      Array step = decoder_only_decode_step(c, p, cache,
                                            Array::from_ints(Shape{{"batch", 2}}, {dec[size_t(i)], dec[size_t(5 + i)]}));
      Array want = transpose(slice(full, "length", i, 1), {"batch", "length", "vocab"});
      EXPECT_LT(max_abs_diff(step, reshape(want, step.shape())), 1e-5) << "decoder-only position " << i;
    }
  }
}

TEST(RelposPerLayer, GinBindingSetsIt) {
  const std::string dropout = "DROPOUT_RATE = 0.0";
  EXPECT_FALSE(testing::load_model_gin("t5_1_1/small.gin", {dropout}).network.relpos_per_layer);
  EXPECT_TRUE(testing::load_model_gin("t5_1_1/small.gin", {dropout, "network.T5Config.relpos_per_layer = True"})
                  .network.relpos_per_layer);
  EXPECT_TRUE(
      testing::load_model_gin("decoder_only/small.gin", {dropout, "network.TransformerConfig.relpos_per_layer = True"})
          .network.relpos_per_layer);
}

// t5x's scalable_t5 files: base.gin imports the network, small.gin (no
// import of its own) sizes it; scan_layers (True in base.gin, and its
// default) and param_scan_axis choose the checkpoint layout
// (trainer/scalable_layout_test.cpp), and the model is T5.1.1 small with a
// table in each layer either way.
TEST(RelposPerLayer, ScalableT5GinFilesReadWithPerLayerParameters) {
  const std::string base = R"(
from __gin__ import dynamic_registration
from t5x import models
from t5x.examples.scalable_t5 import network

MODEL = @models.EncoderDecoderModel()
models.EncoderDecoderModel.module = @network.Transformer()
network.Transformer.config = @network.T5Config()
network.T5Config:
  vocab_size = 32128
  dtype = 'bfloat16'
  emb_dim = 768
  num_heads = 12
  num_encoder_layers = 12
  num_decoder_layers = 12
  head_dim = 64
  mlp_dim = 2048
  mlp_activations = ('gelu', 'linear')
  dropout_rate = 0.0
  logits_via_embedding = False
  scan_layers = True
  remat_policy = 'minimal'
)";
  const std::string small = R"(
network.Transformer.config = @network.T5Config()
network.T5Config:
  emb_dim = 512
  num_heads = 6
  num_encoder_layers = 8
  num_decoder_layers = 8
  head_dim = 64
  mlp_dim = 1024
)";
  gin::Config cfg(&testing::t5x_registry());
  cfg.parse_string(base, "scalable_t5/t5_1_1/base.gin");
  cfg.parse_string(small, "scalable_t5/t5_1_1/small.gin");
  const ModelConfig scanned = read_model_config(cfg);
  EXPECT_TRUE(scanned.network.scalable_checkpoint.on);
  EXPECT_TRUE(scanned.network.scalable_checkpoint.scan_layers);
  EXPECT_EQ(scanned.network.scalable_checkpoint.param_scan_axis, 1);
  // Left at its default, scan_layers is True too; param_scan_axis is a dim
  // every layer parameter has (the norms' scales are vectors).
  gin::Config d(&testing::t5x_registry());
  std::string no_scan = base;
  no_scan.replace(no_scan.find("  scan_layers = True\n"), std::string("  scan_layers = True\n").size(), "");
  d.parse_string(no_scan, "base.gin");
  EXPECT_TRUE(read_model_config(d).network.scalable_checkpoint.scan_layers);
  d.parse_string("network.T5Config.param_scan_axis = 2", "<bindings>");
  try {
    read_model_config(d);
    ADD_FAILURE() << "param_scan_axis = 2 was read";
  } catch (const gin::GinError& e) {
    EXPECT_NE(std::string(e.what()).find("param_scan_axis = 2 is not a dim every layer parameter has"),
              std::string::npos)
        << e.what();
  }
  cfg.parse_string("network.T5Config.scan_layers = False", "<bindings>");
  const ModelConfig m = read_model_config(cfg);
  EXPECT_FALSE(m.network.scalable_checkpoint.scan_layers);
  EXPECT_TRUE(m.network.relpos_per_layer);
  EXPECT_EQ(m.network.emb_dim, 512);
  EXPECT_EQ(m.network.num_decoder_layers, 8);
  EXPECT_EQ(m.network.dtype, DType::bf16);
  // T5.1.1 small's parameters with 16 layer tables for 2 stack tables.
  EXPECT_EQ(make_model(m)->num_params(), 76961152 + 14 * 6 * 32);
  const nn::ParamSpecs specs = encoder_decoder_param_specs(m.network);
  EXPECT_TRUE(std::any_of(specs.begin(), specs.end(), [](const nn::ParamSpec& p) {
    return p.name == "decoder/layers_7/relpos_bias/rel_embedding";
  }));
  // The operative config reads back to the same configuration.
  gin::Config back(&testing::t5x_registry());
  back.parse_string(cfg.operative_config_str(), "config.gin");
  EXPECT_TRUE(back.equivalent(cfg)) << cfg.operative_config_str();
  // The T5 network's files are unaffected: their network.T5Config is T5's.
  EXPECT_FALSE(testing::load_model_gin("t5_1_1/small.gin", {"DROPOUT_RATE = 0.0"}).network.relpos_per_layer);
}

}  // namespace
}  // namespace t5x
