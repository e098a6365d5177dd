// Shared helpers for the model tests.
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/array.h"
#include "ops/ops.h"
#include "t5x/models/models.h"

namespace t5x::testing {

inline Array tokens(int64_t batch, int64_t length, const std::vector<int64_t>& v) {
  return Array::from_ints(Shape{{"batch", batch}, {"length", length}}, v);
}

// The models' shared small batches (vocab < 24): an encoder-decoder one
// with padding, and a prefix-LM one (decoder_causal_attention).
inline Batch enc_dec_batch() {
  return {{"encoder_input_tokens", tokens(2, 6, {5, 7, 9, 3, 1, 0, 2, 4, 6, 8, 11, 1})},
          {"decoder_input_tokens", tokens(2, 5, {0, 4, 8, 12, 3, 0, 6, 9, 1, 0})},
          {"decoder_target_tokens", tokens(2, 5, {4, 8, 12, 3, 1, 6, 9, 1, 0, 0})}};
}
inline Batch decoder_only_batch() {
  return {{"decoder_input_tokens", tokens(2, 6, {0, 4, 8, 12, 3, 9, 0, 6, 9, 1, 5, 0})},
          {"decoder_target_tokens", tokens(2, 6, {4, 8, 12, 3, 9, 1, 6, 9, 1, 5, 7, 0})},
          {"decoder_causal_attention", tokens(2, 6, {1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0})}};
}

// A small float32 model for tests (T5.1.1-like unless changed).
inline T5Config small_test_config(bool gated = true, bool tied = false) {
  T5Config c;
  c.vocab_size = 24;
  c.emb_dim = 16;
  c.num_heads = 2;
  c.head_dim = 4;
  c.mlp_dim = 24;
  c.num_encoder_layers = 2;
  c.num_decoder_layers = 2;
  c.mlp_activations = gated ? std::vector<std::string>{"gelu", "linear"} : std::vector<std::string>{"relu"};
  c.logits_via_embedding = tied;
  c.dropout_rate = 0.0;
  c.dtype = DType::f32;
  return c;
}

// Row-major [batch, length, vocab] log-softmax picked at targets -> [batch*length].
inline std::vector<double> token_log_probs(const Array& logits, const Array& targets) {
  int64_t b = logits.dim("batch"), l = logits.dim("length"), v = logits.dim("vocab");
  auto f = transpose(logits, {"batch", "length", "vocab"}).to_floats();
  auto t = transpose(targets, {"batch", "length"}).to_ints();
  std::vector<double> out(size_t(b * l));
  for (int64_t i = 0; i < b * l; ++i) {
    double m = -1e300, s = 0;
    for (int64_t k = 0; k < v; ++k) m = std::max(m, double(f[size_t(i * v + k)]));
    for (int64_t k = 0; k < v; ++k) s += std::exp(double(f[size_t(i * v + k)]) - m);
    out[size_t(i)] = double(f[size_t(i * v + t[size_t(i)])]) - m - std::log(s);
  }
  return out;
}

// T5's RMSNorm (eps 1e-6) of one row, in double: the known-answer tests' oracle.
inline std::vector<double> rms_ref(std::vector<double> v, const std::vector<float>& scale) {
  double ms = 0;
  for (double x : v) ms += x * x / double(v.size());
  for (size_t e = 0; e < v.size(); ++e) v[e] = v[e] / std::sqrt(ms + 1e-6) * scale[e];
  return v;
}

// Example b's embedded rows [L][E]: emb is [vocab, embed] row-major, ids [batch, L].
inline std::vector<std::vector<double>> embedded_rows(const std::vector<float>& emb, const std::vector<int64_t>& ids,
                                                      int64_t b, int64_t L, int64_t E) {
  std::vector<std::vector<double>> x(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i)
    x[size_t(i)].assign(emb.begin() + ids[size_t(b * L + i)] * E, emb.begin() + (ids[size_t(b * L + i)] + 1) * E);
  return x;
}

// `steps` plain SGD steps (rate `lr`) of model.loss_fn on `batch` from
// `params`: the first and last losses, and each parameter's squared
// gradient norm at the first step.
struct SgdRun {
  double first = 0, last = 0;
  std::map<std::string, double> grad_sq_norm;
};
inline SgdRun sgd_run(const EncoderDecoderModel& m, ParamTree p, const Batch& batch, int steps, double lr) {
  SgdRun r;
  for (int step = 0; step < steps; ++step) {
    auto vg = value_and_grad([&](const ParamTree& x) { return m.loss_fn(x, batch).first; }, p);
    (step == 0 ? r.first : r.last) = vg.value.item();
    if (step == 0)
      for (const auto& [k, g] : vg.grads) {
        double n = 0;
        for (float f : g.to_floats()) n += double(f) * f;
        r.grad_sq_norm[k] = n;
      }
    for (auto& [k, v] : p) v = sub(v, mul(vg.grads.at(k), lr));
  }
  return r;
}

// What is wrong with an SgdRun over a model of `num_params` parameters: a
// parameter without a finite non-zero gradient, or a loss that fell by < 10%.
// Empty when nothing is.
inline std::string sgd_problems(const SgdRun& r, size_t num_params) {
  std::string out;
  if (r.grad_sq_norm.size() != num_params)
    out += std::to_string(r.grad_sq_norm.size()) + " gradients for " + std::to_string(num_params) + " params; ";
  for (const auto& [k, n] : r.grad_sq_norm)
    if (!(n > 0.0) || !std::isfinite(n)) out += "gradient of " + k + " has squared norm " + std::to_string(n) + "; ";
  if (!(r.last < 0.9 * r.first))
    out += "loss " + std::to_string(r.first) + " -> " + std::to_string(r.last) + " fell by < 10%";
  return out;
}

}  // namespace t5x::testing
