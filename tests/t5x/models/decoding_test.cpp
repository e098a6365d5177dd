// Decoding: the KV cache reproduces full forward passes; beam search with one
// beam (alpha 0) is greedy; sampling options; decoder-only prefill.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>

#include "ops/ops.h"
#include "ops/profile.h"
#include "t5x/models/models.h"
#include "test_util.h"

namespace t5x {
namespace {

using testing::small_test_config;
using testing::tokens;

struct EncDec {
  EncoderDecoderModel model{small_test_config()};
  ParamTree params = model.init(prng_key(3));
  Array enc = tokens(2, 5, {5, 6, 7, 8, 1, 9, 10, 1, 0, 0});
  Array zeros = Array::zeros(Shape{{"batch", 2}, {"length", 7}}, DType::i32);
};

void expect_same(const DecodeResult& a, const DecodeResult& b) {
  EXPECT_TRUE(array_equal(a.sequences, b.sequences)) << a.sequences.to_string() << "\n" << b.sequences.to_string();
  EXPECT_LT(max_abs_diff(a.scores, b.scores), 1e-4);
}

// EOS = a token that greedy decoding emits at position 2 of example 0, so that
// the stop-at-EOS paths run.
int64_t pick_eos(EncDec& t) {
  auto step = t.model.cached_step_fn(t.params, t.enc, 7);
  SamplingOptions o;
  o.temperature = 0.0;
  o.eos_id = -1;
  auto s = temperature_sample(t.zeros, {}, *step, o).sequences.to_ints();
  for (int j = 2; j < 7; ++j)
    if (s[size_t(j)] > 1) return s[size_t(j)];
  return 1;
}

TEST(Decoding, CachedGreedyEqualsFullForward) {
  EncDec t;
  SamplingOptions o;
  o.temperature = 0.0;
  o.eos_id = pick_eos(t);
  o.rescale_log_probs = false;  // scores = log-probabilities (rescaled, greedy scores 0)
  auto cached = t.model.cached_step_fn(t.params, t.enc, 7);
  auto full = t.model.full_forward_step_fn(t.params, t.enc);
  DecodeResult a = temperature_sample(t.zeros, {}, *cached, o), b = temperature_sample(t.zeros, {}, *full, o);
  expect_same(a, b);
  // Stops at EOS: position 2 of example 0 is EOS and the rest is padding.
  auto s = a.sequences.to_ints();
  int eos_at = -1;
  for (int j = 0; j < 7 && eos_at < 0; ++j)
    if (s[size_t(j)] == o.eos_id) eos_at = j;
  ASSERT_GE(eos_at, 2);
  for (int j = eos_at + 1; j < 7; ++j) EXPECT_EQ(s[size_t(j)], 0);
  // The score is the sum of the generated tokens' log-probabilities.
  Batch sb{{"encoder_input_tokens", t.enc},
           {"decoder_target_tokens", reshape(a.sequences, Shape{{"batch", 2}, {"length", 7}})}};
  Array tgt = sb["decoder_target_tokens"];
  auto tv = tgt.to_ints();
  std::vector<int64_t> din(tv.size(), 0);
  for (int r = 0; r < 2; ++r)
    for (int j = 1; j < 7; ++j) din[size_t(r * 7 + j)] = tv[size_t(r * 7 + j - 1)];
  sb["decoder_input_tokens"] = tokens(2, 7, din);
  // Weights: every generated token up to and including the first EOS (a
  // random model may also generate the padding id 0).
  std::vector<int64_t> w(tv.size(), 0);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 7; ++j) {
      w[size_t(r * 7 + j)] = 1;
      if (tv[size_t(r * 7 + j)] == o.eos_id) break;
    }
  sb["decoder_loss_weights"] = tokens(2, 7, w);
  // Rows that generated the padding id before EOS are skipped: teacher forcing
  // masks target-0 positions (t5x make_decoder_mask), decoding does not.
  auto sb_scores = t.model.score_batch(t.params, sb).to_floats(), dec_scores = a.scores.to_floats();
  int compared = 0;
  for (int r = 0; r < 2; ++r) {
    bool pad = false;
    for (int j = 0; j < 7 && tv[size_t(r * 7 + j)] != o.eos_id; ++j) pad = pad || tv[size_t(r * 7 + j)] == 0;
    if (pad) continue;
    EXPECT_NEAR(sb_scores[size_t(r)], dec_scores[size_t(r)], 1e-4) << r;
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

TEST(Decoding, CachedSamplingEqualsFullForward) {
  EncDec t;
  for (int mode = 0; mode < 2; ++mode) {
    SamplingOptions o;
    o.temperature = 0.8;
    o.topk = mode == 0 ? 5 : 0;
    o.topp = mode == 1 ? 0.9 : 0.0;
    o.num_decodes = 3;
    o.rng = prng_key(17);
    o.eos_id = 1;
    auto cached = t.model.cached_step_fn(t.params, t.enc, 7);
    auto full = t.model.full_forward_step_fn(t.params, t.enc);
    DecodeResult a = temperature_sample(t.zeros, {}, *cached, o), b = temperature_sample(t.zeros, {}, *full, o);
    EXPECT_EQ(a.sequences.shape(), (Shape{{"batch", 2}, {"decodes", 3}, {"length", 7}}));
    expect_same(a, b);
    auto sc = a.scores.to_floats();
    EXPECT_LE(sc[0], sc[1]);  // ascending
    EXPECT_LE(sc[1], sc[2]);
  }
  SamplingOptions bad;
  bad.topk = 3;
  bad.topp = 0.5;
  auto step = t.model.cached_step_fn(t.params, t.enc, 7);
  EXPECT_THROW(temperature_sample(t.zeros, {}, *step, bad), std::invalid_argument);
}

TEST(Decoding, BeamSearchCachedEqualsFullAndOneBeamIsGreedy) {
  EncDec t;
  int64_t eos = pick_eos(t);
  BeamSearchOptions bo{3, 0.6, eos};
  auto c1 = t.model.cached_step_fn(t.params, t.enc, 7);
  auto f1 = t.model.full_forward_step_fn(t.params, t.enc);
  DecodeResult a = beam_search(t.zeros, *c1, bo), b = beam_search(t.zeros, *f1, bo);
  expect_same(a, b);
  auto sc = a.scores.to_floats();
  EXPECT_LE(sc[0], sc[1]);
  EXPECT_LE(sc[1], sc[2]);
  // One beam, no length penalty: greedy.
  BeamSearchOptions one{1, 0.0, eos};
  SamplingOptions g;
  g.temperature = 0.0;
  g.eos_id = eos;
  g.rescale_log_probs = false;
  auto c2 = t.model.cached_step_fn(t.params, t.enc, 7);
  auto c3 = t.model.cached_step_fn(t.params, t.enc, 7);
  expect_same(beam_search(t.zeros, *c2, one), temperature_sample(t.zeros, {}, *c3, g));
  // The best beam is at least as likely (under the penalty) as greedy.
  EXPECT_NEAR(brevity_penalty(0.6, 1.0), 1.0, 1e-12);
  EXPECT_NEAR(brevity_penalty(0.6, 7.0), std::pow(2.0, 0.6), 1e-12);
  // predict_batch uses beam search and returns the best decode.
  DecodeOptions po;
  po.beam = bo;
  Batch pb{{"encoder_input_tokens", t.enc}, {"decoder_input_tokens", t.zeros}};
  PredictOutput pr = t.model.predict_batch(t.params, pb, po);
  EXPECT_TRUE(array_equal(pr.tokens, reshape(slice(a.sequences, "decodes", 2, 1), Shape{{"batch", 2}, {"length", 7}})));
}

TEST(Decoding, MaxDecodeSteps) {
  EncDec t;
  SamplingOptions o;
  o.temperature = 0.0;
  o.eos_id = -1;
  o.max_decode_steps = 3;
  auto step = t.model.cached_step_fn(t.params, t.enc, 7);
  auto s = temperature_sample(t.zeros, {}, *step, o).sequences.to_ints();
  o.max_decode_steps = -1;
  auto step2 = t.model.cached_step_fn(t.params, t.enc, 7);
  auto full = temperature_sample(t.zeros, {}, *step2, o).sequences.to_ints();
  int nonzero_tail = 0;
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(s[size_t(r * 7 + j)], full[size_t(r * 7 + j)]);
    for (int j = 3; j < 7; ++j) {
      EXPECT_EQ(s[size_t(r * 7 + j)], 0);
      nonzero_tail += full[size_t(r * 7 + j)] != 0;
    }
  }
  EXPECT_GT(nonzero_tail, 0);  // the limit, not EOS, stopped decoding
}

// decode_params: the logits kernel [vocab, embed] (a vocabulary of 300, so
// the few-row logits product takes the transposed-B streaming path) and f32,
// a bf16 model's layer kernels (encoder and decoder) in bf16; the same
// decodes, bit for bit, as the raw parameters, and the same as the
// full-forward oracle.
TEST(Decoding, DecodeParamsDecodeTheSameBits) {
  for (DType dt : {DType::f32, DType::bf16}) {
    T5Config c = small_test_config();
    c.vocab_size = 300;
    c.dtype = dt;
    EncoderDecoderModel m(c);
    const ParamTree p = m.init(prng_key(5));
    const ParamTree d = m.decode_params(p);
    SCOPED_TRACE(dtype_name(dt));
    // Each gated MLP's wi_0 and wi_1 became one [embed, mlp_branch, mlp]
    // kernel (nn::fuse_gated_wi), in the layer kernels' dtype.
    // The logits kernel's screen for greedy decoding is added (two arrays).
    const int64_t mlps = c.num_encoder_layers + c.num_decoder_layers;
    ASSERT_EQ(int64_t(d.size()), int64_t(p.size()) - mlps + 2);
    EXPECT_TRUE(array_equal(d.at(kLogitsScreenName), cast(d.at("decoder/logits_dense/kernel"), DType::bf16)));
    EXPECT_EQ(d.at(kLogitsScreenBoundsName).shape(), (Shape{{"vocab", 300}, {"screen_bound", 2}}));
    for (const char* mlp : {"encoder/layers_0/mlp", "decoder/layers_1/mlp"}) {
      const std::string m_ = mlp;
      EXPECT_EQ(d.count(m_ + "/wi_0/kernel") + d.count(m_ + "/wi_1/kernel"), 0u) << mlp;
      const Array& f = d.at(m_ + "/wi_fused/kernel");
      EXPECT_EQ(f.names(), (std::vector<std::string>{"embed", "mlp_branch", "mlp"})) << mlp;
      EXPECT_EQ(f.dtype(), dt) << mlp;
      const std::vector<Array> h = unstack(f, "mlp_branch");
      EXPECT_TRUE(array_equal(h[0], cast(p.at(m_ + "/wi_0/kernel"), dt))) << mlp;
      EXPECT_TRUE(array_equal(h[1], cast(p.at(m_ + "/wi_1/kernel"), dt))) << mlp;
    }
    const Array& lk = d.at("decoder/logits_dense/kernel");
    EXPECT_EQ(lk.names(), (std::vector<std::string>{"vocab", "embed"}));
    EXPECT_TRUE(array_equal(lk, transpose(p.at("decoder/logits_dense/kernel"), {"vocab", "embed"})));
    EXPECT_EQ(p.at("decoder/logits_dense/kernel").names(), (std::vector<std::string>{"embed", "vocab"}));
    EXPECT_EQ(d.at("decoder/layers_0/mlp/wo/kernel").dtype(), dt);
    EXPECT_EQ(d.at("decoder/layers_0/encoder_decoder_attention/key/kernel").dtype(), dt);
    EXPECT_EQ(d.at("encoder/layers_0/attention/query/kernel").dtype(), dt);
    EXPECT_EQ(d.at("decoder/logits_dense/kernel").dtype(), DType::f32);
    // Kernels used in f32 or as they are stay as they are: an MoE router's,
    // a linear mixing layer's.
    ParamTree extra = p;
    for (const char* n : {"decoder/layers_0/mlp/router/router_weights/w/kernel", "encoder/layers_1/mixing/seq/kernel"})
      extra[n] = Array::ones(Shape{{"embed", 4}, {"unmodeled", 3}}, DType::f32);
    const ParamTree de = m.decode_params(extra);
    EXPECT_EQ(de.at("decoder/layers_0/mlp/router/router_weights/w/kernel").dtype(), DType::f32);
    EXPECT_EQ(de.at("encoder/layers_1/mixing/seq/kernel").dtype(), DType::f32);
    EXPECT_EQ(de.at("encoder/layers_1/mlp/wo/kernel").dtype(), dt);
    // Idempotent: a second call keeps every buffer.
    const ParamTree d2 = m.decode_params(d);
    for (const auto& [k, a] : d) EXPECT_TRUE(d2.at(k).same_buffer(a)) << k;
    for (int64_t batch : {1, 2}) {
      std::vector<int64_t> e(size_t(batch * 5));
      for (size_t i = 0; i < e.size(); ++i) e[i] = int64_t(3 + (i * 37) % 290);
      Batch b{{"encoder_input_tokens", tokens(batch, 5, e)},
              {"decoder_input_tokens", Array::zeros(Shape{{"batch", batch}, {"length", 6}}, DType::i32)}};
      DecodeOptions o;
      o.method = DecodeOptions::Method::temperature_sample;
      o.sampling.temperature = 0.0;
      o.sampling.eos_id = -1;
      o.sampling.rescale_log_probs = false;
      PredictOutput raw = m.predict_batch(p, b, o), prep = m.predict_batch(d, b, o);
      EXPECT_TRUE(array_equal(raw.tokens, prep.tokens)) << batch;
      EXPECT_EQ(raw.scores.to_floats(), prep.scores.to_floats()) << batch;
      if (dt != DType::f32) continue;
      auto full = m.full_forward_step_fn(p, b.at("encoder_input_tokens"));
      DecodeResult f = temperature_sample(b.at("decoder_input_tokens"), {}, *full, o.sampling);
      EXPECT_TRUE(array_equal(reshape(f.sequences, prep.tokens.shape()), prep.tokens)) << batch;
      EXPECT_LT(max_abs_diff(reshape(f.scores, prep.scores.shape()), prep.scores), 1e-4) << batch;
    }
  }
}

// A step that gives only logits: greedy_tokens is DecodeStepFn's default,
// the argmax of the whole logits.
class LogitsOnly : public DecodeStepFn {
 public:
  explicit LogitsOnly(std::unique_ptr<DecodeStepFn> s) : s_(std::move(s)) {}
  Array logits(const Array& d, const std::vector<int64_t>& i) override { return s_->logits(d, i); }
  void gather_rows(const std::vector<int64_t>& rows) override { s_->gather_rows(rows); }

 private:
  std::unique_ptr<DecodeStepFn> s_;
};

// How many `op` calls `fn` made (the op profile counts them).
int64_t screened_calls(const std::function<void()>& fn, const std::string& op = "screened_dense_argmax") {
  op_profile_enable(true);
  op_profile_reset();
  fn();
  const std::string report = op_profile_report();
  op_profile_enable(false);
  const size_t at = report.find(op);
  if (at == std::string::npos) return 0;
  const size_t line = report.rfind('\n', at) == std::string::npos ? 0 : report.rfind('\n', at) + 1;
  double ms = 0;
  long long calls = 0;
  std::sscanf(report.c_str() + line, "%lf ms %lld", &ms, &calls);
  return calls;
}

// Greedy decoding (temperature 0, rescaled scores) on decode_params takes
// each token from the logits kernel's bf16 screen (decode_step_tokens ->
// screened_dense_argmax) and decodes the tokens of the logits' argmax, bit for
// bit: against a logits-only step, for f32 and bf16 models, encoder-decoder
// and decoder-only, 1, 2 and 9 rows (over 8: the whole product). On raw
// parameters (no screen) the same tokens come from the logits.
TEST(Decoding, GreedyOnTheLogitsScreenDecodesTheLogitsArgmax) {
  for (DType dt : {DType::f32, DType::bf16}) {
    T5Config c = small_test_config();
    c.vocab_size = 300;
    c.dtype = dt;
    SCOPED_TRACE(dtype_name(dt));
    SamplingOptions o;
    o.temperature = 0.0;
    o.eos_id = -1;
    const int64_t L = 6;
    EncoderDecoderModel m(c);
    const ParamTree p = m.init(prng_key(8));
    const ParamTree d = m.decode_params(p);
    ASSERT_TRUE(d.contains(kLogitsScreenName));
    for (int64_t batch : {1, 2, 9}) {
      SCOPED_TRACE(batch);
      std::vector<int64_t> e(size_t(batch * 5));
      for (size_t i = 0; i < e.size(); ++i) e[i] = int64_t(2 + (i * 53) % 295);
      const Array enc = tokens(batch, 5, e), zeros = Array::zeros(Shape{{"batch", batch}, {"length", L}}, DType::i32);
      DecodeResult a, b, raw;
      const int64_t calls = screened_calls([&] {
        auto screened = m.cached_step_fn(d, enc, L);
        a = temperature_sample(zeros, {}, *screened, o);
      });
      EXPECT_EQ(calls, batch <= 8 ? L : 0);
      LogitsOnly plain(m.cached_step_fn(d, enc, L));
      b = temperature_sample(zeros, {}, plain, o);
      EXPECT_EQ(screened_calls([&] {
                  auto unprepared = m.cached_step_fn(p, enc, L);
                  raw = temperature_sample(zeros, {}, *unprepared, o);
                }),
                0);
      EXPECT_TRUE(array_equal(a.sequences, b.sequences)) << a.sequences.to_string() << b.sequences.to_string();
      EXPECT_TRUE(array_equal(a.sequences, raw.sequences));
      for (float sc : a.scores.to_floats()) EXPECT_EQ(sc, 0.0f);
      std::set<int64_t> distinct;
      for (int64_t t : a.sequences.to_ints()) distinct.insert(t);
      EXPECT_GT(distinct.size(), 2u);  // not one token everywhere
    }
    DecoderOnlyModel dm(c, LossOptions{}, /*inputs_bidirectional_attention=*/true);
    const ParamTree dp = dm.init(prng_key(9));
    const ParamTree dd = dm.decode_params(dp);
    Array dit = tokens(2, 8, {0, 5, 6, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0});
    Array ca = tokens(2, 8, {1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0});
    Array inputs = tokens(2, 8, {5, 6, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0});
    const std::vector<int64_t> start{2, 1};
    DecodeResult a;
    EXPECT_GT(screened_calls([&] {
                auto screened = dm.cached_step_fn(dd, dit, ca, start);
                a = temperature_sample(inputs, start, *screened, o);
              }),
              0);
    LogitsOnly plain(dm.cached_step_fn(dd, dit, ca, start));
    DecodeResult b = temperature_sample(inputs, start, plain, o);
    EXPECT_TRUE(array_equal(a.sequences, b.sequences)) << a.sequences.to_string() << b.sequences.to_string();
  }
}

// Top-k sampling at temperature 1 (t5x's defaults, and the shipped
// decoder-only config's topk 40) on decode_params draws from the screen's
// candidates (decode_step_candidates -> screened_dense_candidates) the same
// tokens and scores, bitwise, as from the whole logits (a logits-only step),
// for f32 and bf16, encoder-decoder and decoder-only, 1, 2 and 9 rows, topk
// 1, 3, 40 and 100 (over a quarter of the vocabulary: whole rows).
TEST(Decoding, TopKSamplingOnTheLogitsScreenDrawsTheLogitsTokens) {
  for (DType dt : {DType::f32, DType::bf16}) {
    T5Config c = small_test_config();
    c.vocab_size = 300;
    c.dtype = dt;
    SCOPED_TRACE(dtype_name(dt));
    const int64_t L = 6;
    EncoderDecoderModel m(c);
    const ParamTree p = m.init(prng_key(8));
    const ParamTree d = m.decode_params(p);
    for (int64_t topk : {1, 3, 40, 100})
      for (int64_t batch : {1, 2, 9}) {
        SCOPED_TRACE("topk " + std::to_string(topk) + " batch " + std::to_string(batch));
        SamplingOptions o;
        o.topk = topk;
        o.eos_id = -1;
        o.rng = prng_key(31);
        o.num_decodes = batch == 2 ? 2 : 1;
        std::vector<int64_t> e(size_t(batch * 5));
        for (size_t i = 0; i < e.size(); ++i) e[i] = int64_t(2 + (i * 53) % 295);
        const Array enc = tokens(batch, 5, e), zeros = Array::zeros(Shape{{"batch", batch}, {"length", L}}, DType::i32);
        DecodeResult a;
        const int64_t calls = screened_calls(
            [&] {
              auto screened = m.cached_step_fn(d, enc, L);
              a = temperature_sample(zeros, {}, *screened, o);
            },
            "screened_dense_candidates");
        EXPECT_EQ(calls, batch * o.num_decodes <= 8 ? L : 0);
        LogitsOnly plain(m.cached_step_fn(d, enc, L));
        const DecodeResult b = temperature_sample(zeros, {}, plain, o);
        EXPECT_TRUE(array_equal(a.sequences, b.sequences)) << a.sequences.to_string() << b.sequences.to_string();
        EXPECT_EQ(a.scores.to_floats(), b.scores.to_floats());
        std::set<int64_t> distinct;
        for (int64_t t : a.sequences.to_ints()) distinct.insert(t);
        EXPECT_GT(distinct.size(), 2u);
        if (topk > 1) {
          for (float sc : a.scores.to_floats()) EXPECT_LT(sc, 0.0f);  // drawn, not certain
        }
      }
    DecoderOnlyModel dm(c, LossOptions{}, /*inputs_bidirectional_attention=*/true);
    const ParamTree dd = dm.decode_params(dm.init(prng_key(9)));
    Array dit = tokens(2, 8, {0, 5, 6, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0});
    Array ca = tokens(2, 8, {1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0});
    Array inputs = tokens(2, 8, {5, 6, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0});
    const std::vector<int64_t> start{2, 1};
    SamplingOptions o;
    o.topk = 40;
    o.eos_id = -1;
    o.rng = prng_key(32);
    DecodeResult a;
    EXPECT_GT(screened_calls(
                  [&] {
                    auto screened = dm.cached_step_fn(dd, dit, ca, start);
                    a = temperature_sample(inputs, start, *screened, o);
                  },
                  "screened_dense_candidates"),
              0);
    LogitsOnly plain(dm.cached_step_fn(dd, dit, ca, start));
    const DecodeResult b = temperature_sample(inputs, start, plain, o);
    EXPECT_TRUE(array_equal(a.sequences, b.sequences)) << a.sequences.to_string() << b.sequences.to_string();
    EXPECT_EQ(a.scores.to_floats(), b.scores.to_floats());
  }
}

TEST(Decoding, DecoderOnlyPrefillEqualsFullForward) {
  for (bool mqa : {false, true}) {
    T5Config c = small_test_config();
    c.num_kv_heads = mqa ? 1 : 0;
    DecoderOnlyModel m(c, LossOptions{}, /*inputs_bidirectional_attention=*/true);
    ParamTree p = m.init(prng_key(9));
    // Prompts of 3 and 2 positions (BOS + inputs), bidirectional prefix.
    Array dit = tokens(2, 8, {0, 5, 6, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0});
    Array ca = tokens(2, 8, {1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0});
    std::vector<int64_t> start{2, 1};
    Array inputs = tokens(2, 8, {5, 6, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0});
    SamplingOptions o;
    o.temperature = 0.0;
    o.eos_id = -1;
    o.rescale_log_probs = false;
    auto cached = m.cached_step_fn(p, dit, ca, start);
    auto full = m.full_forward_step_fn(p, ca);
    DecodeResult a = temperature_sample(inputs, start, *cached, o), b = temperature_sample(inputs, start, *full, o);
    expect_same(a, b);
    auto s = a.sequences.to_ints();
    EXPECT_EQ(s[0], 5);  // prompt kept
    EXPECT_EQ(s[1], 6);
    // predict_batch returns the continuation only.
    Batch batch{{"decoder_input_tokens", dit}, {"decoder_causal_attention", ca}};
    DecodeOptions po;
    po.sampling = o;
    auto pr = m.predict_batch(p, batch, po).tokens.to_ints();
    for (int j = 0; j < 6; ++j) EXPECT_EQ(pr[size_t(j)], s[size_t(2 + j)]);
    for (int j = 0; j < 7; ++j) EXPECT_EQ(pr[size_t(8 + j)], s[size_t(8 + 1 + j)]);
  }
}

}  // namespace
}  // namespace t5x

namespace t5x {
namespace {

TEST(Decoding, DecoderOnlyCausalLMPromptsEqualFullForward) {
  // t5x's default DecoderOnlyModel (inputs_bidirectional_attention = False):
  // decoder_causal_attention only marks the prompt; attention stays causal.
  T5Config c = testing::small_test_config(false, true);
  DecoderOnlyModel m(c);
  ParamTree p = m.init(prng_key(12));
  Array dit = testing::tokens(2, 6, {0, 5, 6, 7, 0, 0, 0, 9, 0, 0, 0, 0});
  Array ca = testing::tokens(2, 6, {1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0});
  Array inputs = testing::tokens(2, 6, {5, 6, 7, 0, 0, 0, 9, 0, 0, 0, 0, 0});
  std::vector<int64_t> start{3, 1};
  SamplingOptions o;
  o.temperature = 0.7;
  o.topk = 4;
  o.num_decodes = 2;
  o.rng = prng_key(2);
  auto cached = m.cached_step_fn(p, dit, Array(), start);
  auto full = m.full_forward_step_fn(p, Array());
  DecodeResult a = temperature_sample(inputs, start, *cached, o), b = temperature_sample(inputs, start, *full, o);
  EXPECT_TRUE(array_equal(a.sequences, b.sequences));
  EXPECT_LT(max_abs_diff(a.scores, b.scores), 1e-4);
  DecodeOptions po;
  po.sampling = o;
  po.return_all_decodes = true;
  Batch batch{{"decoder_input_tokens", dit}, {"decoder_causal_attention", ca}};
  PredictOutput pr = m.predict_batch(p, batch, po);
  auto s = a.sequences.to_ints(), q = pr.tokens.to_ints();
  ASSERT_EQ(pr.tokens.shape(), a.sequences.shape());
  for (int d = 0; d < 2; ++d) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(q[size_t(d * 6 + j)], s[size_t(d * 6 + 3 + j)]);       // example 0
    for (int j = 0; j < 5; ++j) EXPECT_EQ(q[size_t(12 + d * 6 + j)], s[size_t(12 + d * 6 + 1 + j)]);  // example 1
  }
}

}  // namespace
}  // namespace t5x

// Golden values from t5x's own t5x/decoding.py (temperature_sample,
// beam_search) over a deterministic step function; written by
// scripts/golden/decoding_t5x.py, which also describes the step function and
// the coordinates (t5x's inputs are decoder inputs; ours target prompts).
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace t5x {
namespace {

using nlohmann::json;

const json& t5x_golden() {
  static const json g = [] {
    std::ifstream f(std::string(T5X_SOURCE_DIR) + "/tests/golden/models/decoding_t5x.json");
    if (!f) throw std::runtime_error("missing tests/golden/models/decoding_t5x.json (scripts/golden/decoding_t5x.py)");
    return json::parse(f);
  }();
  return g;
}

// logits[r] = T1[i, seq[r, i]] + T2[(sum_{j <= i} seq[r, j] + ex[r]) % H]
// with i = min(index[r], length - 1), float32 like the script; ex[r] (the
// row's example) follows gather_rows as t5x's cache follows its beams.
// A step that tracks which example each row decodes (ex_), through
// gather_rows.
class ExampleRows : public DecodeStepFn {
 public:
  explicit ExampleRows(int64_t batch) {
    for (int64_t b = 0; b < batch; ++b) ex_.push_back(b);
  }
  void gather_rows(const std::vector<int64_t>& rows) override {
    std::vector<int64_t> ex;
    for (int64_t r : rows) ex.push_back(ex_[size_t(r)]);
    ex_ = ex;
  }

 protected:
  std::vector<int64_t> ex_;
};

class TableStep : public ExampleRows {
 public:
  TableStep(const json& g, int64_t batch)
      : ExampleRows(batch),
        t1_(g.at("t1").get<std::vector<float>>()),
        t2_(g.at("t2").get<std::vector<float>>()),
        V_(g.at("vocab").get<int64_t>()),
        P_(g.at("positions").get<int64_t>()),
        H_(g.at("hash_buckets").get<int64_t>()) {}
  Array logits(const Array& decoder_inputs, const std::vector<int64_t>& index) override {
    const int64_t R = decoder_inputs.dim("batch"), L = decoder_inputs.dim("length");
    const auto d = transpose(decoder_inputs, {"batch", "length"}).to_ints();
    EXPECT_EQ(int64_t(ex_.size()), R);
    std::vector<float> out(size_t(R * V_));
    for (int64_t r = 0; r < R; ++r) {
      const int64_t i = std::min(index[size_t(r)], L - 1);
      EXPECT_LT(i, P_);
      int64_t sum = ex_[size_t(r)];
      for (int64_t j = 0; j <= i; ++j) sum += d[size_t(r * L + j)];
      const int64_t last = d[size_t(r * L + i)], h = sum % H_;
      for (int64_t v = 0; v < V_; ++v)
        out[size_t(r * V_ + v)] = t1_[size_t((i * V_ + last) * V_ + v)] + t2_[size_t(h * V_ + v)];
    }
    return Array::from_vector(Shape{{"batch", R}, {"vocab", V_}}, out);
  }

 private:
  std::vector<float> t1_, t2_;
  int64_t V_, P_, H_;
};

// sequences [batch][decodes][length] and scores (flat, batch-major) as t5x's.
void expect_t5x(const DecodeResult& r, const json& c) {
  const auto want = c.at("sequences").get<std::vector<std::vector<std::vector<int64_t>>>>();
  const int64_t B = int64_t(want.size()), N = int64_t(want[0].size()), L = int64_t(want[0][0].size());
  ASSERT_EQ(r.sequences.shape(), (Shape{{"batch", B}, {"decodes", N}, {"length", L}}));
  const auto got = r.sequences.to_ints();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < L; ++j)
        EXPECT_EQ(got[size_t((b * N + n) * L + j)], want[size_t(b)][size_t(n)][size_t(j)])
            << "example " << b << " decode " << n << " position " << j;
  const auto ws = c.at("scores").get<std::vector<double>>();
  const auto gs = r.scores.to_floats();
  ASSERT_EQ(gs.size(), ws.size());
  for (size_t k = 0; k < ws.size(); ++k) EXPECT_NEAR(gs[k], ws[k], 1e-5) << "score " << k;
}

Array int_rows(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return Array::from_ints(Shape{{"batch", int64_t(rows.size())}, {"length", int64_t(rows[0].size())}}, flat);
}

// Cases where we knowingly differ from t5x (not compared):
// - greedy_max_steps0: t5x's sampling loop body runs once before its end
//   test (decoding.py: `ended` is only set inside sampling_loop_body_fn), so
//   max_decode_steps = 0 still decodes one token there; we decode none.
const std::set<std::string> kKnownSamplingDifferences = {
    "greedy_max_steps0",
};

// A step whose top_candidates narrows its inner step's logits as a screen
// may: each row's entries at or above its keep-th largest, plus every
// `extra`-th other entry (extra 0: none); every `whole`-th row (whole 0:
// none) gives every entry.
class Narrowing : public DecodeStepFn {
 public:
  Narrowing(DecodeStepFn& inner, int64_t extra, int64_t whole) : in_(inner), extra_(extra), whole_(whole) {}
  Array logits(const Array& d, const std::vector<int64_t>& i) override { return in_.logits(d, i); }
  Candidates top_candidates(const Array& d, const std::vector<int64_t>& i, int64_t keep) override {
    ++calls;
    const Array lg = transpose(in_.logits(d, i), {"batch", "vocab"});
    const int64_t R = lg.dim("batch"), V = lg.dim("vocab");
    const std::vector<float> x = lg.to_floats();
    Candidates c;
    c.vocab = V;
    c.index.resize(size_t(R));
    for (int64_t r = 0; r < R; ++r) {
      const float* row = x.data() + r * V;
      if (whole_ > 0 && r % whole_ == whole_ - 1) {
        c.value.emplace_back(row, row + V);
        continue;
      }
      std::vector<float> s(row, row + V);
      const int64_t k = std::min(keep, V);  // keep >= V: every entry, each listed
      std::nth_element(s.begin(), s.begin() + (k - 1), s.end(), std::greater<float>());
      c.value.emplace_back();
      for (int64_t v = 0; v < V; ++v)
        if (row[v] >= s[size_t(k - 1)] || (extra_ > 0 && v % extra_ == 0)) {
          c.index[size_t(r)].push_back(int32_t(v));
          c.value.back().push_back(row[v]);
        }
    }
    return c;
  }
  void gather_rows(const std::vector<int64_t>& rows) override { in_.gather_rows(rows); }
  int calls = 0;

 private:
  DecodeStepFn& in_;
  int64_t extra_, whole_;
};

TEST(Decoding, T5xGoldenTemperatureSample) {
  const json& g = t5x_golden();
  int cases = 0, narrowed = 0;
  for (const json& c : g.at("sampling")) {
    const std::string name = c.at("name");
    if (kKnownSamplingDifferences.count(name)) continue;
    SCOPED_TRACE(name);
    const auto rows = c.at("inputs").get<std::vector<std::vector<int64_t>>>();
    std::vector<int64_t> start;
    if (!c.at("initial_index").is_null()) start = c.at("initial_index").get<std::vector<int64_t>>();
    SamplingOptions o;
    o.temperature = c.at("temperature");
    o.topk = c.at("topk");
    o.topp = c.at("topp");
    o.num_decodes = c.at("num_decodes");
    o.rescale_log_probs = c.at("rescale_log_probs");
    o.eos_id = c.at("eos_id");
    o.rng = prng_key(7);
    if (!c.at("max_decode_steps").is_null()) o.max_decode_steps = c.at("max_decode_steps");
    TableStep step(g, int64_t(rows.size()));
    expect_t5x(temperature_sample(int_rows(rows), start, step, o), c);
    ++cases;
    // The same from narrowed candidates (top-k at temperature 1, rescaled:
    // DecodeStepFn::top_candidates), partial and whole rows.
    for (int64_t extra : {0, 3}) {
      TableStep inner(g, int64_t(rows.size()));
      Narrowing narrowing(inner, extra, /*whole=*/3);
      expect_t5x(temperature_sample(int_rows(rows), start, narrowing, o), c);
      narrowed += narrowing.calls > 0;
    }
  }
  EXPECT_GT(cases, 20);
  EXPECT_GE(narrowed, 4);  // topk1_t1_rescaled and topk1_3decodes_rescaled, twice each
}

// A step of fixed pseudo-random logits (vocab V, `shift` added), the same
// for every decode of an example: row r's logits at position i.
class RandomLogits : public ExampleRows {
 public:
  RandomLogits(int64_t batch, int64_t vocab, float shift) : ExampleRows(batch), V_(vocab), shift_(shift) {}
  Array logits(const Array& d, const std::vector<int64_t>& index) override {
    const int64_t R = d.dim("batch");
    std::vector<float> out(size_t(R * V_));
    for (int64_t r = 0; r < R; ++r)
      for (int64_t v = 0; v < V_; ++v) {
        const uint64_t h = uint64_t(ex_[size_t(r)] * 7919 + index[size_t(r)] * 104729 + v * 31) * 2654435761u;
        // Values in steps of 1/8 (ties) over [-4, 4).
        out[size_t(r * V_ + v)] = float(int64_t((h >> 16) % 64) - 32) / 8.0f + shift_;
      }
    return Array::from_vector(Shape{{"batch", R}, {"vocab", V_}}, out);
  }

 private:
  int64_t V_;
  float shift_;
};

// Top-k sampling at temperature 1 with rescaled scores draws from the step's
// candidates (top_candidates) the same tokens and scores, bitwise, as from
// the whole logits: ties at the k-th value, extra candidates, whole rows, and
// logits near NEG_INF (-1e7, where the masked entries are not negligible and
// the whole masked rows are rebuilt). Other settings do not ask for
// candidates.
TEST(Decoding, TopKFromCandidatesEqualsTheWholeLogits) {
  const int64_t B = 2, L = 9, V = 50;
  const Array zeros = Array::zeros(Shape{{"batch", B}, {"length", L}}, DType::i32);
  for (float shift : {0.0f, -1.0e7f + 500.0f, -1.0e7f + 8.0f})
    for (int64_t topk : {1, 2, 5, 12, 50, 60})
      for (int64_t extra : {0, 4})
        for (int64_t whole : {0, 3}) {
          SCOPED_TRACE("shift " + std::to_string(shift) + " topk " + std::to_string(topk) + " extra " +
                       std::to_string(extra) + " whole " + std::to_string(whole));
          SamplingOptions o;
          o.topk = topk;
          o.num_decodes = 2;
          o.rng = prng_key(23);
          o.eos_id = -1;
          RandomLogits plain(B, V, shift), inner(B, V, shift);
          Narrowing narrowing(inner, extra, whole);
          const DecodeResult a = temperature_sample(zeros, {}, plain, o);
          const DecodeResult b = temperature_sample(zeros, {}, narrowing, o);
          EXPECT_GT(narrowing.calls, 0);
          EXPECT_TRUE(array_equal(a.sequences, b.sequences)) << a.sequences.to_string() << b.sequences.to_string();
          EXPECT_EQ(a.scores.to_floats(), b.scores.to_floats());
          std::set<int64_t> distinct;
          for (int64_t t : a.sequences.to_ints()) distinct.insert(t);
          EXPECT_GT(distinct.size(), topk == 1 ? 2u : 5u);
        }
  // Not asked: another temperature, topp, raw scores.
  for (int variant = 0; variant < 3; ++variant) {
    SamplingOptions o;
    o.topk = variant == 1 ? 0 : 3;
    o.topp = variant == 1 ? 0.9 : 0.0;
    o.temperature = variant == 0 ? 0.7 : 1.0;
    o.rescale_log_probs = variant != 2;
    o.eos_id = -1;
    RandomLogits inner(B, V, 0.0f);
    Narrowing narrowing(inner, 0, 0);
    temperature_sample(zeros, {}, narrowing, o);
    EXPECT_EQ(narrowing.calls, 0) << variant;
  }
}

TEST(Decoding, T5xGoldenBeamSearch) {
  const json& g = t5x_golden();
  int cases = 0;
  for (const json& c : g.at("beam")) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const int64_t B = c.at("batch"), L = c.at("length");
    BeamSearchOptions o{c.at("num_decodes").get<int64_t>(), c.at("alpha").get<double>(), c.at("eos_id").get<int64_t>()};
    TableStep step(g, B);
    expect_t5x(beam_search(Array::zeros(Shape{{"batch", B}, {"length", L}}, DType::i32), step, o), c);
    ++cases;
  }
  EXPECT_GT(cases, 30);
}

}  // namespace
}  // namespace t5x
