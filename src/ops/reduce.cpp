#include "ops/reduce.h"

#include <cmath>
#include <limits>

#include "backend/kernels.h"
#include "ops/autodiff.h"
#include "ops/detail.h"
#include "ops/lowering.h"
#include "ops/elementwise.h"
#include "ops/primitive.h"
#include "ops/shape.h"

namespace t5x {
using namespace detail;

namespace {

using R = kernels::ReduceKind;

struct Plan {
  Shape kept;           // output shape (kept dims in x order)
  Shape ordered;        // x's dims with reduced ones moved last
  int64_t rows = 1, cols = 1;
};

Plan plan_reduce(const char* op, const Array& x, const std::vector<std::string>& dims) {
  std::vector<bool> red(size_t(x.rank()), false);
  for (const std::string& d : dims) {
    int i = require_dim(op, x, d);
    if (red[size_t(i)]) throw_invalid(op, "dim '" + d + "' listed twice");
    red[size_t(i)] = true;
  }
  std::vector<Dim> kept, reduced;
  for (int i = 0; i < x.rank(); ++i) (red[size_t(i)] ? reduced : kept).push_back(x.shape()[i]);
  Plan p;
  p.kept = Shape(kept);
  std::vector<Dim> all = kept;
  all.insert(all.end(), reduced.begin(), reduced.end());
  p.ordered = Shape(all);
  p.rows = p.kept.numel();
  p.cols = x.size() / std::max<int64_t>(p.rows, 1);
  if (p.rows == 0) p.cols = 0;
  return p;
}

Array reduce_forward(R op, const Array& x0, const Plan& p) {
  Array out = make_output(p.kept, x0.dtype(), {x0});
  if (p.rows == 0) return out;
  // Reduced dims leading and kept dims trailing: accumulate whole rows (column sums).
  bool leading = true;
  {
    int nred = x0.rank() - p.kept.rank();
    for (int i = 0; i < p.kept.rank(); ++i)
      if (x0.shape()[nred + i].name != p.kept[i].name) leading = false;
  }
  if (leading && p.cols > 1 && p.rows > 1) {
    kernels::cpu::reduce(op, x0.dtype(), x0.raw_data(), out.raw_data(), p.rows, p.cols, true);
    return out;
  }
  Array x = p.ordered == x0.shape() ? x0 : transpose(x0, p.ordered.names());
  kernels::cpu::reduce(op, x.dtype(), x.raw_data(), out.raw_data(), p.rows, p.cols, false);
  return out;
}

class Reduce : public Primitive {
 public:
  Reduce(R op, Plan p, std::vector<std::string> dims) : op_(op), p_(std::move(p)), dims_(std::move(dims)) {}
  const char* name() const override { return op_ == R::Sum ? "sum" : op_ == R::Max ? "max" : "min"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.reduce(op_ == R::Sum ? Reduction::Sum : op_ == R::Max ? Reduction::Max : Reduction::Min, in[0], dims_)};
  }
  bool saves_inputs() const override { return op_ != R::Sum; }
  bool saves_outputs() const override { return op_ != R::Sum; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    in_ = in[0].shape();
    return {reduce_forward(op_, in[0], p_)};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>& out, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    if (op_ == R::Sum) return {broadcast_to(cot[0], in_)};
    std::vector<std::string> red;
    for (const Dim& d : in_.dims())
      if (!p_.kept.has(d.name)) red.push_back(d.name);
    Array hit = cast(eq(in[0], out[0]), in[0].dtype());
    Array count = sum(hit, red);
    return {transpose(mul(hit, div(cot[0], count)), in_.names())};
  }

 private:
  R op_;
  Plan p_;
  std::vector<std::string> dims_;
  Shape in_;
};

Array reduce(R op, const char* name, const Array& x, const std::vector<std::string>& dims) {
  if (x.dtype() == DType::boolean) throw_invalid(name, "does not accept bool, got " + describe(x));
  Plan p = plan_reduce(name, x, dims);
  if (dims.empty()) return x;
  return apply1(std::make_shared<Reduce>(op, std::move(p), dims), {x});
}

std::vector<std::string> all_dims(const Array& x) { return x.names(); }

// Softmax rows over dim `dim` moved last (transposed there and back).
Array softmax_forward(const char* op, const Array& x0, const std::string& dim, bool log) {
  int a = require_dim(op, x0, dim);
  std::vector<std::string> order = x0.names();
  order.erase(order.begin() + a);
  order.push_back(dim);
  Array x = transpose(x0, order);
  Array out = make_output(x.shape(), x.dtype(), {x});
  const int64_t n = x.dim(dim), rows = n ? x.size() / n : 0;
  kernels::cpu::softmax_rows(log, x.dtype(), x.raw_data(), out.raw_data(), rows, n);
  return transpose(out, x0.names());
}

class Softmax : public Primitive {
 public:
  Softmax(std::string dim, bool log) : dim_(std::move(dim)), log_(log) {}
  const char* name() const override { return log_ ? "log_softmax" : "softmax"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.softmax(in[0], dim_, log_)};
  }
  bool saves_inputs() const override { return false; }
  bool saves_outputs() const override { return true; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    return {softmax_forward(name(), in[0], dim_, log_)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>& out, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    const Array &y = out[0], &g = cot[0];
    if (log_) return {sub(g, mul(exp(y), sum(g, {dim_})))};
    return {mul(y, sub(g, sum(mul(g, y), {dim_})))};
  }

 private:
  std::string dim_;
  bool log_;
};

class Cumsum : public Primitive {
 public:
  Cumsum(std::string dim, bool exclusive, bool reverse) : dim_(std::move(dim)), excl_(exclusive), rev_(reverse) {}
  const char* name() const override { return "cumsum"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.cumsum(in[0], dim_, excl_, rev_)};
  }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array& x = in[0];
    Array out = make_output(x.shape(), x.dtype(), {x});
    int a = x.shape().index(dim_);
    const int64_t n = x.shape()[a].size;
    const int64_t inner = x.shape().strides()[size_t(a)];
    const int64_t outer = n ? x.size() / (n * inner) : 0;
    kernels::cpu::cumsum(x.dtype(), x.raw_data(), out.raw_data(), outer, n, inner, excl_, rev_);
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {cumsum(cot[0], dim_, excl_, !rev_)};
  }

 private:
  std::string dim_;
  bool excl_, rev_;
};

}  // namespace

Array sum(const Array& x, const std::vector<std::string>& dims) { return reduce(R::Sum, "sum", x, dims); }
Array sum(const Array& x) { return reduce(R::Sum, "sum", x, all_dims(x)); }
Array max(const Array& x, const std::vector<std::string>& dims) { return reduce(R::Max, "max", x, dims); }
Array max(const Array& x) { return reduce(R::Max, "max", x, all_dims(x)); }
Array min(const Array& x, const std::vector<std::string>& dims) { return reduce(R::Min, "min", x, dims); }
Array min(const Array& x) { return reduce(R::Min, "min", x, all_dims(x)); }

namespace {
Array mean_local(const Array& x, const std::vector<std::string>& dims) {
  check_floating("mean", x);
  Plan p = plan_reduce("mean", x, dims);
  return mul(sum(x, dims), 1.0 / double(std::max<int64_t>(p.cols, 1)));
}
}  // namespace

Array mean(const Array& x, const std::vector<std::string>& dims) {
  return composite1(
      "mean", {x}, [&](const std::vector<Array>& in) { return mean_local(in[0], dims); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.mean(in[0], dims); });
}
Array mean(const Array& x) { return mean(x, all_dims(x)); }

namespace {
Array logsumexp_local(const Array& x, const std::vector<std::string>& dims) {
  check_floating("logsumexp", x);
  plan_reduce("logsumexp", x, dims);
  // Shift by the (gradient-free) max for stability; rows of -inf stay -inf.
  Array m;
  {
    NoGradGuard no_grad;
    m = max(x, dims);
    m = where(eq(m, -INFINITY), scalar_like(m, 0.0), m);
  }
  return add(log(sum(exp(sub(x, m)), dims)), m);
}
}  // namespace

Array logsumexp(const Array& x, const std::vector<std::string>& dims) {
  return composite1(
      "logsumexp", {x}, [&](const std::vector<Array>& in) { return logsumexp_local(in[0], dims); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.logsumexp(in[0], dims); });
}

Array softmax(const Array& x, const std::string& dim) {
  check_floating("softmax", x);
  require_dim("softmax", x, dim);
  return apply1(std::make_shared<Softmax>(dim, false), {x});
}

Array log_softmax(const Array& x, const std::string& dim) {
  check_floating("log_softmax", x);
  require_dim("log_softmax", x, dim);
  return apply1(std::make_shared<Softmax>(dim, true), {x});
}

namespace {
Array argmax_local(const Array& x0, const std::string& dim) {
  int a = require_dim("argmax", x0, dim);
  if (x0.dtype() == DType::boolean) throw_invalid("argmax", "does not accept bool, got " + describe(x0));
  std::vector<std::string> order = x0.names();
  order.erase(order.begin() + a);
  order.push_back(dim);
  require_cpu("argmax", {x0});
  Array x = transpose(x0, order);
  std::vector<Dim> kept = x.shape().dims();
  kept.pop_back();
  Array out = make_output(Shape(kept), DType::i32, {x});
  const int64_t n = x.dim(dim), rows = n ? x.size() / n : 0;
  if (n == 0 && x.size() > 0) throw_invalid("argmax", "dim '" + dim + "' is empty");
  kernels::cpu::argmax_rows(x.dtype(), x.raw_data(), out.data<int32_t>(), rows, n);
  return out;
}
}  // namespace

// Not differentiable: a composite whose expansion is the kernel.
Array argmax(const Array& x, const std::string& dim) {
  return composite1(
      "argmax", {x}, [&](const std::vector<Array>& in) { return argmax_local(in[0], dim); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.argmax(in[0], dim); });
}

Array cumsum(const Array& x, const std::string& dim, bool exclusive, bool reverse) {
  require_dim("cumsum", x, dim);
  if (x.dtype() == DType::boolean) throw_invalid("cumsum", "does not accept bool, got " + describe(x));
  return apply1(std::make_shared<Cumsum>(dim, exclusive, reverse), {x});
}

}  // namespace t5x
