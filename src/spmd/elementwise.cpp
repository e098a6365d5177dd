#include "spmd/elementwise.h"

#include <algorithm>

#include "ops/autodiff.h"
#include "ops/elementwise.h"
#include "spmd/context.h"
#include "spmd/local.h"
#include "spmd/lower.h"

namespace t5x::spmd {

std::vector<Array> layout_op(const char* op, const std::vector<Array>& xs, const std::vector<std::string>& whole,
                             const LocalFnN& fn) {
  if (!lower::any_split(xs)) return fn(xs);
  lower::check_meshes(op, xs);
  lower::Assignment a;
  for (const auto& x : xs)
    if (x.valid()) lower::absorb(a, x.shape(), spec_of(x));
  for (const auto& w : whole) a.erase(w);
  // Mesh-invariant under a tape: an axis that splits dims a floating operand
  // lacks (a broadcast scale on batch-split activations) would sum that
  // operand's gradient across devices; such axes are not split here (the
  // other operands are gathered), so the gradient is summed as on one process.
  if (context().mesh_invariant() && is_recording()) {
    for (const auto& x : xs) {
      if (!x.valid() || !is_floating(x.dtype())) continue;
      const Axes mine = used_axes(lower::spec_for(x.shape(), a));
      for (auto it = a.begin(); it != a.end();) {
        bool foreign = false;
        for (const auto& ax : it->second)
          foreign = foreign || std::find(mine.begin(), mine.end(), ax) == mine.end();
        it = foreign ? a.erase(it) : std::next(it);
      }
    }
  }
  std::vector<Array> locals;
  for (const auto& x : xs) locals.push_back(x.valid() ? lower::prepare(x, a) : x);
  std::vector<Array> ys = fn(locals);
  std::vector<Array> out;
  for (const Array& y : ys) {
    if (!y.valid()) {
      out.push_back(y);
      continue;
    }
    std::vector<Dim> dims;
    for (const Dim& d : y.shape().dims()) {
      auto it = a.find(d.name);
      dims.push_back({d.name, it == a.end() ? d.size : d.size * context().mesh().axes_size(it->second)});
    }
    out.push_back(lower::finish(y, Shape(std::move(dims)), a));
  }
  return out;
}

Array elementwise(const char* op, const std::vector<Array>& xs, const LocalFn& fn) {
  return layout_op(op, xs, {}, [&](const std::vector<Array>& v) { return std::vector<Array>{fn(v)}; })[0];
}

Array add(const Array& a, const Array& b) { return elementwise("add", {a, b}, [](const auto& v) { return t5x::add(v[0], v[1]); }); }
Array sub(const Array& a, const Array& b) { return elementwise("sub", {a, b}, [](const auto& v) { return t5x::sub(v[0], v[1]); }); }
Array mul(const Array& a, const Array& b) { return elementwise("mul", {a, b}, [](const auto& v) { return t5x::mul(v[0], v[1]); }); }
Array div(const Array& a, const Array& b) { return elementwise("div", {a, b}, [](const auto& v) { return t5x::div(v[0], v[1]); }); }
Array maximum(const Array& a, const Array& b) {
  return elementwise("maximum", {a, b}, [](const auto& v) { return t5x::maximum(v[0], v[1]); });
}
Array minimum(const Array& a, const Array& b) {
  return elementwise("minimum", {a, b}, [](const auto& v) { return t5x::minimum(v[0], v[1]); });
}
Array where(const Array& c, const Array& x, const Array& y) {
  // The plain op orders the output as x, y, cond; pass them in that order.
  return elementwise("where", {x, y, c}, [](const auto& v) { return t5x::where(v[2], v[0], v[1]); });
}
Array unary(const Array& x, const std::function<Array(const Array&)>& f) {
  return elementwise("unary", {x}, [&](const auto& v) { return f(v[0]); });
}

}  // namespace t5x::spmd
