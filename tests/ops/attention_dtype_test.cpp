// dot_product_attention with f32 copies of bf16 keys / values (the decode
// cache's cross-attention K/V) gives exactly the all-bf16 result; mixing
// dtypes otherwise is still an error.
#include <gtest/gtest.h>

#include "harness.h"
#include "ops/ops.h"

namespace t5x {
namespace {

TEST(AttentionDtype, F32KeysValuesForBf16QueryEqualAllBf16) {
  Shape qs{{"batch", 2}, {"length", 3}, {"heads", 4}, {"kv", 8}};
  Shape ks{{"batch", 2}, {"kv_length", 5}, {"heads", 4}, {"kv", 8}};
  Array q = testing::rand_array(qs, 1, -1.f, 1.f, DType::bf16);
  Array k = testing::rand_array(ks, 2, -1.f, 1.f, DType::bf16);
  Array v = testing::rand_array(ks, 3, -1.f, 1.f, DType::bf16);
  AttentionOptions o;
  o.kv_mask = Array::from_ints(Shape{{"batch", 2}, {"kv_length", 5}}, {1, 1, 1, 0, 0, 1, 1, 1, 1, 1}, DType::boolean);
  Array want = dot_product_attention(q, k, v, o);
  Array got = dot_product_attention(q, cast(k, DType::f32), cast(v, DType::f32), o);
  EXPECT_EQ(got.dtype(), DType::bf16);
  EXPECT_TRUE(array_equal(got, want));
  Array ref = dot_product_attention_reference(q, cast(k, DType::f32), cast(v, DType::f32), o);
  EXPECT_TRUE(array_equal(ref, dot_product_attention_reference(q, k, v, o)));
  EXPECT_THROW(dot_product_attention(q, cast(k, DType::f32), v, o), std::invalid_argument);
  EXPECT_THROW(dot_product_attention(cast(q, DType::f32), k, v, o), std::invalid_argument);
}

}  // namespace
}  // namespace t5x
