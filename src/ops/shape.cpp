#include "ops/shape.h"

#include <algorithm>
#include <cstring>

#include "backend/kernels.h"
#include "ops/detail.h"
#include "ops/lowering.h"
#include "ops/elementwise.h"
#include "ops/primitive.h"

namespace t5x {
using namespace detail;

namespace {

// x materialised with the dims (and order) of `out`; dims of out absent in x
// are broadcast.
Array relayout(const Array& x, const Shape& out_shape) {
  Array out = make_output(out_shape, x.dtype(), {x});
  kernels::Strided<1> s{out_shape.sizes(), {strides_over(x.shape(), out_shape)}};
  kernels::cpu::copy(dtype_size(x.dtype()), s, x.raw_data(), out.raw_data(), /*tiled=*/true);
  return out;
}

int64_t block_base(const Shape& big, const std::vector<int64_t>& start) {
  std::vector<int64_t> st = big.strides();
  int64_t b = 0;
  for (size_t d = 0; d < start.size(); ++d) b += start[d] * st[d];
  return b;
}

// dst[start + i] = src[i] for every index i of src (same dim order).
void write_block(const Array& src, Array& dst, const std::vector<int64_t>& start) {
  kernels::Strided<1> s{src.shape().sizes(), {dst.shape().strides()}};
  const int64_t base = block_base(dst.shape(), start);
  kernels::cpu::copy_into(dtype_size(src.dtype()), s, src.raw_data(),
                          static_cast<char*>(dst.raw_data()) + base * int64_t(dtype_size(src.dtype())));
}

// The block of src of shape `out_shape` starting at `start`.
Array read_block(const Array& src, const Shape& out_shape, const std::vector<int64_t>& start) {
  Array out = make_output(out_shape, src.dtype(), {src});
  kernels::Strided<1> s{out_shape.sizes(), {src.shape().strides()}};
  const int64_t base = block_base(src.shape(), start);
  kernels::cpu::copy(dtype_size(src.dtype()), s,
                     static_cast<const char*>(src.raw_data()) + base * int64_t(dtype_size(src.dtype())),
                     out.raw_data(), /*tiled=*/false);
  return out;
}

class Relayout : public Primitive {
 public:
  Relayout(const char* name, Shape out) : name_(name), out_(std::move(out)) {}
  const char* name() const override { return name_; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    in_ = in[0].shape();
    return {relayout(in[0], out_)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {unbroadcast(cot[0], in_)};
  }
  bool accepts_wide_cotangents() const override { return true; }

 private:
  const char* name_;
  Shape out_, in_;
};

class View : public Primitive {
 public:
  View(const char* name, Shape out) : name_(name), out_(std::move(out)) {}
  const char* name() const override { return name_; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    in_ = in[0].shape();
    return {in[0].view_as(out_)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {apply1(std::make_shared<View>(name_, in_), {cot[0]})};
  }
  bool accepts_wide_cotangents() const override { return true; }

 private:
  const char* name_;
  Shape out_, in_;
};

// Pads x into a zero (or `value`) array of shape `out` at `start`.
class PadBlock;

// Reads the block [start, start + out) of x.
class SliceBlock : public Primitive {
 public:
  SliceBlock(Shape out, std::vector<int64_t> start) : out_(std::move(out)), start_(std::move(start)) {}
  const char* name() const override { return "slice"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    in_ = in[0].shape();
    return {read_block(in[0], out_, start_)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override;

 private:
  Shape out_, in_;
  std::vector<int64_t> start_;
};

class PadBlock : public Primitive {
 public:
  PadBlock(Shape out, std::vector<int64_t> start, double value)
      : out_(std::move(out)), start_(std::move(start)), value_(value) {}
  const char* name() const override { return "pad"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    in_ = in[0].shape();
    Array out = value_ == 0.0 ? make_output(out_, in[0].dtype(), {in[0]}, true)
                              : Array::full(out_, value_, in[0].dtype());
    write_block(in[0], out, start_);
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {apply1(std::make_shared<SliceBlock>(in_, start_), {cot[0]})};
  }

 private:
  Shape out_, in_;
  std::vector<int64_t> start_;
  double value_;
};

std::vector<Array> SliceBlock::vjp(const std::vector<Array>&, const std::vector<Array>&,
                                   const std::vector<Array>& cot, const std::vector<bool>&) {
  return {apply1(std::make_shared<PadBlock>(in_, start_, 0.0), {cot[0]})};
}

class Concat : public Primitive {
 public:
  Concat(Shape out, int axis) : out_(std::move(out)), axis_(axis) {}
  const char* name() const override { return "concat"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.concat(in, out_.names()[size_t(axis_)])};
  }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    Array out = make_output(out_, in[0].dtype(), in);
    std::vector<int64_t> start(size_t(out_.rank()), 0);
    for (const Array& x : in) {
      shapes_.push_back(x.shape());
      write_block(x, out, start);
      start[size_t(axis_)] += x.shape()[axis_].size;
    }
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    std::vector<Array> r;
    std::vector<int64_t> start(size_t(out_.rank()), 0);
    for (size_t i = 0; i < shapes_.size(); ++i) {
      r.push_back(needs[i] ? apply1(std::make_shared<SliceBlock>(shapes_[i], start), {cot[0]}) : Array());
      start[size_t(axis_)] += shapes_[i][axis_].size;
    }
    return r;
  }

 private:
  Shape out_;
  int axis_;
  std::vector<Shape> shapes_;
};

// in_place: the update is written over in[0]'s buffer (dynamic_update_slice_into
// donates it), and the op is not differentiable.
class DynamicUpdateSlice : public Primitive {
 public:
  explicit DynamicUpdateSlice(std::vector<int64_t> start, bool in_place = false)
      : start_(std::move(start)), in_place_(in_place) {}
  const char* name() const override { return "dynamic_update_slice"; }
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    upd_ = in[1].shape();
    Array out = in_place_ ? in[0].alias() : in[0].copy();
    write_block(in[1], out, start_);
    return {out};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    if (in_place_) throw_invalid("dynamic_update_slice", "internal: the in-place update is not differentiable");
    Array go, gu;
    if (needs[0]) go = apply1(std::make_shared<DynamicUpdateSlice>(start_), {cot[0], Array::zeros(upd_, cot[0].dtype())});
    if (needs[1]) gu = apply1(std::make_shared<SliceBlock>(upd_, start_), {cot[0]});
    return {go, gu};
  }

 private:
  std::vector<int64_t> start_;
  bool in_place_;
  Shape upd_;
};

// The public ops over the shared kernels above: each adds its arguments and
// its sharded rule (the kernels' own instances, made by vjps, run on local
// shards only).
class Transpose final : public Relayout {
 public:
  Transpose(Shape out, std::vector<std::string> order) : Relayout("transpose", std::move(out)), order_(std::move(order)) {}
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.transpose(in[0], order_)};
  }

 private:
  std::vector<std::string> order_;
};

class BroadcastTo final : public Relayout {
 public:
  explicit BroadcastTo(Shape out) : Relayout("broadcast_to", out), shape_(std::move(out)) {}
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.broadcast_to(in[0], shape_)};
  }

 private:
  Shape shape_;
};

class Rename final : public View {
 public:
  Rename(Shape out, std::map<std::string, std::string> renames) : View("rename", std::move(out)), renames_(std::move(renames)) {}
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.rename(in[0], renames_)};
  }

 private:
  std::map<std::string, std::string> renames_;
};

class Reshape final : public View {
 public:
  explicit Reshape(Shape out) : View("reshape", out), shape_(std::move(out)) {}
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.reshape(in[0], shape_)};
  }

 private:
  Shape shape_;
};

class Slice final : public SliceBlock {
 public:
  Slice(Shape out, std::vector<int64_t> st, std::string dim, int64_t start, int64_t size)
      : SliceBlock(std::move(out), std::move(st)), dim_(std::move(dim)), start_(start), size_(size) {}
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.slice(in[0], dim_, start_, size_)};
  }

 private:
  std::string dim_;
  int64_t start_, size_;
};

class DynamicSlice final : public SliceBlock {
 public:
  DynamicSlice(Shape out, std::vector<int64_t> st, std::map<std::string, int64_t> starts,
               std::map<std::string, int64_t> sizes)
      : SliceBlock(std::move(out), std::move(st)), starts_(std::move(starts)), sizes_(std::move(sizes)) {}
  const char* name() const override { return "dynamic_slice"; }
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.dynamic_slice(in[0], starts_, sizes_)};
  }

 private:
  std::map<std::string, int64_t> starts_, sizes_;
};

class Pad final : public PadBlock {
 public:
  Pad(Shape out, std::vector<int64_t> st, std::string dim, int64_t lo, int64_t hi, double value)
      : PadBlock(std::move(out), std::move(st), value), dim_(std::move(dim)), lo_(lo), hi_(hi), value_(value) {}
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.pad(in[0], dim_, lo_, hi_, value_)};
  }

 private:
  std::string dim_;
  int64_t lo_, hi_;
  double value_;
};

class DynamicUpdate final : public DynamicUpdateSlice {
 public:
  DynamicUpdate(std::vector<int64_t> st, std::map<std::string, int64_t> starts)
      : DynamicUpdateSlice(std::move(st)), starts_(std::move(starts)) {}
  std::vector<Array> lower(const ShardedLowering& l, const std::vector<Array>& in) const override {
    return {l.dynamic_update_slice(in[0], in[1], starts_)};
  }

 private:
  std::map<std::string, int64_t> starts_;
};

Shape with_size(const Shape& s, int axis, int64_t size) {
  std::vector<Dim> d = s.dims();
  d[size_t(axis)].size = size;
  return Shape(std::move(d));
}

}  // namespace

Array transpose(const Array& x, const std::vector<std::string>& order) {
  // The order x already has: x itself, without building a shape.
  if (x.valid() && order.size() == x.shape().dims().size() &&
      std::equal(order.begin(), order.end(), x.shape().dims().begin(),
                 [](const std::string& n, const Dim& d) { return n == d.name; }))
    return x;
  if (int(order.size()) != x.rank())
    throw_invalid("transpose", "order " + names_to_string(order) + " is not a permutation of the dims of " + describe(x));
  std::vector<Dim> dims;
  for (const std::string& n : order) {
    int i = x.shape().index(n);
    if (i < 0) throw_invalid("transpose", "no dim '" + n + "' in x " + describe(x));
    dims.push_back(x.shape()[i]);
  }
  Shape out(dims);  // rejects duplicates
  if (out == x.shape()) return x;
  return apply1(std::make_shared<Transpose>(out, order), {x});
}

Array transpose_like(const Array& x, const Array& like) {
  const auto& a = x.shape().dims();
  const auto& b = like.shape().dims();
  const bool same = a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const Dim& p, const Dim& q) {
                      return p.name == q.name;
                    });
  return same ? x : transpose(x, like.names());
}

Array rename(const Array& x, const std::map<std::string, std::string>& renames) {
  std::vector<Dim> dims = x.shape().dims();
  for (const auto& [from, to] : renames) {
    int i = require_dim("rename", x, from);
    dims[size_t(i)].name = to;
  }
  Shape out;
  try {
    out = Shape(dims);
  } catch (const std::invalid_argument&) {
    throw_invalid("rename", "renaming dims of " + describe(x) + " gives duplicate names");
  }
  return apply1(std::make_shared<Rename>(out, renames), {x});
}

Array reshape(const Array& x, const Shape& shape) {
  if (shape.numel() != x.size())
    throw_invalid("reshape", "cannot reshape " + describe(x) + " (" + std::to_string(x.size()) + " elements) to " +
                                 shape.to_string() + " (" + std::to_string(shape.numel()) + " elements)");
  if (shape == x.shape()) return x;
  return apply1(std::make_shared<Reshape>(shape), {x});
}

Array broadcast_to(const Array& x, const Shape& shape) {
  for (const Dim& d : x.shape().dims()) {
    int i = shape.index(d.name);
    if (i < 0) throw_invalid("broadcast_to", "dim '" + d.name + "' of " + describe(x) + " is absent from " + shape.to_string());
    if (shape[i].size != d.size)
      throw_invalid("broadcast_to", "dim '" + d.name + "' has size " + std::to_string(d.size) + " in x " + describe(x) +
                                        " but " + std::to_string(shape[i].size) + " in the target " + shape.to_string());
  }
  if (shape == x.shape()) return x;
  return apply1(std::make_shared<BroadcastTo>(shape), {x});
}

Array slice(const Array& x, const std::string& dim, int64_t start, int64_t size) {
  int a = require_dim("slice", x, dim);
  int64_t n = x.shape()[a].size;
  if (start < 0 || size < 0 || start + size > n)
    throw_invalid("slice", "range [" + std::to_string(start) + ", " + std::to_string(start + size) +
                               ") out of bounds for dim '" + dim + "' of size " + std::to_string(n) + " in " + describe(x));
  std::vector<int64_t> st(size_t(x.rank()), 0);
  st[size_t(a)] = start;
  return apply1(std::make_shared<Slice>(with_size(x.shape(), a, size), st, dim, start, size), {x});
}

Array pad(const Array& x, const std::string& dim, int64_t lo, int64_t hi, double value) {
  int a = require_dim("pad", x, dim);
  if (lo < 0 || hi < 0)
    throw_invalid("pad", "negative padding (" + std::to_string(lo) + ", " + std::to_string(hi) + ") for dim '" + dim + "'");
  std::vector<int64_t> st(size_t(x.rank()), 0);
  st[size_t(a)] = lo;
  return apply1(std::make_shared<Pad>(with_size(x.shape(), a, x.shape()[a].size + lo + hi), st, dim, lo, hi, value), {x});
}

Array concat(const std::vector<Array>& xs, const std::string& dim) {
  if (xs.empty()) throw_invalid("concat", "needs at least one array");
  int a = require_dim("concat", xs[0], dim, "xs[0]");
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    check_same_dtype("concat", xs[0], xs[i], "xs[0]", ("xs[" + std::to_string(i) + "]").c_str());
    const Shape& s = xs[i].shape();
    bool ok = s.rank() == xs[0].rank();
    for (int d = 0; ok && d < s.rank(); ++d)
      ok = s[d].name == xs[0].shape()[d].name && (d == a || s[d].size == xs[0].shape()[d].size);
    if (!ok)
      throw_invalid("concat", "xs[" + std::to_string(i) + "] " + describe(xs[i]) + " does not match xs[0] " +
                                  describe(xs[0]) + " outside dim '" + dim + "'");
    total += s[a].size;
  }
  if (xs.size() == 1) return xs[0];
  return apply1(std::make_shared<Concat>(with_size(xs[0].shape(), a, total), a), xs);
}

// stack, expand_dims and squeeze are composites: a sharded stack keeps the
// stacked arrays' layouts, where their parts (reshapes adding a dim, then a
// concat) might gather them.
namespace {
Array stack_local(const std::vector<Array>& xs, const std::string& name, int axis) {
  if (xs.empty()) throw_invalid("stack", "needs at least one array");
  if (xs[0].has_dim(name)) throw_invalid("stack", "new dim '" + name + "' already in " + describe(xs[0]));
  int r = xs[0].rank();
  if (axis < 0) axis += r + 1;
  if (axis < 0 || axis > r) throw_invalid("stack", "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  std::vector<Dim> dims = xs[0].shape().dims();
  dims.insert(dims.begin() + axis, Dim{name, 1});
  Shape one(dims);
  std::vector<Array> parts;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].shape() != xs[0].shape())
      throw_invalid("stack", "xs[" + std::to_string(i) + "] " + describe(xs[i]) + " differs from xs[0] " + describe(xs[0]));
    parts.push_back(reshape(xs[i], one));
  }
  return concat(parts, name);
}

Array expand_dims_local(const Array& x, const std::string& name, int axis) {
  if (x.has_dim(name)) throw_invalid("expand_dims", "dim '" + name + "' already in " + describe(x));
  int r = x.rank();
  if (axis < 0) axis += r + 1;
  if (axis < 0 || axis > r) throw_invalid("expand_dims", "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(r));
  std::vector<Dim> dims = x.shape().dims();
  dims.insert(dims.begin() + axis, Dim{name, 1});
  return reshape(x, Shape(dims));
}

Array squeeze_local(const Array& x, const std::string& name) {
  int a = require_dim("squeeze", x, name);
  if (x.shape()[a].size != 1)
    throw_invalid("squeeze", "dim '" + name + "' has size " + std::to_string(x.shape()[a].size) + ", not 1, in " + describe(x));
  std::vector<Dim> dims = x.shape().dims();
  dims.erase(dims.begin() + a);
  return reshape(x, Shape(dims));
}
}  // namespace

Array stack(const std::vector<Array>& xs, const std::string& name, int axis) {
  return composite1(
      "stack", xs, [&](const std::vector<Array>& in) { return stack_local(in, name, axis); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.stack(in, name, axis); });
}

Array expand_dims(const Array& x, const std::string& name, int axis) {
  return composite1(
      "expand_dims", {x}, [&](const std::vector<Array>& in) { return expand_dims_local(in[0], name, axis); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.expand_dims(in[0], name, axis); });
}

Array squeeze(const Array& x, const std::string& name) {
  return composite1(
      "squeeze", {x}, [&](const std::vector<Array>& in) { return squeeze_local(in[0], name); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) { return l.squeeze(in[0], name); });
}

std::vector<Array> unstack(const Array& x, const std::string& dim) {
  int a = require_dim("unstack", x, dim);
  std::vector<Array> r;
  for (int64_t i = 0; i < x.shape()[a].size; ++i) r.push_back(squeeze(slice(x, dim, i, 1), dim));
  return r;
}

namespace {
std::vector<int64_t> clamp_starts(const char* op, const Shape& big, const Shape& small,
                                  const std::map<std::string, int64_t>& starts) {
  std::vector<int64_t> st(size_t(big.rank()), 0);
  for (const auto& [n, v] : starts) {
    int i = big.index(n);
    if (i < 0) throw_invalid(op, "start given for dim '" + n + "' absent from " + big.to_string());
    st[size_t(i)] = std::clamp<int64_t>(v, 0, big[i].size - small[i].size);
  }
  return st;
}
}  // namespace

Array dynamic_slice(const Array& x, const std::map<std::string, int64_t>& starts,
                    const std::map<std::string, int64_t>& sizes) {
  std::vector<Dim> dims = x.shape().dims();
  for (const auto& [n, v] : sizes) {
    int i = require_dim("dynamic_slice", x, n);
    if (v < 0 || v > dims[size_t(i)].size)
      throw_invalid("dynamic_slice", "size " + std::to_string(v) + " for dim '" + n + "' of size " +
                                         std::to_string(dims[size_t(i)].size));
    dims[size_t(i)].size = v;
  }
  Shape out(dims);
  return apply1(std::make_shared<DynamicSlice>(out, clamp_starts("dynamic_slice", x.shape(), out, starts), starts, sizes),
                {x});
}

namespace {
void check_update(const Array& operand, const Array& update) {
  check_same_dtype("dynamic_update_slice", operand, update, "operand", "update");
  const Shape &a = operand.shape(), &u = update.shape();
  bool ok = a.rank() == u.rank();
  for (int d = 0; ok && d < a.rank(); ++d) ok = a[d].name == u[d].name && u[d].size <= a[d].size;
  if (!ok)
    throw_invalid("dynamic_update_slice", "update " + describe(update) + " must have the dims of operand " +
                                              describe(operand) + " in the same order, each no larger");
}

}  // namespace

Array dynamic_update_slice(const Array& operand, const Array& update, const std::map<std::string, int64_t>& starts) {
  check_update(operand, update);
  return apply1(std::make_shared<DynamicUpdate>(clamp_starts("dynamic_update_slice", operand.shape(), update.shape(),
                                                             starts),
                                                starts),
                {operand, update});
}

void dynamic_update_slice_into(Array& operand, const Array& update, const std::map<std::string, int64_t>& starts) {
  check_update(operand, update);
  if (!can_write_over(operand, {update})) {
    operand = dynamic_update_slice(operand, update, starts);
    return;
  }
  Array a = std::move(operand);
  operand = apply1(
      std::make_shared<DynamicUpdateSlice>(clamp_starts("dynamic_update_slice", a.shape(), update.shape(), starts),
                                           true),
      {a, update});
}

}  // namespace t5x
