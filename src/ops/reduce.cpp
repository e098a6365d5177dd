#include "ops/reduce.h"

#include <cmath>
#include <limits>

#include "backend/cpu/vec_math.h"
#include "ops/autodiff.h"
#include "ops/detail.h"
#include "ops/lowering.h"
#include "ops/elementwise.h"
#include "ops/primitive.h"
#include "ops/shape.h"

namespace t5x {
using namespace detail;

namespace {

enum class R { Sum, Max, Min };

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
  dispatch_dtype(x0.dtype(), [&](auto t) {
    using T = decltype(t);
    using C = compute_t<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<C>, double, C>;
    T* o = static_cast<T*>(out.raw_data());
    const Acc init = op == R::Sum ? Acc(0)
                   : op == R::Max ? (std::is_floating_point_v<C> ? -std::numeric_limits<Acc>::infinity()
                                                                 : std::numeric_limits<Acc>::lowest())
                                  : (std::is_floating_point_v<C> ? std::numeric_limits<Acc>::infinity()
                                                                 : std::numeric_limits<Acc>::max());
    auto combine = [op](Acc a, Acc b) -> Acc {
      if (op == R::Sum) return a + b;
      if (a != a || b != b) return a != a ? a : b;  // NaN propagates
      return op == R::Max ? (b > a ? b : a) : (b < a ? b : a);
    };
    if (leading && p.cols > 1 && p.rows > 1) {
      const T* a = static_cast<const T*>(x0.raw_data());
      const int64_t R_ = p.rows, K = p.cols;
      std::vector<Acc> acc(size_t(R_), init);
#pragma omp parallel for schedule(static) if (x0.size() > kParallelThreshold)
      for (int64_t j0 = 0; j0 < R_; j0 += 256) {
        int64_t j1 = std::min(R_, j0 + 256);
        for (int64_t k = 0; k < K; ++k)
          for (int64_t j = j0; j < j1; ++j) acc[size_t(j)] = combine(acc[size_t(j)], Acc(ld(a[k * R_ + j])));
      }
      for (int64_t j = 0; j < R_; ++j) o[j] = st<T>(C(acc[size_t(j)]));
      return;
    }
    Array x = p.ordered == x0.shape() ? x0 : transpose(x0, p.ordered.names());
    const T* a = static_cast<const T*>(x.raw_data());
#pragma omp parallel for schedule(static) if (x.size() > kParallelThreshold && p.rows > 1)
    for (int64_t r = 0; r < p.rows; ++r) {
      Acc acc = init;
      const T* row = a + r * p.cols;
      for (int64_t c = 0; c < p.cols; ++c) acc = combine(acc, Acc(ld(row[c])));
      o[r] = st<T>(C(acc));
    }
  });
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

// Row-wise kernel over dim `dim` moved last: f(row_in, row_out, n) in compute precision.
template <typename F>
Array rowwise(const char* op, const Array& x0, const std::string& dim, F&& f) {
  int a = require_dim(op, x0, dim);
  std::vector<std::string> order = x0.names();
  order.erase(order.begin() + a);
  order.push_back(dim);
  Array x = transpose(x0, order);
  Array out = make_output(x.shape(), x.dtype(), {x});
  const int64_t n = x.dim(dim), rows = n ? x.size() / n : 0;
  dispatch_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, float>) {
      const float* in = x.data<float>();
      float* o = out.data<float>();
#pragma omp parallel for schedule(static) if (x.size() > kParallelThreshold)
      for (int64_t r = 0; r < rows; ++r) f(in + r * n, o + r * n, n);
    } else if constexpr (std::is_floating_point_v<compute_t<T>>) {
      const T* in = static_cast<const T*>(x.raw_data());
      T* o = static_cast<T*>(out.raw_data());
#pragma omp parallel
      {
        std::vector<float> buf(static_cast<size_t>(n)), res(static_cast<size_t>(n));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < n; ++j) buf[size_t(j)] = float(in[r * n + j]);
          f(buf.data(), res.data(), n);
          for (int64_t j = 0; j < n; ++j) o[r * n + j] = st<T>(res[size_t(j)]);
        }
      }
    }
  });
  return transpose(out, x0.names());
}

// Rows in f32 with the backend's vectorised exp (relative error < 3e-7).
void softmax_row(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  float m = cpu::max_of(x, n);
  if (m == -INFINITY) m = 0;
  float inv = 1.0f / cpu::exp_shift_sum(x, y, n, m);
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

void log_softmax_row(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  float m = cpu::max_of(x, n);
  if (m == -INFINITY) m = 0;
  float lse = m + std::log(cpu::exp_sum(x, n, m));
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] - lse;
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
    return {rowwise(name(), in[0], dim_, log_ ? log_softmax_row : softmax_row)};
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
    dispatch_dtype(x.dtype(), [&](auto t) {
      using T = decltype(t);
      using C = compute_t<T>;
      using Acc = std::conditional_t<std::is_floating_point_v<C>, double, C>;
      const T* p = static_cast<const T*>(x.raw_data());
      T* o = static_cast<T*>(out.raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (x.size() > kParallelThreshold)
      for (int64_t b = 0; b < outer; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          Acc acc = 0;
          for (int64_t k = 0; k < n; ++k) {
            int64_t j = rev_ ? n - 1 - k : k;
            int64_t off = (b * n + j) * inner + i;
            Acc v = Acc(ld(p[off]));
            if (excl_) { o[off] = st<T>(C(acc)); acc += v; }
            else { acc += v; o[off] = st<T>(C(acc)); }
          }
        }
    });
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
  Array x = transpose(x0, order);
  std::vector<Dim> kept = x.shape().dims();
  kept.pop_back();
  Array out = make_output(Shape(kept), DType::i32, {x});
  const int64_t n = x.dim(dim), rows = n ? x.size() / n : 0;
  if (n == 0 && x.size() > 0) throw_invalid("argmax", "dim '" + dim + "' is empty");
  dispatch_dtype(x.dtype(), [&](auto t) {
    using T = decltype(t);
    const T* p = static_cast<const T*>(x.raw_data());
    int32_t* o = out.data<int32_t>();
#pragma omp parallel for schedule(static) if (x.size() > kParallelThreshold)
    for (int64_t r = 0; r < rows; ++r) {
      auto best = ld(p[r * n]);
      int32_t bi = 0;
      for (int64_t j = 1; j < n; ++j) {
        auto v = ld(p[r * n + j]);
        if (best != best) break;  // NaN wins
        if (v > best || v != v) { best = v; bi = int32_t(j); }
      }
      o[r] = bi;
    }
  });
  return out;
}
}  // namespace

// Not differentiable: a composite whose expansion is the host loop.
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
