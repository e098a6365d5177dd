#include "spmd/einsum.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "mesh/mesh.h"
#include "mesh/partition_spec.h"
#include "ops/einsum.h"
#include "ops/elementwise.h"
#include "ops/primitive.h"
#include "spmd/reduce.h"
#include "spmd/context.h"
#include "spmd/elementwise.h"
#include "spmd/local.h"
#include "spmd/lower.h"
#include "spmd/reshard.h"

namespace t5x::spmd {
namespace {

using lower::Assignment;

struct Scatter {
  std::string axis, dim;
};

struct Choice {
  Assignment a;                  // layout of the local einsum
  std::vector<Scatter> scatters; // pending axes reduce-scattered onto output dims
  Axes reduce;                   // pending axes all-reduced (mesh order)
  Assignment out;                // layout of the result before the final reshard
  double bytes = 0, work = 0;
  std::string explain;
};

Shape out_shape_of(const Array& x, const Array& y, const std::vector<std::string>& out_dims) {
  std::vector<Dim> dims;
  for (const auto& d : out_dims) {
    if (x.has_dim(d)) dims.push_back({d, x.dim(d)});
    else if (y.has_dim(d)) dims.push_back({d, y.dim(d)});
    else throw_invalid("einsum", "output dim '" + d + "' is in neither operand: x " + describe_sharded(x) + ", y " +
                                     describe_sharded(y));
  }
  return Shape(std::move(dims));
}

double local_elems(const Shape& s, const Assignment& a) {
  const Mesh& m = context().mesh();
  double n = 1;
  for (const Dim& d : s.dims()) {
    auto it = a.find(d.name);
    n *= double(d.size) / double(it == a.end() ? 1 : m.axes_size(it->second));
  }
  return n;
}

Choice evaluate(const Array& x, const Array& y, const Shape& out, const Assignment& a,
                const std::optional<PartitionSpec>& out_spec) {
  const Mesh& mesh = context().mesh();
  const size_t es = dtype_size(x.dtype());
  Choice c;
  c.a = a;
  std::ostringstream ex;
  ex << "layout {";
  bool first = true;
  for (const auto& [d, ax] : a) {
    if (ax.empty()) continue;
    ex << (first ? "" : ", ") << d << ": ";
    for (size_t i = 0; i < ax.size(); ++i) ex << (i ? "+" : "") << ax[i];
    first = false;
  }
  ex << "}";
  double bx = reshard_cost(x.shape(), spec_of(x), lower::spec_for(x.shape(), a), es);
  double by = reshard_cost(y.shape(), spec_of(y), lower::spec_for(y.shape(), a), es);
  ex << "; x: reshard " << bx << " B; y: reshard " << by << " B";
  c.bytes = bx + by;
  // Pending partial sums: axes of layout dims absent from the output.
  Axes pending;
  for (const auto& [d, ax] : a)
    if (!out.has(d))
      for (const auto& p : ax) pending.push_back(p);
  pending = nontrivial(pending);
  c.out = a;
  for (auto it = c.out.begin(); it != c.out.end();)
    it = out.has(it->first) ? std::next(it) : c.out.erase(it);
  double s_out = local_elems(out, c.out) * double(es);
  Axes rest;
  for (const auto& n : mesh.axis_names()) {
    if (std::find(pending.begin(), pending.end(), n) == pending.end()) continue;
    bool scattered = false;
    if (out_spec) {
      for (int i = 0; i < out.rank() && !scattered; ++i) {
        const Axes& want = out_spec->dims[size_t(i)];
        Axes cur = c.out.count(out[i].name) ? c.out[out[i].name] : Axes{};
        Axes next = cur;
        next.push_back(n);
        if (want.size() < next.size() || !std::equal(next.begin(), next.end(), want.begin())) continue;
        const double k = double(mesh.axis_size(n));
        if (int64_t(double(out[i].size) / double(mesh.axes_size(next))) * mesh.axes_size(next) != out[i].size) continue;
        c.bytes += s_out * (k - 1) / k;
        ex << "; reduce_scatter over (" << n << ") onto " << out[i].name << " " << s_out * (k - 1) / k << " B";
        s_out /= k;
        c.scatters.push_back({n, out[i].name});
        c.out[out[i].name] = next;
        scattered = true;
      }
    }
    if (!scattered) rest.push_back(n);
  }
  if (!rest.empty()) {
    const double k = double(mesh.axes_size(rest));
    c.bytes += 2 * s_out * (k - 1) / k;
    ex << "; all_reduce over (";
    for (size_t i = 0; i < rest.size(); ++i) ex << (i ? "," : "") << rest[i];
    ex << ") " << 2 * s_out * (k - 1) / k << " B";
  }
  c.reduce = rest;
  if (out_spec) {
    double br = reshard_cost(out, lower::spec_for(out, c.out), *out_spec, es);
    if (br > 0) ex << "; output reshard " << br << " B";
    c.bytes += br;
  }
  Shape all = x.shape();
  std::vector<Dim> dims = all.dims();
  for (const Dim& d : y.shape().dims())
    if (!all.has(d.name)) dims.push_back(d);
  c.work = local_elems(Shape(std::move(dims)), a);
  c.explain = ex.str();
  return c;
}

Choice search(const Array& x, const Array& y, const Shape& out, const std::optional<PartitionSpec>& out_spec,
              bool invariant);

// Layout choices depend only on shapes, layouts, dtype size, the mesh and the
// policy, so they are memoised (a training step repeats the same einsums).
Choice choose(const Array& x, const Array& y, const Shape& out, const std::optional<PartitionSpec>& out_spec,
              bool invariant) {
  thread_local std::map<std::string, Choice> cache;
  std::string key = mesh_to_string(context().mesh().desc()) + x.shape().to_string() + spec_to_string(spec_of(x)) +
                    y.shape().to_string() + spec_to_string(spec_of(y)) + out.to_string() +
                    (out_spec ? spec_to_string(*out_spec) : "-") + std::to_string(dtype_size(x.dtype())) +
                    (invariant ? "I" : "P");
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  Choice c = search(x, y, out, out_spec, invariant);
  if (cache.size() > 4096) cache.clear();
  return cache[key] = c;
}

// Mesh-invariant (Context::mesh_invariant): summed dims stay whole, and the
// mesh axes they were split over may move to any kept dim; the cheapest of
// the layouts that split the most work wins (then fewest bytes).
Choice search(const Array& x, const Array& y, const Shape& out, const std::optional<PartitionSpec>& out_spec,
              bool invariant) {
  const Mesh& mesh = context().mesh();
  std::vector<std::string> names = x.names();
  for (const auto& n : y.names())
    if (!x.has_dim(n)) names.push_back(n);
  std::vector<std::vector<Axes>> options(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    auto& o = options[i];
    auto add = [&](const Axes& ax) {
      if (std::find(o.begin(), o.end(), ax) == o.end()) o.push_back(ax);
    };
    if (invariant && !out.has(names[i])) {
      add({});
      continue;
    }
    add(lower::axes_of(x.shape(), spec_of(x), names[i]));
    add(lower::axes_of(y.shape(), spec_of(y), names[i]));
    if (out_spec && out.has(names[i])) add(out_spec->dims[size_t(out.index(names[i]))]);
    if (invariant)
      for (const auto& n : nontrivial(mesh.axis_names())) add({n});
    add({});
  }
  std::optional<Choice> best;
  std::vector<size_t> idx(names.size(), 0);
  int64_t visited = 0;
  while (true) {
    Assignment a;
    std::set<std::string> seen;
    bool ok = true;
    for (size_t i = 0; i < names.size() && ok; ++i) {
      const Axes& ax = options[i][idx[i]];
      for (const auto& m : ax) ok = ok && seen.insert(m).second;
      if (!ax.empty()) {
        int64_t size = x.has_dim(names[i]) ? x.dim(names[i]) : y.dim(names[i]);
        ok = ok && size % mesh.axes_size(ax) == 0;
        a[names[i]] = ax;
      }
    }
    if (ok) {
      Choice c = evaluate(x, y, out, a, out_spec);
      const bool better =
          !best ? true
          : invariant ? (c.work < best->work - 1e-9 || (c.work <= best->work + 1e-9 && c.bytes < best->bytes - 1e-9))
                      : (c.bytes < best->bytes - 1e-9 || (c.bytes <= best->bytes + 1e-9 && c.work < best->work));
      if (better) best = std::move(c);
    }
    // Next combination (odometer); bounded search, then greedy.
    size_t i = 0;
    while (i < names.size() && ++idx[i] == options[i].size()) idx[i++] = 0;
    if (i == names.size() || ++visited > 20000) break;
  }
  if (!best) {  // unreachable: the all-replicated layout is always valid
    Assignment a;
    best = evaluate(x, y, out, a, out_spec);
  }
  return *best;
}

bool invariant() { return context().mesh_invariant(); }

// The lowering: local einsum on the chosen layout, then the partial sums'
// reduction and the result's reshard. Mesh-invariant layouts have no partial
// sums and run the local product at the caller's precision.
Array lowered(const Array& x, const Array& y, const Shape& out, const std::vector<std::string>& out_dims,
              const std::optional<PartitionSpec>& out_spec, EinsumPrecision precision, bool inv) {
  Choice c = choose(x, y, out, out_spec, inv);
  Array lx = lower::prepare(x, c.a), ly = lower::prepare(y, c.a);
  // bfloat16 partial sums cross processes in float32 and are rounded once,
  // after the sum, as one process rounds its whole contraction; so do the
  // cotangents (pvary's and all_gather's vjps sum them over processes).
  const bool partial = !c.scatters.empty() || !c.reduce.empty();
  if (!inv) precision = EinsumPrecision{.wide_result = partial, .wide_grads = true};
  Array r = t5x::einsum(lx, ly, out_dims, precision);
  for (const auto& s : c.scatters) r = reduce_scatter(r, s.dim, {s.axis});
  if (!c.reduce.empty()) r = all_reduce(r, c.reduce);
  if (partial && r.dtype() != x.dtype()) r = t5x::cast(r, x.dtype());
  Array g = lower::finish(r, out, c.out);
  return out_spec ? reshard(g, *out_spec) : g;
}

// A mesh-invariant einsum as one differentiable op on the operands' local
// views. Its vjp is not the transpose of the forward's collectives (that
// would sum per-device partial cotangents) but two more mesh-invariant
// einsums, at the precision one process's einsum vjp uses (ops/einsum.cpp).
class MeshInvariantEinsum : public Primitive {
 public:
  MeshInvariantEinsum(const Array& x, const Array& y, std::vector<std::string> out_dims,
                      std::optional<PartitionSpec> out_spec)
      : xs_(x.shape()), ys_(y.shape()), xsh_(x.sharding()), ysh_(y.sharding()), out_dims_(std::move(out_dims)),
        out_spec_(std::move(out_spec)) {}
  const char* name() const override { return "spmd_einsum"; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    Array x = global(in[0], xs_, xsh_), y = global(in[1], ys_, ysh_);
    Array r = lowered(x, y, out_shape_of(x, y, out_dims_), out_dims_, out_spec_, EinsumPrecision{}, true);
    rs_ = r.shape();
    rsh_ = r.sharding();
    return {to_local(r)};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    Array x = global(in[0], xs_, xsh_), y = global(in[1], ys_, ysh_);
    Array g = global(cot[0].dtype() == x.dtype() ? cot[0] : t5x::cast(cot[0], x.dtype()), rs_, rsh_);
    auto grad = [](const Array& a, const Array& b, const Array& operand) {
      const EinsumPrecision p{.wide_result = einsum_cotangent_sums_over_batch(operand, a, b)};
      return to_local(lowered(a, b, operand.shape(), operand.names(), spec_of(operand), p, true));
    };
    return {needs[0] ? grad(g, y, x) : Array(), needs[1] ? grad(x, g, y) : Array()};
  }
  const Shape& result_shape() const { return rs_; }
  const Sharding& result_sharding() const { return rsh_; }

 private:
  static Array global(const Array& local, const Shape& shape, const Sharding& sharding) {
    return sharding.mesh ? from_local(local, shape, sharding) : local;
  }
  Shape xs_, ys_, rs_;
  Sharding xsh_, ysh_, rsh_;
  std::vector<std::string> out_dims_;
  std::optional<PartitionSpec> out_spec_;
};

Array mesh_invariant_einsum(Array x, Array y, const std::vector<std::string>& out_dims,
                            const std::optional<PartitionSpec>& out_spec) {
  // Dims in one operand only and not in the output are summed out first, as
  // t5x::einsum does (a mesh-invariant spmd::sum).
  auto sum_out = [&](const Array& a, const Array& b) {
    std::vector<std::string> dims;
    for (const auto& n : a.names())
      if (!b.has_dim(n) && std::find(out_dims.begin(), out_dims.end(), n) == out_dims.end()) dims.push_back(n);
    return dims.empty() ? a : spmd::sum(a, dims);
  };
  x = sum_out(x, y);
  y = sum_out(y, x);
  auto p = std::make_shared<MeshInvariantEinsum>(x, y, out_dims, out_spec);
  Array local = apply1(p, {to_local(x), to_local(y)});
  return p->result_sharding().mesh ? from_local(local, p->result_shape(), p->result_sharding()) : local;
}

}  // namespace

std::string einsum_plan(const Array& x, const Array& y, const std::vector<std::string>& out_dims,
                        const std::optional<PartitionSpec>& out_spec) {
  lower::check_meshes("einsum", {x, y});
  return choose(x, y, out_shape_of(x, y, out_dims), out_spec, invariant()).explain;
}

Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out_dims,
             const std::optional<PartitionSpec>& out_spec) {
  if (!lower::any_split({x, y})) {
    Array r = t5x::einsum(x, y, out_dims);
    return out_spec ? reshard(r, *out_spec) : r;
  }
  lower::check_meshes("einsum", {x, y});
  if (x.dtype() != y.dtype())
    throw_invalid("einsum", "dtype mismatch: x is " + describe_sharded(x) + " but y is " + describe_sharded(y) +
                                "; cast one of them");
  Shape out = out_shape_of(x, y, out_dims);
  if (out_spec) validate_partition_spec(context().mesh().desc(), named_shape(out), *out_spec);
  if (invariant()) return mesh_invariant_einsum(x, y, out_dims, out_spec);
  return lowered(x, y, out, out_dims, out_spec, EinsumPrecision{}, false);
}

PartialSum einsum_partial(const Array& x, const Array& y, const std::vector<std::string>& out_dims) {
  Shape out = out_shape_of(x, y, out_dims);
  if (!lower::any_split({x, y})) {
    Array r = t5x::einsum(x, y, out_dims);
    return {to_local(r), out, PartitionSpec::replicated(size_t(out.rank())), {}};
  }
  lower::check_meshes("einsum", {x, y});
  if (x.dtype() != y.dtype())
    throw_invalid("einsum", "dtype mismatch: x is " + describe_sharded(x) + " but y is " + describe_sharded(y));
  if (invariant()) {  // nothing is left pending
    Array r = spmd::einsum(x, y, out_dims);
    return {to_local(r), out, spec_of(r), {}};
  }
  Choice c = choose(x, y, out, std::nullopt, false);
  Array r = t5x::einsum(lower::prepare(x, c.a), lower::prepare(y, c.a), out_dims);
  return {r, out, lower::spec_for(out, c.out), c.reduce};
}

PartialSum add(const PartialSum& a, const PartialSum& b) {
  if (a.shape == b.shape && a.spec == b.spec && a.pending == b.pending)
    return {t5x::add(a.local, b.local), a.shape, a.spec, a.pending};
  // Different layouts or pending axes (the einsums chose different
  // strategies): reduce each, then add as global arrays.
  Array r = spmd::add(resolve(a), resolve(b));
  return {to_local(r), r.shape(), spec_of(r), {}};
}

Array resolve(const PartialSum& p, const std::optional<PartitionSpec>& out_spec) {
  Array r = p.pending.empty() ? p.local : all_reduce(p.local, p.pending);
  Array g = from_local(r, p.shape, context().sharding(p.spec));
  return out_spec ? reshard(g, *out_spec) : g;
}

Array einsum(const std::string& spec, const Array& x, const Array& y, const std::optional<PartitionSpec>& out_spec) {
  auto arrow = spec.find("->");
  auto comma = spec.find(',');
  if (arrow == std::string::npos || comma == std::string::npos || comma > arrow)
    throw_invalid("einsum", "spec '" + spec + "' is not of the form 'x dims, y dims -> out dims'");
  auto words = [](const std::string& s) {
    std::vector<std::string> w;
    std::istringstream is(s);
    for (std::string t; is >> t;) w.push_back(t);
    return w;
  };
  auto xs = words(spec.substr(0, comma)), ys = words(spec.substr(comma + 1, arrow - comma - 1));
  if (xs != x.names() || ys != y.names())
    throw_invalid("einsum", "spec '" + spec + "' does not match x " + describe_sharded(x) + " and y " +
                                describe_sharded(y));
  return einsum(x, y, words(spec.substr(arrow + 2)), out_spec);
}

}  // namespace t5x::spmd
