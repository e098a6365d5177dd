// iota, one_hot, take (embedding lookup), top_k.
#include <cstring>

#include "harness.h"
#include "ops/profile.h"

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

// A table taken from twice (T5's token embedding: encoder and decoder): the
// backward adds the second take's rows into the first gradient in place
// (Take::vjp_into) and must give the bits of the two dense gradients added.
TEST(IndexOps, TableTakenTwiceGetsTheBitsOfItsTwoGradientsAdded) {
  // 150 columns: two whole 64-wide blocks of the kernel and a part.
  Array emb = rand_array(Shape{{"vocab", 40}, {"embed", 150}}, 3);
  Array ids1 = Array::from_vector<int32_t>(Shape{{"batch", 2}, {"length", 5}}, {7, 3, 7, 0, 39, 3, 3, 12, 7, 1});
  Array ids2 = Array::from_vector<int64_t>(Shape{{"batch", 2}, {"length", 4}}, {3, 12, 12, 5, 39, 3, 20, 12});
  Array w1 = rand_array(Shape{{"batch", 2}, {"length", 5}, {"embed", 150}}, 4);
  Array w2 = rand_array(Shape{{"batch", 2}, {"length", 4}, {"embed", 150}}, 5);
  auto grad_of = [&](const std::vector<Array>& ids, const std::vector<Array>& w) {
    return vjp([&](const std::vector<Array>& v) {
             std::vector<Array> outs;
             for (const Array& i : ids) outs.push_back(take(v[0], i, "vocab"));
             return outs;
           }, {emb}, w).second[0];
  };
  const bool was_on = op_profile_enabled();
  op_profile_enable(true);
  op_profile_reset();
  const Array both = grad_of({ids1, ids2}, {w1, w2});
  const std::string report = op_profile_report();
  op_profile_enable(was_on);
  const Array want = add(grad_of({ids2}, {w2}), grad_of({ids1}, {w1}));
  ASSERT_EQ(both.shape(), want.shape());
  const std::vector<float> got = both.to_floats(), expected = want.to_floats();
  EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)));
  // Not a vacuous pass: rows 3, 7 and 12 sum several contributions, and the
  // second gradient went in place: three takes ran (the two forward ones and
  // the in-place add, which the profile counts as a take) inside two take vjps.
  EXPECT_NE(at(both, {{"vocab", 3}, {"embed", 149}}), 0.0f);
  EXPECT_EQ(at(both, {{"vocab", 2}, {"embed", 0}}), 0.0f);
  auto calls = [&](const std::string& key) {
    const size_t at_key = report.find("  " + key + "\n");
    if (at_key == std::string::npos) return int64_t(-1);
    const size_t line = report.rfind('\n', at_key) + 1;  // npos + 1 = 0 on the first line
    return int64_t(std::stoll(report.substr(report.find("ms", line) + 2)));
  };
  EXPECT_EQ(calls("take/fwd"), 3) << report;
  EXPECT_EQ(calls("take/vjp"), 2) << report;
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
