// Layout ops: transpose, rename, reshape, broadcast_to, slice, pad, concat,
// stack, dynamic_slice, dynamic_update_slice.
#include "harness.h"

namespace t5x {
namespace {
using namespace testing;

const Shape kS{{"batch", 2}, {"length", 3}, {"embed", 4}};

TEST(ShapeOps, TransposeMovesDataByName) {
  Array x = rand_array(kS, 1);
  Array t = transpose(x, {"embed", "batch", "length"});
  EXPECT_EQ(t.shape(), (Shape{{"embed", 4}, {"batch", 2}, {"length", 3}}));
  for_each_index(kS, [&](const auto& i) { EXPECT_EQ(at(t, i), at(x, i)); });
  check_grad([](const std::vector<Array>& v) { return transpose(v[0], {"length", "embed", "batch"}); }, {x});
}

// transpose_like: x in another array's order of dims; x's own buffer when it
// already has it (transpose to x's own order, likewise); and a mismatch of
// names is transpose's error.
TEST(ShapeOps, TransposeLikeTakesTheOtherArraysOrder) {
  Array x = rand_array(Shape{{"batch", 2}, {"length", 3}, {"embed", 4}}, 7);
  Array like = Array::zeros(Shape{{"embed", 4}, {"batch", 2}, {"length", 3}});
  Array t = transpose_like(x, like);
  EXPECT_EQ(t.names(), like.names());
  EXPECT_TRUE(array_equal(t, transpose(x, like.names())));
  EXPECT_FALSE(t.same_buffer(x));
  EXPECT_TRUE(transpose_like(x, Array::zeros(x.shape())).same_buffer(x));
  EXPECT_TRUE(transpose(x, x.names()).same_buffer(x));
  expect_invalid([&] { transpose_like(x, Array::zeros(Shape{{"batch", 2}, {"vocab", 3}, {"embed", 4}})); },
                 {"[transpose]", "'vocab'"});
}

TEST(ShapeOps, RenameReshapeBroadcast) {
  Array x = rand_array(kS, 2);
  Array r = rename(x, {{"length", "q"}});
  EXPECT_EQ(r.shape(), (Shape{{"batch", 2}, {"q", 3}, {"embed", 4}}));
  EXPECT_EQ(r.to_floats(), x.to_floats());
  Array h = reshape(x, Shape{{"batch", 2}, {"length", 3}, {"heads", 2}, {"kv", 2}});
  EXPECT_EQ(h.to_floats(), x.to_floats());
  check_grad([](const std::vector<Array>& v) { return reshape(v[0], Shape{{"n", 24}}); }, {x});
  Array s = rand_array(Shape{{"embed", 4}, {"batch", 2}}, 3);
  Array b = broadcast_to(s, kS);
  for_each_index(kS, [&](const auto& i) { EXPECT_EQ(at(b, i), at(s, {{"embed", i.at("embed")}, {"batch", i.at("batch")}})); });
  check_grad([](const std::vector<Array>& v) { return broadcast_to(v[0], kS); }, {s});
  check_grad([](const std::vector<Array>& v) { return rename(v[0], {{"embed", "e"}}); }, {x});
}

TEST(ShapeOps, SlicePadConcatStack) {
  Array x = rand_array(kS, 4);
  Array s = slice(x, "length", 1, 2);
  EXPECT_EQ(s.shape(), (Shape{{"batch", 2}, {"length", 2}, {"embed", 4}}));
  for_each_index(s.shape(), [&](const auto& i) {
    auto j = i;
    j["length"] += 1;
    EXPECT_EQ(at(s, i), at(x, j));
  });
  Array p = pad(x, "embed", 1, 2, -5.0);
  EXPECT_EQ(p.dim("embed"), 7);
  for_each_index(p.shape(), [&](const auto& i) {
    int64_t e = i.at("embed");
    if (e < 1 || e >= 5) EXPECT_EQ(at(p, i), -5.f);
    else { auto j = i; j["embed"] = e - 1; EXPECT_EQ(at(p, i), at(x, j)); }
  });
  Array y = rand_array(Shape{{"batch", 2}, {"length", 1}, {"embed", 4}}, 5);
  Array c = concat({x, y}, "length");
  EXPECT_EQ(c.dim("length"), 4);
  EXPECT_EQ(slice(c, "length", 3, 1).to_floats(), y.to_floats());
  EXPECT_EQ(slice(c, "length", 0, 3).to_floats(), x.to_floats());
  Array st = stack({x, x * 2.0}, "layers", 1);
  EXPECT_EQ(st.shape(), (Shape{{"batch", 2}, {"layers", 2}, {"length", 3}, {"embed", 4}}));
  for_each_index(kS, [&](const auto& i) {
    auto j = i;
    j["layers"] = 1;
    EXPECT_EQ(at(st, j), 2 * at(x, i));
  });
  check_grad([](const std::vector<Array>& v) { return slice(v[0], "embed", 1, 2); }, {x});
  check_grad([](const std::vector<Array>& v) { return pad(v[0], "length", 2, 1); }, {x});
  check_grad([](const std::vector<Array>& v) { return concat({v[0], v[1]}, "length"); }, {x, y});
  check_grad([](const std::vector<Array>& v) { return stack({v[0], v[1]}, "s", -1); }, {x, x * 0.5});
}

TEST(ShapeOps, DynamicSliceAndUpdateForKvCache) {
  Array cache = Array::zeros(Shape{{"batch", 2}, {"length", 5}, {"kv", 3}});
  Array step = rand_array(Shape{{"batch", 2}, {"length", 1}, {"kv", 3}}, 6);
  Array c1 = dynamic_update_slice(cache, step, {{"length", 2}});
  EXPECT_EQ(dynamic_slice(c1, {{"length", 2}}, {{"length", 1}}).to_floats(), step.to_floats());
  EXPECT_EQ(sum(abs(c1)).item(), sum(abs(step)).item());
  EXPECT_EQ(sum(cache).item(), 0.0);  // inputs are never modified
  // Start indices clamp like lax.dynamic_update_slice.
  Array c2 = dynamic_update_slice(cache, step, {{"length", 99}});
  EXPECT_EQ(dynamic_slice(c2, {{"length", 4}}, {{"length", 1}}).to_floats(), step.to_floats());
  Array big = rand_array(cache.shape(), 7);
  check_grad([&](const std::vector<Array>& v) { return dynamic_update_slice(v[0], v[1], {{"length", 1}}); }, {big, step});
  check_grad([&](const std::vector<Array>& v) { return dynamic_slice(v[0], {{"length", 3}, {"kv", 1}}, {{"length", 2}, {"kv", 2}}); }, {big});
}

// A decode step's cache write: over the cache's own buffer when the caller
// holds its only handle, else a copy that leaves the other handle's values.
TEST(ShapeOps, DynamicUpdateSliceIntoWritesOverASoleOwnerOnly) {
  const Array step = rand_array(Shape{{"batch", 2}, {"length", 1}, {"kv", 3}}, 6);
  const Array base = rand_array(Shape{{"batch", 2}, {"length", 5}, {"kv", 3}}, 8);
  const std::vector<float> want = dynamic_update_slice(base, step, {{"length", 99}}).to_floats();
  Array cache = base.copy();
  const void* where = cache.raw_data();
  dynamic_update_slice_into(cache, step, {{"length", 99}});  // clamped to 4, as the copy
  EXPECT_EQ(cache.raw_data(), where);
  EXPECT_EQ(cache.to_floats(), want);
  Array shared = base.copy();
  const Array keep = shared;
  dynamic_update_slice_into(shared, step, {{"length", 99}});
  EXPECT_FALSE(shared.same_buffer(keep));
  EXPECT_EQ(shared.to_floats(), want);
  EXPECT_EQ(keep.to_floats(), base.to_floats());
  EXPECT_THROW(dynamic_update_slice_into(cache, Array::zeros(Shape{{"batch", 2}, {"length", 6}, {"kv", 3}}), {}),
               std::invalid_argument);
}

TEST(ShapeOps, Misuse) {
  Array x = rand_array(kS, 1);
  expect_invalid([&] { transpose(x, {"batch", "embed"}); }, {"[transpose]", "permutation"});
  expect_invalid([&] { reshape(x, Shape{{"n", 7}}); }, {"[reshape]", "24", "7"});
  expect_invalid([&] { slice(x, "length", 2, 5); }, {"[slice]", "'length'", "3"});
  expect_invalid([&] { concat({x, rand_array(Shape{{"batch", 2}, {"length", 3}, {"mlp", 4}}, 2)}, "length"); },
                 {"[concat]", "mlp"});
  expect_invalid([&] { rename(x, {{"length", "embed"}}); }, {"[rename]", "duplicate"});
  expect_invalid([&] { broadcast_to(x, Shape{{"batch", 2}, {"embed", 4}}); }, {"[broadcast_to]", "'length'"});
}

}  // namespace
}  // namespace t5x

namespace t5x {
namespace {
using namespace testing;

TEST(ShapeOps, ExpandSqueezeUnstack) {
  Array x = rand_array(Shape{{"batch", 2}, {"embed", 3}}, 9);
  Array e = expand_dims(x, "length", 1);
  EXPECT_EQ(e.shape(), (Shape{{"batch", 2}, {"length", 1}, {"embed", 3}}));
  EXPECT_TRUE(array_equal(squeeze(e, "length"), x));
  auto parts = unstack(x, "batch");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].shape(), (Shape{{"embed", 3}}));
  EXPECT_TRUE(array_equal(stack(parts, "batch"), x));
  check_grad([](const std::vector<Array>& v) { return mul(unstack(v[0], "embed")[2], 3.0); }, {x});
  expect_invalid([&] { squeeze(x, "embed"); }, {"[squeeze]", "'embed'", "3"});
  expect_invalid([&] { expand_dims(x, "embed"); }, {"[expand_dims]", "'embed'"});
}

}  // namespace
}  // namespace t5x
