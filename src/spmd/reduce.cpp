#include "spmd/reduce.h"

#include <algorithm>

#include "core/error.h"
#include "ops/autodiff.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "spmd/context.h"
#include "spmd/local.h"
#include "spmd/lower.h"

namespace t5x::spmd {
namespace {

struct Plan {
  lower::Assignment in, out;  // layouts of x and of the result
  Axes pending;               // nontrivial axes of the reduced dims, mesh order
  Array local;
  Shape out_shape;
};

Plan plan(const char* op, const Array& x, const std::vector<std::string>& dims) {
  lower::check_meshes(op, {x});
  Plan p;
  lower::absorb(p.in, x.shape(), spec_of(x));
  // Mesh-invariant: the reduced dims are gathered whole, so each sum runs as
  // one process runs it (no partial sums across devices).
  if (context().mesh_invariant())
    for (const auto& d : dims) p.in.erase(d);
  p.out = p.in;
  Axes pend;
  for (const auto& d : dims) {
    if (!x.has_dim(d)) throw_invalid(op, "no dim '" + d + "' in x " + describe_sharded(x));
    auto it = p.out.find(d);
    if (it == p.out.end()) continue;
    pend.insert(pend.end(), it->second.begin(), it->second.end());
    p.out.erase(it);
  }
  pend = nontrivial(pend);
  for (const auto& n : context().mesh().axis_names())
    if (std::find(pend.begin(), pend.end(), n) != pend.end()) p.pending.push_back(n);
  p.local = lower::prepare(x, p.in);
  std::vector<Dim> od;
  for (const Dim& d : x.shape().dims())
    if (std::find(dims.begin(), dims.end(), d.name) == dims.end()) od.push_back(d);
  p.out_shape = Shape(std::move(od));
  return p;
}

// Max of x over dims across all shards, without gradient; non-finite -> 0
// (shift for a stable exp).
Array global_max_shift(const Plan& p, const std::vector<std::string>& dims) {
  NoGradGuard g;
  Array m = all_reduce(t5x::max(p.local, dims), p.pending, ReduceOp::kMax);
  return t5x::where(t5x::isfinite(m), m, 0.0);
}

Array reduce_extreme(const char* op, const Array& x, const std::vector<std::string>& dims, ReduceOp rop) {
  const bool is_max = rop == ReduceOp::kMax;
  if (!lower::any_split({x})) return is_max ? t5x::max(x, dims) : t5x::min(x, dims);
  Plan p = plan(op, x, dims);
  Array r;
  if (p.pending.empty()) {
    r = is_max ? t5x::max(p.local, dims) : t5x::min(p.local, dims);
  } else if (!is_floating(x.dtype())) {
    r = all_reduce(is_max ? t5x::max(p.local, dims) : t5x::min(p.local, dims), p.pending, rop);
  } else {
    Array m, maskf, cnt;
    {
      NoGradGuard g;
      m = all_reduce(is_max ? t5x::max(p.local, dims) : t5x::min(p.local, dims), p.pending, rop);
      maskf = t5x::cast(t5x::eq(p.local, m), x.dtype());
      cnt = all_reduce(t5x::sum(maskf, dims), p.pending);
    }
    r = t5x::div(all_reduce(t5x::sum(t5x::mul(p.local, maskf), dims), p.pending), cnt);
  }
  return lower::finish(r, p.out_shape, p.out);
}

}  // namespace

Array sum(const Array& x, const std::vector<std::string>& dims) {
  if (!lower::any_split({x})) return t5x::sum(x, dims);
  Plan p = plan("sum", x, dims);
  Array r = all_reduce(t5x::sum(p.local, dims), p.pending);
  return lower::finish(r, p.out_shape, p.out);
}

Array sum(const Array& x) { return spmd::sum(x, x.names()); }

Array mean(const Array& x, const std::vector<std::string>& dims) {
  if (!lower::any_split({x})) return t5x::mean(x, dims);
  if (!is_floating(x.dtype())) throw_invalid("mean", "expected a floating dtype for x, got " + describe_sharded(x));
  double n = 1;
  for (const auto& d : dims) n *= double(x.dim(d));
  Array s = spmd::sum(x, dims);
  return from_local(t5x::mul(to_local(s), 1.0 / n), s.shape(), s.sharding());
}

Array mean(const Array& x) { return spmd::mean(x, x.names()); }

Array max(const Array& x, const std::vector<std::string>& dims) { return reduce_extreme("max", x, dims, ReduceOp::kMax); }
Array min(const Array& x, const std::vector<std::string>& dims) { return reduce_extreme("min", x, dims, ReduceOp::kMin); }

Array logsumexp(const Array& x, const std::vector<std::string>& dims) {
  if (!lower::any_split({x})) return t5x::logsumexp(x, dims);
  Plan p = plan("logsumexp", x, dims);
  if (p.pending.empty()) return lower::finish(t5x::logsumexp(p.local, dims), p.out_shape, p.out);
  Array m = global_max_shift(p, dims);
  Array s = all_reduce(t5x::sum(t5x::exp(t5x::sub(p.local, m)), dims), p.pending);
  return lower::finish(t5x::add(t5x::log(s), m), p.out_shape, p.out);
}

Array softmax(const Array& x, const std::string& dim) {
  if (!lower::any_split({x})) return t5x::softmax(x, dim);
  Plan p = plan("softmax", x, {dim});
  if (p.pending.empty()) return lower::finish(t5x::softmax(p.local, dim), x.shape(), p.in);
  Array m = global_max_shift(p, {dim});
  Array e = t5x::exp(t5x::sub(p.local, m));
  Array s = pvary(all_reduce(t5x::sum(e, {dim}), p.pending), p.pending);
  return lower::finish(t5x::div(e, s), x.shape(), p.in);
}

Array log_softmax(const Array& x, const std::string& dim) {
  if (!lower::any_split({x})) return t5x::log_softmax(x, dim);
  Plan p = plan("log_softmax", x, {dim});
  if (p.pending.empty()) return lower::finish(t5x::log_softmax(p.local, dim), x.shape(), p.in);
  Array m = global_max_shift(p, {dim});
  Array shifted = t5x::sub(p.local, m);
  Array lse = pvary(t5x::log(all_reduce(t5x::sum(t5x::exp(shifted), {dim}), p.pending)), p.pending);
  return lower::finish(t5x::sub(shifted, lse), x.shape(), p.in);
}

}  // namespace t5x::spmd
