// Grouped-query / multi-query attention in the T5 models (nn/attention.h,
// T5Config::num_kv_heads / encoder_num_kv_heads):
//   - G = num_heads is multi-head attention, bitwise (params, loss, grads);
//   - G < num_heads equals the multi-head model whose key / value kernels
//     repeat each group's K/V head (Ainslie et al.'s definition), forward and
//     gradients (a K/V head's gradient is the sum over its group);
//   - cached decoding reproduces the uncached logits, with a cache of G heads.
#include <gtest/gtest.h>

#include <string>

#include "ops/ops.h"
#include "t5x/models/models.h"
#include "t5x/models/network.h"
#include "test_util.h"

namespace t5x {
namespace {

using testing::small_test_config;
using testing::decoder_only_batch;
using testing::enc_dec_batch;
using testing::tokens;

T5Config four_heads(int64_t g, int64_t enc_g = 0) {
  T5Config c = small_test_config();
  c.num_heads = 4;
  c.head_dim = 3;
  c.num_kv_heads = g;
  c.encoder_num_kv_heads = enc_g;
  return c;
}

// The decoder-only model is a prefix LM (its explicit-mask attention path).
std::unique_ptr<BaseTransformerModel> make(const T5Config& c, bool decoder_only) {
  if (decoder_only) return std::make_unique<DecoderOnlyModel>(c, LossOptions{}, true);
  return std::make_unique<EncoderDecoderModel>(c);
}

// [embed, kv_heads=G, kv] -> [embed, joined_kv = H*kv] with head h = K/V head h / (H/G).
Array repeat_kv_heads(const Array& w, int64_t h) {
  const int64_t e = w.dim("embed"), g = w.dim("kv_heads"), d = w.dim("kv");
  Array b = broadcast_to(w, Shape{{"embed", e}, {"kv_heads", g}, {"group", h / g}, {"kv", d}});
  return reshape(transpose(b, {"embed", "kv_heads", "group", "kv"}), Shape{{"embed", e}, {"joined_kv", h * d}});
}

// The multi-head gradient [embed, H*kv] summed over each group -> [embed, G, kv].
Array sum_over_groups(const Array& g_mha, int64_t h, int64_t g) {
  const int64_t e = g_mha.dim("embed"), d = g_mha.dim("joined_kv") / h;
  Array r = reshape(g_mha, Shape{{"embed", e}, {"kv_heads", g}, {"group", h / g}, {"kv", d}});
  return transpose(sum(r, {"group"}), {"embed", "kv_heads", "kv"});
}

TEST(GroupedQueryAttention, KvHeadsEqualToHeadsIsMultiHeadBitwise) {
  for (bool decoder_only : {false, true}) {
    SCOPED_TRACE(decoder_only ? "decoder-only" : "encoder-decoder");
    auto a = make(four_heads(0), decoder_only), b = make(four_heads(4, 4), decoder_only);
    const Batch batch = decoder_only ? decoder_only_batch() : enc_dec_batch();
    ParamTree p = a->init(prng_key(5)), q = b->init(prng_key(5));
    ASSERT_EQ(p.size(), q.size());
    for (const auto& [k, v] : p) EXPECT_TRUE(array_equal(v, q.at(k))) << k;  // same shapes, names, init
    auto ga = value_and_grad([&](const ParamTree& x) { return a->loss_fn(x, batch).first; }, p);
    auto gb = value_and_grad([&](const ParamTree& x) { return b->loss_fn(x, batch).first; }, q);
    EXPECT_EQ(ga.value.item(), gb.value.item());
    for (const auto& [k, g] : ga.grads) EXPECT_TRUE(array_equal(g, gb.grads.at(k))) << k;
  }
}

// Known answer: the GQA model equals the multi-head model built from it by
// repeating each K/V head over its group (the definition in Ainslie et al.).
void check_against_repeated_mha(const T5Config& gqa, bool decoder_only) {
  T5Config mha = gqa;
  mha.num_kv_heads = mha.encoder_num_kv_heads = 0;
  auto mg = make(gqa, decoder_only), mm = make(mha, decoder_only);
  const Batch batch = decoder_only ? decoder_only_batch() : enc_dec_batch();
  const ParamTree pg = mg->init(prng_key(7));
  ParamTree pm = pg;
  int grouped = 0;
  for (auto& [k, v] : pm)
    if (v.has_dim("kv_heads")) {
      ++grouped;
      v = repeat_kv_heads(v, gqa.num_heads);
    }
  const bool enc_grouped = gqa.encoder_num_kv_heads && gqa.encoder_num_kv_heads != gqa.num_heads;
  const int layers = int(gqa.num_decoder_layers) * (decoder_only ? 1 : 2) + (enc_grouped ? int(gqa.num_encoder_layers) : 0);
  EXPECT_EQ(grouped, 2 * layers);
  for (const auto& [k, v] : mm->init(prng_key(7))) EXPECT_EQ(pm.at(k).shape(), v.shape()) << k;
  {
    NoGradGuard ng;
    EXPECT_LT(max_abs_diff(mg->logits(pg, batch), mm->logits(pm, batch)), 1e-5);
  }
  auto gg = value_and_grad([&](const ParamTree& x) { return mg->loss_fn(x, batch).first; }, pg);
  auto gm = value_and_grad([&](const ParamTree& x) { return mm->loss_fn(x, batch).first; }, pm);
  EXPECT_NEAR(gg.value.item(), gm.value.item(), 1e-5 * std::abs(gm.value.item()));
  for (const auto& [k, g] : gg.grads) {
    const Array want = g.has_dim("kv_heads") ? sum_over_groups(gm.grads.at(k), gqa.num_heads, g.dim("kv_heads"))
                                             : gm.grads.at(k);
    EXPECT_LT(max_abs_diff(g, want), 2e-5) << k;
  }
}

TEST(GroupedQueryAttention, EqualsMultiHeadWithRepeatedKeyValueHeads) {
  for (int64_t g : {1, 2}) {
    SCOPED_TRACE("num_kv_heads " + std::to_string(g));
    check_against_repeated_mha(four_heads(g), false);
    check_against_repeated_mha(four_heads(g, /*enc_g=*/g == 1 ? 2 : 1), false);
    check_against_repeated_mha(four_heads(g), true);
  }
}

TEST(GroupedQueryAttention, EncoderStaysMultiHeadUnlessConfigured) {
  EncoderDecoderModel m(four_heads(1));
  ParamTree p = m.init(prng_key(1));
  EXPECT_EQ(p.at("encoder/layers_0/attention/key/kernel").shape(), (Shape{{"embed", 16}, {"joined_kv", 12}}));
  EXPECT_EQ(p.at("decoder/layers_1/self_attention/key/kernel").shape(),
            (Shape{{"embed", 16}, {"kv_heads", 1}, {"kv", 3}}));
  EXPECT_EQ(p.at("decoder/layers_0/encoder_decoder_attention/value/kernel").shape(),
            (Shape{{"embed", 16}, {"kv_heads", 1}, {"kv", 3}}));
  EXPECT_EQ(p.at("decoder/layers_0/self_attention/query/kernel").shape(), (Shape{{"embed", 16}, {"joined_kv", 12}}));
  EncoderDecoderModel e(four_heads(1, 2));
  EXPECT_EQ(e.init(prng_key(1)).at("encoder/layers_1/attention/value/kernel").shape(),
            (Shape{{"embed", 16}, {"kv_heads", 2}, {"kv", 3}}));
  try {
    EncoderDecoderModel bad(four_heads(3));
    (void)bad.init(prng_key(1));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& ex) {
    EXPECT_NE(std::string(ex.what()).find("num_kv_heads 3 must divide num_heads 4"), std::string::npos) << ex.what();
  }
}

// Step-by-step cached decoding gives the teacher-forced logits at every
// position; the caches hold only the G K/V heads.
TEST(GroupedQueryAttention, CachedDecodingEqualsUncachedLogits) {
  const std::vector<int64_t> dec = {0, 4, 8, 12, 3, 0, 6, 9, 1, 5};  // [2, 5], no padding inside
  for (int64_t g : {1, 2}) {
    SCOPED_TRACE("num_kv_heads " + std::to_string(g));
    const T5Config c = four_heads(g);
    nn::Dropout none;
    {  // encoder-decoder
      EncoderDecoderModel m(c);
      ParamTree p = m.init(prng_key(3));
      Array enc_tokens = tokens(2, 6, {5, 7, 9, 3, 1, 0, 2, 4, 6, 8, 11, 1});
      Array encoded = t5_encode(c, p, enc_tokens, Array(), none);
      Array full = t5_decode(c, p, encoded, enc_tokens, tokens(2, 5, dec), Array(), Array(), Array(), none);
      DecoderCache cache = t5_init_decoder_cache(c, p, encoded, enc_tokens, 5);
      EXPECT_EQ(cache.self_key[0].shape(), (Shape{{"batch", 2}, {"kv_length", 5}, {"kv_heads", g}, {"kv", 3}}));
      EXPECT_EQ(cache.cross_value[1].dim("kv_heads"), g);
      for (int64_t i = 0; i < 5; ++i) {
        Array step = t5_decode_step(c, p, cache, Array::from_ints(Shape{{"batch", 2}}, {dec[size_t(i)], dec[size_t(5 + i)]}));
        Array want = transpose(slice(full, "length", i, 1), {"batch", "length", "vocab"});
        EXPECT_LT(max_abs_diff(step, reshape(want, step.shape())), 1e-5) << "position " << i;
      }
    }
    {  // decoder-only: prefill 2 positions, then steps
      Array full = decoder_only_forward(c, DecoderOnlyModel(c).init(prng_key(4)), tokens(2, 5, dec), Array(), Array(),
                                        Array(), none);
      ParamTree p = DecoderOnlyModel(c).init(prng_key(4));
      std::vector<int64_t> prompt = {dec[0], dec[1], dec[5], dec[6]};
      DecoderCache cache = decoder_only_prefill(c, p, tokens(2, 2, prompt), Array(),
                                                Array::from_ints(Shape{{"batch", 2}}, {2, 2}), 5);
      EXPECT_EQ(cache.self_value[1].shape(), (Shape{{"batch", 2}, {"kv_length", 5}, {"kv_heads", g}, {"kv", 3}}));
      for (int64_t i = 2; i < 5; ++i) {
        Array step = decoder_only_decode_step(c, p, cache,
                                              Array::from_ints(Shape{{"batch", 2}}, {dec[size_t(i)], dec[size_t(5 + i)]}));
        Array want = transpose(slice(full, "length", i, 1), {"batch", "length", "vocab"});
        EXPECT_LT(max_abs_diff(step, reshape(want, step.shape())), 1e-5) << "position " << i;
      }
    }
  }
}

}  // namespace
}  // namespace t5x
