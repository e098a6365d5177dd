// Named shapes, Array handles, dtypes, Status / Result.
#include <gtest/gtest.h>

#include <memory>

#include "core/array.h"
#include "core/error.h"

namespace t5x {
namespace {

TEST(CoreShape, NamedDimsPrintMeshTfStyle) {
  Shape s{{"batch", 8}, {"length", 128}, {"embed", 512}};
  EXPECT_EQ(s.to_string(), "[batch=8, length=128, embed=512]");
  EXPECT_EQ(s.numel(), 8 * 128 * 512);
  EXPECT_EQ(s.index("length"), 1);
  EXPECT_EQ(s.size("embed"), 512);
  EXPECT_EQ(s.strides(), (std::vector<int64_t>{128 * 512, 512, 1}));
  EXPECT_EQ(Shape{}.to_string(), "[]");
  EXPECT_EQ(Shape{}.numel(), 1);
  EXPECT_THROW((Shape{{"a", 2}, {"a", 3}}), std::invalid_argument);
  EXPECT_THROW((Shape{{"a", -1}}), std::invalid_argument);
  try {
    s.size("vocab");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'vocab'"), std::string::npos);
  }
}

TEST(CoreDtype, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::f16), 2u);
  EXPECT_EQ(dtype_size(DType::i64), 8u);
  EXPECT_EQ(dtype_size(DType::boolean), 1u);
  EXPECT_STREQ(dtype_name(DType::bf16), "bfloat16");
  EXPECT_TRUE(is_floating(DType::f16));
  EXPECT_FALSE(is_floating(DType::i32));
}

TEST(CoreArray, ConstructionAccessAndPrinting) {
  Array a = Array::from_vector<float>(Shape{{"batch", 2}, {"embed", 3}}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(a.dtype(), DType::f32);
  EXPECT_EQ(a.dim("embed"), 3);
  EXPECT_EQ(a.data<float>()[4], 5.f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw_data()) % 64, 0u);
  EXPECT_EQ(a.to_string(), "float32[batch=2, embed=3] {1, 2, 3, 4, 5, 6}");
  EXPECT_TRUE(a.is_fully_local());
  EXPECT_EQ(a.local_shape(), a.shape());
  EXPECT_EQ(a.device().to_string(), "cpu:0");
  EXPECT_THROW(a.data<int32_t>(), std::invalid_argument);
  Array b = Array::from_vector<bool>(Shape{{"n", 3}}, {true, false, true});
  EXPECT_EQ(b.to_ints(), (std::vector<int64_t>{1, 0, 1}));
  Array h = Array::from_floats(Shape{{"n", 2}}, {1.5f, -2.25f}, DType::bf16);
  EXPECT_EQ(h.to_floats(), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(Array::full(Shape{{"n", 2}}, 7, DType::i64).to_ints(), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(Array::scalar(2.5).item(), 2.5);
  EXPECT_THROW(Array::from_vector<float>(Shape{{"n", 2}}, {1.f}), std::invalid_argument);
}

// Integers come back exact, not through float: 2^24 + 1 (a restored step,
// the case that found it) and the int32 extremes.
TEST(CoreArray, IntegersReadBackExactly) {
  const std::vector<int64_t> v{16777217, 2147483647, -2147483648LL, -16777217};
  EXPECT_EQ(Array::from_ints(Shape({{"x", 4}}), v, DType::i32).to_ints(), v);
  EXPECT_EQ(Array::from_ints(Shape{}, {16777217}, DType::i32).item(), 16777217.0);
}

TEST(CoreArray, HandlesShareDataCopiesDoNot) {
  Array a = Array::from_vector<float>(Shape{{"n", 2}}, {1, 2});
  Array b = a;
  Array c = a.copy();
  a.data<float>()[0] = 9;
  EXPECT_EQ(b.data<float>()[0], 9.f);
  EXPECT_EQ(c.data<float>()[0], 1.f);
  EXPECT_TRUE(a.same_buffer(b));
  EXPECT_FALSE(array_equal(a, c));
  EXPECT_EQ(max_abs_diff(a, c), 8.0);
  EXPECT_TRUE(allclose(a, b));
}

TEST(CoreArray, LocalShardShapeFollowsPartitionSpec) {
  auto mesh = std::make_shared<MeshDesc>(MeshDesc{{"data", "model"}, {2, 4}, 0});
  Sharding s{mesh, PartitionSpec({{"data"}, {"model"}})};
  Array a(Shape{{"batch", 8}, {"embed", 16}}, DType::f32, s);
  EXPECT_EQ(a.shape(), (Shape{{"batch", 8}, {"embed", 16}}));
  EXPECT_EQ(a.local_shape(), (Shape{{"batch", 4}, {"embed", 4}}));
  EXPECT_EQ(a.nbytes(), 16u * 4u);
  EXPECT_FALSE(a.is_fully_local());
  Array r(Shape{{"batch", 8}}, DType::f32, Sharding{mesh, PartitionSpec::replicated(1)});
  EXPECT_TRUE(r.is_fully_local());
  EXPECT_THROW(Array(Shape{{"batch", 6}}, DType::f32, Sharding{mesh, PartitionSpec({{"model"}})}), std::invalid_argument);
  // Local view and back, sharing the buffer.
  Array lv = a.local_view();
  EXPECT_EQ(lv.shape(), (Shape{{"batch", 4}, {"embed", 4}}));
  EXPECT_TRUE(lv.is_fully_local());
  EXPECT_TRUE(lv.same_buffer(a));
  Array g = Array::from_local(lv, a.shape(), s);
  EXPECT_EQ(g.shape(), a.shape());
  EXPECT_EQ(g.local_shape(), a.local_shape());
  EXPECT_THROW(Array::from_local(lv, Shape{{"batch", 8}, {"embed", 8}}, s), std::invalid_argument);
}

TEST(CoreArray, LiveBytesCounter) {
  int64_t before = live_bytes();
  {
    Array a(Shape{{"n", 1000}}, DType::f32);
    EXPECT_EQ(live_bytes() - before, 4000);
  }
  EXPECT_EQ(live_bytes(), before);
}

Result<int> parse_positive(int v) {
  if (v <= 0) return InvalidArgumentError("value " + std::to_string(v) + " must be positive");
  return v;
}

Status chain(int v) {
  T5X_RETURN_IF_ERROR(parse_positive(v).status());
  return Status::Ok();
}

TEST(CoreError, StatusAndResult) {
  EXPECT_TRUE(Status().ok());
  Status s = NotFoundError("file x.msgpack not found");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.to_string(), "NOT_FOUND: file x.msgpack not found");
  EXPECT_THROW(s.throw_if_error(), std::runtime_error);
  auto r = parse_positive(3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 3);
  auto bad = parse_positive(-1);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THROW(bad.value(), std::runtime_error);
  EXPECT_EQ(chain(-2).message(), "value -2 must be positive");
  EXPECT_TRUE(chain(2).ok());
  try {
    throw_invalid("einsum", "dim 'embed' mismatch");
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "[einsum] dim 'embed' mismatch");
  }
}

}  // namespace
}  // namespace t5x
