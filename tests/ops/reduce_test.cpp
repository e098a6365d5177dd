// Reductions, softmax family, argmax, cumsum: naive references and vjps.
#include <cmath>
#include <limits>

#include "harness.h"

namespace t5x {
namespace {
using namespace testing;

const Shape kS{{"batch", 2}, {"length", 3}, {"embed", 4}};

// Naive reduction of x over `red` dims into the kept-dim shape.
std::vector<double> naive_reduce(const Array& x, const std::vector<std::string>& red, int op) {
  std::vector<Dim> kept;
  for (const Dim& d : x.shape().dims())
    if (std::find(red.begin(), red.end(), d.name) == red.end()) kept.push_back(d);
  Shape ks(kept);
  std::vector<double> out(size_t(ks.numel()), op == 0 ? 0.0 : op == 1 ? -INFINITY : INFINITY);
  for_each_index(x.shape(), [&](const auto& i) {
    std::map<std::string, int64_t> k;
    for (const Dim& d : kept) k[d.name] = i.at(d.name);
    double& o = out[size_t(offset(ks, k))];
    double v = at(x, i);
    o = op == 0 ? o + v : op == 1 ? std::max(o, v) : std::min(o, v);
  });
  return out;
}

TEST(Reduce, SumMaxMinOverEveryDimSubset) {
  Array x = rand_array(kS, 1);
  std::vector<std::vector<std::string>> subsets = {{"batch"}, {"length"}, {"embed"}, {"batch", "embed"},
                                                   {"length", "embed"}, {"embed", "batch", "length"}};
  for (const auto& red : subsets) {
    SCOPED_TRACE(names_to_string(red));
    Array s = sum(x, red), mx = max(x, red), mn = min(x, red);
    auto rs = naive_reduce(x, red, 0), rx = naive_reduce(x, red, 1), rn = naive_reduce(x, red, 2);
    auto vs = s.to_floats(), vx = mx.to_floats(), vn = mn.to_floats();
    ASSERT_EQ(vs.size(), rs.size());
    for (size_t i = 0; i < rs.size(); ++i) {
      EXPECT_NEAR(vs[i], rs[i], 1e-5);
      EXPECT_EQ(vx[i], float(rx[i]));
      EXPECT_EQ(vn[i], float(rn[i]));
    }
    for (const Dim& d : s.shape().dims()) EXPECT_TRUE(std::find(red.begin(), red.end(), d.name) == red.end());
    check_grad([&](const std::vector<Array>& v) { return sum(v[0], red); }, {x});
    // Well separated values so finite differences do not cross a tie.
    std::vector<float> sep(24);
    for (int i = 0; i < 24; ++i) sep[size_t(i)] = float((i * 7) % 24) * 0.1f;
    Array xs = Array::from_floats(kS, sep);
    check_grad([&](const std::vector<Array>& v) { return max(v[0], red); }, {xs});
    check_grad([&](const std::vector<Array>& v) { return min(v[0], red); }, {xs});
    check_grad([&](const std::vector<Array>& v) { return mean(v[0], red); }, {x});
  }
  EXPECT_NEAR(sum(x).item(), naive_reduce(x, x.names(), 0)[0], 1e-5);
  EXPECT_NEAR(mean(x).item(), naive_reduce(x, x.names(), 0)[0] / 24, 1e-6);
}

TEST(Reduce, LargeSumsUseThreadsAndStayAccurate) {
  Array x = Array::full(Shape{{"a", 300}, {"b", 1000}}, 0.1);
  auto r = sum(x, {"b"}).to_floats();
  for (float v : r) EXPECT_NEAR(v, 100.0, 1e-4);
  auto c = sum(x, {"a"}).to_floats();
  for (float v : c) EXPECT_NEAR(v, 30.0, 1e-4);
  Array i = Array::full(Shape{{"n", 100000}}, 3, DType::i32);
  EXPECT_EQ(sum(i).item(), 300000);
}

TEST(Reduce, MaxGradientSplitsTies) {
  Array x = Array::from_vector<float>(Shape{{"n", 4}}, {1, 3, 3, 0});
  auto [o, g] = vjp([](const std::vector<Array>& v) { return std::vector<Array>{max(v[0])}; }, {x},
                    {Array::scalar(1.0)});
  EXPECT_EQ(g[0].to_floats(), (std::vector<float>{0, 0.5f, 0.5f, 0}));
}

TEST(Reduce, LogsumexpSoftmaxLogSoftmax) {
  Array x = rand_array(kS, 2, -3, 3);
  for (const std::string dim : {"batch", "length", "embed"}) {
    SCOPED_TRACE(dim);
    Array lse = logsumexp(x, {dim});
    Array sm = softmax(x, dim), ls = log_softmax(x, dim);
    ASSERT_EQ(sm.shape(), kS);
    for_each_index(kS, [&](const auto& i) {
      double z = 0;
      for (int64_t j = 0; j < x.dim(dim); ++j) {
        auto k = i;
        k[dim] = j;
        z += std::exp(at(x, k));
      }
      auto kept = i;
      kept.erase(dim);
      EXPECT_NEAR(at(lse, kept), std::log(z), 1e-5);
      EXPECT_NEAR(at(sm, i), std::exp(at(x, i)) / z, 1e-6);
      EXPECT_NEAR(at(ls, i), at(x, i) - std::log(z), 1e-5);
    });
    check_grad([&](const std::vector<Array>& v) { return logsumexp(v[0], {dim}); }, {x});
    check_grad([&](const std::vector<Array>& v) { return softmax(v[0], dim); }, {x});
    check_grad([&](const std::vector<Array>& v) { return log_softmax(v[0], dim); }, {x});
  }
  // Stable for huge logits, -inf masked entries get probability 0.
  Array big = Array::from_vector<float>(Shape{{"v", 3}}, {1000, 1000, -INFINITY});
  EXPECT_NEAR(logsumexp(big, {"v"}).item(), 1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(softmax(big, "v").to_floats(), (std::vector<float>{0.5f, 0.5f, 0.f}));
  Array bf = softmax(cast(x, DType::bf16), "embed");
  EXPECT_EQ(bf.dtype(), DType::bf16);
  EXPECT_LT(max_abs_diff(cast(bf, DType::f32), softmax(x, "embed")), 1e-2);
}

TEST(Reduce, ArgmaxAndCumsum) {
  Array x = Array::from_vector<float>(Shape{{"b", 2}, {"v", 4}}, {1, 5, 5, 2, -1, -3, 0, -2});
  Array a = argmax(x, "v");
  EXPECT_EQ(a.dtype(), DType::i32);
  EXPECT_EQ(a.shape(), (Shape{{"b", 2}}));
  EXPECT_EQ(a.to_ints(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(argmax(x, "b").to_ints(), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(cumsum(x, "v").to_floats(), (std::vector<float>{1, 6, 11, 13, -1, -4, -4, -6}));
  EXPECT_EQ(cumsum(x, "v", true).to_floats(), (std::vector<float>{0, 1, 6, 11, 0, -1, -4, -4}));
  EXPECT_EQ(cumsum(x, "v", false, true).to_floats(), (std::vector<float>{13, 12, 7, 2, -6, -5, -2, -2}));
  EXPECT_EQ(cumsum(x, "b").to_floats(), (std::vector<float>{1, 5, 5, 2, 0, 2, 5, 0}));
  Array y = rand_array(kS, 3);
  for (bool ex : {false, true})
    for (bool rev : {false, true})
      check_grad([&](const std::vector<Array>& v) { return cumsum(v[0], "length", ex, rev); }, {y});
}

TEST(Reduce, Misuse) {
  Array x = rand_array(kS, 1);
  expect_invalid([&] { sum(x, {"lenght"}); }, {"[sum]", "'lenght'", "batch=2"});
  expect_invalid([&] { sum(x, {"embed", "embed"}); }, {"[sum]", "'embed'", "twice"});
  expect_invalid([&] { softmax(x, "vocab"); }, {"[softmax]", "'vocab'"});
  expect_invalid([&] { mean(Array::zeros(Shape{{"n", 2}}, DType::i32)); }, {"[mean]", "int32"});
}

}  // namespace
}  // namespace t5x
