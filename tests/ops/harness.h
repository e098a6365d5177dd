// Conformance harness: random inputs, naive indexing, finite-difference vjp checks.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace t5x::testing {

// Uniform values in [lo, hi) from std::mt19937 (independent of t5x's PRNG).
inline Array rand_array(const Shape& s, uint32_t seed, float lo = -1.f, float hi = 1.f, DType dt = DType::f32) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(size_t(s.numel()));
  for (float& x : v) x = d(g);
  return Array::from_floats(s, v, dt);
}

// Flat row-major offset of a named index (every dim of s must be given).
inline int64_t offset(const Shape& s, const std::map<std::string, int64_t>& idx) {
  int64_t off = 0;
  auto st = s.strides();
  for (int d = 0; d < s.rank(); ++d) off += idx.at(s[d].name) * st[size_t(d)];
  return off;
}

// Calls f(idx) for every named index of shape s, in row-major order.
inline void for_each_index(const Shape& s, const std::function<void(const std::map<std::string, int64_t>&)>& f) {
  std::map<std::string, int64_t> idx;
  for (const Dim& d : s.dims()) idx[d.name] = 0;
  if (s.numel() == 0) return;
  while (true) {
    f(idx);
    int d = s.rank() - 1;
    for (; d >= 0; --d) {
      if (++idx[s[d].name] < s[d].size) break;
      idx[s[d].name] = 0;
    }
    if (d < 0) return;
  }
}

inline float at(const Array& a, const std::map<std::string, int64_t>& idx) {
  return a.to_floats()[size_t(offset(a.shape(), idx))];
}

// Checks the vjp of fn at `inputs` against central finite differences of
// L(x) = sum(fn(x) * w), w fixed random weights. Only floating inputs are
// perturbed. Uses f32 with step eps; tolerance atol + rtol * |numeric|.
inline void check_grad(const std::function<Array(const std::vector<Array>&)>& fn, const std::vector<Array>& inputs,
                       double eps = 1e-2, double rtol = 2e-2, double atol = 2e-3, uint32_t seed = 99) {
  Array out0 = fn(inputs);
  Array w = rand_array(out0.shape(), seed, 0.5f, 1.5f, out0.dtype());
  auto loss = [&](const std::vector<Array>& xs) -> double {
    NoGradGuard g;
    Array o = fn(xs);
    auto a = cast(o, DType::f32).to_floats();
    auto b = w.to_floats();
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
    return s;
  };
  auto [outs, grads] = vjp([&](const std::vector<Array>& xs) { return std::vector<Array>{fn(xs)}; }, inputs, {w});
  ASSERT_EQ(grads.size(), inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!is_floating(inputs[k].dtype())) continue;
    ASSERT_TRUE(grads[k].valid()) << "no gradient for input " << k;
    ASSERT_EQ(grads[k].shape(), inputs[k].shape()) << "input " << k;
    auto base = inputs[k].to_floats();
    auto g = grads[k].to_floats();
    for (size_t i = 0; i < base.size(); ++i) {
      std::vector<Array> xp = inputs, xm = inputs;
      auto vp = base, vm = base;
      vp[i] += float(eps);
      vm[i] -= float(eps);
      xp[k] = Array::from_floats(inputs[k].shape(), vp, inputs[k].dtype());
      xm[k] = Array::from_floats(inputs[k].shape(), vm, inputs[k].dtype());
      double num = (loss(xp) - loss(xm)) / (2 * eps);
      EXPECT_NEAR(g[i], num, atol + rtol * std::fabs(num)) << "input " << k << " element " << i;
    }
  }
}

inline void expect_close(const Array& got, const Array& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape()) << got.shape().to_string() << " vs " << want.shape().to_string();
  auto a = got.to_floats(), b = want.to_floats();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(a[i], b[i], tol * (1 + std::fabs(b[i]))) << "element " << i;
}

// Runs f and checks it throws std::invalid_argument whose message contains every piece.
inline void expect_invalid(const std::function<void()>& f, const std::vector<std::string>& pieces) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    std::string m = e.what();
    for (const auto& p : pieces) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
  }
}

}  // namespace t5x::testing
