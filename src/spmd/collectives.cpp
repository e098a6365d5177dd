#include "spmd/collectives.h"

#include <cstring>
#include <optional>

#include "core/allocator.h"
#include "core/error.h"
#include "ops/primitive.h"
#include "spmd/context.h"
#include "spmd/local.h"

namespace t5x::spmd {
namespace {

struct Split {
  int64_t pre = 1, d = 1, post = 1;  // x viewed as [pre, d, post] around dim
};
Split around(const Shape& s, int di) {
  Split r;
  for (int i = 0; i < s.rank(); ++i) {
    if (i < di) r.pre *= s[i].size;
    else if (i == di) r.d = s[i].size;
    else r.post *= s[i].size;
  }
  return r;
}

Shape with_size(const Shape& s, int di, int64_t size) {
  std::vector<Dim> dims = s.dims();
  dims[size_t(di)].size = size;
  return Shape(std::move(dims));
}

// A collective's staging copy: not zeroed (every byte is written before it
// is read), from the CPU allocator's cache of freed blocks.
char* staging(std::optional<Buffer>& b, size_t bytes) {
  b.emplace(bytes, /*zero=*/false);
  return static_cast<char*>(b->data());
}

// [pre, k*dk, post] -> [k, pre, dk, post]
void to_member_major(const char* in, char* out, const Split& sp, int64_t k, size_t es) {
  const int64_t dk = sp.d / k, row = dk * sp.post * int64_t(es);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t p = 0; p < sp.pre; ++p)
      std::memcpy(out + ((j * sp.pre + p) * row), in + ((p * k + j) * row), size_t(row));
}
// [k, pre, dk, post] -> [pre, k*dk, post]; sp describes one piece (d = dk).
void from_member_major(const char* in, char* out, const Split& piece, int64_t k, size_t es) {
  const int64_t row = piece.d * piece.post * int64_t(es);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t p = 0; p < piece.pre; ++p)
      std::memcpy(out + ((p * k + j) * row), in + ((j * piece.pre + p) * row), size_t(row));
}

int dim_index(const char* op, const Array& x, const std::string& dim) {
  int i = x.shape().index(dim);
  if (i < 0) throw_invalid(op, "no dim '" + dim + "' in " + std::string(dtype_name(x.dtype())) + x.shape().to_string());
  return i;
}

Array raw_all_reduce(const Array& x, const Axes& axes, ReduceOp op) {
  Array out(x.shape(), x.dtype(), {}, {}, false);
  if (context().mesh_invariant() && op == ReduceOp::kSum && x.dtype() == DType::f32) {
    // One fixed order (pairwise in group-rank order, mesh/pairwise_sum.h):
    // the same bits for any MPI algorithm, and one process's sum of the
    // same blocks (microbatches).
    std::memcpy(out.raw_data(), x.raw_data(), size_t(x.size()) * sizeof(float));
    context().over(axes).all_reduce_pairwise(static_cast<float*>(out.raw_data()), size_t(x.size()));
    return out;
  }
  context().over(axes).all_reduce(x.raw_data(), out.raw_data(), size_t(x.size()), comm_dtype(x.dtype(), "all_reduce"),
                                  op);
  return out;
}

Array raw_all_gather(const Array& x, int di, const Axes& axes) {
  Communicator& c = context().over(axes);
  const int64_t k = c.size();
  const size_t es = dtype_size(x.dtype());
  Array out(with_size(x.shape(), di, x.shape()[di].size * k), x.dtype(), {}, {}, false);
  const Split sp = around(x.shape(), di);
  if (sp.pre == 1) {  // the members' shards in rank order are the concat
    c.all_gather(x.raw_data(), out.raw_data(), size_t(x.size()), comm_dtype(x.dtype(), "all_gather"));
    return out;
  }
  std::optional<Buffer> buf;
  char* tmp = staging(buf, size_t(x.size() * k) * es);
  c.all_gather(x.raw_data(), tmp, size_t(x.size()), comm_dtype(x.dtype(), "all_gather"));
  from_member_major(tmp, static_cast<char*>(out.raw_data()), sp, k, es);
  return out;
}

Array raw_reduce_scatter(const Array& x, int di, const Axes& axes) {
  Communicator& c = context().over(axes);
  const int64_t k = c.size();
  const Split sp = around(x.shape(), di);
  if (sp.d % k != 0)
    throw_invalid("reduce_scatter", "dim '" + x.shape()[di].name + "' of size " + std::to_string(sp.d) +
                                        " is not divisible by the group size " + std::to_string(k));
  const size_t es = dtype_size(x.dtype());
  const char* send = static_cast<const char*>(x.raw_data());
  std::optional<Buffer> buf;
  if (sp.pre != 1) {  // (with pre == 1, x is member-major already)
    char* tmp = staging(buf, size_t(x.size()) * es);
    to_member_major(send, tmp, sp, k, es);
    send = tmp;
  }
  Array out(with_size(x.shape(), di, sp.d / k), x.dtype(), {}, {}, false);
  c.reduce_scatter(send, out.raw_data(), size_t(x.size() / k), comm_dtype(x.dtype(), "reduce_scatter"));
  return out;
}

// Block `r` of k along dim di.
Array raw_block(const Array& x, int di, int64_t k, int64_t r) {
  const Split sp = around(x.shape(), di);
  if (sp.d % k != 0)
    throw_invalid("axis_slice", "dim '" + x.shape()[di].name + "' of size " + std::to_string(sp.d) +
                                    " is not divisible by the group size " + std::to_string(k));
  const size_t es = dtype_size(x.dtype());
  Array out(with_size(x.shape(), di, sp.d / k), x.dtype(), {}, {}, false);
  const int64_t row = (sp.d / k) * sp.post * int64_t(es);
  const char* in = static_cast<const char*>(x.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  for (int64_t p = 0; p < sp.pre; ++p) std::memcpy(o + p * row, in + (p * k + r) * row, size_t(row));
  return out;
}

Array raw_all_to_all(const Array& x, int si, int ci, const Axes& axes) {
  Communicator& c = context().over(axes);
  const int64_t k = c.size();
  const Split sp = around(x.shape(), si);
  if (sp.d % k != 0)
    throw_invalid("all_to_all", "dim '" + x.shape()[si].name + "' of size " + std::to_string(sp.d) +
                                    " is not divisible by the group size " + std::to_string(k));
  const size_t es = dtype_size(x.dtype());
  const char* send = static_cast<const char*>(x.raw_data());
  std::optional<Buffer> buf, recv_buf;
  if (sp.pre != 1) {
    char* tmp = staging(buf, size_t(x.size()) * es);
    to_member_major(send, tmp, sp, k, es);
    send = tmp;
  }
  Shape piece = with_size(x.shape(), si, sp.d / k);
  Array out(with_size(piece, ci, piece[ci].size * k), x.dtype(), {}, {}, false);
  const Split cp = around(piece, ci);
  if (cp.pre == 1) {  // received in rank order = the concat along ci
    c.all_to_all(send, out.raw_data(), size_t(x.size() / k), comm_dtype(x.dtype(), "all_to_all"));
    return out;
  }
  char* recv = staging(recv_buf, size_t(x.size()) * es);
  c.all_to_all(send, recv, size_t(x.size() / k), comm_dtype(x.dtype(), "all_to_all"));
  from_member_major(recv, static_cast<char*>(out.raw_data()), cp, k, es);
  return out;
}

Array raw_permute(const Array& x, const Axes& axes, const std::vector<std::pair<int, int>>& pairs) {
  Array out(x.shape(), x.dtype(), {}, {}, true);
  context().over(axes).permute(x.raw_data(), out.raw_data(), size_t(x.size()), comm_dtype(x.dtype(), "ppermute"),
                               pairs);
  return out;
}

class AllReduceP : public Primitive {
 public:
  AllReduceP(Axes a, ReduceOp op) : axes_(std::move(a)), op_(op) {}
  const char* name() const override { return "all_reduce"; }
  bool accepts_wide_cotangents() const override { return true; }  // float32 sums
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {raw_all_reduce(in[0], axes_, op_)}; }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    if (op_ != ReduceOp::kSum) return {Array()};
    return {cot[0]};
  }

 private:
  Axes axes_;
  ReduceOp op_;
};

class PVaryP : public Primitive {
 public:
  explicit PVaryP(Axes a) : axes_(std::move(a)) {}
  const char* name() const override { return "pvary"; }
  bool accepts_wide_cotangents() const override { return true; }  // float32 sums
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {in[0].alias()}; }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {raw_all_reduce(cot[0], axes_, ReduceOp::kSum)};
  }

 private:
  Axes axes_;
};

class AllGatherP : public Primitive {
 public:
  AllGatherP(std::string d, Axes a, bool inv) : dim_(std::move(d)), axes_(std::move(a)), invariant_(inv) {}
  const char* name() const override { return invariant_ ? "all_gather_invariant" : "all_gather"; }
  bool accepts_wide_cotangents() const override { return true; }  // float32 sums
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    return {raw_all_gather(in[0], in[0].shape().index(dim_), axes_)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    int di = cot[0].shape().index(dim_);
    if (invariant_) return {raw_block(cot[0], di, group_size(axes_), group_rank(axes_))};
    return {raw_reduce_scatter(cot[0], di, axes_)};
  }

 private:
  std::string dim_;
  Axes axes_;
  bool invariant_;
};

class ReduceScatterP : public Primitive {
 public:
  ReduceScatterP(std::string d, Axes a) : dim_(std::move(d)), axes_(std::move(a)) {}
  const char* name() const override { return "reduce_scatter"; }
  bool accepts_wide_cotangents() const override { return true; }  // float32 sums
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    return {raw_reduce_scatter(in[0], in[0].shape().index(dim_), axes_)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {raw_all_gather(cot[0], cot[0].shape().index(dim_), axes_)};
  }

 private:
  std::string dim_;
  Axes axes_;
};

class AllToAllP : public Primitive {
 public:
  AllToAllP(std::string s, std::string c, Axes a) : s_(std::move(s)), c_(std::move(c)), axes_(std::move(a)) {}
  const char* name() const override { return "all_to_all"; }
  bool accepts_wide_cotangents() const override { return true; }  // float32 sums
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    return {raw_all_to_all(in[0], in[0].shape().index(s_), in[0].shape().index(c_), axes_)};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {raw_all_to_all(cot[0], cot[0].shape().index(c_), cot[0].shape().index(s_), axes_)};
  }

 private:
  std::string s_, c_;
  Axes axes_;
};

class PPermuteP : public Primitive {
 public:
  PPermuteP(Axes a, std::vector<std::pair<int, int>> p) : axes_(std::move(a)), pairs_(std::move(p)) {}
  const char* name() const override { return "ppermute"; }
  bool accepts_wide_cotangents() const override { return true; }  // float32 sums
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override { return {raw_permute(in[0], axes_, pairs_)}; }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    std::vector<std::pair<int, int>> inv;
    for (auto [s, d] : pairs_) inv.emplace_back(d, s);
    return {raw_permute(cot[0], axes_, inv)};
  }

 private:
  Axes axes_;
  std::vector<std::pair<int, int>> pairs_;
};

class AxisSliceP : public Primitive {
 public:
  AxisSliceP(std::string d, Axes a) : dim_(std::move(d)), axes_(std::move(a)) {}
  const char* name() const override { return "axis_slice"; }
  bool accepts_wide_cotangents() const override { return true; }  // float32 sums
  bool saves_inputs() const override { return false; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    return {raw_block(in[0], in[0].shape().index(dim_), group_size(axes_), group_rank(axes_))};
  }
  std::vector<Array> vjp(const std::vector<Array>&, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>&) override {
    return {raw_all_gather(cot[0], cot[0].shape().index(dim_), axes_)};
  }

 private:
  std::string dim_;
  Axes axes_;
};

void check_local_input(const char* op, const Array& x) {
  if (!x.valid()) throw_invalid(op, "null array");
  if (!x.is_fully_local() || x.local_shape() != x.shape())
    throw_invalid(op, "expects a local array (spmd::to_local), got the sharded " + describe_sharded(x));
}

}  // namespace

int64_t group_size(const Axes& axes) { return context().mesh().axes_size(axes); }
int64_t group_rank(const Axes& axes) {
  const Mesh& m = context().mesh();
  return m.rank_in_group(axes, m.device_id());
}
Axes nontrivial(const Axes& axes) {
  Axes r;
  for (const auto& a : axes)
    if (context().mesh().axis_size(a) > 1) r.push_back(a);
  return r;
}

Array all_reduce(const Array& x, const Axes& axes, ReduceOp op) {
  check_local_input("all_reduce", x);
  if (group_size(axes) == 1) return x;
  return apply1(std::make_shared<AllReduceP>(axes, op), {x});
}

Array pvary(const Array& x, const Axes& axes) {
  check_local_input("pvary", x);
  if (group_size(axes) == 1) return x;
  return apply1(std::make_shared<PVaryP>(axes), {x});
}

Array all_gather(const Array& x, const std::string& dim, const Axes& axes) {
  check_local_input("all_gather", x);
  dim_index("all_gather", x, dim);
  if (group_size(axes) == 1) return x;
  return apply1(std::make_shared<AllGatherP>(dim, axes, false), {x});
}

Array all_gather_invariant(const Array& x, const std::string& dim, const Axes& axes) {
  check_local_input("all_gather_invariant", x);
  dim_index("all_gather_invariant", x, dim);
  if (group_size(axes) == 1) return x;
  return apply1(std::make_shared<AllGatherP>(dim, axes, true), {x});
}

Array reduce_scatter(const Array& x, const std::string& dim, const Axes& axes) {
  check_local_input("reduce_scatter", x);
  dim_index("reduce_scatter", x, dim);
  if (group_size(axes) == 1) return x;
  return apply1(std::make_shared<ReduceScatterP>(dim, axes), {x});
}

Array all_to_all(const Array& x, const std::string& split_dim, const std::string& concat_dim, const Axes& axes) {
  check_local_input("all_to_all", x);
  dim_index("all_to_all", x, split_dim);
  dim_index("all_to_all", x, concat_dim);
  if (group_size(axes) == 1) return x;
  if (split_dim == concat_dim) throw_invalid("all_to_all", "split and concat dims must differ, both are '" + split_dim + "'");
  return apply1(std::make_shared<AllToAllP>(split_dim, concat_dim, axes), {x});
}

Array ppermute(const Array& x, const Axes& axes, const std::vector<std::pair<int, int>>& pairs) {
  check_local_input("ppermute", x);
  return apply1(std::make_shared<PPermuteP>(axes, pairs), {x});
}

Array axis_slice(const Array& x, const std::string& dim, const Axes& axes) {
  check_local_input("axis_slice", x);
  dim_index("axis_slice", x, dim);
  if (group_size(axes) == 1) return x;
  return apply1(std::make_shared<AxisSliceP>(dim, axes), {x});
}

}  // namespace t5x::spmd
