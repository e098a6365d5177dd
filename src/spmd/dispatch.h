// Dispatch of the plain ops (ops/) to their sharded lowerings.
//
// The op layer keeps one small hook: when some input of an op is split over
// the mesh (!is_fully_local()), it calls the installed dispatcher with the op
// name, the array inputs and the non-array arguments, and returns its outputs:
//
//   // ops/detail.h
//   struct OpArgs { std::vector<std::string> dims; std::string dim, name;
//                   int64_t k = 0; double scalar = 0; DType dtype = DType::f32; };
//   using ShardedDispatch = std::vector<Array> (*)(std::string_view op,
//                                                  const std::vector<Array>& inputs,
//                                                  const OpArgs& args);
//   void set_sharded_dispatch(ShardedDispatch f);   // spmd::install() calls it
//   ShardedDispatch sharded_dispatch();             // null until installed
//
// dispatch() below implements that contract for: add sub mul div maximum
// minimum (inputs a, b) and where (cond, x, y), in the plain ops' argument
// order; every unary op by name (neg abs sign
// square exp log tanh sqrt rsqrt sigmoid relu gelu cast logical_not isnan
// isfinite; scalar ops "add_scalar" "mul_scalar" ... with args.scalar);
// sum mean max min logsumexp (args.dims); softmax log_softmax (args.dim);
// einsum (args.dims = output dims); one_hot (args.k = depth, args.name,
// args.dims = mesh axes of the new dim); take (args.dim); top_k (args.k,
// args.dim; two outputs); reshard is not an op of ops/. Unknown names throw
// "[spmd] no sharded lowering for op 'x'".
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/array.h"

namespace t5x::spmd {

struct OpArgs {
  std::vector<std::string> dims;
  std::string dim, name;
  int64_t k = 0;
  double scalar = 0;
  DType dtype = DType::f32;
};

std::vector<Array> dispatch(std::string_view op, const std::vector<Array>& inputs, const OpArgs& args);

// Registers dispatch() with the op layer once it has the hook above; until
// then it only records the request (installed() is true) and the spmd
// functions are called directly.
void install();
bool installed();

}  // namespace t5x::spmd
