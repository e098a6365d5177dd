#include "ops/einsum.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <sstream>

#include "backend/kernels.h"
#include "ops/detail.h"
#include "ops/lowering.h"
#include "ops/elementwise.h"
#include "ops/primitive.h"
#include "ops/profile.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace t5x {
using namespace detail;

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
// The result dtype of an einsum of x and y; `widen` asks for float32 from
// bfloat16 operands (the GEMM's accumulators, unrounded).
DType result_dtype(const Array& x, bool widen) { return widen && x.dtype() == DType::bf16 ? DType::f32 : x.dtype(); }

// T5X_OP_PROFILE: each product's time under its dtypes and shape.
void profile_gemm(const char* dtypes, const kernels::GemmDims& g, std::chrono::steady_clock::time_point t0) {
  if (t0 == std::chrono::steady_clock::time_point()) return;
  op_profile_add(std::string("  gemm ") + dtypes + " b" + std::to_string(g.batch) + " m" + std::to_string(g.m) +
                     " n" + std::to_string(g.n) + " k" + std::to_string(g.k) + (g.trans_a ? " tA" : "") +
                     (g.trans_b ? " tB" : ""),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

// The clock for profile_gemm, read only when T5X_OP_PROFILE is on (a
// decode step makes ~70 products per token).
std::chrono::steady_clock::time_point profile_start() {
  return op_profile_enabled() ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
}

// Where each dim of an einsum's operands goes (Einsum::eval_cpu): positions
// in x and in y by role, found by comparing names once per call rather than
// through vectors of names (a batch-1 decode step makes ~67 einsums a token;
// bench/ops BM_op_overhead_einsum).
struct Roles {
  static constexpr int kMax = 32;  // Shape ranks far beyond any model's
  struct Group {
    int x[kMax], y[kMax];  // positions in x and y (-1 where absent)
    int count = 0;
    bool in_x = true;      // sizes and dims taken from x (else y)
    int64_t size(const Array& xa, const Array& ya) const {
      int64_t p = 1;
      for (int i = 0; i < count; ++i) p *= in_x ? xa.shape()[x[i]].size : ya.shape()[y[i]].size;
      return p;
    }
    void add(int ix, int iy) {
      if (count == kMax) throw std::invalid_argument("[einsum] more than 32 dims");
      x[count] = ix;
      y[count++] = iy;
    }
  };
  Group b, m, n, k;
  bool out_in_order = true;  // out == B ++ M ++ N
  size_t rank_x = 0, rank_y = 0;

  static int find(const std::vector<Dim>& d, const std::string& name) {
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i].name == name) return int(i);
    return -1;
  }
  Roles(const std::vector<Dim>& xd, const std::vector<Dim>& yd, const std::vector<std::string>& out) {
    n.in_x = false;
    rank_x = xd.size();
    rank_y = yd.size();
    int last = 0;
    for (const std::string& name : out) {
      const int ix = find(xd, name), iy = find(yd, name);
      const int role = ix >= 0 && iy >= 0 ? 0 : ix >= 0 ? 1 : 2;
      if (ix < 0 && iy < 0) throw std::invalid_argument("[einsum] output dim '" + name + "' is in neither operand");
      out_in_order = out_in_order && role >= last;
      last = role;
      (role == 0 ? b : role == 1 ? m : n).add(ix, iy);
    }
    for (size_t i = 0; i < xd.size(); ++i) {
      const int iy = find(yd, xd[i].name);
      if (iy >= 0 && !contains(out, xd[i].name)) k.add(int(i), iy);
    }
  }
  // Whether the concatenated positions of the runs are 0, 1, ..., rank - 1.
  static bool identity(std::initializer_list<std::pair<const int*, int>> runs, size_t rank) {
    size_t at = 0;
    for (const auto& [pos, count] : runs)
      for (int i = 0; i < count; ++i)
        if (pos[i] != int(at++)) return false;
    return at == rank;
  }
  bool x_is(const Group& p, const Group& q, const Group& s) const {
    return identity({{p.x, p.count}, {q.x, q.count}, {s.x, s.count}}, rank_x);
  }
  bool y_is(const Group& p, const Group& q, const Group& s) const {
    return identity({{p.y, p.count}, {q.y, q.count}, {s.y, s.count}}, rank_y);
  }
  // The names of x's (of y's) dims in the groups' order.
  static std::vector<std::string> names_in(const Array& v, bool of_x, std::initializer_list<const Group*> groups) {
    std::vector<std::string> r;
    for (const Group* g : groups)
      for (int i = 0; i < g->count; ++i) r.push_back(v.shape()[of_x ? g->x[i] : g->y[i]].name);
    return r;
  }
};

// as_bf16: a bfloat16 product whose operands may be stored float32, each
// taken as cast(operand, bf16) (EinsumPrecision::operand_dtype).
class Einsum : public Primitive {
 public:
  explicit Einsum(std::vector<std::string> out, bool widen = false, bool wide_grads = false, bool as_bf16 = false)
      : out_(std::move(out)), widen_(widen), wide_grads_(wide_grads), as_bf16_(as_bf16) {}
  const char* name() const override { return "einsum"; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const bool mixed = as_bf16_ && (in[0].dtype() != DType::bf16 || in[1].dtype() != DType::bf16);
    const Array &x = in[0], &y = in[1];  // f32 or bf16 when mixed (einsum_local)
    // Every dim of x and y is a batch dim B (x, y, out), M (x, out), N (y, out)
    // or K (x, y; summed): einsum_local summed the others out. Operand
    // layouts: [B, M, K] or [B, K, M] (trans_a); [B, K, N] or [B, N, K]
    // (trans_b), B and M and N in out's order, K in x's.
    const Roles r(x.shape().dims(), y.shape().dims(), out_);
    // A float32 operand of a bf16 product that needs a transpose (a copy
    // anyway) is cast first, so that the copy is bf16.
    auto narrowed = [&](const Array& v) { return mixed && v.dtype() == DType::f32 ? cast(v, DType::bf16) : v; };
    Array a = x, b = y;
    bool ta = false, tb = false;
    if (r.x_is(r.b, r.k, r.m)) ta = true;
    else if (!r.x_is(r.b, r.m, r.k)) a = transpose(narrowed(x), Roles::names_in(x, true, {&r.b, &r.m, &r.k}));
    if (r.y_is(r.b, r.n, r.k)) tb = true;
    else if (!r.y_is(r.b, r.k, r.n)) b = transpose(narrowed(y), Roles::names_in(y, false, {&r.b, &r.k, &r.n}));
    const int64_t nb = r.b.size(x, y), m = r.m.size(x, y), n = r.n.size(x, y), k = r.k.size(x, y);
    std::vector<Dim> cdims;
    cdims.reserve(size_t(r.b.count + r.m.count + r.n.count));
    for (const Roles::Group* g : {&r.b, &r.m, &r.n})
      for (int i = 0; i < g->count; ++i)
        cdims.push_back(g->in_x ? x.shape()[g->x[i]] : y.shape()[g->y[i]]);
    Shape cshape(std::move(cdims));
    // The product's C comes out as [B, M, N]: out_'s order unless out_
    // interleaves the roles.
    auto in_out_order = [&](Array c) { return r.out_in_order ? c : transpose(c, out_); };
    kernels::GemmDims gs;
    gs.batch = nb; gs.m = m; gs.n = n; gs.k = k; gs.trans_a = ta; gs.trans_b = tb;
    if (mixed && k > 0 && (a.dtype() == DType::f32 || b.dtype() == DType::f32)) {
      // bf16 arithmetic on a float32 operand, rounded as the product reads it.
      const DType cdt = widen_ ? DType::f32 : DType::bf16;
      Array cc = make_output(cshape, cdt, {x, y});
      const auto t0 = profile_start();
      if (nb * m * n > 0)
        kernels::cpu::gemm_as_bf16(gs, a.dtype(), b.dtype(), cdt, a.raw_data(), b.raw_data(), cc.raw_data());
      profile_gemm(cdt == DType::bf16 ? "bf16 (f32 operand)" : "bf16->f32 (f32 operand)", gs, t0);
      return {in_out_order(cc)};
    }
    if (mixed) {  // k == 0, or the operands became bf16 in their transposes
      a = cast(a, DType::bf16);
      b = cast(b, DType::bf16);
    }
    const DType dt = a.dtype();
    if (dt == DType::bf16 && k > 0 && !widen_) {
      // bf16 output straight from the f32 accumulators (one rounding, as the
      // f32 product followed by a cast): no f32 intermediate, no cast pass.
      Array cb = make_output(cshape, DType::bf16, {x, y});
      const auto t0 = profile_start();
      if (nb * m * n > 0)
        kernels::cpu::gemm(gs, DType::bf16, DType::bf16, a.data<bfloat16>(), b.data<bfloat16>(), cb.data<bfloat16>());
      profile_gemm("bf16", gs, t0);
      return {in_out_order(cb)};
    }
    Array c = make_output(cshape, DType::f32, {x, y}, /*zero=*/k == 0);
    if (nb * m * n > 0 && k > 0) {
      if (dt == DType::bf16) {
        const auto t0 = profile_start();
        kernels::cpu::gemm(gs, DType::bf16, DType::f32, a.data<bfloat16>(), b.data<bfloat16>(), c.data<float>());
        profile_gemm("bf16->f32", gs, t0);
      } else {
        Array af = cast(a, DType::f32), bf = cast(b, DType::f32);
        const auto t0 = profile_start();
        kernels::cpu::gemm(gs, DType::f32, DType::f32, af.data<float>(), bf.data<float>(), c.data<float>());
        profile_gemm("f32", gs, t0);
      }
    }
    return {in_out_order(cast(c, result_dtype(a, widen_)))};
  }
  // Cotangents that are sums over 'batch' (weight gradients), and with
  // wide_grads all cotangents, of bfloat16 operands leave their GEMMs in
  // float32 (wide cotangents, ops/autodiff.h): the partial sums of a batch
  // or a contraction split over processes then add up to one process's sum
  // to float32 rounding, not bfloat16's. Activation gradients of one process
  // stay bfloat16 (wide ones would cost cast passes on every activation).
  std::vector<Array> vjp(const std::vector<Array>& in, const std::vector<Array>&, const std::vector<Array>& cot,
                         const std::vector<bool>& needs) override {
    const Array &x = in[0], &y = in[1];
    const DType dt = as_bf16_ ? DType::bf16 : x.dtype();
    // A float32 cotangent of a bf16 output (attention's dq, dk, dv) is rounded
    // to bf16: by the GEMMs as they pack it where they can (the bits of the
    // cast, without its pass over the array), else by a cast.
    const bool rounds_in_packing = as_bf16_ && dt == DType::bf16 && cot[0].dtype() == DType::f32 &&
                                   kernels::cpu::gemm_as_bf16_rounds_in_packing();
    const Array g = cot[0].dtype() == dt || rounds_in_packing ? cot[0] : cast(cot[0], dt);
    // A float32 operand of an as_bf16 product gets its cotangent cast to
    // float32, as the vjp of the cast it stands for.
    auto product = [&](const Array& a, const Array& b, const Array& operand, bool widen) {
      Array r = apply1(std::make_shared<Einsum>(operand.names(), widen, false, as_bf16_), {a, b});
      return operand.dtype() == DType::f32 && r.dtype() == DType::bf16 ? cast(r, DType::f32) : r;
    };
    return {needs[0] ? product(g, y, x, wide_grads_ || einsum_cotangent_sums_over_batch(x, g, y)) : Array(),
            needs[1] ? product(x, g, y, wide_grads_ || einsum_cotangent_sums_over_batch(y, x, g)) : Array()};
  }
  bool accepts_wide_cotangents() const override { return true; }  // vjp() rounds them, above

 private:
  std::vector<std::string> out_;
  bool widen_ = false, wide_grads_ = false, as_bf16_ = false;
};

}  // namespace

// A weight gradient: the sum that data parallelism splits over processes.
bool einsum_cotangent_sums_over_batch(const Array& operand, const Array& a, const Array& b) {
  return !operand.has_dim("batch") && (a.has_dim("batch") || b.has_dim("batch"));
}

Array einsum(const Array& x0, const Array& y0, const std::vector<std::string>& out) {
  return einsum(x0, y0, out, EinsumPrecision{});
}

namespace {
// An operand as a product in `dt` takes it: cast, except a float32 operand of
// a bfloat16 product where the GEMM rounds it as it packs it, unless
// `sums_first` (dims summed out before the product: the sum runs on the cast
// operand). Where the GEMM would cast it on every call (oneDNN's native
// bf16), it is cast here once, and its vjp's product reuses the cast.
Array as_operand(const Array& v, std::optional<DType> dt, bool sums_first) {
  if (!dt || v.dtype() == *dt) return v;
  if (*dt == DType::bf16 && v.dtype() == DType::f32 && !sums_first && kernels::cpu::gemm_as_bf16_rounds_in_packing())
    return v;
  return cast(v, *dt);
}

Array einsum_local(const Array& x1, const Array& y1, const std::vector<std::string>& out, EinsumPrecision precision) {
  const std::optional<DType> dt = precision.operand_dtype;
  check_floating("einsum", x1);
  check_floating("einsum", y1, "y");
  if (dt && !is_floating(*dt))
    throw_invalid("einsum", std::string("operand_dtype must be a floating dtype, got ") + dtype_name(*dt));
  if (!dt) check_same_dtype("einsum", x1, y1);
  auto summed_first = [&](const Array& v, const Array& other) {
    for (const Dim& d : v.shape().dims())
      if (!other.has_dim(d.name) && !contains(out, d.name)) return true;
    return false;
  };
  const Array x0 = as_operand(x1, dt, summed_first(x1, y1)), y0 = as_operand(y1, dt, summed_first(y1, x1));
  for (size_t i = 0; i < out.size(); ++i) {
    if (!x0.has_dim(out[i]) && !y0.has_dim(out[i]))
      throw_invalid("einsum", "output dim '" + out[i] + "' is in neither operand: x " + describe(x0) + ", y " +
                                  describe(y0));
    for (size_t j = 0; j < i; ++j)
      if (out[j] == out[i]) throw_invalid("einsum", "output dim '" + out[i] + "' listed twice");
  }
  std::vector<std::string> xs, ys;  // dims summed out before the product
  for (const Dim& d : x0.shape().dims()) {
    const int iy = y0.shape().index(d.name);
    if (iy >= 0 && y0.shape()[iy].size != d.size)
      broadcast_shapes("einsum", x0.shape(), y0.shape());  // throws: same-named dims of different sizes
    if (iy < 0 && !contains(out, d.name)) xs.push_back(d.name);
  }
  for (const Dim& d : y0.shape().dims())
    if (!x0.has_dim(d.name) && !contains(out, d.name)) ys.push_back(d.name);
  Array x = xs.empty() ? x0 : sum(x0, xs);
  Array y = ys.empty() ? y0 : sum(y0, ys);
  const bool as_bf16 = dt == DType::bf16 && (x.dtype() != DType::bf16 || y.dtype() != DType::bf16);
  return apply1(std::make_shared<Einsum>(out, precision.wide_result, precision.wide_grads, as_bf16), {x, y});
}
}  // namespace

// A composite: the sharded rule takes the operands before the sums of dims
// in one operand only, which it may leave pending as partial sums.
Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out, EinsumPrecision precision) {
  return composite1(
      "einsum", {x, y}, [&](const std::vector<Array>& in) { return einsum_local(in[0], in[1], out, precision); },
      [&](const ShardedLowering& l, const std::vector<Array>& in) {
        // Split operands are cast first (elementwise, per shard).
        auto c = [&](const Array& v) { return as_operand(v, precision.operand_dtype, true); };
        return l.einsum(c(in[0]), c(in[1]), out);
      });
}

namespace {
std::vector<std::string> tokens(const std::string& s) {
  std::istringstream is(s);
  std::vector<std::string> r;
  std::string t;
  while (is >> t) r.push_back(t);
  return r;
}
void check_spec(const std::string& spec, const std::vector<std::string>& listed, const Array& a, const char* what) {
  std::vector<std::string> names = a.names();
  bool ok = listed.size() == names.size();
  for (const auto& n : listed) ok = ok && a.has_dim(n);
  if (!ok)
    throw_invalid("einsum", "spec '" + spec + "' lists " + names_to_string(listed) + " for " + what + " but " + what +
                                " is " + describe(a));
}
}  // namespace

Array einsum(const std::string& spec, const Array& x, const Array& y) {
  size_t arrow = spec.find("->");
  size_t comma = spec.find(',');
  if (arrow == std::string::npos || comma == std::string::npos || comma > arrow)
    throw_invalid("einsum", "spec '" + spec + "' is not of the form 'x dims, y dims -> out dims'");
  check_spec(spec, tokens(spec.substr(0, comma)), x, "x");
  check_spec(spec, tokens(spec.substr(comma + 1, arrow - comma - 1)), y, "y");
  return einsum(x, y, tokens(spec.substr(arrow + 2)));
}

Array matmul(const Array& x, const Array& y, const std::string& contract) {
  return matmul(x, y, contract, EinsumPrecision{});
}

Array matmul(const Array& x, const Array& y, const std::string& contract, EinsumPrecision precision) {
  if (!x.has_dim(contract) || !y.has_dim(contract))
    throw_invalid("matmul", "contraction dim '" + contract + "' must be in both x " + describe(x) + " and y " +
                                describe(y));
  std::vector<std::string> out;
  for (const auto& n : x.names())
    if (n != contract) out.push_back(n);
  for (const auto& n : y.names())
    if (n != contract && !x.has_dim(n)) out.push_back(n);
  return einsum(x, y, out, precision);
}

namespace {
bool is_vocab_embed(const Array& a, DType dtype) {
  return a.valid() && a.rank() == 2 && a.names()[0] == "vocab" && a.names()[1] == "embed" && a.dtype() == dtype;
}

// The decoding primitives below: not differentiated (no cotangent for any
// input), so nothing saved for a vjp.
class DecodeOnly : public Primitive {
 public:
  std::vector<Array> vjp(const std::vector<Array>& inputs, const std::vector<Array>&, const std::vector<Array>&,
                         const std::vector<bool>&) override {
    return std::vector<Array>(inputs.size());
  }
  bool saves_inputs() const override { return false; }
};

// kernel [vocab, embed] f32 (validated) -> screen, bounds.
class MakeLogitsScreen final : public DecodeOnly {
 public:
  const char* name() const override { return "make_logits_screen"; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array& k = in[0];
    const int64_t v = k.dim("vocab"), e = k.dim("embed");
    Array screen = make_output(k.shape(), DType::bf16, in);
    Array bounds = make_output(Shape{{"vocab", v}, {"screen_bound", 2}}, DType::f32, in);
    kernels::cpu::logits_screen(v, e, k.data<float>(), screen.raw_data(), bounds.data<float>());
    return {screen, bounds};
  }
};

// Inputs x [batch, embed], kernel, screen, bounds (validated); int32 [batch].
// No sharded rule (the default's error: the screen is of one process's whole
// kernel); the same for the candidates below.
class ScreenedDenseArgmax final : public DecodeOnly {
 public:
  const char* name() const override { return "screened_dense_argmax"; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array xr = transpose(in[0], {"batch", "embed"});
    const Array &k = in[1], &s = in[2], &b = in[3];
    const int64_t rows = xr.dim("batch");
    Array out = make_output(Shape{{"batch", rows}}, DType::i32, in);
    kernels::cpu::screened_argmax(rows, k.dim("vocab"), k.dim("embed"), xr.data<float>(), k.data<float>(),
                                  s.raw_data(), b.data<float>(), out.data<int32_t>());
    return {out};
  }
};

// Inputs x [batch, embed], kernel, screen, bounds (validated); outputs index
// int32 and value f32 [batch, candidates], each row's candidates first, then
// index -1 and value -inf up to the longest row's count.
class ScreenedDenseCandidates final : public DecodeOnly {
 public:
  explicit ScreenedDenseCandidates(int64_t keep) : keep_(keep) {}
  const char* name() const override { return "screened_dense_candidates"; }
  std::vector<Array> eval_cpu(const std::vector<Array>& in) override {
    const Array xr = transpose(in[0], {"batch", "embed"});
    const Array &k = in[1], &s = in[2], &b = in[3];
    const int64_t rows = xr.dim("batch");
    std::vector<kernels::cpu::ScreenedCandidates> c(static_cast<size_t>(rows));
    kernels::cpu::screened_candidates(rows, k.dim("vocab"), k.dim("embed"), xr.data<float>(), k.data<float>(),
                                      s.raw_data(), b.data<float>(), keep_, c.data());
    int64_t width = 0;
    for (const auto& r : c) width = std::max(width, int64_t(r.index.size()));
    const Shape shape{{"batch", rows}, {"candidates", width}};
    Array index = make_output(shape, DType::i32, in), value = make_output(shape, DType::f32, in);
    int32_t* ip = index.data<int32_t>();
    float* vp = value.data<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const auto& cr = c[size_t(r)];
      const int64_t nr = int64_t(cr.index.size());
      std::copy(cr.index.begin(), cr.index.end(), ip + r * width);
      std::copy(cr.value.begin(), cr.value.end(), vp + r * width);
      std::fill(ip + r * width + nr, ip + (r + 1) * width, -1);
      std::fill(vp + r * width + nr, vp + (r + 1) * width, -std::numeric_limits<float>::infinity());
    }
    return {index, value};
  }

 private:
  int64_t keep_;
};
}  // namespace

LogitsScreen make_logits_screen(const Array& kernel) {
  if (!is_vocab_embed(kernel, DType::f32))
    throw_invalid("make_logits_screen", "kernel must be float32 [vocab, embed], got " + describe(kernel));
  if (!kernel.is_fully_local())
    throw_invalid("make_logits_screen", "kernel is split over the mesh; the screen is of one process's whole kernel");
  std::vector<Array> out = apply(std::make_shared<MakeLogitsScreen>(), {kernel});
  return LogitsScreen{out[0], out[1]};
}

namespace {
// screened_dense_argmax's and screened_dense_candidates' argument checks.
void check_screened(const char* op, const Array& x, const Array& kernel, const LogitsScreen& screen) {
  if (!x.valid() || x.rank() != 2 || !x.has_dim("batch") || !x.has_dim("embed") || x.dtype() != DType::f32)
    throw_invalid(op, "x must be float32 [batch, embed], got " + describe(x));
  if (!is_vocab_embed(kernel, DType::f32))
    throw_invalid(op, "kernel must be float32 [vocab, embed], got " + describe(kernel));
  if (!is_vocab_embed(screen.screen, DType::bf16) || screen.screen.shape() != kernel.shape() ||
      !screen.bounds.valid() || screen.bounds.dtype() != DType::f32 ||
      screen.bounds.shape() != Shape{{"vocab", kernel.dim("vocab")}, {"screen_bound", 2}})
    throw_invalid(op, "screen does not match kernel " + describe(kernel) + " (make_logits_screen(kernel) makes it)");
  if (x.dim("embed") != kernel.dim("embed"))
    throw_invalid(op, "x " + describe(x) + " and kernel " + describe(kernel) + " differ in 'embed'");
}
}  // namespace

Array screened_dense_argmax(const Array& x, const Array& kernel, const LogitsScreen& screen) {
  check_screened("screened_dense_argmax", x, kernel, screen);
  const int64_t rows = x.dim("batch");
  if (rows > kernels::cpu::kScreenedArgmaxMaxRows || rows == 0)
    return argmax(einsum(x, kernel, {"batch", "vocab"}, EinsumPrecision{}), "vocab");
  return apply1(std::make_shared<ScreenedDenseArgmax>(), {x, kernel, screen.screen, screen.bounds});
}

ScreenedCandidateArrays screened_dense_candidates(const Array& x, const Array& kernel, const LogitsScreen& screen,
                                                  int64_t keep) {
  check_screened("screened_dense_candidates", x, kernel, screen);
  if (keep < 1) throw_invalid("screened_dense_candidates", "keep must be >= 1, got " + std::to_string(keep));
  const int64_t rows = x.dim("batch");
  if (rows > kernels::cpu::kScreenedArgmaxMaxRows || rows == 0) {
    const Array logits = transpose(einsum(x, kernel, {"batch", "vocab"}, EinsumPrecision{}), {"batch", "vocab"});
    return {Array(), rename(logits, {{"vocab", "candidates"}}), kernel.dim("vocab")};
  }
  std::vector<Array> out =
      apply(std::make_shared<ScreenedDenseCandidates>(keep), {x, kernel, screen.screen, screen.bounds});
  return {out[0], out[1], kernel.dim("vocab")};
}

}  // namespace t5x
