#include "ops/detail.h"

#include "backend/device.h"
#include "ops/autodiff.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace t5x::detail {

void check_local(const char* op, const std::vector<Array>& xs) {
  for (const Array& x : xs) {
    if (!x.valid()) continue;
    if (!x.is_fully_local())
      throw_invalid(op, "sharded inputs not supported yet (got " + describe(x) +
                            " split over the mesh); reshard to replicated first");
  }
}

void no_cuda_kernel(const char* op, const std::vector<Array>& inputs) {
  std::string where = "cuda";
  for (const Array& in : inputs)
    if (in.valid()) {
      where = in.device().to_string();
      break;
    }
  throw_invalid(op, std::string("has no CUDA kernel in this build (inputs on ") + where + ")" +
                        (backend::cuda_available() ? "" : "; this build has no CUDA backend"));
}

void require_cpu(const char* op, const std::vector<Array>& inputs) {
  for (const Array& in : inputs)
    if (in.valid() && in.device().kind != DeviceKind::cpu) no_cuda_kernel(op, inputs);
}

bool can_write_over(const Array& x, const std::vector<Array>& others) {
  if (!x.valid() || !x.is_sole_owner() || is_recording() || x.sharding().mesh || x.device() != Device{}) return false;
  for (const Array& o : others)
    if (o.valid() && (o.sharding().mesh || o.device() != Device{})) return false;
  return true;
}

Array make_output(const Shape& shape, DType dtype, const std::vector<Array>& inputs, bool zero) {
  for (const Array& x : inputs) {
    if (x.valid() && x.sharding().mesh && !x.sharding().is_single_device()) {
      Sharding s{x.sharding().mesh, PartitionSpec::replicated(size_t(shape.rank()))};
      return Array(shape, dtype, s, x.device(), zero);
    }
  }
  return Array(shape, dtype, {}, inputs.empty() || !inputs[0].valid() ? Device{} : inputs[0].device(), zero);
}

std::string describe(const Array& x) {
  if (!x.valid()) return "null";
  return std::string(dtype_name(x.dtype())) + x.shape().to_string();
}

void check_floating(const char* op, const Array& x, const char* what) {
  if (!is_floating(x.dtype()))
    throw_invalid(op, std::string("expected a floating dtype for ") + what + ", got " + describe(x));
}

void check_same_dtype(const char* op, const Array& a, const Array& b, const char* an, const char* bn) {
  if (a.dtype() != b.dtype())
    throw_invalid(op, std::string("dtype mismatch: ") + an + " is " + describe(a) + " but " + bn + " is " +
                          describe(b) + "; cast one of them");
}

int require_dim(const char* op, const Array& x, const std::string& dim, const char* what) {
  int i = x.shape().index(dim);
  if (i < 0) throw_invalid(op, "no dim '" + dim + "' in " + what + " " + describe(x));
  return i;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  std::vector<Dim> dims = a.dims();
  for (const Dim& d : b.dims()) {
    int i = a.index(d.name);
    if (i < 0) {
      dims.push_back(d);
    } else if (a[i].size != d.size) {
      throw_invalid(op, "dim '" + d.name + "' has size " + std::to_string(a[i].size) + " in " + a.to_string() +
                            " but " + std::to_string(d.size) + " in " + b.to_string());
    }
  }
  return Shape(std::move(dims));
}

std::vector<int64_t> strides_over(const Shape& in, const Shape& out) {
  std::vector<int64_t> in_strides = in.strides();
  std::vector<int64_t> r(size_t(out.rank()), 0);
  for (int d = 0; d < out.rank(); ++d) {
    int i = in.index(out[d].name);
    if (i >= 0) r[size_t(d)] = in_strides[size_t(i)];
  }
  return r;
}

Array unbroadcast(const Array& g, const Shape& target) {
  std::vector<std::string> extra;
  for (const Dim& d : g.shape().dims())
    if (!target.has(d.name)) extra.push_back(d.name);
  Array r = extra.empty() ? g : sum(g, extra);
  if (r.shape() != target) r = transpose(r, target.names());
  return r;
}

}  // namespace t5x::detail
