// Shared by the optimizer tests: the golden files written by
// scripts/golden/optim_jax.py and the deterministic params / grads both
// sides generate.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/array.h"
#include "ops/autodiff.h"

namespace t5x::optim_test {

// Integer hash -> [-scale, scale), exact in float64 then rounded (as the script).
inline std::vector<float> det_values(int64_t n, int leaf, int step, double scale) {
  std::vector<float> out(static_cast<size_t>(n));
  const uint64_t m32 = 0xFFFFFFFFull;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t h = (uint64_t(i) * 2654435761ull + uint64_t(leaf * 40503 + step * 97 + 12345)) & m32;
    h = ((h ^ (h >> 13)) * 0x5BD1E995ull) & m32;
    h = h ^ (h >> 15);
    const double u = double(h) / 4294967296.0;
    out[size_t(i)] = float((2.0 * u - 1.0) * scale);
  }
  return out;
}

struct Golden {
  nlohmann::json man;
  std::vector<float> bin;

  static const Golden& get() {
    static Golden g = load();
    return g;
  }
  static Golden load() {
    Golden g;
    const std::string dir = std::string(T5X_SOURCE_DIR) + "/tests/golden/optim/";
    std::ifstream jf(dir + "optim.json");
    if (!jf) throw std::runtime_error("missing " + dir + "optim.json (run scripts/golden/optim_jax.py)");
    g.man = nlohmann::json::parse(jf);
    std::ifstream bf(dir + "optim.bin", std::ios::binary | std::ios::ate);
    const auto bytes = static_cast<size_t>(bf.tellg());
    bf.seekg(0);
    g.bin.resize(bytes / 4);
    bf.read(reinterpret_cast<char*>(g.bin.data()), std::streamsize(bytes));
    return g;
  }

  Shape leaf_shape(size_t k) const {
    std::vector<Dim> dims;
    for (const auto& d : man["leaves"][k]["dims"]) dims.push_back({d[0].get<std::string>(), d[1].get<int64_t>()});
    return Shape(dims);
  }
  std::string leaf_path(size_t k) const { return man["leaves"][k]["path"].get<std::string>(); }

  ParamTree params(const std::vector<size_t>& leaves) const {
    ParamTree p;
    for (size_t k : leaves) {
      Shape s = leaf_shape(k);
      p[leaf_path(k)] = Array::from_vector(s, det_values(s.numel(), int(k), 0, man["leaves"][k]["param_scale"].get<double>()));
    }
    return p;
  }
  ParamTree grads(const std::vector<size_t>& leaves, int step, double mult) const {
    ParamTree g;
    for (size_t k : leaves) {
      Shape s = leaf_shape(k);
      const double scale = man["leaves"][k]["grad_scale"].get<double>() * mult;
      g[leaf_path(k)] = Array::from_vector(s, det_values(s.numel(), int(k), step + 1, scale));
    }
    return g;
  }
  std::vector<size_t> all_leaves() const {
    std::vector<size_t> v;
    for (size_t k = 0; k < man["leaves"].size(); ++k) v.push_back(k);
    return v;
  }
};

struct Diff {
  double max_abs = 0;  // largest |a - b|
  double max_rel = 0;  // largest |a - b| / max(|b|, 1e-30 + tiny floor)
  int64_t compared = 0;
};

// Compares `a` (local buffer) with the golden entry {offset, count, stride, shape}.
inline Diff compare(const nlohmann::json& e, const Array& a, const std::string& what) {
  Diff d;
  const auto& bin = Golden::get().bin;
  std::vector<int64_t> shape = e["shape"].get<std::vector<int64_t>>();
  EXPECT_EQ(shape, a.shape().sizes()) << what;
  const int64_t off = e["offset"], count = e["count"], stride = e["stride"];
  std::vector<float> v = a.to_floats();
  EXPECT_EQ(int64_t(v.size() + size_t(stride) - 1) / stride, count) << what;
  for (int64_t i = 0; i < count && i * stride < int64_t(v.size()); ++i) {
    const double want = bin[size_t(off + i)], got = v[size_t(i * stride)];
    const double ad = std::abs(got - want);
    d.max_abs = std::max(d.max_abs, ad);
    d.max_rel = std::max(d.max_rel, ad / std::max(std::abs(want), 1e-30));
    ++d.compared;
  }
  return d;
}

}  // namespace t5x::optim_test
