#include "spmd/lower.h"

#include <algorithm>

#include "spmd/context.h"
#include "spmd/local.h"
#include "spmd/reshard.h"

namespace t5x::spmd::lower {

Axes axes_of(const Shape& shape, const PartitionSpec& spec, const std::string& name) {
  int i = shape.index(name);
  if (i < 0 || spec.dims.empty()) return {};
  return spec.dims[size_t(i)];
}

PartitionSpec spec_for(const Shape& shape, const Assignment& a) {
  PartitionSpec s = PartitionSpec::replicated(size_t(shape.rank()));
  for (int i = 0; i < shape.rank(); ++i) {
    auto it = a.find(shape[i].name);
    if (it != a.end()) s.dims[size_t(i)] = it->second;
  }
  return s;
}

Axes used(const Assignment& a) {
  Axes r;
  for (const auto& [d, ax] : a)
    for (const auto& x : ax) r.push_back(x);
  return r;
}

void absorb(Assignment& a, const Shape& shape, const PartitionSpec& spec) {
  if (spec.dims.empty()) return;
  Axes u = used(a);
  for (int i = 0; i < shape.rank(); ++i) {
    const Axes& ax = spec.dims[size_t(i)];
    if (ax.empty() || a.count(shape[i].name)) continue;
    bool free = true;
    for (const auto& x : ax) free = free && std::find(u.begin(), u.end(), x) == u.end();
    if (!free) continue;
    a[shape[i].name] = ax;
    u.insert(u.end(), ax.begin(), ax.end());
  }
}

Array prepare(const Array& x, const Assignment& a) {
  PartitionSpec target = spec_for(x.shape(), a);
  Axes mine = used_axes(target), extra;
  for (const auto& ax : used(a))
    if (std::find(mine.begin(), mine.end(), ax) == mine.end()) extra.push_back(ax);
  extra = nontrivial(extra);
  auto in = [](const Axes& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  // An axis x must be varying over but is split over (minor-most on a dim)
  // is gathered into a varying value: all_gather, whose vjp reduce-scatters
  // (the ZeRO-3 weight gather), rather than all-gather + pvary (all-reduce).
  Array loc = to_local(x);
  PartitionSpec src = spec_of(x);
  Axes gathered;
  for (bool again = true; again;) {
    again = false;
    for (int i = 0; i < x.rank(); ++i) {
      auto& d = src.dims[size_t(i)];
      if (d.empty() || !in(extra, d.back())) continue;
      loc = all_gather(loc, x.shape()[i].name, {d.back()});
      gathered.push_back(d.back());
      d.pop_back();
      again = true;
    }
  }
  loc = reshard_local(loc, x.shape(), src, target);
  // Group over the remaining extra axes in mesh order (any order sums the same).
  Axes ordered;
  for (const auto& n : context().mesh().axis_names())
    if (in(extra, n) && !in(gathered, n)) ordered.push_back(n);
  return ordered.empty() ? loc : pvary(loc, ordered);
}

Array finish(const Array& local, const Shape& global, const Assignment& a) {
  return from_local(local, global, context().sharding(spec_for(global, a)));
}

bool any_split(const std::vector<Array>& xs) {
  for (const auto& x : xs)
    if (x.valid() && !x.is_fully_local()) return true;
  return false;
}

void check_meshes(const char* op, const std::vector<Array>& xs) {
  for (const auto& x : xs)
    if (x.valid()) check_mesh(op, x);
}

}  // namespace t5x::spmd::lower
