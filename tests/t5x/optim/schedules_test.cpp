// Learning-rate schedules: t5x's run gins and optax's shapes as known
// answers (float32 references from JAX / optax: golden_test.cpp).
#include "t5x/optim/schedules.h"

#include <cmath>

#include <gtest/gtest.h>

namespace t5x {
namespace {

TEST(Schedules, PretrainGinIsConstantThenInverseSqrt) {
  // configs/runs/pretrain.gin: 'constant * rsqrt_decay', base 1.0, warmup 10000.
  auto lr = create_learning_rate_scheduler({.factors = "constant * rsqrt_decay", .base_learning_rate = 1.0,
                                            .warmup_steps = 10000});
  EXPECT_DOUBLE_EQ(lr(0), 0.01);
  EXPECT_DOUBLE_EQ(lr(9999), 0.01);
  EXPECT_DOUBLE_EQ(lr(40000), 1.0 / 200.0);
  // finetune.gin: 'constant', 0.001.
  auto ft = create_learning_rate_scheduler({.factors = "constant", .base_learning_rate = 0.001});
  EXPECT_DOUBLE_EQ(ft(0), 0.001);
  EXPECT_DOUBLE_EQ(ft(123456), 0.001);
}

TEST(Schedules, DefaultsWarmupAndFloor) {
  auto lr = create_learning_rate_scheduler();  // constant * linear_warmup * rsqrt_decay, 0.5, 1000
  EXPECT_DOUBLE_EQ(lr(0), 1e-8);               // min_learning_rate floor
  EXPECT_NEAR(lr(500), 0.5 * 0.5 / std::sqrt(1000.0), 1e-15);
  EXPECT_NEAR(lr(4000), 0.5 / std::sqrt(4000.0), 1e-15);
  auto off = create_learning_rate_scheduler({.factors = "constant * linear_warmup", .base_learning_rate = 1.0,
                                             .warmup_steps = 10, .step_offset = 100});
  EXPECT_DOUBLE_EQ(off(50), 1e-8);  // before the offset: step clamps to 0
  EXPECT_DOUBLE_EQ(off(105), 0.5);
}

TEST(Schedules, DecayEveryAndCosineCycles) {
  auto de = create_learning_rate_scheduler({.factors = "constant * decay_every", .base_learning_rate = 2.0,
                                            .decay_factor = 0.5, .steps_per_decay = 100});
  EXPECT_DOUBLE_EQ(de(99), 2.0);
  EXPECT_DOUBLE_EQ(de(250), 0.5);
  auto cos = create_learning_rate_scheduler({.factors = "constant * cosine_decay", .base_learning_rate = 1.0,
                                             .warmup_steps = 0, .steps_per_cycle = 100});
  EXPECT_NEAR(cos(50), 0.5, 1e-12);
  EXPECT_NEAR(cos(150), 0.5, 1e-12);  // cyclic
  EXPECT_NEAR(cos(200), 1.0, 1e-12);
}

TEST(Schedules, UnknownFactorNamesTheKnownOnes) {
  try {
    create_learning_rate_scheduler({.factors = "constant * rsqrt_dacay"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("[create_learning_rate_scheduler] Unknown factor 'rsqrt_dacay'"), std::string::npos);
    EXPECT_NE(m.find("rsqrt_decay"), std::string::npos);
  }
}

TEST(Schedules, OptaxLinearAndCosine) {
  auto lin = linear_schedule(1.0, 0.0, 10, 5);
  EXPECT_DOUBLE_EQ(lin(0), 1.0);
  EXPECT_DOUBLE_EQ(lin(10), 0.5);
  EXPECT_DOUBLE_EQ(lin(100), 0.0);
  EXPECT_DOUBLE_EQ(linear_schedule(3.0, 0.0, 0)(7), 3.0);
  auto wc = warmup_cosine_decay_schedule(0.0, 1.0, 10, 110, 0.1);
  EXPECT_DOUBLE_EQ(wc(0), 0.0);
  EXPECT_DOUBLE_EQ(wc(5), 0.5);
  EXPECT_DOUBLE_EQ(wc(10), 1.0);
  EXPECT_NEAR(wc(60), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_NEAR(wc(110), 0.1, 1e-12);
  EXPECT_NEAR(wc(1000), 0.1, 1e-12);
  EXPECT_THROW(cosine_decay_schedule(1.0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace t5x
