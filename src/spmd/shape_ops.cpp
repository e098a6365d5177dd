#include "spmd/shape_ops.h"

#include <optional>

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

// GSPMD's reshape sharding propagation: the reshape factors into blocks of
// consecutive dims with equal products (a merge, a split, or an unchanged
// dim). Within a block the shards are contiguous ranges of the flattened
// block when its split input dims are a fully split prefix (local size 1)
// plus at most one partly split dim; the same mesh axes, major first, then
// lay out the output block if each output dim takes whole axes until it is
// fully split. Returns nullopt (gather) otherwise.
std::optional<PartitionSpec> reshape_keeps_layout(const Mesh& mesh, const Shape& in, const PartitionSpec& spec,
                                                  const Shape& out) {
  PartitionSpec res = PartitionSpec::replicated(size_t(out.rank()));
  int i = 0, j = 0;
  const int ni = in.rank(), no = out.rank();
  while (i < ni || j < no) {
    // One block: [i, ie) -> [j, je) with equal products (size-1 dims join the
    // current block; a block ends when both sides moved and products agree).
    int ie = i, je = j;
    int64_t pi = 1, po = 1;
    do {
      if ((pi <= po && ie < ni) || je >= no) pi *= in[ie++].size;
      else po *= out[je++].size;
    } while ((pi != po || ie == i || je == j) && (ie < ni || je < no));
    if (pi != po) return std::nullopt;
    // The block's flattened shard axes, major first.
    std::vector<std::string> axes;
    bool partial = false;  // an earlier dim of the block has local size > 1
    for (int d = i; d < ie; ++d) {
      int64_t n = 1;
      for (const auto& a : spec.dims[size_t(d)]) {
        axes.push_back(a);
        n *= mesh.axis_size(a);
      }
      if (partial && n > 1) return std::nullopt;
      if (in[d].size / n > 1) partial = true;
    }
    int k = j;
    int64_t left = j < je ? out[j].size : 1;
    for (const auto& a : axes) {
      const int64_t s = mesh.axis_size(a);
      // Axes of size 1 split nothing: they stay with their neighbours (so the
      // spec still matches the rules' (e.g. ('expert', 'data')) or are dropped.
      if (s > 1)
        while (left == 1 && k + 1 < je) left = out[++k].size;
      if (s == 1 && k >= je) continue;
      if (k >= je || left % s != 0) return std::nullopt;
      res.dims[size_t(k)].push_back(a);
      left /= s;
    }
    i = ie;
    j = je;
  }
  return res;
}

}  // namespace

Array transpose(const Array& x, const std::vector<std::string>& order) {
  return one("transpose", {x}, {}, [&](const auto& v) { return t5x::transpose(v[0], order); });
}

Array reshape(const Array& x, const Shape& shape) {
  if (!lower::any_split({x})) return t5x::reshape(x, shape);
  check_mesh("reshape", x);
  if (shape.numel() != x.shape().numel())
    return t5x::reshape(x, shape);  // the plain op's error names the shapes
  const Mesh& mesh = context().mesh();
  if (auto out = reshape_keeps_layout(mesh, x.shape(), spec_of(x), shape)) {
    std::vector<Dim> loc = shape.dims();
    for (size_t d = 0; d < loc.size(); ++d) loc[d].size /= mesh.axes_size(out->dims[d]);
    Array r = t5x::reshape(to_local(x), Shape(std::move(loc)));
    return from_local(r, shape, context().sharding(*out));
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
