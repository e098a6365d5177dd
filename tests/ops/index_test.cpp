// iota, one_hot, take (embedding lookup), top_k.
#include "harness.h"

namespace t5x {
namespace {
using namespace testing;

TEST(IndexOps, IotaAndOneHot) {
  Array i = iota(Shape{{"q", 2}, {"k", 3}}, "k");
  EXPECT_EQ(i.to_ints(), (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(iota(Shape{{"q", 2}, {"k", 3}}, "q", DType::f32).to_floats(), (std::vector<float>{0, 0, 0, 1, 1, 1}));
  Array ids = Array::from_vector<int32_t>(Shape{{"batch", 2}, {"length", 2}}, {1, 0, 3, 5});
  Array oh = one_hot(ids, 4, "vocab");
  EXPECT_EQ(oh.shape(), (Shape{{"batch", 2}, {"length", 2}, {"vocab", 4}}));
  EXPECT_EQ(oh.to_floats(), (std::vector<float>{0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}));  // 5 is out of range
}

TEST(IndexOps, TakeIsEmbeddingLookupWithScatterAddGradient) {
  Array emb = rand_array(Shape{{"vocab", 5}, {"embed", 3}}, 1);
  Array ids = Array::from_vector<int32_t>(Shape{{"batch", 2}, {"length", 3}}, {4, 0, 4, 1, 1, 2});
  Array x = take(emb, ids, "vocab");
  EXPECT_EQ(x.shape(), (Shape{{"batch", 2}, {"length", 3}, {"embed", 3}}));
  auto idv = ids.to_ints();
  for_each_index(x.shape(), [&](const auto& i) {
    int64_t id = idv[size_t(i.at("batch") * 3 + i.at("length"))];
    EXPECT_EQ(at(x, i), at(emb, {{"vocab", id}, {"embed", i.at("embed")}}));
  });
  // Same as the one-hot matmul t5x uses.
  EXPECT_LT(max_abs_diff(x, einsum(one_hot(ids, 5, "vocab"), emb, {"batch", "length", "embed"})), 1e-6);
  check_grad([&](const std::vector<Array>& v) { return take(v[0], ids, "vocab"); }, {emb});
  // Gather along a middle dim.
  Array t = rand_array(Shape{{"a", 2}, {"b", 4}, {"c", 3}}, 2);
  Array sel = Array::from_vector<int64_t>(Shape{{"j", 2}}, {3, 1});
  Array g = take(t, sel, "b");
  EXPECT_EQ(g.shape(), (Shape{{"a", 2}, {"j", 2}, {"c", 3}}));
  EXPECT_EQ(at(g, {{"a", 1}, {"j", 0}, {"c", 2}}), at(t, {{"a", 1}, {"b", 3}, {"c", 2}}));
  check_grad([&](const std::vector<Array>& v) { return take(v[0], sel, "b"); }, {t});
  expect_invalid([&] { take(emb, Array::from_vector<int32_t>(Shape{{"n", 1}}, {7}), "vocab"); },
                 {"[take]", "index 7", "'vocab'", "5"});
  expect_invalid([&] { take(emb, Array::zeros(Shape{{"n", 1}}), "vocab"); }, {"[take]", "int32/int64", "float32"});
}

TEST(IndexOps, TopK) {
  Array x = Array::from_vector<float>(Shape{{"vocab", 5}, {"batch", 2}}, {1, 9, 7, 2, 3, 8, 7, 2, 0, 5});
  auto [v, i] = top_k(x, 2, "vocab");
  EXPECT_EQ(v.shape(), (Shape{{"vocab", 2}, {"batch", 2}}));
  // column 0: {1, 7, 3, 7, 0} -> 7 (idx 1), 7 (idx 3); column 1: {9, 2, 8, 2, 5} -> 9, 8.
  EXPECT_EQ(v.to_floats(), (std::vector<float>{7, 9, 7, 8}));
  EXPECT_EQ(i.to_ints(), (std::vector<int64_t>{1, 0, 3, 2}));
  Array y = rand_array(Shape{{"b", 3}, {"v", 6}}, 3);
  check_grad([](const std::vector<Array>& a) { return top_k(a[0], 3, "v").first; }, {y});
  expect_invalid([&] { top_k(x, 6, "vocab"); }, {"[top_k]", "k = 6", "'vocab'"});
}

}  // namespace
}  // namespace t5x
