// nn layers: relative position buckets, t5x initialisers, attention masks,
// grouped-query attention, dropout determinism.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/attention.h"
#include "nn/layers.h"
#include "nn/params.h"
#include "nn/relpos.h"
#include "ops/ops.h"

namespace t5x::nn {
namespace {

TEST(Relpos, KnownBuckets) {
  // Bidirectional: 16 buckets per sign, keys after the query (+) shifted by 16.
  EXPECT_EQ(relative_position_bucket(0, true), 0);
  EXPECT_EQ(relative_position_bucket(-1, true), 1);
  EXPECT_EQ(relative_position_bucket(1, true), 17);
  EXPECT_EQ(relative_position_bucket(-7, true), 7);
  // n = 8..: 8 + floor(log(n/8)/log(16)*8): n = 12 -> 8 + floor(1.169) = 9.
  EXPECT_EQ(relative_position_bucket(-12, true), 9);
  EXPECT_EQ(relative_position_bucket(12, true), 25);
  EXPECT_EQ(relative_position_bucket(-1000, true), 15);
  EXPECT_EQ(relative_position_bucket(1000, true), 31);
  // Unidirectional: future -> 0; n = 20: 16 + floor(log(20/16)/log(8)*16) = 17.
  EXPECT_EQ(relative_position_bucket(5, false), 0);
  EXPECT_EQ(relative_position_bucket(-15, false), 15);
  EXPECT_EQ(relative_position_bucket(-20, false), 17);
  EXPECT_EQ(relative_position_bucket(-127, false), 31);
  EXPECT_EQ(relative_position_bucket(-5000, false), 31);
}

TEST(Relpos, BiasGathersTheTableByOffset) {
  Array table = Array::from_floats(Shape{{"heads", 2}, {"relpos_buckets", 32}}, [] {
    std::vector<float> v(64);
    for (int i = 0; i < 64; ++i) v[size_t(i)] = float(i);
    return v;
  }());
  Array b = relative_position_bias(table, relative_position_buckets(3, 4, true));
  ASSERT_EQ(b.shape(), (Shape{{"heads", 2}, {"length", 3}, {"kv_length", 4}}));
  auto v = b.to_floats();
  for (int h = 0; h < 2; ++h)
    for (int q = 0; q < 3; ++q)
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(v[size_t((h * 3 + q) * 4 + k)], float(h * 32 + relative_position_bucket(k - q, true)));
  // Decode row at index 2 equals row 2 of the full unidirectional buckets.
  auto row = relative_position_buckets_at(Array::from_ints(Shape{{"batch", 1}}, {2}), 4, false).to_ints();
  auto full = relative_position_buckets(3, 4, false).to_ints();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(row[size_t(k)], full[size_t(2 * 4 + k)]);
}

double stddev(const Array& a) {
  auto v = a.to_floats();
  double m = 0, s = 0;
  for (float x : v) m += x;
  m /= double(v.size());
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size()));
}

TEST(Init, T5xInitialisers) {
  AttentionConfig att{4, 0, 16, DType::f32};
  ParamSpecs s = attention_param_specs("a", 256, att);
  auto mlp = mlp_param_specs("m", 256, 512, {"gelu", "linear"});
  s.insert(s.end(), mlp.begin(), mlp.end());
  s.push_back(embedding_param_spec("emb", 64, 256));
  s.push_back(norm_param_spec("n/scale", 256));
  s.push_back({"rel", Shape{{"heads", 8}, {"relpos_buckets", 32}}, InitSpec::variance_scaling(1, "fan_avg", "uniform")});
  ParamTree p = init_params(s, prng_key(0));
  // query: N(0, 1/embed) / sqrt(head_dim); key: N(0, 1/embed); out: fan_in = joined_kv.
  EXPECT_NEAR(stddev(p["a/query/kernel"]), 1.0 / 16.0 / 4.0, 0.004);
  EXPECT_NEAR(stddev(p["a/key/kernel"]), 1.0 / 16.0, 0.004);
  EXPECT_NEAR(stddev(p["a/out/kernel"]), 1.0 / 8.0, 0.008);
  // MLP: truncated normal with stddev 1/sqrt(fan_in), bounded by 2 / .8796 stddevs.
  EXPECT_NEAR(stddev(p["m/wi_0/kernel"]), 1.0 / 16.0, 0.003);
  double bound = 2.0 / 16.0 / .87962566103423978 + 1e-6;
  for (float x : p["m/wi_0/kernel"].to_floats()) ASSERT_LE(std::abs(x), bound);
  EXPECT_NEAR(stddev(p["emb"]), 1.0, 0.03);
  for (float x : p["n/scale"].to_floats()) ASSERT_EQ(x, 1.0f);
  double lim = std::sqrt(3.0 / 20.0);
  for (float x : p["rel"].to_floats()) ASSERT_LE(std::abs(x), lim);
  EXPECT_NEAR(stddev(p["rel"]), lim / std::sqrt(3.0), 0.03);
  // Logical axes are the dim names; values depend only on (key, name).
  EXPECT_EQ(logical_axes(s)["a/query/kernel"], (std::vector<std::string>{"embed", "joined_kv"}));
  EXPECT_TRUE(array_equal(init_param(s[1], prng_key(0)), p["a/key/kernel"]));
  EXPECT_FALSE(array_equal(init_param(s[1], prng_key(1)), p["a/key/kernel"]));
  EXPECT_EQ(count_params(s), 4 * 256 * 64 + 3 * 256 * 512 + 64 * 256 + 256 + 8 * 32);
}

TEST(Attention, MaskBiasCausalSegmentsPrefix) {
  MaskSpec m;
  m.causal = true;
  m.q_segment_ids = m.kv_segment_ids = Array::from_ints(Shape{{"batch", 1}, {"length", 4}}, {1, 1, 2, 0});
  Array mb = attention_mask_bias(m, 1, 4, 4);
  auto v = mb.to_floats();
  auto allowed = [&](int q, int k) { return v[size_t(q * 4 + k)] == 0.0f; };
  EXPECT_TRUE(allowed(1, 0));
  EXPECT_FALSE(allowed(0, 1));  // causal
  EXPECT_FALSE(allowed(2, 1));  // other segment
  EXPECT_TRUE(allowed(2, 2));
  EXPECT_FALSE(allowed(3, 3));  // padding segment 0
  EXPECT_EQ(v[1], -1e10f);
  // Prefix LM: the first two positions see each other.
  MaskSpec p;
  p.causal = true;
  p.bidirectional_prefix = Array::from_ints(Shape{{"batch", 1}, {"length", 4}}, {1, 1, 0, 0});
  auto w = attention_mask_bias(p, 1, 4, 4).to_floats();
  EXPECT_EQ(w[1], 0.0f);        // q0 -> k1 allowed
  EXPECT_EQ(w[1 * 4 + 2], -1e10f);  // q1 -> k2 still causal
}

ParamTree random_tree(const ParamSpecs& s, uint32_t seed) {
  ParamTree t;
  for (const auto& spec : s) t[spec.name] = mul(normal(fold_in(prng_key(seed), name_hash(spec.name)), spec.shape), 0.3);
  return t;
}

TEST(Attention, FusedAndManualPathsAgree) {
  AttentionConfig att{2, 0, 4, DType::f32};
  ParamTree p = random_tree(attention_param_specs("a", 8, att), 1);
  Array x = normal(prng_key(5), Shape{{"batch", 2}, {"length", 5}, {"embed", 8}});
  Array rel = relative_position_bias(mul(normal(prng_key(6), Shape{{"heads", 2}, {"relpos_buckets", 32}}), 1.0),
                                     relative_position_buckets(5, 5, false));
  MaskSpec causal;
  causal.causal = true;
  causal.q_mask = causal.kv_mask = Array::from_ints(Shape{{"batch", 2}, {"length", 5}}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
  Dropout none;
  Array fused = multi_head_attention(p, "a", x, x, causal, rel, att, none);
  // An all-zero prefix takes the explicit-mask path and must give the same values.
  MaskSpec prefix = causal;
  prefix.bidirectional_prefix = Array::zeros(Shape{{"batch", 2}, {"length", 5}}, DType::i32);
  Array manual = multi_head_attention(p, "a", x, x, prefix, rel, att, none);
  EXPECT_LT(max_abs_diff(fused, manual), 1e-5);
  // Reference: plain ops.
  Array q = project_query(p, "a", x, att);
  auto [k, v] = project_key_value(p, "a", x, att);
  Array logits = add(add(einsum(q, k, {"batch", "heads", "length", "kv_length"}), rel),
                     attention_mask_bias(causal, 2, 5, 5));
  Array ctx = einsum(softmax(logits, "kv_length"), v, {"batch", "length", "heads", "kv"});
  EXPECT_LT(max_abs_diff(project_out(p, "a", ctx, att), fused), 1e-5);
}

// Known answer: MQA (G = 1) and GQA (G = 2) equal multi-head attention whose
// K/V kernels repeat K/V head h / (H / G) for query head h, on the fused
// (grouped kernel) path and on the explicit-mask path (repeated heads).
TEST(Attention, GroupedQueryEqualsMultiHeadWithRepeatedKV) {
  for (int64_t g : {1, 2}) {
    SCOPED_TRACE("kv_heads " + std::to_string(g));
    AttentionConfig gqa{4, g, 3, DType::f32}, mha{4, 0, 3, DType::f32};
    ParamTree p = random_tree(attention_param_specs("a", 6, gqa), 2);
    EXPECT_EQ(p["a/key/kernel"].shape(), (Shape{{"embed", 6}, {"kv_heads", g}, {"kv", 3}}));
    ParamTree q = p;
    for (const char* n : {"key", "value"}) {
      // Head h of the repeated kernel = K/V head h / (4 / g), built by hand.
      auto w = transpose(p[std::string("a/") + n + "/kernel"], {"embed", "kv_heads", "kv"}).to_floats();
      std::vector<float> rep;
      for (int64_t e = 0; e < 6; ++e)
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t d = 0; d < 3; ++d) rep.push_back(w[size_t((e * g + h / (4 / g)) * 3 + d)]);
      q[std::string("a/") + n + "/kernel"] = Array::from_floats(Shape{{"embed", 6}, {"joined_kv", 12}}, rep);
    }
    Array x = normal(prng_key(7), Shape{{"batch", 2}, {"length", 4}, {"embed", 6}});
    MaskSpec m;
    m.causal = true;
    MaskSpec prefix = m;
    prefix.bidirectional_prefix = Array::zeros(Shape{{"batch", 2}, {"length", 4}}, DType::i32);
    Dropout none;
    Array want = multi_head_attention(q, "a", x, x, m, Array(), mha, none);
    EXPECT_LT(max_abs_diff(multi_head_attention(p, "a", x, x, m, Array(), gqa, none), want), 1e-5);
    EXPECT_LT(max_abs_diff(multi_head_attention(p, "a", x, x, prefix, Array(), gqa, none), want), 1e-5);
  }
}

// K/V arrays named kv_heads with G = H go through the grouped kernel with
// groups of one: bitwise the multi-head result, forward and gradients.
TEST(Attention, GroupsOfOneAreMultiHeadBitwise) {
  AttentionConfig att{4, 0, 3, DType::f32};
  Array q = normal(prng_key(1), Shape{{"batch", 2}, {"length", 5}, {"heads", 4}, {"kv", 3}});
  Array k = normal(prng_key(2), Shape{{"batch", 2}, {"kv_length", 5}, {"heads", 4}, {"kv", 3}});
  Array v = normal(prng_key(3), Shape{{"batch", 2}, {"kv_length", 5}, {"heads", 4}, {"kv", 3}});
  MaskSpec m;
  m.causal = true;
  Dropout none;
  auto loss = [&](const ParamTree& t, bool grouped) {
    Array kk = t.at("k"), vv = t.at("v");
    if (grouped) {
      kk = rename(kk, {{"heads", "kv_heads"}});
      vv = rename(vv, {{"heads", "kv_heads"}});
    }
    Array o = attend(t.at("q"), kk, vv, m, Array(), att, none);
    return sum(mul(o, o));
  };
  ParamTree t{{"q", q}, {"k", k}, {"v", v}};
  auto a = value_and_grad([&](const ParamTree& x) { return loss(x, false); }, t);
  auto b = value_and_grad([&](const ParamTree& x) { return loss(x, true); }, t);
  EXPECT_EQ(a.value.item(), b.value.item());
  for (const char* n : {"q", "k", "v"}) EXPECT_TRUE(array_equal(a.grads.at(n), b.grads.at(n))) << n;
}

// fuse_gated_wi (a decode layout): the gated GELU MLP with wi_0 and wi_1
// stacked into one kernel gives the bits of the two products, on the few-row
// path (a decode step's rows) and the packed one (a whole sequence), f32 and
// bf16; other MLPs and a second call are left as they are.
TEST(Mlp, FusedGatedWiGivesTheBitsOfTwoProducts) {
  for (DType dt : {DType::f32, DType::bf16}) {
    ParamTree p;
    p["m/wi_0/kernel"] = cast(normal(prng_key(1), Shape{{"embed", 64}, {"mlp", 512}}), dt);
    p["m/wi_1/kernel"] = cast(normal(prng_key(2), Shape{{"embed", 64}, {"mlp", 512}}), dt);
    p["m/wo/kernel"] = cast(normal(prng_key(3), Shape{{"mlp", 512}, {"embed", 64}}), dt);
    p["r/wi/kernel"] = p.at("m/wi_0/kernel");  // one activation: nothing to fuse
    p["r/wo/kernel"] = p.at("m/wo/kernel");
    const ParamTree f = fuse_gated_wi(p);
    ASSERT_EQ(f.size(), p.size() - 1);
    EXPECT_EQ(f.count("m/wi_0/kernel") + f.count("m/wi_1/kernel"), 0u);
    EXPECT_TRUE(f.at("r/wi/kernel").same_buffer(p.at("r/wi/kernel")));
    const ParamTree f2 = fuse_gated_wi(f);
    for (const auto& [k, a] : f) EXPECT_TRUE(f2.at(k).same_buffer(a)) << k;
    Dropout none;
    for (int64_t rows : {1, 3, 8, 40}) {
      const Array x = cast(normal(prng_key(uint32_t(10 + rows)), Shape{{"batch", 1}, {"length", rows}, {"embed", 64}}),
                           dt);
      const Array want = mlp_block(p, "m", x, {"gelu", "linear"}, none);
      const Array got = mlp_block(f, "m", x, {"gelu", "linear"}, none);
      EXPECT_EQ(got.names(), want.names());
      EXPECT_TRUE(array_equal(got, want)) << dtype_name(dt) << " rows=" << rows;
      EXPECT_GT(max_abs_diff(cast(got, DType::f32), Array::zeros(got.shape(), DType::f32)), 0.0);
    }
    // The fused kernel serves only the gated GELU MLP without dropout.
    const Array x = cast(normal(prng_key(9), Shape{{"batch", 1}, {"length", 2}, {"embed", 64}}), dt);
    try {
      mlp_block(f, "m", x, {"relu", "linear"}, none);
      FAIL() << "expected an error";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("m/wi_fused/kernel"), std::string::npos) << e.what();
    }
  }
}

TEST(Dropout, DeterministicFromKeyAndBroadcastOverLength) {
  Array x = Array::ones(Shape{{"batch", 2}, {"length", 6}, {"embed", 16}});
  Dropout a(0.5, prng_key(3)), b(0.5, prng_key(3)), none;
  Array ya = a(x), yb = b(x);
  EXPECT_TRUE(array_equal(ya, yb));
  EXPECT_TRUE(array_equal(none(x), x));
  auto v = transpose(ya, {"batch", "length", "embed"}).to_floats();
  int zeros = 0;
  for (int bb = 0; bb < 2; ++bb)
    for (int e = 0; e < 16; ++e)
      for (int l = 0; l < 6; ++l) {
        float first = v[size_t((bb * 6) * 16 + e)];
        ASSERT_EQ(v[size_t((bb * 6 + l) * 16 + e)], first);  // same along length
        zeros += first == 0.0f && l == 0;
        if (first != 0.0f) {
          ASSERT_FLOAT_EQ(first, 2.0f);
        }
      }
  EXPECT_GT(zeros, 4);
  EXPECT_LT(zeros, 28);
  EXPECT_FALSE(array_equal(a(x), ya));  // the next call draws a new mask
}

// Per-block keys: rows of block b drop as a pass over them alone with key b;
// an array with no "batch" dim (an MoE expert hidden layer) takes one mask
// from the first block's key (it was an error, on the expert mesh with
// dropout); a batch the blocks do not divide is refused.
TEST(Dropout, PerBlockKeysSplitTheBatchAndFallBackToTheFirstKey) {
  const PRNGKey k0 = prng_key(5), k1 = prng_key(6);
  Array x = Array::ones(Shape{{"batch", 4}, {"length", 3}, {"embed", 8}});
  Dropout blocks(0.5, DropoutKeys::per_block({k0, k1}));
  Dropout only0(0.5, k0), only1(0.5, k1);
  const Array y = blocks(x);
  EXPECT_TRUE(array_equal(slice(y, "batch", 0, 2), only0(slice(x, "batch", 0, 2))));
  EXPECT_TRUE(array_equal(slice(y, "batch", 2, 2), only1(slice(x, "batch", 2, 2))));
  Array h = Array::ones(Shape{{"expert", 2}, {"expert_capacity", 3}, {"expert_mlp", 16}});
  Dropout b2(0.5, DropoutKeys::per_block({k0, k1})), first(0.5, k0);
  EXPECT_TRUE(array_equal(b2(h, {"expert_capacity"}), first(h, {"expert_capacity"})));
  Dropout b3(0.5, DropoutKeys::per_block({k0, k1, prng_key(7)}));
  EXPECT_THROW(b3(x), std::invalid_argument);
}

}  // namespace
}  // namespace t5x::nn
