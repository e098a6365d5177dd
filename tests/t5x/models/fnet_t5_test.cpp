// The T5 encoder with FNet's Fourier mixing (T5Config::encoder_mixing =
// kFourier; Lee-Thorp et al. 2021, section 3.1): parameters, a known answer
// from a direct DFT sum, packed inputs refused, gradients, and cached
// decoding over the Fourier-mixed encoding equal to the uncached logits.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

#include "ops/ops.h"
#include "t5x/models/models.h"
#include "t5x/models/network.h"
#include "test_util.h"

namespace t5x {
namespace {

using testing::small_test_config;
using testing::enc_dec_batch;
using testing::tokens;

T5Config fnet_config(int64_t encoder_layers = 2) {
  T5Config c = small_test_config();
  c.encoder_mixing = T5Config::Mixing::kFourier;
  c.num_encoder_layers = encoder_layers;
  return c;
}

TEST(FNetEncoder, ParamsReplaceAttentionByTheMixingNorm) {
  ParamTree p = EncoderDecoderModel(fnet_config()).init(prng_key(1));
  ParamTree t5 = EncoderDecoderModel(small_test_config()).init(prng_key(1));
  EXPECT_EQ(p.count("encoder/relpos_bias/rel_embedding"), 0u);
  for (int i = 0; i < 2; ++i) {
    const std::string l = "encoder/layers_" + std::to_string(i);
    EXPECT_EQ(p.count(l + "/attention/query/kernel"), 0u);
    EXPECT_EQ(p.count(l + "/pre_attention_layer_norm/scale"), 0u);
    ASSERT_EQ(p.count(l + "/pre_mixing_layer_norm/scale"), 1u);
    EXPECT_EQ(p.at(l + "/pre_mixing_layer_norm/scale").shape().to_string(), "[embed=16]");
  }
  // The rest is T5's: 2 layers x (4 attention kernels + 1 norm) + relpos fewer.
  EXPECT_EQ(t5.size() - p.size(), 2u * 5u + 1u - 2u);
  EXPECT_EQ(p.count("decoder/layers_1/self_attention/query/kernel"), 1u);
}

// One layer with a zero MLP output kernel: encoded = RMSNorm(x + Re(DFT2(RMSNorm(x)))),
// checked against the DFT written out as a double sum (no FFT library).
TEST(FNetEncoder, OneLayerIsTheRealPartOfTheTwoDimensionalDft) {
  const T5Config c = fnet_config(1);
  ParamTree p = EncoderDecoderModel(c).init(prng_key(3));
  const std::string l = "encoder/layers_0";
  p[l + "/mlp/wo/kernel"] = mul(p.at(l + "/mlp/wo/kernel"), 0.0);
  const int64_t E = c.emb_dim, L = 5, B = 2;
  std::vector<float> s1(static_cast<size_t>(E)), s2(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) s1[size_t(e)] = 0.5f + 0.1f * float(e), s2[size_t(e)] = 1.5f - 0.05f * float(e);
  p[l + "/pre_mixing_layer_norm/scale"] = Array::from_floats(Shape{{"embed", E}}, s1);
  p["encoder/encoder_norm/scale"] = Array::from_floats(Shape{{"embed", E}}, s2);
  const std::vector<int64_t> ids = {5, 7, 9, 3, 0, 2, 4, 6, 8, 11};  // padding (0) is mixed too
  nn::Dropout none;
  const std::vector<float> got =
      transpose(t5_encode(c, p, tokens(B, L, ids), Array(), none), {"batch", "length", "embed"}).to_floats();
  const std::vector<float> emb = transpose(p.at("token_embedder/embedding"), {"vocab", "embed"}).to_floats();
  auto rms = testing::rms_ref;
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<std::vector<double>> x = testing::embedded_rows(emb, ids, b, L, E);
    std::vector<std::vector<double>> h;
    for (const auto& row : x) h.push_back(rms(row, s1));
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> y = x[size_t(i)];
      for (int64_t e = 0; e < E; ++e)
        for (int64_t j = 0; j < L; ++j)
          for (int64_t k = 0; k < E; ++k)
            y[size_t(e)] += h[size_t(j)][size_t(k)] *
                            std::cos(2 * std::numbers::pi * (double(i * j) / double(L) + double(e * k) / double(E)));
      y = rms(y, s2);
      for (int64_t e = 0; e < E; ++e)
        worst = std::max(worst, std::abs(double(got[size_t((b * L + i) * E + e)]) - y[size_t(e)]));
    }
  }
  EXPECT_LT(worst, 2e-5);
}

TEST(FNetEncoder, PackedInputsAreRefusedWithTheFix) {
  EncoderDecoderModel m(fnet_config());
  ParamTree p = m.init(prng_key(2));
  Batch b = {{"encoder_input_tokens", tokens(1, 4, {5, 1, 7, 1})},
             {"encoder_segment_ids", tokens(1, 4, {1, 1, 2, 2})},
             {"decoder_input_tokens", tokens(1, 4, {0, 4, 0, 6})},
             {"decoder_target_tokens", tokens(1, 4, {4, 1, 6, 1})},
             {"decoder_segment_ids", tokens(1, 4, {1, 1, 2, 2})}};
  try {
    m.loss_fn(p, b);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cannot take packed inputs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("pack = False"), std::string::npos) << e.what();
  }
}

// Every parameter gets a gradient, the mixing norms included (through the
// DFT's vjp), and a few SGD steps lower the loss.
TEST(FNetEncoder, GradientsReachEveryParameterAndSgdLowersTheLoss) {
  EncoderDecoderModel m(fnet_config());
  const Batch b = enc_dec_batch();
  const testing::SgdRun r = testing::sgd_run(m, m.init(prng_key(4)), b, 8, 0.02);
  EXPECT_EQ(testing::sgd_problems(r, m.init(prng_key(4)).size()), "");
}

// The decoder is unchanged: cached greedy decoding over a Fourier-mixed
// encoding gives the teacher-forced logits of the decoded tokens.
TEST(FNetEncoder, CachedDecodingEqualsTeacherForcedLogits) {
  EncoderDecoderModel m(fnet_config());
  ParamTree p = m.init(prng_key(6));
  const Batch b = enc_dec_batch();
  nn::Dropout none;
  const Array enc = b.at("encoder_input_tokens");
  Array encoded = t5_encode(m.config(), p, enc, Array(), none);
  const Array dec_in = b.at("decoder_input_tokens");
  const std::vector<float> teacher =
      transpose(t5_decode(m.config(), p, encoded, enc, dec_in, Array(), Array(), Array(), none),
                {"batch", "length", "vocab"})
          .to_floats();
  DecoderCache cache = t5_init_decoder_cache(m.config(), p, encoded, enc, 5);
  const int64_t V = m.config().vocab_size;
  const std::vector<int64_t> in = dec_in.to_ints();
  double worst = 0;
  for (int64_t t = 0; t < 5; ++t) {
    Array tok = Array::from_ints(Shape{{"batch", 2}}, {in[size_t(t)], in[size_t(5 + t)]});
    const std::vector<float> step = transpose(t5_decode_step(m.config(), p, cache, tok), {"batch", "vocab"}).to_floats();
    for (int64_t bb = 0; bb < 2; ++bb)
      for (int64_t v = 0; v < V; ++v)
        worst = std::max(worst, double(std::abs(step[size_t(bb * V + v)] - teacher[size_t((bb * 5 + t) * V + v)])));
  }
  EXPECT_LT(worst, 1e-5);
}

}  // namespace
}  // namespace t5x
