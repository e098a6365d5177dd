#include "nn/params.h"

#include <cmath>
#include <set>
#include <stdexcept>

#include "ops/elementwise.h"
#include "ops/random.h"

namespace t5x::nn {

uint32_t name_hash(const std::string& name) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name) {
    h ^= c;
    h *= 16777619u;
  }
  return h;
}

namespace {
double fan(const ParamSpec& s) {
  const auto& d = s.shape.dims();
  if (d.empty()) return 1.0;
  // Flat 2-D view [first dim, rest] as t5x DenseGeneral: in = first, out = rest.
  double in = double(d.front().size), out = 1.0;
  for (size_t i = 1; i < d.size(); ++i) out *= double(d[i].size);
  if (d.size() == 1) out = in;
  if (s.init.mode == "fan_in") return in;
  if (s.init.mode == "fan_out") return out;
  if (s.init.mode == "fan_avg") return (in + out) / 2.0;
  throw std::invalid_argument("[init_param] unknown variance_scaling mode '" + s.init.mode + "' for " + s.name);
}
}  // namespace

Array init_param(const ParamSpec& s, const PRNGKey& root) {
  PRNGKey key = fold_in(root, name_hash(s.name));
  Array out;
  switch (s.init.kind) {
    case InitSpec::Kind::ones: return Array::ones(s.shape, s.dtype);
    case InitSpec::Kind::zeros: return Array::zeros(s.shape, s.dtype);
    case InitSpec::Kind::normal: out = mul(normal(key, s.shape), s.init.stddev); break;
    case InitSpec::Kind::variance_scaling: {
      double variance = s.init.scale / fan(s);
      const std::string& d = s.init.distribution;
      if (d == "normal") {
        out = mul(normal(key, s.shape), std::sqrt(variance));
      } else if (d == "truncated_normal") {
        // jax: stddev of the standard normal truncated to (-2, 2).
        out = mul(truncated_normal(key, -2.0, 2.0, s.shape), std::sqrt(variance) / .87962566103423978);
      } else if (d == "uniform") {
        double lim = std::sqrt(3.0 * variance);
        out = uniform(key, s.shape, -lim, lim);
      } else {
        throw std::invalid_argument("[init_param] unknown distribution '" + d + "' for " + s.name);
      }
      break;
    }
  }
  if (s.init.divisor != 1.0) out = div(out, s.init.divisor);
  return s.dtype == DType::f32 ? out : cast(out, s.dtype);
}

ParamTree init_params(const ParamSpecs& specs, const PRNGKey& root) {
  ParamTree t;
  for (const auto& s : specs) {
    if (t.count(s.name)) throw std::invalid_argument("[init_params] duplicate parameter '" + s.name + "'");
    t[s.name] = init_param(s, root);
  }
  return t;
}

LogicalAxes logical_axes(const ParamSpecs& specs) {
  LogicalAxes a;
  for (const auto& s : specs) a[s.name] = s.shape.names();
  return a;
}

int64_t count_params(const ParamSpecs& specs) {
  int64_t n = 0;
  for (const auto& s : specs) n += s.shape.numel();
  return n;
}

const Array& get(const ParamTree& params, const std::string& name) {
  auto it = params.find(name);
  if (it == params.end()) throw std::invalid_argument("[params] missing parameter '" + name + "'");
  return it->second;
}

}  // namespace t5x::nn
