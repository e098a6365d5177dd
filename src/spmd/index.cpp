#include "spmd/index.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "spmd/context.h"
#include "spmd/local.h"
#include "spmd/lower.h"
#include "spmd/reshard.h"

namespace t5x::spmd {
namespace {

Axes in_mesh_order(const Axes& axes) {
  Axes r;
  for (const auto& n : context().mesh().axis_names())
    if (std::find(axes.begin(), axes.end(), n) != axes.end()) r.push_back(n);
  return r;
}

}  // namespace

Array one_hot(const Array& ids, int64_t depth, const std::string& name, const Axes& axes, DType dtype) {
  if (!lower::any_split({ids}) && group_size(axes) == 1) {
    Array r = t5x::one_hot(ids, depth, name, dtype);
    return r;
  }
  lower::check_meshes("one_hot", {ids});
  const int64_t k = group_size(axes);
  if (depth % k != 0)
    throw_invalid("one_hot", "depth " + std::to_string(depth) + " is not divisible by " + std::to_string(k) +
                                 ", the size of the mesh axes splitting '" + name + "'");
  lower::Assignment a;
  lower::absorb(a, ids.shape(), spec_of(ids));
  for (const auto& ax : lower::used(a))
    if (std::find(axes.begin(), axes.end(), ax) != axes.end())
      throw_invalid("one_hot", "mesh axis '" + ax + "' splits both ids " + describe_sharded(ids) + " and '" + name + "'");
  if (!axes.empty()) a[name] = axes;
  const int64_t dl = depth / k, off = group_rank(axes) * dl;
  Array lids = to_local(ids);
  Array r = t5x::one_hot(off ? t5x::sub(lids, double(off)) : lids, dl, name, dtype);
  std::vector<Dim> dims = ids.shape().dims();
  dims.push_back({name, depth});
  return lower::finish(r, Shape(std::move(dims)), a);
}

Array take(const Array& x, const Array& ids, const std::string& dim) {
  if (!lower::any_split({x, ids})) return t5x::take(x, ids, dim);
  lower::check_meshes("take", {x, ids});
  if (!x.has_dim(dim)) throw_invalid("take", "no dim '" + dim + "' in x " + describe_sharded(x));
  // ids with a dim named like the taken one (rows picked by row ids, e.g. a
  // decode cache's beam reordering): the two layouts are different dims.
  if (ids.has_dim(dim)) {
    const std::string tmp = dim + "~ids";
    return spmd::rename(spmd::take(x, spmd::rename(ids, {{dim, tmp}}), dim), {{tmp, dim}});
  }
  lower::Assignment a;
  lower::absorb(a, ids.shape(), spec_of(ids));
  lower::absorb(a, x.shape(), spec_of(x));
  Array lx = lower::prepare(x, a), lids = lower::prepare(ids, a);
  Axes vocab_axes = a.count(dim) ? a[dim] : Axes{};
  Array r;
  if (group_size(vocab_axes) == 1) {
    r = t5x::take(lx, lids, dim);
  } else {
    const int64_t vl = lx.dim(dim), off = group_rank(vocab_axes) * vl;
    Array sh = t5x::sub(lids, double(off));
    Array mask = t5x::logical_and(t5x::ge(sh, 0.0), t5x::lt(sh, double(vl)));
    Array clipped = t5x::where(mask, sh, 0.0);
    r = t5x::mul(t5x::take(lx, clipped, dim), t5x::cast(mask, x.dtype()));
    r = all_reduce(r, in_mesh_order(nontrivial(vocab_axes)));
  }
  a.erase(dim);
  std::vector<Dim> dims;
  for (const Dim& d : x.shape().dims()) {
    if (d.name == dim) {
      for (const Dim& e : ids.shape().dims()) dims.push_back(e);
    } else {
      dims.push_back(d);
    }
  }
  return lower::finish(r, Shape(std::move(dims)), a);
}

std::pair<Array, Array> top_k(const Array& x, int64_t k, const std::string& dim) {
  if (!lower::any_split({x})) return t5x::top_k(x, k, dim);
  lower::check_meshes("top_k", {x});
  if (!x.has_dim(dim)) throw_invalid("top_k", "no dim '" + dim + "' in x " + describe_sharded(x));
  lower::Assignment a;
  lower::absorb(a, x.shape(), spec_of(x));
  Array lx = lower::prepare(x, a);
  Axes axes = a.count(dim) ? a[dim] : Axes{};
  a.erase(dim);
  std::vector<Dim> dims = x.shape().dims();
  for (auto& d : dims)
    if (d.name == dim) d.size = k;
  Shape out(std::move(dims));
  if (group_size(axes) == 1) {
    auto [v, i] = t5x::top_k(lx, k, dim);
    return {lower::finish(v, out, a), lower::finish(i, out, a)};
  }
  const int64_t dl = lx.dim(dim);
  if (k > dl)
    throw_invalid("top_k", "k=" + std::to_string(k) + " exceeds the local size " + std::to_string(dl) + " of dim '" +
                               dim + "' in " + describe_sharded(x));
  auto [lv, li] = t5x::top_k(lx, k, dim);
  Array gi = all_gather_invariant(t5x::add(li, double(group_rank(axes) * dl)), dim, axes);
  Array gv = all_gather_invariant(lv, dim, axes);
  auto [v, sel] = t5x::top_k(gv, k, dim);
  // Global index of each selected candidate: idx[.., j, ..] = gi[.., sel[.., j, ..], ..].
  Array idx(sel.shape(), DType::i32, {}, {}, false);
  const int di = sel.shape().index(dim);
  int64_t pre = 1, post = 1;
  for (int i = 0; i < sel.rank(); ++i) {
    if (i < di) pre *= sel.shape()[i].size;
    if (i > di) post *= sel.shape()[i].size;
  }
  const int64_t kk = gi.shape()[di].size;
  const int32_t* s = sel.data<int32_t>();
  const int32_t* g = gi.data<int32_t>();
  int32_t* o = idx.data<int32_t>();
  for (int64_t p = 0; p < pre; ++p)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t q = 0; q < post; ++q) {
        int64_t src = s[(p * k + j) * post + q];
        o[(p * k + j) * post + q] = g[(p * kk + src) * post + q];
      }
  return {lower::finish(v, out, a), lower::finish(idx, out, a)};
}

}  // namespace t5x::spmd
