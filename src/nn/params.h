// Parameter declarations and t5x's initialisers.
//
// A ParamSpec names one parameter with its t5x path
// ("encoder/layers_0/attention/query/kernel"), its GLOBAL shape whose dim
// names ARE the parameter's logical axis names (flax param_with_axes), e.g.
// [embed=512, joined_kv=384], and its initialiser. Models are written against
// these names, so the mesh layer can shard each parameter through
// logical_axis_rules (mesh/logical_axis_rules.h) without model code.
//
// Initialisers reproduce t5x/examples/t5 (t5x.md 4; jax.nn.initializers):
//   ones                                  RMSNorm scale
//   normal(stddev)                        token embedding (stddev 1.0)
//   variance_scaling(scale, mode, dist)   dense kernels and the relpos table:
//     fan_in = size of the first dim, fan_out = size of the last dim of the
//     2-D kernel (t5x DenseGeneral initialises the flat [in, out] kernel;
//     for the relpos table [heads, relpos_buckets] these are heads / buckets),
//     variance = scale / fan;   normal: N(0, variance);
//     truncated_normal: truncated to (-2, 2) and divided by .87962566103423978;
//     uniform: U(-sqrt(3 variance), sqrt(3 variance)).
//   `divisor` divides the result (query kernels: sqrt(head_dim), which folds
//   T5's 1/sqrt(d) attention scaling into the initialisation).
// Keys are counter based: param `name` draws from fold_in(root, fnv1a32(name)),
// so the values depend on (root key, name) only — not on the mesh, the order
// of initialisation or the other parameters.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/array.h"
#include "core/random.h"
#include "ops/autodiff.h"

namespace t5x::nn {

struct InitSpec {
  enum class Kind { ones, zeros, normal, variance_scaling };
  Kind kind = Kind::zeros;
  double stddev = 1.0;                         // normal
  double scale = 1.0;                          // variance_scaling
  std::string mode = "fan_in";                 // fan_in | fan_out | fan_avg
  std::string distribution = "normal";         // normal | truncated_normal | uniform
  double divisor = 1.0;

  static InitSpec ones() { return {Kind::ones}; }
  static InitSpec normal(double stddev) { InitSpec s{Kind::normal}; s.stddev = stddev; return s; }
  static InitSpec variance_scaling(double scale, std::string mode, std::string distribution, double divisor = 1.0) {
    InitSpec s{Kind::variance_scaling};
    s.scale = scale; s.mode = std::move(mode); s.distribution = std::move(distribution); s.divisor = divisor;
    return s;
  }
};

struct ParamSpec {
  std::string name;  // t5x path
  Shape shape;       // dim names = logical axis names
  InitSpec init;
  DType dtype = DType::f32;  // t5x keeps parameters in float32
};
using ParamSpecs = std::vector<ParamSpec>;
// name -> logical axis names, parallel to a ParamTree.
using LogicalAxes = std::map<std::string, std::vector<std::string>>;

// FNV-1a 32-bit hash of a parameter name (the fold_in data).
uint32_t name_hash(const std::string& name);
// One parameter, freshly initialised.
Array init_param(const ParamSpec& spec, const PRNGKey& root);
// All parameters. Throws std::invalid_argument("[init_params] ...") on duplicate names.
ParamTree init_params(const ParamSpecs& specs, const PRNGKey& root);
LogicalAxes logical_axes(const ParamSpecs& specs);
// Number of parameters (from shapes; allocates nothing).
int64_t count_params(const ParamSpecs& specs);

// Throws std::invalid_argument("[params] missing parameter 'x'") if absent.
const Array& get(const ParamTree& params, const std::string& name);

}  // namespace t5x::nn
