// Shared helpers of the distributed spmd tests (run under mpiexec -np N).
// Assertions that might differ between ranks are non-fatal so every rank
// keeps calling the same collectives and a failure never becomes a hang.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mesh/logical_axis_rules.h"
#include "ops/ops.h"
#include "spmd/spmd.h"

namespace t5x::testing_spmd {

extern std::shared_ptr<Communicator> g_world;

// Contexts for the meshes with as many devices as processes: 1 -> (1x1);
// 2 -> (2x1) (1x2); 4 -> (2x2); 8 -> (4x2). Built once (communicator splits
// are collective).
const std::vector<std::shared_ptr<spmd::Context>>& contexts();
std::string mesh_name(const spmd::Context& c);

struct Preset {
  int act, param;
};
inline const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = {{1, 1}, {2, 1}, {1, 2}, {2, 2}};
  return p;
}

// Deterministic host array, identical on every rank.
inline Array randn(const Shape& s, uint32_t seed) { return normal(prng_key(seed), s); }

// max |a - b| / max(max |b|, 1e-3): the relative error of a against b.
inline double rel_err(const Array& a, const Array& b) {
  std::vector<float> x = a.to_floats(), y = b.to_floats();
  if (x.size() != y.size()) return 1e9;
  double m = 0, s = 1e-3;
  for (size_t i = 0; i < x.size(); ++i) {
    m = std::max(m, double(std::fabs(x[i] - y[i])));
    s = std::max(s, double(std::fabs(y[i])));
  }
  return m / s;
}

// Bytes sent by this process so far (all groups of the context).
inline double sent_bytes(spmd::Context& c) { return c.groups().total_counters().total_bytes(); }

}  // namespace t5x::testing_spmd
