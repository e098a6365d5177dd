// Hook from the plain ops to a sharded lowering (installed by spmd::install()).
//
// Every public op checks, before validation, whether some valid input is split
// over the mesh (!is_fully_local()). If so and a dispatcher is installed, the
// op returns dispatcher(op_name, inputs, args) instead of running its local
// kernel; the dispatcher's own ops then record on the autodiff tape. Without
// a dispatcher the op throws "[op] sharded inputs not supported yet".
// Op names and the packing of OpArgs per op are listed in spmd/dispatch.h.
// The check costs one pointer load on the single-device path.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/array.h"

namespace t5x {

struct AttentionOptions;  // ops/fused.h

// The non-array arguments of an op; each op uses the few fields it needs.
struct OpArgs {
  std::vector<std::string> dims;
  std::string dim, name;
  int64_t k = 0;
  std::vector<int64_t> ints;
  double scalar = 0, scalar2 = 0;
  DType dtype = DType::f32;
  Shape shape;
  std::map<std::string, int64_t> starts, sizes;
  const AttentionOptions* attention = nullptr;
};

using ShardedDispatch = std::vector<Array> (*)(std::string_view op, const std::vector<Array>& inputs,
                                               const OpArgs& args);

// Installs (or, with nullptr, removes) the dispatcher. Not synchronised with
// running ops: install once at start-up.
void set_sharded_dispatch(ShardedDispatch f);
ShardedDispatch sharded_dispatch();  // null until installed

namespace detail {
inline bool is_split(const Array& x) { return x.valid() && !x.is_fully_local(); }
// True when a dispatcher is installed and some valid input is split.
template <typename... A>
inline bool any_sharded(const A&... xs) {
  return sharded_dispatch() != nullptr && (is_split(xs) || ...);
}
inline bool any_sharded_in(const std::vector<Array>& xs) {
  if (sharded_dispatch() == nullptr) return false;
  for (const Array& x : xs)
    if (is_split(x)) return true;
  return false;
}
// Calls the installed dispatcher and returns its first output.
Array dispatch1(std::string_view op, std::vector<Array> inputs, const OpArgs& args = {});
std::vector<Array> dispatch_n(std::string_view op, std::vector<Array> inputs, const OpArgs& args, size_t n);
}  // namespace detail

}  // namespace t5x
