// Each differentiable collective's vjp is its transpose: for a linear f and
// any cotangent c, <f(x), c> = <x, vjp(c)>, where an inner product over
// varying values sums over the group and one over invariant values is taken
// once. Plus forward values against explicit expectations.
#include "spmd_test_util.h"

namespace t5x::testing_spmd {
namespace {

using spmd::Axes;

double dot(const Array& a, const Array& b) {
  std::vector<float> x = a.to_floats(), y = b.to_floats();
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += double(x[i]) * double(y[i]);
  return s;
}

double group_sum(spmd::Context& c, const Axes& axes, double v) {
  double out = 0;
  c.over(axes).all_reduce(&v, &out, 1, CommDtype::kF64);
  return out;
}

struct Case {
  std::string name;
  bool in_varying, out_varying;
  Shape in;
  std::function<Array(const Array&)> f;
};

TEST(SpmdCollectives, VjpIsTranspose) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    const Mesh& m = ctx->mesh();
    std::vector<Axes> sets = {{"data"}, {"model"}, {"data", "model"}, {"model", "data"}};
    for (const Axes& axes : sets) {
      const int64_t k = m.axes_size(axes);
      const uint32_t dev = uint32_t(m.device_id());
      Shape s{{"a", 2 * k}, {"b", 3}};
      std::vector<std::pair<int, int>> ring;
      for (int i = 0; i < int(k); ++i) ring.emplace_back(i, int((i + 1) % k));
      std::vector<Case> cases = {
          {"all_reduce", true, false, s, [&](const Array& x) { return spmd::all_reduce(x, axes); }},
          {"pvary", false, true, s, [&](const Array& x) { return spmd::pvary(x, axes); }},
          {"all_gather", true, true, s, [&](const Array& x) { return spmd::all_gather(x, "b", axes); }},
          {"all_gather_invariant", true, false, s,
           [&](const Array& x) { return spmd::all_gather_invariant(x, "a", axes); }},
          {"reduce_scatter", true, true, s, [&](const Array& x) { return spmd::reduce_scatter(x, "a", axes); }},
          {"all_to_all", true, true, s, [&](const Array& x) { return spmd::all_to_all(x, "a", "b", axes); }},
          {"ppermute", true, true, s, [&](const Array& x) { return spmd::ppermute(x, axes, ring); }},
          {"axis_slice", false, true, s, [&](const Array& x) { return spmd::axis_slice(x, "a", axes); }},
      };
      for (const auto& c : cases) {
        SCOPED_TRACE(mesh_name(*ctx) + " " + c.name + " over " + axes[0] + (axes.size() > 1 ? "," + axes[1] : ""));
        Array x = randn(c.in, c.in_varying ? 100 + dev : 7);
        Array y0;
        {
          NoGradGuard g;
          y0 = c.f(x);
        }
        Array ybar = randn(y0.shape(), c.out_varying ? 300 + dev : 9);
        auto [outs, grads] = vjp([&](const std::vector<Array>& v) { return std::vector<Array>{c.f(v[0])}; }, {x}, {ybar});
        double lhs = dot(outs[0], ybar), rhs = dot(x, grads[0]);
        if (c.out_varying) lhs = group_sum(*ctx, axes, lhs);
        if (c.in_varying) rhs = group_sum(*ctx, axes, rhs);
        EXPECT_NEAR(lhs, rhs, 1e-4 * (1 + std::fabs(lhs)));
      }
    }
  }
}

TEST(SpmdCollectives, ForwardValues) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    const Mesh& m = ctx->mesh();
    for (const Axes& axes : std::vector<Axes>{{"data"}, {"model"}, {"model", "data"}}) {
      SCOPED_TRACE(mesh_name(*ctx) + " over " + axes[0]);
      const int64_t k = m.axes_size(axes), r = spmd::group_rank(axes);
      // Member r holds [r*10 + i] along 'a' (size 2k).
      std::vector<float> v;
      for (int64_t i = 0; i < 2 * k; ++i) v.push_back(float(r * 10 + i));
      Array x = Array::from_vector(Shape{{"a", 2 * k}}, v);
      Array ag = spmd::all_gather(x, "a", axes);
      ASSERT_EQ(ag.dim("a"), 2 * k * k);
      for (int64_t j = 0; j < k; ++j)
        for (int64_t i = 0; i < 2 * k; ++i) EXPECT_EQ(ag.to_floats()[size_t(j * 2 * k + i)], float(j * 10 + i));
      Array rs = spmd::reduce_scatter(x, "a", axes);
      ASSERT_EQ(rs.dim("a"), 2);
      for (int64_t i = 0; i < 2; ++i) {
        float want = 0;
        for (int64_t j = 0; j < k; ++j) want += float(j * 10 + r * 2 + i);
        EXPECT_EQ(rs.to_floats()[size_t(i)], want);
      }
      Array ar = spmd::all_reduce(x, axes, ReduceOp::kMax);
      EXPECT_EQ(ar.to_floats()[0], float((k - 1) * 10));
    }
  }
}

}  // namespace
}  // namespace t5x::testing_spmd
