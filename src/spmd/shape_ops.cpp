#include "spmd/shape_ops.h"

#include "core/error.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "spmd/context.h"
#include "spmd/elementwise.h"
#include "spmd/local.h"
#include "spmd/lower.h"
#include "spmd/reshard.h"

namespace t5x::spmd {
namespace {

Array one(const char* op, const std::vector<Array>& xs, const std::vector<std::string>& whole,
          const std::function<Array(const std::vector<Array>&)>& f) {
  return layout_op(op, xs, whole, [&](const std::vector<Array>& v) { return std::vector<Array>{f(v)}; })[0];
}

std::vector<std::string> keys(const std::map<std::string, int64_t>& m) {
  std::vector<std::string> k;
  for (const auto& [n, v] : m) k.push_back(n);
  return k;
}

}  // namespace

Array transpose(const Array& x, const std::vector<std::string>& order) {
  return one("transpose", {x}, {}, [&](const auto& v) { return t5x::transpose(v[0], order); });
}

Array reshape(const Array& x, const Shape& shape) {
  if (!lower::any_split({x})) return t5x::reshape(x, shape);
  check_mesh("reshape", x);
  const PartitionSpec spec = spec_of(x);
  int last = -1;
  for (int i = 0; i < x.rank(); ++i)
    if (!spec.dims[size_t(i)].empty()) last = i;
  bool prefix = last < shape.rank();
  for (int i = 0; i <= last && prefix; ++i) prefix = shape[i] == x.shape()[i];
  // MTF splittable reshape: the last split dim becomes several dims whose
  // major one keeps the split, e.g. a model-split [embed, joined_kv] kernel
  // -> [embed, heads, kv] with heads split: local, no communication.
  if (!prefix && last >= 0 && last < shape.rank()) {
    bool same = true;
    for (int i = 0; i < last && same; ++i) same = shape[i] == x.shape()[i];
    const int64_t whole = x.shape()[last].size, n = whole / x.local_shape()[last].size;
    int64_t prod = 1;
    int j = last;
    for (; j < shape.rank() && prod < whole; ++j) prod *= shape[j].size;
    if (same && prod == whole && j - last > 1 && shape[last].size % n == 0) {
      std::vector<Dim> loc = shape.dims();
      PartitionSpec out = PartitionSpec::replicated(size_t(shape.rank()));
      for (int i = 0; i < last; ++i) {
        loc[size_t(i)].size = x.local_shape()[i].size;
        out.dims[size_t(i)] = spec.dims[size_t(i)];
      }
      loc[size_t(last)].size = shape[last].size / n;
      out.dims[size_t(last)] = spec.dims[size_t(last)];
      Array r = t5x::reshape(to_local(x), Shape(std::move(loc)));
      return from_local(r, shape, context().sharding(out));
    }
  }
  if (prefix) {
    std::vector<Dim> loc = shape.dims();
    PartitionSpec out = PartitionSpec::replicated(size_t(shape.rank()));
    for (int i = 0; i <= last; ++i) {
      loc[size_t(i)].size = x.local_shape()[i].size;
      out.dims[size_t(i)] = spec.dims[size_t(i)];
    }
    Array r = t5x::reshape(to_local(x), Shape(std::move(loc)));
    return from_local(r, shape, context().sharding(out));
  }
  Array full = reshard(x, PartitionSpec::replicated(size_t(x.rank())));
  Array r = t5x::reshape(to_local(full), shape);
  return from_local(r, shape, context().sharding(PartitionSpec::replicated(size_t(shape.rank()))));
}

Array broadcast_to(const Array& x, const Shape& shape) {
  return one("broadcast_to", {x}, {}, [&](const auto& v) {
    std::vector<Dim> dims = shape.dims();
    for (auto& d : dims)
      if (v[0].has_dim(d.name)) d.size = v[0].dim(d.name);
    return t5x::broadcast_to(v[0], Shape(std::move(dims)));
  });
}

Array slice(const Array& x, const std::string& dim, int64_t start, int64_t size) {
  return one("slice", {x}, {dim}, [&](const auto& v) { return t5x::slice(v[0], dim, start, size); });
}

Array pad(const Array& x, const std::string& dim, int64_t lo, int64_t hi, double value) {
  return one("pad", {x}, {dim}, [&](const auto& v) { return t5x::pad(v[0], dim, lo, hi, value); });
}

Array concat(const std::vector<Array>& xs, const std::string& dim) {
  return one("concat", xs, {dim}, [&](const auto& v) { return t5x::concat(v, dim); });
}

Array stack(const std::vector<Array>& xs, const std::string& name, int axis) {
  return one("stack", xs, {name}, [&](const auto& v) { return t5x::stack(v, name, axis); });
}

Array expand_dims(const Array& x, const std::string& name, int axis) {
  return one("expand_dims", {x}, {name}, [&](const auto& v) { return t5x::expand_dims(v[0], name, axis); });
}

Array squeeze(const Array& x, const std::string& name) {
  return one("squeeze", {x}, {name}, [&](const auto& v) { return t5x::squeeze(v[0], name); });
}

Array dynamic_slice(const Array& x, const std::map<std::string, int64_t>& starts,
                    const std::map<std::string, int64_t>& sizes) {
  std::vector<std::string> whole = keys(starts);
  for (const auto& k : keys(sizes)) whole.push_back(k);
  return one("dynamic_slice", {x}, whole, [&](const auto& v) { return t5x::dynamic_slice(v[0], starts, sizes); });
}

Array dynamic_update_slice(const Array& operand, const Array& update, const std::map<std::string, int64_t>& starts) {
  std::vector<std::string> whole = keys(starts);
  for (const Dim& d : update.shape().dims())
    if (operand.has_dim(d.name) && operand.dim(d.name) != d.size) whole.push_back(d.name);
  return one("dynamic_update_slice", {operand, update}, whole,
             [&](const auto& v) { return t5x::dynamic_update_slice(v[0], v[1], starts); });
}

Array cumsum(const Array& x, const std::string& dim, bool exclusive, bool reverse) {
  return one("cumsum", {x}, {dim}, [&](const auto& v) { return t5x::cumsum(v[0], dim, exclusive, reverse); });
}

Array argmax(const Array& x, const std::string& dim) {
  return one("argmax", {x}, {dim}, [&](const auto& v) { return t5x::argmax(v[0], dim); });
}

}  // namespace t5x::spmd
