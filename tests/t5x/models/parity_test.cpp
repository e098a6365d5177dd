// Parity with real peers (golden files from scripts/golden/models_hf_parity.py):
//  - Hugging Face transformers' T5ForConditionalGeneration (PyTorch, fp32),
//    T5.1.1 (gated-gelu, untied) and T5.1.0 (relu, tied): logits, mean loss,
//    per-token log-probabilities; weights imported through the checkpoint
//    layer's safetensors reader and HF -> t5x name mapping.
//  - A numpy decoder-only prefix LM (same script) for DecoderOnlyModel.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "t5x/checkpoints/hf_t5.h"
#include "t5x/checkpoints/safetensors.h"
#include "t5x/models/models.h"
#include "test_util.h"

namespace t5x {
namespace {

std::string golden(const std::string& name) { return std::string(T5X_SOURCE_DIR) + "/tests/golden/models/" + name; }

Array to_array(const HostTensor& t, const Shape& shape) {
  if (t.dtype == "float32") return Array::from_vector(shape, t.values<float>());
  if (t.dtype == "int32") return Array::from_vector(shape, t.values<int32_t>());
  throw std::runtime_error("unexpected dtype " + t.dtype);
}

Array io_array(const SafetensorsFile& f, const std::string& name, std::vector<std::string> dims) {
  const HostTensor* t = f.find(name);
  if (!t) throw std::runtime_error("missing " + name);
  std::vector<Dim> d;
  for (size_t i = 0; i < dims.size(); ++i) d.push_back({dims[i], t->shape[i]});
  return to_array(*t, Shape(d));
}

// Loads named tensors into a param tree shaped by the model's specs.
ParamTree load_params(const NamedTensors& tensors, const nn::ParamSpecs& specs) {
  std::map<std::string, const HostTensor*> by_name;
  for (const auto& [n, t] : tensors) by_name[n] = &t;
  ParamTree p;
  for (const auto& s : specs) {
    auto it = by_name.find(s.name);
    if (it == by_name.end()) throw std::runtime_error("no tensor for " + s.name);
    EXPECT_EQ(it->second->shape, s.shape.sizes()) << s.name;
    p[s.name] = to_array(*it->second, s.shape);
  }
  EXPECT_EQ(p.size(), tensors.size());
  return p;
}

// max |a - b| over non-padding target positions, relative to max |b|.
double rel_logit_diff(const Array& a, const Array& b, const Array& targets) {
  int64_t v = a.dim("vocab");
  auto x = transpose(a, {"batch", "length", "vocab"}).to_floats();
  auto y = transpose(b, {"batch", "length", "vocab"}).to_floats();
  auto t = transpose(targets, {"batch", "length"}).to_ints();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == 0) continue;
    for (int64_t k = 0; k < v; ++k) {
      diff = std::max(diff, double(std::abs(x[i * size_t(v) + size_t(k)] - y[i * size_t(v) + size_t(k)])));
      scale = std::max(scale, double(std::abs(y[i * size_t(v) + size_t(k)])));
    }
  }
  return diff / scale;
}

void hf_parity(const std::string& name, DType dtype = DType::f32) {
  std::ifstream cf(golden(name + "_config.json"));
  std::stringstream ss;
  ss << cf.rdbuf();
  HfT5Config hf = HfT5Config::from_json(ss.str(), name + "_config.json");
  T5Config cfg;
  cfg.vocab_size = hf.vocab_size;
  cfg.emb_dim = hf.d_model;
  cfg.num_heads = hf.num_heads;
  cfg.head_dim = hf.d_kv;
  cfg.mlp_dim = hf.d_ff;
  cfg.num_encoder_layers = hf.num_layers;
  cfg.num_decoder_layers = hf.num_decoder_layers;
  cfg.mlp_activations = hf.is_gated_act() ? std::vector<std::string>{"gelu", "linear"} : std::vector<std::string>{"relu"};
  cfg.logits_via_embedding = hf.tie_word_embeddings;
  cfg.dropout_rate = 0.0;
  cfg.dtype = dtype;
  EncoderDecoderModel model(cfg, LossOptions{0.0, 0.0, LossNormalizingFactor::parse("NUM_REAL_TARGET_TOKENS")});
  SafetensorsFile w = read_safetensors(golden(name + "_weights.safetensors"));
  ParamTree params = load_params(hf_params_to_t5x(w.tensors, hf), model.param_specs());

  SafetensorsFile io = read_safetensors(golden(name + "_io.safetensors"));
  Batch b{{"encoder_input_tokens", io_array(io, "encoder_input_tokens", {"batch", "length"})},
          {"decoder_input_tokens", io_array(io, "decoder_input_tokens", {"batch", "length"})},
          {"decoder_target_tokens", io_array(io, "decoder_target_tokens", {"batch", "length"})}};
  Array ref = io_array(io, "logits", {"batch", "length", "vocab"});
  Array logits = model.logits(params, b);
  if (dtype == DType::bf16) {
    // bfloat16 activations (t5x's default): same logits to bf16 precision.
    EXPECT_LT(rel_logit_diff(logits, ref, b["decoder_target_tokens"]), 3e-2) << name;
    EXPECT_GT(rel_logit_diff(logits, ref, b["decoder_target_tokens"]), 1e-6) << name;
    return;
  }
  EXPECT_LT(rel_logit_diff(logits, ref, b["decoder_target_tokens"]), 1e-4) << name;
  // HF's loss: mean over labels != -100 = t5x sum / NUM_REAL_TARGET_TOKENS without z-loss.
  double hf_loss = io.find("loss")->values<float>()[0];
  auto [loss, metrics] = model.loss_fn(params, b);
  EXPECT_NEAR(loss.item(), hf_loss, 1e-4 * std::abs(hf_loss)) << name;
  // Per-token log-likelihoods and score_batch.
  auto lp = testing::token_log_probs(logits, b["decoder_target_tokens"]);
  auto ref_lp = io.find("token_log_probs")->values<float>();
  auto t = b["decoder_target_tokens"].to_ints();
  for (size_t i = 0; i < lp.size(); ++i)
    if (t[i] != 0) {
      EXPECT_NEAR(lp[i], ref_lp[i], 1e-4 * std::max(1.0, std::abs(double(ref_lp[i])))) << name << " " << i;
    }
  auto scores = model.score_batch(params, b).to_floats();
  int64_t len = b["decoder_target_tokens"].dim("length");
  for (size_t r = 0; r < scores.size(); ++r) {
    double s = 0;
    for (int64_t j = 0; j < len; ++j)
      if (t[r * size_t(len) + size_t(j)] != 0) s += ref_lp[r * size_t(len) + size_t(j)];
    EXPECT_NEAR(scores[r], s, 1e-4 * std::abs(s)) << name;
  }
}

TEST(HfParity, T5_1_1GatedGeluUntied) { hf_parity("t5_1_1"); }
TEST(HfParity, T5_1_0ReluTied) { hf_parity("t5_1_0"); }
TEST(HfParity, T5_1_1Bfloat16Activations) { hf_parity("t5_1_1", DType::bf16); }

TEST(NumpyParity, DecoderOnlyPrefixLM) {
  T5Config cfg = testing::small_test_config(true, true);
  cfg.vocab_size = 96;
  cfg.emb_dim = 32;
  cfg.num_heads = 4;
  cfg.head_dim = 8;
  cfg.mlp_dim = 64;
  DecoderOnlyModel model(cfg, LossOptions{}, /*inputs_bidirectional_attention=*/true);
  SafetensorsFile w = read_safetensors(golden("decoder_only_weights.safetensors"));
  ParamTree params = load_params(w.tensors, model.param_specs());
  SafetensorsFile io = read_safetensors(golden("decoder_only_io.safetensors"));
  Batch b{{"decoder_input_tokens", io_array(io, "decoder_input_tokens", {"batch", "length"})},
          {"decoder_target_tokens", io_array(io, "decoder_target_tokens", {"batch", "length"})},
          {"decoder_causal_attention", io_array(io, "decoder_causal_attention", {"batch", "length"})}};
  Array logits = model.logits(params, b);
  EXPECT_LT(rel_logit_diff(logits, io_array(io, "logits", {"batch", "length", "vocab"}), b["decoder_target_tokens"]),
            1e-4);
  auto lp = testing::token_log_probs(logits, b["decoder_target_tokens"]);
  auto ref = io.find("token_log_probs")->values<float>();
  auto t = b["decoder_target_tokens"].to_ints();
  for (size_t i = 0; i < lp.size(); ++i)
    if (t[i] != 0) {
      EXPECT_NEAR(lp[i], ref[i], 1e-4 * std::max(1.0, std::abs(double(ref[i]))));
    }
  // Without the prefix the logits change (the mask matters); t5x's default
  // inputs_bidirectional_attention = False ignores decoder_causal_attention.
  Batch causal = b;
  causal.erase("decoder_causal_attention");
  Array causal_logits = model.logits(params, causal);
  EXPECT_GT(rel_logit_diff(causal_logits, logits, b["decoder_target_tokens"]), 1e-3);
  DecoderOnlyModel lm(cfg);
  EXPECT_LT(rel_logit_diff(lm.logits(params, b), causal_logits, b["decoder_target_tokens"]), 1e-6);
}

}  // namespace
}  // namespace t5x
