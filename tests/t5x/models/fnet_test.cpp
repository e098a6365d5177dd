// FNet encoder (t5x/models/fnet.h) without Python: config.json parsing and its
// errors, the HF tensor checks, and properties of the forward pass (the last
// LayerNorm's output, padding mixed into every position, gradients). Parity
// with transformers' FNetModel: t5x_fnet_hf_parity (interop).
#include <gtest/gtest.h>

#include <cmath>

#include "ops/ops.h"
#include "t5x/checkpoints/host_tensor.h"
#include "t5x/models/fnet.h"

namespace t5x {
namespace {

FNetConfig tiny() {
  FNetConfig c;
  c.vocab_size = 20;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 10;
  return c;
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

TEST(FNet, ConfigFromJson) {
  FNetConfig c = FNetConfig::from_json(
      R"({"model_type": "fnet", "vocab_size": 97, "hidden_size": 24, "intermediate_size": 40,
          "num_hidden_layers": 2, "max_position_embeddings": 32, "type_vocab_size": 3, "layer_norm_eps": 1e-5})",
      "c.json");
  EXPECT_EQ(c.vocab_size, 97);
  EXPECT_EQ(c.hidden_size, 24);
  EXPECT_EQ(c.intermediate_size, 40);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.max_position_embeddings, 32);
  EXPECT_EQ(c.type_vocab_size, 3);
  EXPECT_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.hidden_act, "gelu_new");
  EXPECT_EQ(FNetConfig::from_json("{}", "c.json").layer_norm_eps, 1e-12);  // FNetConfig's default
  EXPECT_NE(error_of([] { FNetConfig::from_json(R"({"model_type": "t5"})", "c.json"); }).find("c.json: model_type"),
            std::string::npos);
  const std::string act = error_of([] { FNetConfig::from_json(R"({"hidden_act": "relu"})", "c.json"); });
  EXPECT_NE(act.find("c.json: hidden_act \"relu\""), std::string::npos) << act;
  EXPECT_NE(error_of([] { FNetConfig::from_json(R"({"use_tpu_fourier_optimizations": true})", "c.json"); })
                .find("use_tpu_fourier_optimizations"),
            std::string::npos);
  EXPECT_NE(error_of([] { FNetConfig::from_json("{", "c.json"); }).find("c.json: invalid JSON"), std::string::npos);
}

TEST(FNet, HfTensorsAreChecked) {
  const FNetConfig c = tiny();
  NamedTensors hf = {{"embeddings.word_embeddings.weight", HostTensor::zeros("float32", {20, 8})}};
  const std::string missing = error_of([&] { fnet_params_from_hf(hf, c, "dir"); });
  EXPECT_NE(missing.find("dir: missing tensor 'embeddings.position_embeddings.weight'"), std::string::npos) << missing;
  hf[0].second = HostTensor::zeros("float32", {21, 8});
  const std::string shape = error_of([&] { fnet_params_from_hf(hf, c, "dir"); });
  EXPECT_NE(shape.find("'embeddings.word_embeddings.weight' has shape [21,8]"), std::string::npos) << shape;
}

// Bad config.json fields are named: wrong types (use_tpu_fourier_optimizations
// escaped as a bare nlohmann error), sizes that are not positive (a negative
// hidden_size reached Shape's "negative size" without the file) and a
// negative layer_norm_eps (NaN outputs).
TEST(FNet, ConfigFieldErrorsNameTheField) {
  auto err = [](const std::string& json) { return error_of([&] { FNetConfig::from_json(json, "c.json"); }); };
  std::string e = err(R"({"use_tpu_fourier_optimizations": "yes"})");
  EXPECT_NE(e.find("c.json: field \"use_tpu_fourier_optimizations\" is \"yes\""), std::string::npos) << e;
  e = err(R"({"layer_norm_eps": "x"})");
  EXPECT_NE(e.find("c.json: field \"layer_norm_eps\" is \"x\""), std::string::npos) << e;
  e = err(R"({"hidden_size": "24"})");
  EXPECT_NE(e.find("c.json: field \"hidden_size\" is \"24\""), std::string::npos) << e;
  e = err(R"({"hidden_act": 5})");
  EXPECT_NE(e.find("c.json: field \"hidden_act\" is 5"), std::string::npos) << e;
  e = err(R"({"hidden_size": -24})");
  EXPECT_NE(e.find("c.json: field \"hidden_size\" is -24; it must be positive"), std::string::npos) << e;
  e = err(R"({"num_hidden_layers": 0})");
  EXPECT_NE(e.find("c.json: field \"num_hidden_layers\" is 0; it must be positive"), std::string::npos) << e;
  e = err(R"({"layer_norm_eps": -1})");
  EXPECT_NE(e.find("c.json: field \"layer_norm_eps\" is -1"), std::string::npos) << e;
  EXPECT_EQ(FNetConfig::from_json(R"({"hidden_size": null, "layer_norm_eps": 0})", "c.json").hidden_size, 768);
}

// A checkpoint with more layers than num_hidden_layers was loaded as the
// smaller model (other outputs, no error).
TEST(FNet, LayersPastNumHiddenLayersAreRefused) {
  FNetConfig two = tiny();
  const int64_t E = two.hidden_size, M = two.intermediate_size;
  NamedTensors hf = {
      {"embeddings.word_embeddings.weight", HostTensor::zeros("float32", {two.vocab_size, E})},
      {"embeddings.position_embeddings.weight", HostTensor::zeros("float32", {two.max_position_embeddings, E})},
      {"embeddings.token_type_embeddings.weight", HostTensor::zeros("float32", {two.type_vocab_size, E})},
      {"embeddings.LayerNorm.weight", HostTensor::zeros("float32", {E})},
      {"embeddings.LayerNorm.bias", HostTensor::zeros("float32", {E})},
      {"embeddings.projection.weight", HostTensor::zeros("float32", {E, E})},
      {"embeddings.projection.bias", HostTensor::zeros("float32", {E})},
      {"pooler.dense.weight", HostTensor::zeros("float32", {E, E})},
      {"pooler.dense.bias", HostTensor::zeros("float32", {E})},
  };
  for (int i = 0; i < 2; ++i) {
    const std::string h = "fnet.encoder.layer." + std::to_string(i) + ".";
    for (const char* ln : {"fourier.output.LayerNorm.", "output.LayerNorm."}) {
      hf.push_back({h + ln + "weight", HostTensor::zeros("float32", {E})});
      hf.push_back({h + ln + "bias", HostTensor::zeros("float32", {E})});
    }
    hf.push_back({h + "intermediate.dense.weight", HostTensor::zeros("float32", {M, E})});
    hf.push_back({h + "intermediate.dense.bias", HostTensor::zeros("float32", {M})});
    hf.push_back({h + "output.dense.weight", HostTensor::zeros("float32", {E, M})});
    hf.push_back({h + "output.dense.bias", HostTensor::zeros("float32", {E})});
  }
  EXPECT_EQ(fnet_params_from_hf(hf, two, "dir").size(), 9u + 2 * 8);
  FNetConfig one = two;
  one.num_hidden_layers = 1;
  const std::string e = error_of([&] { fnet_params_from_hf(hf, one, "dir"); });
  EXPECT_NE(e.find("dir: tensor 'encoder.layer.1."), std::string::npos) << e;
  EXPECT_NE(e.find("past num_hidden_layers=1"), std::string::npos) << e;
}

TEST(FNet, ForwardNormalisesMixesPaddingAndHasGradients) {
  const FNetConfig c = tiny();
  ParamTree p = nn::init_params(fnet_param_specs(c), prng_key(3));
  Array ids = Array::from_ints(Shape{{"batch", 2}, {"length", 6}}, {5, 6, 7, 8, 9, 10, 11, 12, 13, 3, 3, 3});
  FNetOutputs o = fnet_encode(c, p, ids);
  ASSERT_EQ(o.last_hidden_state.shape(), (Shape{{"batch", 2}, {"length", 6}, {"embed", 8}}));
  ASSERT_EQ(o.pooled.shape(), (Shape{{"batch", 2}, {"embed", 8}}));
  // The last LayerNorm (scale 1, bias 0 at init): every row has mean 0 and variance 1.
  auto h = o.last_hidden_state.to_floats();
  for (size_t r = 0; r < 12; ++r) {
    double m = 0, v = 0;
    for (size_t k = 0; k < 8; ++k) m += h[r * 8 + k] / 8.0;
    for (size_t k = 0; k < 8; ++k) v += (h[r * 8 + k] - m) * (h[r * 8 + k] - m) / 8.0;
    EXPECT_NEAR(m, 0.0, 1e-5) << r;
    EXPECT_NEAR(v, 1.0, 1e-4) << r;
  }
  // Pooled = tanh(dense(first token)): within (-1, 1).
  for (float x : o.pooled.to_floats()) EXPECT_LT(std::fabs(x), 1.f);
  // The mixing ignores padding: changing a padded token of row 1 changes its
  // first position, and leaves row 0 as it was.
  Array ids2 = Array::from_ints(ids.shape(), {5, 6, 7, 8, 9, 10, 11, 12, 13, 3, 3, 4});
  auto h2 = fnet_encode(c, p, ids2).last_hidden_state.to_floats();
  for (size_t k = 0; k < 48; ++k) EXPECT_EQ(h2[k], h[k]);
  double moved = 0;
  for (size_t k = 48; k < 56; ++k) moved = std::max(moved, double(std::fabs(h2[k] - h[k])));
  EXPECT_GT(moved, 1e-3);
  // Gradient of a weighted sum against a central difference along one kernel direction.
  Array w = normal(prng_key(4), o.last_hidden_state.shape());
  auto loss = [&](const ParamTree& q) { return sum(mul(fnet_encode(c, q, ids).last_hidden_state, w)); };
  auto g = value_and_grad(loss, p);
  const std::string k = "encoder/layers_0/mlp/wi/kernel";
  Array dir = normal(prng_key(5), p.at(k).shape());
  const double eps = 1e-2;
  ParamTree plus = p, minus = p;
  plus[k] = add(p.at(k), mul(dir, eps));
  minus[k] = sub(p.at(k), mul(dir, eps));
  NoGradGuard ng;
  const double numeric = (loss(plus).item() - loss(minus).item()) / (2 * eps);
  const double analytic = sum(mul(g.grads.at(k), dir)).item();
  EXPECT_NEAR(analytic, numeric, 1e-2 * std::max(1.0, std::fabs(numeric)));
  EXPECT_GT(std::fabs(analytic), 1e-3);
  EXPECT_NE(error_of([&] { fnet_encode(c, p, Array::zeros(Shape{{"batch", 1}, {"length", 11}}, DType::i32)); })
                .find("[fnet] input length 11 exceeds max_position_embeddings=10"),
            std::string::npos);
}

}  // namespace
}  // namespace t5x
