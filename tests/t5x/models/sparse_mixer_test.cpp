// The T5 encoder with Sparse Mixer's LINEAR mixing (T5Config::encoder_mixing
// = kLinear; Lee-Thorp & Ainslie 2022, arXiv 2205.12399; moe.md 4.2):
// W_seq . X . W_hidden on a hand-computed case, one encoder layer against a
// direct sum, the hybrid attention layout's parameters, the fixed length and
// packing refusals, config errors, and gradients reaching the mixing kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/ops.h"
#include "t5x/models/models.h"
#include "t5x/models/network.h"
#include "test_util.h"

namespace t5x {
namespace {

using testing::small_test_config;
using testing::tokens;

T5Config mixer_config(int64_t encoder_layers = 2, int64_t length = 6, int64_t attention_layers = 0) {
  T5Config c = small_test_config();
  c.encoder_mixing = T5Config::Mixing::kLinear;
  c.encoder_mixing_length = length;
  c.num_encoder_layers = encoder_layers;
  c.num_encoder_attention_layers = attention_layers;
  return c;
}

// W_seq = [[1, 2], [0, 1]], W_hidden = [[1, 0], [1, 1]], X = [[1, 2], [3, 4]]:
// W_seq X = [[7, 10], [3, 4]]; (W_seq X) W_hidden = [[17, 10], [7, 4]].
// The second example is -X. seq/kernel holds W_seq transposed ([in, out]).
TEST(SparseMixer, LinearMixIsWseqTimesXTimesWhidden) {
  ParamTree p;
  p["m/seq/kernel"] = Array::from_floats(Shape{{"length", 2}, {"mixing_length", 2}}, {1, 0, 2, 1});
  p["m/hidden/kernel"] = Array::from_floats(Shape{{"embed", 2}, {"mlp", 2}}, {1, 0, 1, 1});
  Array x = Array::from_floats(Shape{{"batch", 2}, {"length", 2}, {"embed", 2}}, {1, 2, 3, 4, -1, -2, -3, -4});
  Array y = linear_mix(p, "m", x);
  EXPECT_EQ(y.shape().to_string(), "[batch=2, length=2, embed=2]");
  EXPECT_EQ(y.to_floats(), (std::vector<float>{17, 10, 7, 4, -17, -10, -7, -4}));
  // Another dim order in, the same order out.
  Array yt = linear_mix(p, "m", transpose(x, {"embed", "batch", "length"}));
  EXPECT_EQ(yt.names(), (std::vector<std::string>{"embed", "batch", "length"}));
  EXPECT_EQ(transpose(yt, {"batch", "length", "embed"}).to_floats(), y.to_floats());
}

// One layer with a zero MLP output kernel: encoded = RMSNorm(x + W_seq RMSNorm(x) W_hidden),
// against the products written out as sums over the initialised kernels.
TEST(SparseMixer, OneLayerIsTheLinearMixOfTheNormedInput) {
  const int64_t L = 5, B = 2;
  const T5Config c = mixer_config(1, L);
  ParamTree p = EncoderDecoderModel(c).init(prng_key(3));
  const std::string l = "encoder/layers_0";
  p[l + "/mlp/wo/kernel"] = mul(p.at(l + "/mlp/wo/kernel"), 0.0);
  // Scale the N(0, 0.02) kernels up so the mixing moves the output visibly.
  p[l + "/mixing/seq/kernel"] = mul(p.at(l + "/mixing/seq/kernel"), 30.0);
  p[l + "/mixing/hidden/kernel"] = mul(p.at(l + "/mixing/hidden/kernel"), 30.0);
  const int64_t E = c.emb_dim;
  const std::vector<int64_t> ids = {5, 7, 9, 3, 0, 2, 4, 6, 8, 11};  // padding (0) is mixed too
  nn::Dropout none;
  const std::vector<float> got =
      transpose(t5_encode(c, p, tokens(B, L, ids), Array(), none), {"batch", "length", "embed"}).to_floats();
  const std::vector<float> emb = transpose(p.at("token_embedder/embedding"), {"vocab", "embed"}).to_floats();
  const std::vector<float> ws = transpose(p.at(l + "/mixing/seq/kernel"), {"length", "mixing_length"}).to_floats();
  const std::vector<float> wh = transpose(p.at(l + "/mixing/hidden/kernel"), {"embed", "mlp"}).to_floats();
  const std::vector<float> s1 = p.at(l + "/pre_mixing_layer_norm/scale").to_floats();
  const std::vector<float> s2 = p.at("encoder/encoder_norm/scale").to_floats();
  auto rms = testing::rms_ref;
  double worst = 0, moved = 0;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<std::vector<double>> x = testing::embedded_rows(emb, ids, b, L, E);
    std::vector<std::vector<double>> h;
    for (const auto& row : x) h.push_back(rms(row, s1));
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> y = x[size_t(i)];
      for (int64_t e = 0; e < E; ++e)
        for (int64_t j = 0; j < L; ++j)
          for (int64_t k = 0; k < E; ++k)  // W_seq[i, j] = seq kernel[j, i]
            y[size_t(e)] += double(ws[size_t(j * L + i)]) * h[size_t(j)][size_t(k)] * double(wh[size_t(k * E + e)]);
      const std::vector<double> plain = rms(x[size_t(i)], s2);
      y = rms(y, s2);
      for (int64_t e = 0; e < E; ++e) {
        worst = std::max(worst, std::abs(double(got[size_t((b * L + i) * E + e)]) - y[size_t(e)]));
        moved = std::max(moved, std::abs(plain[size_t(e)] - y[size_t(e)]));
      }
    }
  }
  EXPECT_LT(worst, 2e-5);
  EXPECT_GT(moved, 1e-2);  // the mixing term is not negligible in this check
}

// num_encoder_attention_layers = 1 of 3, TOP: layers 0 and 1 mix, layer 2
// keeps self-attention (and the encoder its relpos bias).
TEST(SparseMixer, HybridTopLayoutParams) {
  ParamTree p = EncoderDecoderModel(mixer_config(3, 6, 1)).init(prng_key(1));
  EXPECT_EQ(p.count("encoder/relpos_bias/rel_embedding"), 1u);
  for (int i = 0; i < 2; ++i) {
    const std::string l = "encoder/layers_" + std::to_string(i);
    EXPECT_EQ(p.count(l + "/attention/query/kernel"), 0u) << l;
    EXPECT_EQ(p.at(l + "/pre_mixing_layer_norm/scale").shape().to_string(), "[embed=16]");
    EXPECT_EQ(p.at(l + "/mixing/seq/kernel").shape().to_string(), "[length=6, mixing_length=6]");
    EXPECT_EQ(p.at(l + "/mixing/hidden/kernel").shape().to_string(), "[embed=16, mlp=16]");
  }
  const std::vector<float> w = p.at("encoder/layers_0/mixing/hidden/kernel").to_floats();
  double ss = 0;
  for (float f : w) ss += double(f) * f;
  const double sd = std::sqrt(ss / double(w.size()));
  EXPECT_GT(sd, 0.016);  // N(0, 0.02) over 256 draws
  EXPECT_LT(sd, 0.024);
  EXPECT_EQ(p.count("encoder/layers_2/attention/query/kernel"), 1u);
  EXPECT_EQ(p.count("encoder/layers_2/mixing/seq/kernel"), 0u);
  T5Config bottom = mixer_config(3, 6, 1);
  bottom.encoder_attention_layout = T5Config::SparseLayout::kBottom;
  EXPECT_TRUE(bottom.encoder_attention_layer(0));
  EXPECT_FALSE(bottom.encoder_attention_layer(2));
  EXPECT_TRUE(small_test_config().encoder_attention_layer(1));
}

Batch batch(int64_t enc_len) {
  std::vector<int64_t> e(size_t(2 * enc_len));
  for (size_t i = 0; i < e.size(); ++i) e[i] = int64_t(2 + i % 9);
  e[e.size() - 1] = 0;
  return {{"encoder_input_tokens", tokens(2, enc_len, e)},
          {"decoder_input_tokens", tokens(2, 5, {0, 4, 8, 12, 3, 0, 6, 9, 1, 0})},
          {"decoder_target_tokens", tokens(2, 5, {4, 8, 12, 3, 1, 6, 9, 1, 0, 0})}};
}

TEST(SparseMixer, OtherLengthsAndPackedInputsAreRefusedWithTheFix) {
  EncoderDecoderModel m(mixer_config(3, 6, 1));
  ParamTree p = m.init(prng_key(2));
  try {
    m.loss_fn(p, batch(5));
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("has W_seq of length 6 but the encoder inputs have length 5"), std::string::npos) << w;
    EXPECT_NE(w.find("encoder_mixing_length"), std::string::npos) << w;
  }
  Batch b = batch(6);
  b["encoder_segment_ids"] = tokens(2, 6, {1, 1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 0});
  b["decoder_segment_ids"] = tokens(2, 5, {1, 1, 2, 2, 2, 1, 1, 1, 0, 0});
  try {
    m.loss_fn(p, b);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("linear-mixing (Sparse Mixer) encoder cannot take packed inputs"), std::string::npos) << w;
    EXPECT_NE(w.find("pack = False"), std::string::npos) << w;
  }
}

TEST(SparseMixer, BadMixingConfigsAreRefused) {
  auto refused = [](const T5Config& c, const std::string& what) {
    try {
      (void)encoder_decoder_param_specs(c);
      ADD_FAILURE() << "no error for " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  refused(mixer_config(2, 0), "encoder_mixing = 'linear' needs encoder_mixing_length > 0 (got 0)");
  refused(mixer_config(2, 6, 3), "num_encoder_attention_layers = 3 is not in 0 .. 2");
  T5Config att = small_test_config();
  att.num_encoder_attention_layers = 1;
  refused(att, "num_encoder_attention_layers = 1 needs a mixing encoder");
  T5Config mixed = mixer_config(3, 6, 2);
  mixed.encoder_attention_layout = T5Config::SparseLayout::kMixed;
  refused(mixed, "MIXED");
}

// Every parameter of the hybrid gets a gradient (W_seq, W_hidden and the
// attention layer's included), and a few SGD steps lower the loss.
TEST(SparseMixer, GradientsReachEveryParameterAndSgdLowersTheLoss) {
  EncoderDecoderModel m(mixer_config(3, 6, 1));
  const Batch b = batch(6);
  const testing::SgdRun r = testing::sgd_run(m, m.init(prng_key(4)), b, 8, 0.02);
  EXPECT_EQ(testing::sgd_problems(r, m.init(prng_key(4)).size()), "");
}

}  // namespace
}  // namespace t5x
