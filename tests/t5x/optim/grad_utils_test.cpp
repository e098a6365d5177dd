// Global norm, optax clip_by_global_norm, t5x microbatch accumulation.
#include "t5x/optim/grad_utils.h"

#include <cmath>

#include <omp.h>

#include <gtest/gtest.h>

#include "ops/ops.h"

namespace t5x {
namespace {

TEST(GradUtils, GlobalNormAndClip) {
  ParamTree g{{"a", Array::from_vector(Shape{{"embed", 2}}, std::vector<float>{3, 0})},
              {"b", Array::from_vector(Shape{{"mlp", 1}}, std::vector<float>{-4})}};
  EXPECT_DOUBLE_EQ(global_norm(g), 5.0);
  ParamTree same = clip_by_global_norm(g, 10.0);
  EXPECT_TRUE(same.at("a").same_buffer(g.at("a")));  // below the threshold: untouched
  ParamTree c = clip_by_global_norm(g, 1.0);
  EXPECT_FLOAT_EQ(c.at("a").to_floats()[0], 0.6f);
  EXPECT_FLOAT_EQ(c.at("b").to_floats()[0], -0.8f);
  EXPECT_NEAR(global_norm(c), 1.0, 1e-7);
  EXPECT_FLOAT_EQ(g.at("a").to_floats()[0], 3.0f);  // inputs unchanged
}

// Several of the kernel's 2^16-value sum chunks, against a long double sum;
// the same bits on one thread and on all; bf16 and f16 gradients sum their
// widened values in the f32 order, bit for bit.
TEST(GradUtils, GlobalNormOverChunksThreadsAndDtypes) {
  const int64_t n = 3 * 65536 + 5;
  std::vector<float> v(static_cast<size_t>(n));
  long double ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    v[size_t(i)] = float(std::sin(0.37 * double(i))) * (i % 3 == 0 ? 100.f : 0.01f);
    ref += (long double)v[size_t(i)] * (long double)v[size_t(i)];
  }
  const Shape s{{"embed", n}};
  const ParamTree g{{"a", Array::from_vector(s, v)}};
  const double norm = global_norm(g);
  EXPECT_NEAR(norm, double(std::sqrt(ref)), 1e-13 * double(std::sqrt(ref)));
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const double one = global_norm(g);
  omp_set_num_threads(threads);
  EXPECT_EQ(one, norm);
  for (DType dt : {DType::bf16, DType::f16}) {
    const Array low = Array::from_floats(s, v, dt);
    EXPECT_EQ(global_norm({{"a", low}}), global_norm({{"a", Array::from_vector(s, low.to_floats())}})) << dtype_name(dt);
  }
  EXPECT_THROW(global_norm({{"i", Array::from_ints(Shape{{"embed", 2}}, {1, 2})}}), std::invalid_argument);
}

// Clipping a bf16 or f16 gradient rounds (g / norm) * max_norm once to its
// dtype; the microbatch sums add the widened values in float32.
TEST(GradUtils, ClipAndAccumulateKeepTheGradientDtype) {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::cos(double(i))) * 3.f;
  const Shape s{{"embed", 1000}};
  for (DType dt : {DType::bf16, DType::f16}) {
    const Array g = Array::from_floats(s, v, dt);
    const ParamTree c = clip_by_global_norm({{"g", g}}, 0.5, 7.0);
    ASSERT_EQ(c.at("g").dtype(), dt);
    const std::vector<float> in = g.to_floats(), out = c.at("g").to_floats();
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = (in[i] / 7.0f) * 0.5f;
      EXPECT_EQ(out[i], dt == DType::bf16 ? float(bfloat16(want)) : float(float16(want))) << dtype_name(dt) << i;
    }
    GradAccumulator acc({{"g", Array::zeros(s)}});
    acc.add({{"g", g}});
    acc.add({{"g", g}});
    const std::vector<float> sum = acc.sum().at("g").to_floats();
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(sum[i], in[i] + in[i]) << dtype_name(dt) << i;
  }
}

TEST(GradUtils, GetMicrobatchSlicesTheBatchDim) {
  std::vector<int64_t> ids(12);
  for (int i = 0; i < 12; ++i) ids[size_t(i)] = i;
  std::map<std::string, Array> batch{{"targets", Array::from_ints(Shape{{"batch", 6}, {"length", 2}}, ids)}};
  auto mb = get_microbatch(batch, 1, 3);
  EXPECT_EQ(mb.at("targets").shape(), (Shape{{"batch", 2}, {"length", 2}}));
  EXPECT_EQ(mb.at("targets").to_ints(), (std::vector<int64_t>{4, 5, 6, 7}));
  try {
    get_microbatch(batch, 0, 4);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("not divisible by num_microbatches 4"), std::string::npos);
  }
  EXPECT_THROW(get_microbatch(batch, 3, 3), std::invalid_argument);
}

TEST(GradUtils, MicrobatchSumEqualsFullBatchGradientOfASumLoss) {
  // t5x sums microbatch grads (losses are sums over tokens): the result is
  // the full-batch gradient.
  std::vector<float> xv(8 * 3), yv(8);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(std::sin(double(i)));
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = float(i) * 0.1f;
  std::map<std::string, Array> batch{{"x", Array::from_vector(Shape{{"batch", 8}, {"embed", 3}}, xv)},
                                     {"y", Array::from_vector(Shape{{"batch", 8}}, yv)}};
  ParamTree params{{"w", Array::from_vector(Shape{{"embed", 3}}, std::vector<float>{0.5f, -1.f, 2.f})}};
  auto grad_of = [&](const std::map<std::string, Array>& b) {
    return value_and_grad(
               [&](const ParamTree& p) {
                 Array pred = einsum(b.at("x"), p.at("w"), {"batch"});
                 return sum(square(sub(pred, b.at("y"))));
               },
               params)
        .grads;
  };
  ParamTree full = grad_of(batch);
  ParamTree acc = accumulate_grads_microbatched(params, 4, [&](int64_t i) { return grad_of(get_microbatch(batch, i, 4)); });
  EXPECT_EQ(acc.at("w").dtype(), DType::f32);
  EXPECT_TRUE(allclose(acc.at("w"), full.at("w"), 1e-5, 1e-5)) << acc.at("w").to_string() << full.at("w").to_string();
  // Off: one call, grads returned as they are.
  int calls = 0;
  accumulate_grads_microbatched(params, 1, [&](int64_t) { ++calls; return full; });
  EXPECT_EQ(calls, 1);
}

TEST(GradUtils, AccumulatorIsFloat32ForBf16Grads) {
  ParamTree params{{"w", Array::zeros(Shape{{"embed", 2}}, DType::bf16)}};
  GradAccumulator acc(params);
  ParamTree g{{"w", Array::from_floats(Shape{{"embed", 2}}, {1.0f, 1.0f / 256}, DType::bf16)}};
  for (int i = 0; i < 300; ++i) acc.add(g);
  EXPECT_EQ(acc.count(), 300);
  EXPECT_EQ(acc.sum().at("w").dtype(), DType::f32);
  EXPECT_FLOAT_EQ(acc.sum().at("w").to_floats()[0], 300.0f);  // a bf16 sum would stall at 256
  EXPECT_NEAR(acc.sum().at("w").to_floats()[1], 300.0 / 256, 1e-6);
  EXPECT_THROW(acc.add({}), std::invalid_argument);
}

// Microbatch gradients add pairwise, ((g0 + g1) + (g2 + g3)): the order in
// which two data-parallel processes holding two microbatches each sum them.
// Here the two orders differ: 1 + 2^-24 rounds to 1 three times in a row,
// but 2^-24 + 2^-24 = 2^-23 survives.
TEST(GradUtils, MicrobatchGradientsAddPairwise) {
  ParamTree params{{"w", Array::zeros(Shape{{"embed", 1}})}};
  const float tiny = std::ldexp(1.0f, -24);
  const std::vector<float> g = {1.0f, tiny, tiny, tiny};
  auto grad_of = [&](int64_t i) { return ParamTree{{"w", Array::from_floats(Shape{{"embed", 1}}, {g[size_t(i)]})}}; };
  EXPECT_EQ(accumulate_grads_microbatched(params, 4, grad_of).at("w").to_floats()[0], 1.0f + 2 * tiny);
  // Three: (g0 + g1) + g2.
  EXPECT_EQ(accumulate_grads_microbatched(params, 3, grad_of).at("w").to_floats()[0], 1.0f);
  // One: grad_fn(0) itself.
  EXPECT_EQ(accumulate_grads_microbatched(params, 1, grad_of).at("w").to_floats()[0], 1.0f);
}

}  // namespace
}  // namespace t5x
