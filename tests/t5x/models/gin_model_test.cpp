// Models built from the repository's gin model files (configs/models/*.gin).
#include <gtest/gtest.h>

#include <filesystem>

#include "t5x/gin/config.h"
#include "t5x/gin/registry.h"
#include "t5x/models/gin_model.h"
#include "gin_test_util.h"

namespace t5x {
namespace {

const gin::Registry& registry() { return testing::t5x_registry(); }

ModelConfig load(const std::string& rel, const std::vector<std::string>& bindings) {
  return testing::load_model_gin(rel, bindings);
}

TEST(GinModel, T5_1_1SmallFromGin) {
  ModelConfig s = load("t5_1_1/small.gin", {"DROPOUT_RATE = 0.1"});
  EXPECT_FALSE(s.decoder_only);
  T5Config want = t5_1_1_config("small");
  EXPECT_EQ(s.network.emb_dim, want.emb_dim);
  EXPECT_EQ(s.network.num_heads, want.num_heads);
  EXPECT_EQ(s.network.mlp_dim, want.mlp_dim);
  EXPECT_EQ(s.network.mlp_activations, want.mlp_activations);
  EXPECT_EQ(s.network.dtype, DType::bf16);
  EXPECT_DOUBLE_EQ(s.network.dropout_rate, 0.1);
  EXPECT_FALSE(s.network.logits_via_embedding);
  EXPECT_DOUBLE_EQ(s.loss.z_loss, 1e-4);
  EXPECT_EQ(s.loss.loss_normalizing_factor.kind, LossNormalizingFactor::Kind::none);
  EXPECT_EQ(make_model(s)->num_params(), 76961152);
  // Bindings override the file (t5x's --gin.* flags).
  ModelConfig o = load("t5_1_1/small.gin", {"DROPOUT_RATE = 0.0", "LOSS_NORMALIZING_FACTOR = 233472",
                                          "network.T5Config.num_decoder_layers = 2"});
  EXPECT_EQ(o.loss.loss_normalizing_factor.kind, LossNormalizingFactor::Kind::constant);
  EXPECT_DOUBLE_EQ(o.loss.loss_normalizing_factor.value, 233472.0);
  EXPECT_EQ(o.network.num_decoder_layers, 2);
  ModelConfig a = load("t5_1_1/small.gin", {"DROPOUT_RATE = 0.0", "LOSS_NORMALIZING_FACTOR = 'AVERAGE_PER_SEQUENCE'"});
  EXPECT_EQ(a.loss.loss_normalizing_factor.kind, LossNormalizingFactor::Kind::average_per_sequence);
}

// gin-config evaluates a scoped reference in its own scope: `@enc/...` read
// inside `outer` sees `enc/...` bindings and not `outer/...` ones; an
// unscoped reference there inherits `outer`.
TEST(GinModel, AScopedReferenceRunsInItsOwnScope) {
  const std::vector<std::string> common = {"DROPOUT_RATE = 0.0", "MODEL = @outer/models.EncoderDecoderModel()",
                                           "enc/network.T5Config.emb_dim = 16", "outer/network.T5Config.emb_dim = 32"};
  auto with = [&](const std::string& module) {
    std::vector<std::string> b = common;
    b.push_back("models.EncoderDecoderModel.module = " + module);
    return load("t5_1_1/tiny.gin", b);
  };
  EXPECT_EQ(with("@enc/network.Transformer()").network.emb_dim, 16);
  EXPECT_EQ(with("@network.Transformer()").network.emb_dim, 32);
  // Scope outer/enc reads outer/enc, then outer, then unscoped bindings (gin
  // looks at prefixes only: enc alone is not one).
  EXPECT_EQ(with("@outer/enc/network.Transformer()").network.emb_dim, 32);
}

TEST(GinModel, T5_1_0AndDecoderOnlyFromGin) {
  ModelConfig t = load("t5_1_0/base.gin", {"DROPOUT_RATE = 0.0"});
  EXPECT_TRUE(t.network.logits_via_embedding);
  EXPECT_EQ(t.network.mlp_activations, (std::vector<std::string>{"relu"}));
  EXPECT_EQ(make_model(t)->num_params(), EncoderDecoderModel(t5_1_0_config("base")).num_params());
  ModelConfig d = load("decoder_only/small.gin", {"DROPOUT_RATE = 0.0"});
  EXPECT_TRUE(d.decoder_only);
  EXPECT_EQ(d.network.num_decoder_layers, 8);
  EXPECT_EQ(d.decode.sampling.topk, 40);
  EXPECT_FALSE(d.inputs_bidirectional_attention);
  EXPECT_EQ(make_model(d)->num_params(), DecoderOnlyModel(decoder_only_config("small")).num_params());
}

// t5x passes instances: `@x` (the class) where `@x()` belongs would fail
// under Python, so it is refused here too, at the binding.
TEST(GinModel, AClassWhereT5xPassesAnInstanceIsRefused) {
  auto error = [](const std::vector<std::string>& b) {
    std::vector<std::string> all = {"DROPOUT_RATE = 0.0"};
    all.insert(all.end(), b.begin(), b.end());
    try {
      load("t5_1_1/tiny.gin", all);
    } catch (const gin::GinError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string m = error({"MODEL = @models.EncoderDecoderModel"});
  EXPECT_NE(m.find("MODEL = @models.EncoderDecoderModel is the model class, not a model"), std::string::npos) << m;
  EXPECT_NE(m.find("write MODEL = @models.EncoderDecoderModel()"), std::string::npos) << m;
  const std::string n = error({"models.EncoderDecoderModel.module = @network.Transformer"});
  EXPECT_NE(n.find("models.EncoderDecoderModel.module = @network.Transformer passes the configurable itself"),
            std::string::npos) << n;
  // Another configurable in the place of the network or its config is named
  // at its binding (it was read for parameters it lacks: "no value bound for
  // network.Transformer.vocab_size", then "has no parameter" on the hint).
  const std::string w = error({"network.Transformer.config = @network.Transformer()"});
  EXPECT_NE(w.find("network.Transformer.config = @network.Transformer() is not what t5x passes there"),
            std::string::npos) << w;
  EXPECT_NE(w.find("hint: write network.Transformer.config = @network.T5Config()"), std::string::npos) << w;
  const std::string x = error({"models.EncoderDecoderModel.module = @network.T5Config()"});
  EXPECT_NE(x.find("hint: write models.EncoderDecoderModel.module = @network.Transformer()"), std::string::npos) << x;
  EXPECT_EQ(error({}), "no error");
}

// models.*.decode_fn picks the algorithm (t5x: beam search for the
// encoder-decoder unless bound), its arguments read in the reference's scope;
// anything else, and return_all_decodes (one prediction per example is
// written), is refused at the binding.
TEST(GinModel, DecodeFnChoosesTheAlgorithm) {
  using M = DecodeOptions::Method;
  auto with = [](std::vector<std::string> b) {
    b.insert(b.begin(), "DROPOUT_RATE = 0.0");
    return load("t5_1_1/tiny.gin", b).decode;
  };
  EXPECT_EQ(with({}).method, M::default_for_model);
  EXPECT_EQ(with({"models.EncoderDecoderModel.decode_fn = @decoding.beam_search"}).method, M::beam_search);
  const DecodeOptions t = with({"models.EncoderDecoderModel.decode_fn = @decoding.temperature_sample",
                                "decoding.temperature_sample.temperature = 5.0",
                                "decoding.temperature_sample.topk = 0"});
  EXPECT_EQ(t.method, M::temperature_sample);
  EXPECT_DOUBLE_EQ(t.sampling.temperature, 5.0);
  EXPECT_EQ(t.sampling.topk, 0);
  const DecodeOptions h = with({"models.EncoderDecoderModel.decode_fn = @hot/decoding.temperature_sample",
                                "decoding.temperature_sample.temperature = 0.5",
                                "hot/decoding.temperature_sample.temperature = 2.0"});
  EXPECT_EQ(h.method, M::temperature_sample);
  EXPECT_DOUBLE_EQ(h.sampling.temperature, 2.0);
  auto error = [&](const std::string& binding) {
    try {
      with({binding});
    } catch (const gin::GinError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string e1 = error("models.EncoderDecoderModel.decode_fn = @network.Transformer");
  EXPECT_NE(e1.find("decode_fn is configurable reference @network.Transformer, not a decoding function"), std::string::npos) << e1;
  EXPECT_NE(e1.find("@decoding.temperature_sample"), std::string::npos) << e1;
  const std::string e2 = error("models.EncoderDecoderModel.predict_batch_with_aux.return_all_decodes = True");
  EXPECT_NE(e2.find("return_all_decodes = True is not supported"), std::string::npos) << e2;
}

// Every field the reader handles, through the MODEL macro and through the
// run script's `model` reference (the path of `t5x train` / `t5x infer`).
TEST(GinModel, PrefixLMAndDecodingFieldsThroughEitherEntry) {
  const std::string dir = (std::filesystem::path(T5X_SOURCE_DIR) / "configs").string();
  const std::vector<std::string> b = {"DROPOUT_RATE = 0.25",
                                      "LOSS_NORMALIZING_FACTOR = 'NUM_REAL_TARGET_TOKENS'",
                                      "models.DecoderOnlyModel.inputs_bidirectional_attention = True",
                                      "models.DecoderOnlyModel.predict_batch_with_aux.num_decodes = 3",
                                      "decoding.temperature_sample.max_decode_steps = 7",
                                      "decoding.temperature_sample.eos_id = 5",
                                      "network.TransformerConfig.dtype = 'float32'"};
  gin::Config g = gin::parse_config_files_and_bindings({dir + "/models/decoder_only/small.gin"}, b, {}, &registry());
  ModelConfig m = read_model_config(g);
  ModelConfig r = read_model_config(g, g.macro_value("MODEL").as_reference());
  for (const ModelConfig* c : {&m, &r}) {
    EXPECT_TRUE(c->decoder_only);
    EXPECT_TRUE(c->inputs_bidirectional_attention);
    EXPECT_EQ(c->network.num_encoder_layers, 0);
    EXPECT_EQ(c->network.num_decoder_layers, 8);
    EXPECT_EQ(c->network.vocab_size, 32128);
    EXPECT_EQ(c->network.dtype, DType::f32);
    EXPECT_DOUBLE_EQ(c->network.dropout_rate, 0.25);
    EXPECT_TRUE(c->network.logits_via_embedding);
    EXPECT_DOUBLE_EQ(c->loss.z_loss, 1e-4);
    EXPECT_EQ(c->loss.loss_normalizing_factor.kind, LossNormalizingFactor::Kind::num_real_target_tokens);
    EXPECT_EQ(c->decode.sampling.num_decodes, 3);
    EXPECT_EQ(c->decode.beam.num_decodes, 3);
    EXPECT_EQ(c->decode.sampling.topk, 40);
    EXPECT_EQ(c->decode.sampling.max_decode_steps, 7);
    EXPECT_EQ(c->decode.sampling.eos_id, 5);
  }
  auto model = make_model(m);
  auto* d = dynamic_cast<const DecoderOnlyModel*>(model.get());
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->inputs_bidirectional_attention());
}

// encoder_mixing through the one model reader: the FNet configs, the
// attention default, and an unknown name refused at its binding.
TEST(GinModel, FourierMixingEncoderFromGin) {
  EXPECT_EQ(load("t5_1_1/tiny.gin", {"DROPOUT_RATE = 0.0"}).network.encoder_mixing, T5Config::Mixing::kAttention);
  ModelConfig f = load("t5_1_1/tiny_fnet.gin", {"DROPOUT_RATE = 0.0"});
  EXPECT_EQ(f.network.encoder_mixing, T5Config::Mixing::kFourier);
  EXPECT_EQ(load("t5_1_1/mini_fnet.gin", {"DROPOUT_RATE = 0.0"}).network.encoder_mixing, T5Config::Mixing::kFourier);
  // 2 encoder layers x (4 attention kernels [8, 12] - 0) + relpos [4, 32].
  EXPECT_EQ(make_model(load("t5_1_1/tiny.gin", {"DROPOUT_RATE = 0.0"}))->num_params() - make_model(f)->num_params(),
            2 * 4 * 8 * 12 + 4 * 32);
  try {
    load("t5_1_1/tiny.gin", {"DROPOUT_RATE = 0.0", "network.T5Config.encoder_mixing = 'fft'"});
    FAIL() << "expected a GinError";
  } catch (const gin::GinError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("network.T5Config.encoder_mixing = 'fft' is not a mixing sublayer"), std::string::npos) << m;
    EXPECT_NE(m.find("'attention' (T5), 'fourier' (FNet) or 'linear' (Sparse Mixer)"), std::string::npos) << m;
    EXPECT_NE(m.find("<--gin_bindings #2>"), std::string::npos) << m;
  }
}

// Sparse Mixer gins (configs/models/sparse_mixer): linear mixing with the
// TOP attention layers, experts-choose MoE in the MIDDLE encoder layers, a
// dense decoder; bad mixing bindings refused at their binding.
TEST(GinModel, SparseMixerFromGin) {
  ModelConfig t = load("sparse_mixer/tiny.gin", {"DROPOUT_RATE = 0.0", "ENCODER_MIXING_LENGTH = 16"});
  const T5Config& n = t.network;
  EXPECT_EQ(n.encoder_mixing, T5Config::Mixing::kLinear);
  EXPECT_EQ(n.encoder_mixing_length, 16);
  EXPECT_EQ(n.num_encoder_layers, 3);
  EXPECT_EQ(n.num_encoder_attention_layers, 1);
  EXPECT_EQ(n.encoder_attention_layout, T5Config::SparseLayout::kTop);
  EXPECT_EQ(n.moe.router, nn::RouterType::kExpertsChooseMasked);
  EXPECT_EQ(n.moe.num_experts, 4);
  EXPECT_DOUBLE_EQ(n.moe.train_capacity_factor, 1.0);
  EXPECT_DOUBLE_EQ(n.moe.eval_capacity_factor, 1.0);
  EXPECT_EQ(n.moe.min_expert_capacity, 4);
  EXPECT_DOUBLE_EQ(t.loss.aux_loss_factor, 0.01);
  EXPECT_DOUBLE_EQ(t.loss.router_z_loss_factor, 1e-4);
  EXPECT_EQ(n.num_decoder_sparse_layers, 0);
  std::vector<bool> att, sparse;
  for (int64_t l = 0; l < 3; ++l) att.push_back(n.encoder_attention_layer(l)), sparse.push_back(n.sparse_layer(true, l));
  EXPECT_EQ(att, (std::vector<bool>{false, false, true}));
  EXPECT_EQ(sparse, (std::vector<bool>{false, true, false}));
  ModelConfig m = load("sparse_mixer/mini.gin", {"DROPOUT_RATE = 0.0", "ENCODER_MIXING_LENGTH = 512"});
  EXPECT_EQ(m.network.emb_dim, 256);
  EXPECT_EQ(m.network.mlp_dim, 1024);
  EXPECT_EQ(m.network.moe.num_experts, 8);
  att.clear(), sparse.clear();
  for (int64_t l = 0; l < 4; ++l)
    att.push_back(m.network.encoder_attention_layer(l)), sparse.push_back(m.network.sparse_layer(true, l));
  EXPECT_EQ(att, (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(sparse, (std::vector<bool>{false, true, true, false}));
  int mixing = 0;
  for (const auto& sp : make_model(m)->param_specs())
    if (sp.name.find("/mixing/seq/kernel") != std::string::npos) {
      ++mixing;
      EXPECT_EQ(sp.shape.to_string(), "[length=512, mixing_length=512]") << sp.name;
    }
  EXPECT_EQ(mixing, 3);

  auto refused = [](const std::string& rel, std::vector<std::string> b, const std::string& what) {
    b.insert(b.begin(), "DROPOUT_RATE = 0.0");
    try {
      load(rel, b);
      ADD_FAILURE() << "expected a GinError for " << what;
    } catch (const gin::GinError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("<--gin_bindings #"), std::string::npos) << e.what();
    }
  };
  refused("sparse_mixer/tiny.gin", {"ENCODER_MIXING_LENGTH = 0"},
          "network.T5Config.encoder_mixing_length = 0 must be positive with encoder_mixing = 'linear'");
  refused("sparse_mixer/tiny.gin", {"ENCODER_MIXING_LENGTH = 16", "NUM_ENCODER_ATTENTION_LAYERS = 4"},
          "network.T5Config.num_encoder_attention_layers = 4 is not in 0 .. 3");
  refused("sparse_mixer/tiny.gin", {"ENCODER_MIXING_LENGTH = 16", "NUM_ENCODER_ATTENTION_LAYERS = 2",
                                    "network.T5Config.encoder_attention_layout = 'MIXED'"},
          "network.T5Config.encoder_attention_layout = 'MIXED'");
  refused("sparse_mixer/tiny.gin", {"ENCODER_MIXING_LENGTH = 16", "network.T5Config.encoder_attention_layout = 'UP'"},
          "unknown sparse layout 'UP'");
  refused("t5_1_1/tiny.gin", {"network.T5Config.num_encoder_attention_layers = 1"},
          "num_encoder_attention_layers = 1 but encoder_mixing = 'attention'");
}

// num_kv_heads through the one model reader: the GQA configs, a binding, the
// multi-head default, and a non-divisor refused at its binding.
TEST(GinModel, GroupedQueryAttentionFromGin) {
  ModelConfig mha = load("t5_1_1/tiny.gin", {"DROPOUT_RATE = 0.0"});
  EXPECT_EQ(mha.network.num_kv_heads, 0);
  EXPECT_EQ(mha.network.encoder_num_kv_heads, 0);
  ModelConfig g2 = load("t5_1_1/tiny_gqa2.gin", {"DROPOUT_RATE = 0.0"});
  EXPECT_EQ(g2.network.num_heads, 4);
  EXPECT_EQ(g2.network.num_kv_heads, 2);
  EXPECT_EQ(g2.network.encoder_num_kv_heads, 0);
  ModelConfig mq = load("t5_1_1/mini_mqa.gin", {"DROPOUT_RATE = 0.0", "network.T5Config.encoder_num_kv_heads = 2"});
  EXPECT_EQ(mq.network.num_kv_heads, 1);
  EXPECT_EQ(mq.network.encoder_num_kv_heads, 2);
  // K/V kernels shrink from [8, 4*3] to [8, kv_heads, 3]: 2 * 2 layers * 2 attentions * 8 * (12 - 6).
  EXPECT_EQ(make_model(mha)->num_params() - make_model(g2)->num_params(), 2 * 2 * 2 * 8 * 6);
  ModelConfig d = load("decoder_only/small.gin", {"DROPOUT_RATE = 0.0", "network.TransformerConfig.num_kv_heads = 3"});
  EXPECT_EQ(d.network.num_kv_heads, 3);
  try {
    load("t5_1_1/tiny.gin", {"DROPOUT_RATE = 0.0", "network.T5Config.num_kv_heads = 3"});
    FAIL() << "expected a GinError";
  } catch (const gin::GinError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("network.T5Config.num_kv_heads = 3 must divide num_heads = 4"), std::string::npos) << m;
    EXPECT_NE(m.find("<--gin_bindings #2>"), std::string::npos) << m;  // the binding's place
  }
}

TEST(GinModel, NoModelIsAClearError) {
  gin::Config g(&registry());
  try {
    read_model_config(g);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("configure no model: include a configs/models/*.gin"), std::string::npos)
        << e.what();
  }
}

TEST(GinModel, AnUnsupportedDtypeNamesItsBinding) {
  try {
    load("t5_1_1/tiny.gin", {"DROPOUT_RATE = 0.0", "network.T5Config.dtype = 'float64'"});
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("network.T5Config.dtype = 'float64': unsupported activation dtype"),
              std::string::npos)
        << e.what();
  }
}

TEST(GinModel, MissingDropoutRateIsAGinError) {
  EXPECT_THROW(load("t5_1_1/small.gin", {}), gin::GinError);
}

}  // namespace
}  // namespace t5x
