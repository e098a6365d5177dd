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

}  // namespace t5x::testing
