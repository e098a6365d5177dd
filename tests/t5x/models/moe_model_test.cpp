// Mixture-of-Experts T5 models (T5Config MoE fields, network layer() with
// nn::moe_block, the t5x contrib/moe loss; moe.md 1.8, 2.5, 2.6):
//   - flaxformer's sparse-layer placement (BOTTOM / MIDDLE / MIXED / TOP);
//   - the configs/models/moe gin files: shapes and parameter counts, and bad
//     values refused at their binding;
//   - a 1-expert MoE layer whose expert is the dense MLP is the dense model:
//     teacher-forced logits and loss bitwise, cached decode steps within 1e-5;
//   - the loss adds the factor-weighted means of the layers' losses, with
//     t5x's expert metrics; the router gets gradients; jitter keys follow
//     the dropout key.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "ops/autodiff.h"
#include "ops/ops.h"
#include "t5x/gin/config.h"
#include "t5x/gin/registry.h"
#include "t5x/models/gin_model.h"
#include "t5x/models/models.h"
#include "gin_test_util.h"
#include "test_util.h"

namespace t5x {
namespace {

using testing::small_test_config;
using testing::enc_dec_batch;
using testing::tokens;
using L = T5Config::SparseLayout;

std::vector<int64_t> sparse(int64_t num_layers, int64_t n, L layout) {
  std::vector<int64_t> out;
  for (int64_t l = 0; l < num_layers; ++l)
    if (is_sparse_layer(l, num_layers, n, layout)) out.push_back(l);
  return out;
}

TEST(MoeLayout, FlaxformerPlacement) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(sparse(12, 6, L::kMixed), (V{1, 3, 5, 7, 9, 11}));  // Switch-Base
  EXPECT_EQ(sparse(12, 3, L::kMixed), (V{3, 7, 11}));           // tokens_choose_base, st_moe_base
  EXPECT_EQ(sparse(4, 2, L::kMixed), (V{1, 3}));                // moe/mini.gin
  EXPECT_EQ(sparse(4, 4, L::kMixed), (V{0, 1, 2, 3}));
  EXPECT_EQ(sparse(14, 4, L::kMiddle), (V{5, 6, 7, 8}));        // Sparse Mixer base
  EXPECT_EQ(sparse(5, 2, L::kMiddle), (V{2, 3}));               // L - n <= 2l < L + n
  EXPECT_EQ(sparse(6, 2, L::kBottom), (V{0, 1}));
  EXPECT_EQ(sparse(6, 2, L::kTop), (V{4, 5}));
  EXPECT_EQ(sparse(6, 0, L::kMixed), V{});
  EXPECT_EQ(sparse(5, 2, L::kTop), (V{3, 4}));
  try {
    is_sparse_layer(0, 12, 5, L::kMixed);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("MIXED sparse layout needs num_layers (12) to be a multiple"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(is_sparse_layer(0, 4, 5, L::kBottom), std::invalid_argument);
  EXPECT_THROW(is_sparse_layer(0, 4, -1, L::kTop), std::invalid_argument);
  EXPECT_EQ(parse_sparse_layout("LayerLayout.MIXED"), L::kMixed);
  EXPECT_EQ(parse_sparse_layout("top"), L::kTop);
  EXPECT_THROW(parse_sparse_layout("EVERY_OTHER"), std::invalid_argument);
}

ModelConfig load(const std::string& rel, std::vector<std::string> bindings = {}) {
  bindings.insert(bindings.begin(), "DROPOUT_RATE = 0.0");
  return testing::load_model_gin(rel, bindings);
}

int64_t count(const ModelConfig& m) { return make_model(m)->num_params(); }

// Parameter counts: the dense model's, with each sparse layer's MLP (P
// params) replaced by E copies plus the router [embed, E]:
// dense + n_sparse * (embed * E + (E - 1) * P).
TEST(MoeConfigs, EachParsesWithTheExpectedShapeAndParameterCount) {
  const int64_t base = 247577856;  // T5.1.1 Base; Switch's ReLU 3072 MLP has as many params (2*768*3072 = 3*768*2048)
  const int64_t base_mlp = 3 * 768 * 2048;
  ModelConfig s128 = load("moe/switch_base.gin");
  EXPECT_EQ(s128.network.moe.num_experts, 128);
  EXPECT_EQ(s128.network.mlp_activations, (std::vector<std::string>{"relu"}));
  EXPECT_EQ(s128.network.moe.num_selected_experts, 1);
  EXPECT_EQ(s128.network.moe.max_group_size, 8192);
  EXPECT_DOUBLE_EQ(s128.network.moe.expert_init_scale, 0.1);
  EXPECT_EQ(s128.network.moe.dtype, DType::bf16);
  EXPECT_DOUBLE_EQ(s128.loss.aux_loss_factor, 0.01);
  EXPECT_DOUBLE_EQ(s128.loss.router_z_loss_factor, 0.0);
  EXPECT_EQ(count(s128), base + 12 * (768 * 128 + 127 * base_mlp));
  EXPECT_EQ(count(s128), 7439891712);
  EXPECT_EQ(count(load("moe/switch_base_128.gin")), 7439891712);
  EXPECT_EQ(count(load("moe/switch_base_8.gin")), base + 12 * (768 * 8 + 7 * base_mlp));
  EXPECT_EQ(count(load("moe/switch_base_8.gin")), 644013312);

  ModelConfig st = load("moe/st_moe_base.gin");
  EXPECT_EQ(st.network.moe.num_experts, 16);
  EXPECT_EQ(st.network.moe.num_selected_experts, 2);
  EXPECT_EQ(st.network.mlp_activations, (std::vector<std::string>{"gelu", "linear"}));
  EXPECT_DOUBLE_EQ(st.loss.router_z_loss_factor, 1e-4);
  EXPECT_EQ(sparse(12, st.network.num_encoder_sparse_layers, st.network.encoder_sparse_layout),
            (std::vector<int64_t>{3, 7, 11}));
  EXPECT_EQ(count(st), base + 6 * (768 * 16 + 15 * base_mlp));

  ModelConfig mini = load("moe/mini.gin");
  const int64_t mini_dense = count(load("t5_1_1/mini.gin"));
  EXPECT_EQ(count(mini), mini_dense + 4 * (256 * 8 + 7 * 3 * 256 * 1024));
  EXPECT_EQ(count(mini), 47920896);
  auto specs = make_model(mini)->param_specs();
  std::map<std::string, Shape> by_name;
  for (const auto& s : specs) by_name[s.name] = s.shape;
  for (const char* stack : {"encoder", "decoder"}) {
    for (int l : {1, 3}) {
      const std::string p = std::string(stack) + "/layers_" + std::to_string(l) + "/mlp/";
      ASSERT_TRUE(by_name.count(p + "expert/wi_0/kernel")) << p;
      EXPECT_EQ(by_name.at(p + "expert/wi_0/kernel").sizes(), (std::vector<int64_t>{8, 256, 1024}));
      EXPECT_EQ(by_name.at(p + "expert/wo/kernel").sizes(), (std::vector<int64_t>{8, 1024, 256}));
      EXPECT_EQ(by_name.at(p + "router/router_weights/w/kernel").sizes(), (std::vector<int64_t>{256, 8}));
      EXPECT_FALSE(by_name.count(p + "wi_0/kernel"));
    }
    for (int l : {0, 2})
      EXPECT_TRUE(by_name.count(std::string(stack) + "/layers_" + std::to_string(l) + "/mlp/wi_0/kernel"));
  }
  ModelConfig tiny = load("moe/tiny.gin");
  EXPECT_EQ(count(tiny), count(load("t5_1_1/tiny.gin")) + 2 * (8 * 4 + 3 * 3 * 8 * 16));
  EXPECT_EQ(tiny.network.moe.dtype, DType::f32);
}

void expect_gin_error(const std::string& gin, const std::vector<std::string>& bindings, const std::string& what,
                      const std::string& where) {
  try {
    load(gin, bindings);
    FAIL() << "expected a GinError for " << what;
  } catch (const gin::GinError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(what), std::string::npos) << m;
    EXPECT_NE(m.find(where), std::string::npos) << m;
  }
}

TEST(MoeConfigs, BadValuesAreRefusedAtTheirBinding) {
  expect_gin_error("moe/mini.gin", {"network.T5Config.num_encoder_sparse_layers = 3"},
                   "network.T5Config.encoder_sparse_layout = 'MIXED': the MIXED sparse layout needs num_layers (4)",
                   "moe.gin:");
  expect_gin_error("moe/mini.gin", {"network.T5Config.num_decoder_sparse_layers = 5"},
                   "network.T5Config.num_decoder_sparse_layers = 5 is not in 0 .. 4", "<--gin_bindings #2>");
  expect_gin_error("moe/mini.gin", {"ROUTER_TYPE = 'top1'"}, "router_type = 'top1' is not a router",
                   "<--gin_bindings #2>");
  expect_gin_error("moe/mini.gin", {"ENCODER_SPARSE_LAYOUT = 'EVERY_OTHER'"}, "unknown sparse layout 'EVERY_OTHER'",
                   "<--gin_bindings #2>");
  expect_gin_error("moe/mini.gin", {"NUM_SELECTED_EXPERTS = 9"}, "num_selected_experts = 9 is not in 1 .. num_experts = 8",
                   "<--gin_bindings #2>");
  expect_gin_error("moe/mini.gin", {"ROUTER_TYPE = 'experts_choose_masked'"}, "expert-choice routing sees future tokens",
                   "<--gin_bindings #2>");
  expect_gin_error("t5_1_1/mini.gin", {"network.T5Config.num_decoder_sparse_layers = 2"}, "but num_experts = 0",
                   "<--gin_bindings #2>");
  // Encoder-only sparse layers may use expert-choice routing.
  ModelConfig ec = load("moe/mini.gin", {"ROUTER_TYPE = 'experts_choose_masked'", "NUM_DECODER_SPARSE_LAYERS = 0"});
  EXPECT_EQ(ec.network.moe.router, nn::RouterType::kExpertsChooseMasked);
}

// Within 1e-5 relative: the cached steps' 1-token einsums may block their
// sums differently from the dense matmuls (AVX2 kernels do), so not bitwise.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5 * (1.0 + std::fabs(a[i]))) << what << " [" << i << "]";
}

T5Config moe_config(int64_t experts, int64_t k = 1) {
  T5Config c = small_test_config();
  c.moe.num_experts = experts;
  c.moe.num_selected_experts = k;
  c.num_encoder_sparse_layers = 1;
  c.num_decoder_sparse_layers = 1;
  return c;
}

// The dense params with each sparse layer's mlp/wi_0 ... as a 1-expert MoE
// layer: expert kernels [1, ...] = the dense kernel, router zero.
ParamTree as_one_expert(const T5Config& moe, const ParamTree& dense) {
  ParamTree p;
  for (const auto& [name, a] : dense) {
    const auto at = name.find("/mlp/");
    bool sparse_mlp = false;
    if (at != std::string::npos) {
      const bool enc = name.rfind("encoder/", 0) == 0;
      const int64_t layer = std::stoll(name.substr(name.find("layers_") + 7));
      sparse_mlp = moe.sparse_layer(enc, layer);
    }
    if (!sparse_mlp) {
      p[name] = a;
      continue;
    }
    const std::string prefix = name.substr(0, at + 5), leaf = name.substr(at + 5);
    std::vector<Dim> d{{"expert", 1}};
    for (const auto& dim : a.shape().dims()) d.push_back({dim.name == "embed" ? "mlp_embed" : dim.name == "mlp" ? "expert_mlp" : dim.name, dim.size});
    p[prefix + "expert/" + leaf] = reshape(a, Shape(d));
    p[prefix + "router/router_weights/w/kernel"] = Array::zeros(Shape{{"embed", moe.emb_dim}, {"expert", 1}});
  }
  return p;
}

// One expert, no drops (capacity >= tokens per group), combine weight
// softmax over 1 expert = 1: the MoE model is the dense model (bitwise
// teacher-forced, on AVX-512 and AVX2). Layout of the
// spec'd names and dims checked on the way (the ParamTree must match them).
TEST(MoeModel, OneExpertEqualsTheDenseModel) {
  T5Config dense_cfg = small_test_config();
  T5Config moe_cfg = moe_config(1);
  EncoderDecoderModel dense(dense_cfg), moe(moe_cfg);
  const ParamTree pd = dense.init(prng_key(3));
  const ParamTree pm = as_one_expert(moe_cfg, pd);
  for (const auto& s : moe.param_specs()) {
    ASSERT_TRUE(pm.count(s.name)) << s.name;
    EXPECT_EQ(pm.at(s.name).shape().sizes(), s.shape.sizes()) << s.name;
  }
  const Batch b = enc_dec_batch();
  EXPECT_EQ(dense.logits(pd, b).to_floats(), moe.logits(pm, b).to_floats());
  // Cached decoding goes through the same layer (one token per row and step).
  auto sd = dense.cached_step_fn(pd, b.at("encoder_input_tokens"), 5);
  auto sm = moe.cached_step_fn(pm, b.at("encoder_input_tokens"), 5);
  const Array dec_in = b.at("decoder_input_tokens");
  for (int64_t i = 0; i < 3; ++i)
    expect_close(sd->logits(dec_in, {i, i}).to_floats(), sm->logits(dec_in, {i, i}).to_floats(), "step " + std::to_string(i));
  auto [ld, md] = dense.loss_fn(pd, b);
  auto [lm, mm] = moe.loss_fn(pm, b);
  EXPECT_FLOAT_EQ(lm.item(), ld.item());  // aux_loss_factor 0 (t5x's default)
  // One expert: every token goes to it (f = 1, P = 1 -> aux = E * 1 = 1), all
  // dispatched, confidence 1; z = mean(logsumexp(0)^2) = 0.
  EXPECT_FLOAT_EQ(mm.at("experts/fraction_tokens_left_behind").value(), 0.0f);
  EXPECT_FLOAT_EQ(mm.at("experts/router_confidence").value(), 1.0f);
  EXPECT_FLOAT_EQ(mm.at("experts/auxiliary_loss").value(), 0.0f);  // times factor 0
  EXPECT_FALSE(md.count("experts/auxiliary_loss"));
}

// The same for the decoder-only model (a prefix LM), teacher-forced and
// through the prefilled cache.
TEST(MoeModel, DecoderOnlyOneExpertEqualsTheDenseModel) {
  T5Config dense_cfg = small_test_config();
  dense_cfg.num_encoder_layers = 0;
  T5Config moe_cfg = dense_cfg;
  moe_cfg.moe.num_experts = 1;
  moe_cfg.num_decoder_sparse_layers = 2;
  DecoderOnlyModel dense(dense_cfg, LossOptions{}, true), moe(moe_cfg, LossOptions{}, true);
  const ParamTree pd = dense.init(prng_key(4));
  const ParamTree pm = as_one_expert(moe_cfg, pd);
  ASSERT_EQ(pm.size(), moe.param_specs().size());
  const Batch b = {{"decoder_input_tokens", tokens(2, 6, {0, 4, 8, 12, 3, 9, 0, 6, 9, 1, 5, 0})},
                   {"decoder_target_tokens", tokens(2, 6, {4, 8, 12, 3, 9, 1, 6, 9, 1, 5, 7, 0})},
                   {"decoder_causal_attention", tokens(2, 6, {1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0})}};
  EXPECT_EQ(dense.logits(pd, b).to_floats(), moe.logits(pm, b).to_floats());
  const Array ca = b.at("decoder_causal_attention"), in = b.at("decoder_input_tokens");
  auto sd = dense.cached_step_fn(pd, in, ca, {1, 2});
  auto sm = moe.cached_step_fn(pm, in, ca, {1, 2});
  expect_close(sd->logits(in, {1, 2}).to_floats(), sm->logits(in, {1, 2}).to_floats(), "decode step");
  auto [lm, mm] = moe.loss_fn(pm, b);
  EXPECT_FLOAT_EQ(lm.item(), dense.loss_fn(pd, b).first.item());
  EXPECT_FLOAT_EQ(mm.at("experts/router_confidence").value(), 1.0f);
}

// loss = CE + z + aux_factor * mean(aux) + z_factor * mean(router z); the
// metrics are t5x's; gradients reach the routers and experts.
TEST(MoeModel, LossAddsTheWeightedMeansOfTheLayersLosses) {
  T5Config c = moe_config(4, 2);
  LossOptions with{}, without{};
  with.aux_loss_factor = 0.5;
  with.router_z_loss_factor = 0.25;
  EncoderDecoderModel m(c, with), m0(c, without);
  ParamTree p = m.init(prng_key(5));
  const Batch b = enc_dec_batch();
  auto [loss, metrics] = m.loss_fn(p, b);
  auto [loss0, metrics0] = m0.loss_fn(p, b);
  const double aux = metrics.at("experts/auxiliary_loss").value(), rz = metrics.at("experts/router_z_loss").value();
  EXPECT_GT(aux, 0.0);
  EXPECT_GT(rz, 0.0);
  EXPECT_NEAR(loss.item(), loss0.item() + aux + rz, 1e-5);
  EXPECT_NEAR(metrics.at("cross_ent_loss").value(), loss.item() - metrics.at("z_loss").value() - aux - rz, 1e-5);
  EXPECT_NEAR(metrics.at("cross_ent_loss").value(), metrics0.at("cross_ent_loss").value(), 1e-5);
  EXPECT_DOUBLE_EQ(metrics0.at("experts/auxiliary_loss").value(), 0.0);
  EXPECT_DOUBLE_EQ(metrics.at("loss").value(), double(loss.item()));
  for (const char* k : {"experts/fraction_tokens_left_behind", "experts/expert_usage", "experts/router_confidence"}) {
    EXPECT_TRUE(metrics.count(k)) << k;
    EXPECT_GE(metrics.at(k).value(), 0.0) << k;
    EXPECT_LE(metrics.at(k).value(), 1.0) << k;
  }
  auto vg = value_and_grad([&](const ParamTree& x) { return m.loss_fn(x, b, prng_key(1)).first; }, p);
  for (const char* k : {"encoder/layers_1/mlp/router/router_weights/w/kernel", "decoder/layers_1/mlp/expert/wo/kernel",
                        "encoder/layers_0/mlp/wi_0/kernel"}) {
    double n = 0;
    for (float f : vg.grads.at(k).to_floats()) n += double(f) * f;
    EXPECT_GT(n, 0.0) << k;
  }
}

// Jitter: a training forward is a pure function of its key; another key
// draws other jitter; evaluation (no key) has none.
TEST(MoeModel, JitterFollowsTheDropoutKey) {
  T5Config c = moe_config(4);
  c.moe.jitter_noise = 0.5;
  EncoderDecoderModel m(c);
  ParamTree p = m.init(prng_key(8));
  const Batch b = enc_dec_batch();
  const auto a1 = m.logits(p, b, prng_key(1)).to_floats(), a2 = m.logits(p, b, prng_key(1)).to_floats();
  EXPECT_EQ(a1, a2);
  EXPECT_NE(a1, m.logits(p, b, prng_key(2)).to_floats());
  EXPECT_EQ(m.logits(p, b).to_floats(), m.logits(p, b).to_floats());
}

}  // namespace
}  // namespace t5x
