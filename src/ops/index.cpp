#include "ops/index.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "backend/kernels.h"
#include "ops/detail.h"
#include "ops/lowering.h"
#include "ops/einsum.h"
#include "ops/elementwise.h"
#include "ops/primitive.h"
#include "ops/shape.h"

namespace t5x {
using namespace detail;

namespace {

std::vector<int64_t> index_values(const char* op, const Array& idx) {
  if (!is_integer(idx.dtype())) throw_invalid(op, "indices must be int32/int64, got " + describe(idx));
  return idx.to_ints();
}

// [pre, n, post] view of x around dim a.
using kernels::Split3;
Split3 split3(const Shape& s, int a) {
  Split3 r;
  for (int d = 0; d < s.rank(); ++d) (d < a ? r.pre : d > a ? r.post : r.n) *= s[d].size;
  return r;
}

// acc (written over) += take's gradient for the cotangent g of ids: the
// in-place form of take's vjp (Take::vjp_into).
class TakeGradInto : public Primitive {
 public:
  explicit TakeGradInto(Split3 s) : s_(s) {}
  const char* name() const override { return "take"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    Array out = in[0].alias();
    const std::vector<int64_t> ids = in[2].to_ints();
    kernels::cpu::take_grad_add_f32(s_, ids.data(), int64_t(ids.size()), in[1].data<float>(), out.data<float>());
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>&,
                         const std::vector<bool>&) override {
    throw_invalid("take", "internal: the in-place take gradient is not differentiable");
  }

 private:
  Split3 s_;
};

class Take : public Primitive {
 public:
  Take(int axis, Shape out) : axis_(axis), out_(std::move(out)) {}
  const char* name() const override { return "take"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.take(in[0], in[1], in[0].names()[size_t(axis_)])};
  }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array &x = in[0], &idx = in[1];
    x_shape_ = x.shape();
    Split3 s = split3(x.shape(), axis_);
    std::vector<int64_t> ids = idx.to_ints();
    const int64_t ni = int64_t(ids.size());
    Array out = make_output(out_, x.dtype(), {x});
    kernels::cpu::take(dtype_size(x.dtype()), s, ids.data(), ni, x.raw_data(), out.raw_data());
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    if (!needs[0]) return {Array(), Array()};
    Split3 s = split3(x_shape_, axis_);
    std::vector<int64_t> ids = in[1].to_ints();
    const int64_t ni = int64_t(ids.size());
    Array g = cast(cot[0], DType::f32);
    Array gx(x_shape_, DType::f32, {}, {}, /*zero=*/false);
    kernels::cpu::take_grad_f32(s, ids.data(), ni, g.data<float>(), gx.data<float>());
    return {cast(gx, in[0].dtype()), Array()};
  }
  // A table taken from twice (T5's token embedding, by the encoder and the
  // decoder): the second gradient is added into the first where it may be
  // written over, rather than made dense ([vocab, embed] zeros and a few rows)
  // and added: the same bits.
  bool vjp_into(const std::vector<Array>& in, const std::vector<Array>& cot, size_t input, Array& acc) override {
    if (input != 0 || in[0].dtype() != DType::f32 || !can_write_over(acc, {cot[0], in[1]})) return false;
    Array g = cast(cot[0], DType::f32);
    Array a = std::move(acc);
    acc = apply1(std::make_shared<TakeGradInto>(split3(x_shape_, axis_)), {a, g, in[1]});
    return true;
  }

 private:
  int axis_;
  Shape out_, x_shape_;
};

class TopK : public Primitive {
 public:
  TopK(int64_t k, std::string dim) : k_(k), dim_(std::move(dim)) {}
  const char* name() const override { return "top_k"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    auto [values, indices] = l.top_k(in[0], k_, dim_);
    return {values, indices};
  }
  bool saves_inputs() const override { return false; }
  bool saves_outputs() const override { return true; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array& x0 = in[0];
    x_shape_ = x0.shape();
    std::vector<std::string> order = x0.names();
    order.erase(std::find(order.begin(), order.end(), dim_));
    order.push_back(dim_);
    Array x = transpose(x0, order);
    std::vector<Dim> od = x.shape().dims();
    od.back().size = k_;
    Shape os(od);
    const int64_t n = x.dim(dim_), rows = n ? x.size() / n : 0;
    Array vals = make_output(os, x.dtype(), {x}), idx = make_output(os, DType::i32, {x});
    std::vector<float> xv = x.to_floats();
    std::vector<float> outv(static_cast<size_t>(os.numel()));
    kernels::cpu::top_k_rows(xv.data(), rows, n, k_, outv.data(), idx.data<int32_t>());
    Array v32 = Array::from_floats(os, outv, x.dtype());
    std::vector<std::string> back;
    for (const Dim& d : x0.shape().dims()) back.push_back(d.name);
    return {transpose(v32, back), transpose(idx, back)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>& out, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    if (!needs[0]) return {Array()};
    // d x = sum_j one_hot(idx_j) * g_j, as an einsum over the k entries.
    const std::string kd = "__top_k";
    Array oh = one_hot(rename(out[1], {{dim_, kd}}), x_shape_.size(dim_), dim_, cot[0].dtype());
    return {einsum(oh, rename(cot[0], {{dim_, kd}}), x_shape_.names())};
  }

 private:
  int64_t k_;
  std::string dim_;
  Shape x_shape_;
};

}  // namespace

Array iota(const Shape& shape, const std::string& dim, DType dtype) {
  int a = shape.index(dim);
  if (a < 0) throw_invalid("iota", "no dim '" + dim + "' in " + shape.to_string());
  if (dtype == DType::boolean) throw_invalid("iota", "dtype bool is not supported");
  std::vector<float> v(size_t(shape[a].size));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  Array line = is_integer(dtype) ? Array::from_ints(Shape{shape[a]}, std::vector<int64_t>(v.begin(), v.end()), dtype)
                                 : Array::from_floats(Shape{shape[a]}, v, dtype);
  return broadcast_to(line, shape);
}

namespace {
Array one_hot_local(const Array& indices, int64_t depth, const std::string& name, DType dtype) {
  if (!is_integer(indices.dtype())) throw_invalid("one_hot", "indices must be int32/int64, got " + describe(indices));
  if (indices.has_dim(name)) throw_invalid("one_hot", "new dim '" + name + "' already in indices " + describe(indices));
  if (depth < 0) throw_invalid("one_hot", "negative depth " + std::to_string(depth));
  require_cpu("one_hot", {indices});
  std::vector<Dim> dims = indices.shape().dims();
  dims.push_back({name, depth});
  Array out = make_output(Shape(dims), dtype, {indices}, true);
  std::vector<int64_t> ids = indices.to_ints();
  kernels::cpu::one_hot(dtype, ids.data(), int64_t(ids.size()), depth, out.raw_data());
  return out;
}
}  // namespace

// Not differentiable: a composite whose expansion is the kernel.
Array one_hot(const Array& indices, int64_t depth, const std::string& name, DType dtype) {
  return composite1(
      "one_hot", {indices}, [&](const std::vector<Array>& in) { return one_hot_local(in[0], depth, name, dtype); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.one_hot(in[0], depth, name, dtype); });
}

Array take(const Array& x, const Array& indices, const std::string& dim) {
  int a = require_dim("take", x, dim);
  std::vector<int64_t> ids = index_values("take", indices);
  const int64_t n = x.shape()[a].size;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= n)
      throw_invalid("take", "index " + std::to_string(ids[i]) + " (at flat position " + std::to_string(i) +
                                ") out of range for dim '" + dim + "' of size " + std::to_string(n));
  std::vector<Dim> dims;
  for (int d = 0; d < x.rank(); ++d) {
    if (d == a) {
      for (const Dim& i : indices.shape().dims()) {
        if (x.has_dim(i.name) && i.name != dim)
          throw_invalid("take", "indices dim '" + i.name + "' collides with a dim of x " + describe(x));
        dims.push_back(i);
      }
    } else {
      dims.push_back(x.shape()[d]);
    }
  }
  return apply1(std::make_shared<Take>(a, Shape(dims)), {x, indices});
}

std::pair<Array, Array> top_k(const Array& x, int64_t k, const std::string& dim) {
  int a = require_dim("top_k", x, dim);
  if (x.dtype() == DType::boolean) throw_invalid("top_k", "does not accept bool, got " + describe(x));
  if (k < 0 || k > x.shape()[a].size)
    throw_invalid("top_k", "k = " + std::to_string(k) + " outside [0, " + std::to_string(x.shape()[a].size) +
                               "] for dim '" + dim + "'");
  auto r = t5x::apply(std::make_shared<TopK>(k, dim), {x});
  return {r[0], r[1]};
}

}  // namespace t5x
