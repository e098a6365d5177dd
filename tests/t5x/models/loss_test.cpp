// Losses and metrics (t5x semantics), packing, and gradients vs finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/ops.h"
#include "t5x/models/models.h"
#include "test_util.h"

namespace t5x {
namespace {

using testing::small_test_config;
using testing::token_log_probs;
using testing::tokens;

struct Fixture {
  Array logits = mul(normal(prng_key(11), Shape{{"batch", 2}, {"length", 4}, {"vocab", 6}}), 2.0);
  Array targets = tokens(2, 4, {3, 1, 0, 0, 2, 5, 4, 1});
  Array weights = Array::from_floats(Shape{{"batch", 2}, {"length", 4}}, {1, 1, 0, 0, 1, 1, 1, 1});
};

TEST(Losses, NormalizingFactorModes) {
  Fixture f;
  auto lp = token_log_probs(f.logits, f.targets);
  auto w = f.weights.to_floats();
  double total = 0;
  for (size_t i = 0; i < lp.size(); ++i) total += -lp[i] * w[i];
  Batch b{{"decoder_target_tokens", f.targets}, {"decoder_loss_weights", f.weights}};
  auto loss = [&](const std::string& lnf) {
    LossOptions o;
    o.z_loss = 0.0;
    o.loss_normalizing_factor = LossNormalizingFactor::parse(lnf);
    return t5x_loss(f.logits, b, o).loss.item();
  };
  EXPECT_NEAR(loss("None"), total, 1e-4);
  EXPECT_NEAR(loss("233472"), total / 233472.0, 1e-9);
  EXPECT_NEAR(loss("NUM_REAL_TARGET_TOKENS"), total / 6.0, 1e-5);
  EXPECT_NEAR(loss("SpecialLossNormalizingFactor.NUM_TOTAL_TARGET_TOKENS"), total / 8.0, 1e-5);
  // Average per sequence: each row's loss averaged over its weights, then the
  // mean over rows (the new weights sum to the number of rows).
  double r0 = (-lp[0] - lp[1]) / 2.0, r1 = (-lp[4] - lp[5] - lp[6] - lp[7]) / 4.0;
  EXPECT_NEAR(loss("average_per_sequence"), (r0 + r1) / 2.0, 1e-5);
  EXPECT_THROW(LossNormalizingFactor::parse("per_token"), std::invalid_argument);
}

TEST(Losses, ZLossLabelSmoothingAndMetrics) {
  Fixture f;
  Batch b{{"decoder_target_tokens", f.targets}, {"decoder_loss_weights", f.weights}};
  LossOptions o;  // z_loss 1e-4 by default
  LossOutput out = t5x_loss(f.logits, b, o);
  // z-loss = 1e-4 * sum_w logsumexp^2
  Array lse = logsumexp(f.logits, {"vocab"});
  double z = sum(mul(mul(square(lse), 1e-4), f.weights)).item();
  EXPECT_NEAR(out.z_loss.item(), z, 1e-6);
  LossOptions no_z = o;
  no_z.z_loss = 0;
  EXPECT_NEAR(out.loss.item(), t5x_loss(f.logits, b, no_z).loss.item() + z, 1e-4);
  Metrics m = compute_base_metrics(f.logits, f.targets, f.weights, out);
  EXPECT_NEAR(m["cross_ent_loss"].value(), out.loss.item() - z, 1e-5);
  EXPECT_EQ(m["num_nonpadding_tokens"].value(), 6.0);
  EXPECT_EQ(m["nonpadding_fraction"].value(), 0.75);
  // accuracy counts argmax hits on weighted tokens.
  auto am = transpose(argmax(f.logits, "vocab"), {"batch", "length"}).to_ints();
  auto t = f.targets.to_ints();
  auto w = f.weights.to_floats();
  double hits = 0;
  for (size_t i = 0; i < t.size(); ++i) hits += (am[i] == t[i]) * w[i];
  EXPECT_DOUBLE_EQ(m["accuracy"].value(), hits / 6.0);
  // Label smoothing 0.1 against the soft-target definition.
  LossOptions ls = no_z;
  ls.label_smoothing = 0.1;
  double conf = 0.9, low = 0.1 / 5.0, norm = -(conf * std::log(conf) + 5 * low * std::log(low + 1e-20));
  auto lf = transpose(f.logits, {"batch", "length", "vocab"}).to_floats();
  double expect = 0;
  for (int i = 0; i < 8; ++i) {
    double mx = -1e9, s = 0;
    for (int k = 0; k < 6; ++k) mx = std::max(mx, double(lf[size_t(i * 6 + k)]));
    for (int k = 0; k < 6; ++k) s += std::exp(lf[size_t(i * 6 + k)] - mx);
    double l = 0;
    for (int k = 0; k < 6; ++k) l -= (k == t[size_t(i)] ? conf : low) * (lf[size_t(i * 6 + k)] - mx - std::log(s));
    expect += (l - norm) * w[size_t(i)];
  }
  EXPECT_NEAR(t5x_loss(f.logits, b, ls).loss.item(), expect, 1e-4);
}

TEST(Losses, PackedBatchEqualsSeparateExamples) {
  EncoderDecoderModel m(small_test_config());
  ParamTree p = m.init(prng_key(4));
  // Separate: two examples padded to length 6.
  Batch sep{{"encoder_input_tokens", tokens(2, 6, {5, 6, 7, 1, 0, 0, 9, 1, 0, 0, 0, 0})},
            {"decoder_input_tokens", tokens(2, 6, {0, 3, 4, 0, 0, 0, 0, 8, 2, 0, 0, 0})},
            {"decoder_target_tokens", tokens(2, 6, {3, 4, 1, 0, 0, 0, 8, 2, 1, 0, 0, 0})},
            {"decoder_loss_weights", tokens(2, 6, {1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0, 0})}};
  // Packed into one row, as seqio's EncDecFeatureConverter packs them.
  Batch packed{{"encoder_input_tokens", tokens(1, 6, {5, 6, 7, 1, 9, 1})},
               {"encoder_segment_ids", tokens(1, 6, {1, 1, 1, 1, 2, 2})},
               {"encoder_positions", tokens(1, 6, {0, 1, 2, 3, 0, 1})},
               {"decoder_input_tokens", tokens(1, 6, {0, 3, 4, 0, 8, 2})},
               {"decoder_target_tokens", tokens(1, 6, {3, 4, 1, 8, 2, 1})},
               {"decoder_segment_ids", tokens(1, 6, {1, 1, 1, 2, 2, 2})},
               {"decoder_positions", tokens(1, 6, {0, 1, 2, 0, 1, 2})},
               {"decoder_loss_weights", tokens(1, 6, {1, 1, 1, 1, 1, 1})}};
  auto a = token_log_probs(m.logits(p, sep), sep["decoder_target_tokens"]);
  auto b = token_log_probs(m.logits(p, packed), packed["decoder_target_tokens"]);
  for (int j = 0; j < 3; ++j) {
    EXPECT_NEAR(b[size_t(j)], a[size_t(j)], 1e-5) << j;
    EXPECT_NEAR(b[size_t(3 + j)], a[size_t(6 + j)], 1e-5) << j;
  }
  // Same total loss, and the packed metrics count two segments.
  LossOptions o;
  auto [ls, ms] = m.loss_fn(p, sep);
  auto [lp, mp] = m.loss_fn(p, packed);
  EXPECT_NEAR(ls.item(), lp.item(), 1e-4);
  EXPECT_EQ(mp["effective_batch_size/decoder"].value(), 2.0);
  // Decoder-only packing too.
  DecoderOnlyModel d(small_test_config(false, true));
  ParamTree pd = d.init(prng_key(5));
  Batch dsep{{"decoder_input_tokens", tokens(2, 5, {0, 3, 4, 0, 0, 0, 8, 0, 0, 0})},
             {"decoder_target_tokens", tokens(2, 5, {3, 4, 1, 0, 0, 8, 1, 0, 0, 0})}};
  Batch dpk{{"decoder_input_tokens", tokens(1, 5, {0, 3, 4, 0, 8})},
            {"decoder_target_tokens", tokens(1, 5, {3, 4, 1, 8, 1})},
            {"decoder_segment_ids", tokens(1, 5, {1, 1, 1, 2, 2})},
            {"decoder_positions", tokens(1, 5, {0, 1, 2, 0, 1})}};
  auto da = token_log_probs(d.logits(pd, dsep), dsep["decoder_target_tokens"]);
  auto db = token_log_probs(d.logits(pd, dpk), dpk["decoder_target_tokens"]);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(db[size_t(j)], da[size_t(j)], 1e-5);
  for (int j = 0; j < 2; ++j) EXPECT_NEAR(db[size_t(3 + j)], da[size_t(5 + j)], 1e-5);
}

// Central differences of the loss w.r.t. a few entries of every parameter.
void check_gradients(const BaseTransformerModel& m, const Batch& b, std::optional<PRNGKey> rng) {
  ParamTree p = m.init(prng_key(21));
  auto fn = [&](const ParamTree& q) { return m.loss_fn(q, b, rng).first; };
  ValueAndGrad vg = value_and_grad(fn, p);
  ASSERT_EQ(vg.grads.size(), p.size());
  int checked = 0;
  for (const auto& [name, value] : p) {
    auto g = vg.grads.at(name).to_floats();
    int64_t n = value.size();
    for (int64_t i : {int64_t(0), n / 2, n - 1}) {
      const double eps = 1e-2;
      auto perturbed = [&](double delta) {
        auto v = value.to_floats();
        v[size_t(i)] += float(delta);
        ParamTree q = p;
        q[name] = Array::from_floats(value.shape(), v);
        NoGradGuard ng;
        return fn(q).item();
      };
      double fd = (perturbed(eps) - perturbed(-eps)) / (2 * eps);
      EXPECT_NEAR(g[size_t(i)], fd, 2e-3 + 3e-2 * std::abs(fd)) << name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

TEST(Losses, EncoderDecoderGradientsMatchFiniteDifferences) {
  T5Config c = small_test_config();
  c.emb_dim = 8;
  c.mlp_dim = 8;
  c.vocab_size = 12;
  c.dropout_rate = 0.1;  // fixed key: a deterministic function of the params
  EncoderDecoderModel m(c, LossOptions{1e-4, 0.1, {}});
  Batch b{{"encoder_input_tokens", tokens(2, 5, {5, 6, 7, 1, 0, 9, 3, 1, 0, 0})},
          {"decoder_input_tokens", tokens(2, 4, {0, 3, 4, 5, 0, 8, 2, 0})},
          {"decoder_target_tokens", tokens(2, 4, {3, 4, 5, 1, 8, 2, 1, 0})},
          {"decoder_loss_weights", tokens(2, 4, {1, 1, 1, 1, 1, 1, 1, 0})}};
  check_gradients(m, b, prng_key(8));
}

TEST(Losses, DecoderOnlyPrefixLMGradientsMatchFiniteDifferences) {
  T5Config c = small_test_config(false, true);
  c.emb_dim = 8;
  c.mlp_dim = 8;
  c.vocab_size = 12;
  c.num_kv_heads = 1;  // multi-query
  DecoderOnlyModel m(c, LossOptions{}, /*inputs_bidirectional_attention=*/true);
  Batch b{{"decoder_input_tokens", tokens(2, 5, {0, 3, 4, 5, 6, 0, 8, 2, 7, 0})},
          {"decoder_target_tokens", tokens(2, 5, {3, 4, 5, 6, 1, 8, 2, 7, 1, 0})},
          {"decoder_causal_attention", tokens(2, 5, {1, 1, 1, 0, 0, 1, 1, 0, 0, 0})},
          {"decoder_loss_weights", tokens(2, 5, {0, 0, 1, 1, 1, 0, 1, 1, 1, 0})}};
  check_gradients(m, b, std::nullopt);
}

}  // namespace
}  // namespace t5x

#include "nn/constraint.h"

namespace t5x {
namespace {

TEST(Losses, ActivationConstraintHookSeesResidualStream) {
  EncoderDecoderModel m(testing::small_test_config());
  ParamTree p = m.init(prng_key(4));
  Batch b{{"encoder_input_tokens", testing::tokens(1, 4, {5, 6, 1, 0})},
          {"decoder_input_tokens", testing::tokens(1, 3, {0, 3, 4})},
          {"decoder_target_tokens", testing::tokens(1, 3, {3, 4, 1})}};
  Array plain = m.logits(p, b);
  int calls = 0;
  {
    nn::ActivationConstraintScope scope([&](const Array& x) {
      ++calls;
      EXPECT_EQ(x.names(), (std::vector<std::string>{"batch", "length", "embed"}));
      return mul(x, 1.0);
    });
    EXPECT_LT(max_abs_diff(m.logits(p, b), plain), 1e-6);
  }
  // Embedding + 2 per encoder layer, embedding + 3 per decoder layer.
  EXPECT_EQ(calls, 1 + 2 * 2 + 1 + 3 * 2);
  m.logits(p, b);
  EXPECT_EQ(calls, 12);  // the scope restored the identity
}

}  // namespace
}  // namespace t5x
