// Every lowered op: the sharded result equals the single-device result, and
// so do the gradients (value_and_grad of sum(op(...) * c) through the sharded
// ops vs the plain ops), within 1e-5 relative in f32, on every mesh of the
// world size and under t5x's four standard rule presets. Inputs are sharded
// by the preset (dim names are logical axis names).
#include "spmd_test_util.h"

namespace t5x::testing_spmd {
namespace {

using Fn = std::function<Array(const ParamTree&, bool sharded)>;

struct OpCase {
  std::string name;
  ParamTree inputs;  // host arrays
  Fn fn;
  bool differentiable = true;
};

Shape act() { return Shape{{"batch", 4}, {"length", 2}, {"embed", 4}}; }

Array ids_array() {
  std::vector<int64_t> v;
  for (int i = 0; i < 8; ++i) v.push_back((i * 5 + 3) % 8);
  return Array::from_ints(Shape{{"batch", 4}, {"length", 2}}, v, DType::i32);
}

std::vector<OpCase> cases() {
  Array x = randn(act(), 1), y = transpose(randn(act(), 2), {"embed", "batch", "length"});
  Array b = randn(Shape{{"embed", 4}}, 3), wi = randn(Shape{{"embed", 4}, {"mlp", 4}}, 4);
  Array wo = randn(Shape{{"mlp", 4}, {"embed", 4}}, 5), h = randn(Shape{{"batch", 4}, {"length", 2}, {"mlp", 4}}, 6);
  Array logits = randn(Shape{{"batch", 4}, {"length", 2}, {"vocab", 8}}, 7);
  Array emb = randn(Shape{{"vocab", 8}, {"embed", 4}}, 8);
  Array q = randn(Shape{{"batch", 4}, {"length", 2}, {"heads", 2}, {"kv", 2}}, 9);
  Array k = randn(Shape{{"batch", 4}, {"kv_length", 2}, {"heads", 2}, {"kv", 2}}, 10);
  Array ids = ids_array();
  auto S = [](bool s, auto sharded_fn, auto plain_fn) { return s ? sharded_fn() : plain_fn(); };
  std::vector<OpCase> c;
  c.push_back({"add_bias", {{"x", x}, {"b", b}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::add(p.at("x"), p.at("b")); }, [&] { return add(p.at("x"), p.at("b")); });
               }});
  c.push_back({"mul_by_name", {{"x", x}, {"y", y}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::mul(p.at("x"), p.at("y")); }, [&] { return mul(p.at("x"), p.at("y")); });
               }});
  c.push_back({"where_gelu", {{"x", x}}, [=](const ParamTree& p, bool s) {
                 const Array& v = p.at("x");
                 if (!s) return where(gt(v, 0.0), gelu(v), mul(v, 0.5));
                 Array cond = spmd::unary(v, [](const Array& a) { return gt(a, 0.0); });
                 return spmd::where(cond, spmd::unary(v, gelu), spmd::unary(v, [](const Array& a) { return a * 0.5; }));
               }});
  for (std::string d : {"embed", "batch"})
    c.push_back({"sum_" + d, {{"x", x}}, [=](const ParamTree& p, bool s) {
                   return S(s, [&] { return spmd::sum(p.at("x"), {d}); }, [&] { return sum(p.at("x"), {d}); });
                 }});
  c.push_back({"mean_all", {{"x", x}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::mean(p.at("x")); }, [&] { return mean(p.at("x")); });
               }});
  c.push_back({"max_embed", {{"x", x}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::max(p.at("x"), {"embed"}); }, [&] { return max(p.at("x"), {"embed"}); });
               }});
  c.push_back({"min_batch", {{"x", x}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::min(p.at("x"), {"batch"}); }, [&] { return min(p.at("x"), {"batch"}); });
               }});
  c.push_back({"logsumexp_vocab", {{"l", logits}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::logsumexp(p.at("l"), {"vocab"}); },
                          [&] { return logsumexp(p.at("l"), {"vocab"}); });
               }});
  c.push_back({"softmax_vocab", {{"l", logits}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::softmax(p.at("l"), "vocab"); }, [&] { return softmax(p.at("l"), "vocab"); });
               }});
  c.push_back({"log_softmax_vocab", {{"l", logits}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::log_softmax(p.at("l"), "vocab"); },
                          [&] { return log_softmax(p.at("l"), "vocab"); });
               }});
  c.push_back({"einsum_in", {{"x", x}, {"w", wi}}, [=](const ParamTree& p, bool s) {
                 std::vector<std::string> o = {"batch", "length", "mlp"};
                 return S(s, [&] { return spmd::einsum(p.at("x"), p.at("w"), o); }, [&] { return einsum(p.at("x"), p.at("w"), o); });
               }});
  c.push_back({"einsum_out", {{"h", h}, {"w", wo}}, [=](const ParamTree& p, bool s) {
                 std::vector<std::string> o = {"batch", "length", "embed"};
                 return S(s, [&] { return spmd::einsum(p.at("h"), p.at("w"), o); }, [&] { return einsum(p.at("h"), p.at("w"), o); });
               }});
  c.push_back({"einsum_attention", {{"q", q}, {"k", k}}, [=](const ParamTree& p, bool s) {
                 std::vector<std::string> o = {"batch", "heads", "length", "kv_length"};
                 return S(s, [&] { return spmd::einsum(p.at("q"), p.at("k"), o); }, [&] { return einsum(p.at("q"), p.at("k"), o); });
               }});
  c.push_back({"einsum_logits", {{"x", x}, {"e", emb}}, [=](const ParamTree& p, bool s) {
                 std::vector<std::string> o = {"batch", "length", "vocab"};
                 return S(s, [&] { return spmd::einsum(p.at("x"), p.at("e"), o); }, [&] { return einsum(p.at("x"), p.at("e"), o); });
               }});
  c.push_back({"take_vocab", {{"e", emb}, {"ids", ids}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::take(p.at("e"), p.at("ids"), "vocab"); },
                          [&] { return take(p.at("e"), p.at("ids"), "vocab"); });
               }});
  c.push_back({"top_k_values", {{"l", logits}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::top_k(p.at("l"), 2, "vocab").first; },
                          [&] { return top_k(p.at("l"), 2, "vocab").first; });
               }});
  c.push_back({"top_k_indices", {{"l", logits}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::top_k(p.at("l"), 2, "vocab").second; },
                          [&] { return top_k(p.at("l"), 2, "vocab").second; });
               }, false});
  // Cross-entropy with a split vocab: logsumexp (max + sum all-reduces) minus
  // the target logit through a one-hot built locally in the vocab layout.
  c.push_back({"cross_entropy_vocab", {{"l", logits}, {"ids", ids}}, [=](const ParamTree& p, bool s) {
                 const Array &l = p.at("l"), &t = p.at("ids");
                 if (!s) return sub(logsumexp(l, {"vocab"}), sum(mul(l, one_hot(t, 8, "vocab")), {"vocab"}));
                 spmd::Axes vocab_axes = spmd::spec_of(l).dims[2];
                 Array target = spmd::one_hot(t, 8, "vocab", vocab_axes);
                 return spmd::sub(spmd::logsumexp(l, {"vocab"}), spmd::sum(spmd::mul(l, target), {"vocab"}));
               }});
  // Layout ops.
  auto unary_case = [&](std::string name, ParamTree in, std::function<Array(const Array&)> sharded,
                        std::function<Array(const Array&)> plain, bool diff = true) {
    std::string key = in.begin()->first;
    c.push_back({name, in, [=](const ParamTree& p, bool s) { return s ? sharded(p.at(key)) : plain(p.at(key)); }, diff});
  };
  unary_case("transpose", {{"x", x}}, [](const Array& a) { return spmd::transpose(a, {"embed", "batch", "length"}); },
             [](const Array& a) { return transpose(a, {"embed", "batch", "length"}); });
  Shape split_heads{{"batch", 4}, {"length", 2}, {"heads", 2}, {"kv", 2}};
  unary_case("reshape_split_embed", {{"x", x}}, [=](const Array& a) { return spmd::reshape(a, split_heads); },
             [=](const Array& a) { return reshape(a, split_heads); });
  Shape merged{{"batch", 4}, {"joined_kv", 8}};
  unary_case("reshape_merge", {{"x", x}}, [=](const Array& a) { return spmd::reshape(a, merged); },
             [=](const Array& a) { return reshape(a, merged); });
  Shape bshape{{"batch", 4}, {"length", 2}, {"embed", 4}, {"mlp", 4}};
  unary_case("broadcast_to", {{"b", b}}, [=](const Array& a) { return spmd::broadcast_to(a, bshape); },
             [=](const Array& a) { return broadcast_to(a, bshape); });
  unary_case("slice_embed", {{"x", x}}, [](const Array& a) { return spmd::slice(a, "embed", 1, 2); },
             [](const Array& a) { return slice(a, "embed", 1, 2); });
  unary_case("pad_batch", {{"x", x}}, [](const Array& a) { return spmd::pad(a, "batch", 1, 3, 0.5); },
             [](const Array& a) { return pad(a, "batch", 1, 3, 0.5); });
  unary_case("concat_embed", {{"x", x}}, [](const Array& a) { return spmd::concat({a, a}, "embed"); },
             [](const Array& a) { return concat({a, a}, "embed"); });
  unary_case("stack", {{"x", x}}, [](const Array& a) { return spmd::stack({a, a}, "layers", 0); },
             [](const Array& a) { return stack({a, a}, "layers", 0); });
  unary_case("cumsum_embed", {{"x", x}}, [](const Array& a) { return spmd::cumsum(a, "embed", true); },
             [](const Array& a) { return cumsum(a, "embed", true); });
  unary_case("argmax_embed", {{"x", x}}, [](const Array& a) { return spmd::argmax(a, "embed"); },
             [](const Array& a) { return argmax(a, "embed"); }, false);
  unary_case("dynamic_slice", {{"x", x}},
             [](const Array& a) { return spmd::dynamic_slice(a, {{"length", 1}}, {{"length", 1}}); },
             [](const Array& a) { return dynamic_slice(a, {{"length", 1}}, {{"length", 1}}); });
  // Fused ops.
  c.push_back({"rms_norm", {{"x", x}, {"b", b}}, [=](const ParamTree& p, bool s) {
                 return s ? spmd::rms_norm(p.at("x"), p.at("b")) : rms_norm(p.at("x"), p.at("b"));
               }});
  for (bool z : {false, true})
    c.push_back({z ? "cross_entropy_fused_z_loss" : "cross_entropy_fused", {{"l", logits}, {"ids", ids}},
                 [=](const ParamTree& p, bool s) {
                   CrossEntropy r = s ? spmd::softmax_cross_entropy_with_integer_labels(p.at("l"), p.at("ids"), 1e-2, 0.1)
                                      : softmax_cross_entropy_with_integer_labels(p.at("l"), p.at("ids"), 1e-2, 0.1);
                   return z ? r.z_loss : r.loss;
                 }, !z});
  Array v = randn(k.shape(), 15);
  c.push_back({"attention_causal", {{"q", q}, {"k", k}, {"v", v}}, [=](const ParamTree& p, bool s) {
                 AttentionOptions o;
                 o.causal = true;
                 return s ? spmd::dot_product_attention(p.at("q"), p.at("k"), p.at("v"), o)
                          : dot_product_attention(p.at("q"), p.at("k"), p.at("v"), o);
               }});
  c.push_back({"one_hot_vocab", {{"ids", ids}}, [=](const ParamTree& p, bool s) {
                 return S(s, [&] { return spmd::one_hot(p.at("ids"), 8, "vocab", {"model"}); },
                          [&] { return one_hot(p.at("ids"), 8, "vocab"); });
               }, false});
  return c;
}

void run_case(spmd::Context& ctx, const LogicalAxisRules& rules, const OpCase& c) {
  // Single-device reference.
  Array ref_out = c.fn(c.inputs, false);
  Array cot = randn(ref_out.shape(), 77);
  ParamTree sharded = spmd::shard_params(c.inputs, rules);
  Array out = spmd::gather(c.fn(sharded, true));
  if (is_floating(ref_out.dtype())) {
    EXPECT_LE(rel_err(out, ref_out), 1e-5) << "forward";
  } else {
    EXPECT_TRUE(array_equal(out, ref_out)) << "forward " << out.to_string() << " vs " << ref_out.to_string();
  }
  if (!c.differentiable) return;
  auto ref = value_and_grad([&](const ParamTree& p) { return sum(mul(c.fn(p, false), cot)); }, c.inputs);
  Array cot_s = spmd::shard(cot, spmd::param_spec(cot.shape(), rules));
  auto got = value_and_grad([&](const ParamTree& p) { return spmd::sum(spmd::mul(c.fn(p, true), cot_s)); }, sharded);
  EXPECT_LE(rel_err(spmd::gather(got.value), ref.value), 1e-5) << "loss";
  for (const auto& [k, g] : ref.grads) {
    ASSERT_TRUE(got.grads.count(k)) << k;
    EXPECT_EQ(got.grads.at(k).local_shape(), sharded.at(k).local_shape()) << "grad layout of " << k;
    EXPECT_LE(rel_err(spmd::gather(got.grads.at(k)), g), 1e-5) << "grad of " << k;
  }
}

TEST(SpmdOps, ShardedEqualsSingleDeviceWithGrads) {
  const auto all = cases();
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    for (const auto& pr : presets()) {
      LogicalAxisRules rules = standard_logical_axis_rules(pr.act, pr.param);
      for (const auto& c : all) {
        SCOPED_TRACE(mesh_name(*ctx) + " rules (" + std::to_string(pr.act) + "," + std::to_string(pr.param) + ") " +
                     c.name);
        run_case(*ctx, rules, c);
      }
    }
  }
}

// Explicit layouts the presets do not produce: contracted dims split in one
// operand only, reduce-scatter outputs, conflicting splits, every reshard.
TEST(SpmdOps, ExplicitLayoutsAndReshards) {
  using P = PartitionSpec;
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    Array x = randn(Shape{{"batch", 8}, {"embed", 8}}, 11), w = randn(Shape{{"embed", 8}, {"mlp", 8}}, 12);
    std::vector<P> specs = {P({{}, {}}), P({{"data"}, {}}), P({{}, {"model"}}), P({{"data"}, {"model"}}),
                            P({{"model"}, {"data"}}), P({{"data", "model"}, {}}), P({{}, {"model", "data"}})};
    Array ref = einsum(x, w, {"batch", "mlp"});
    Array cot = randn(ref.shape(), 13);
    auto ref_g = value_and_grad([&](const ParamTree& p) { return sum(mul(einsum(p.at("x"), p.at("w"), {"batch", "mlp"}), cot)); },
                                {{"x", x}, {"w", w}});
    for (const P& sx : specs)
      for (const P& sw : specs)
        for (const P& so : {specs[0], specs[3], specs[4]}) {
          SCOPED_TRACE(mesh_name(*ctx) + " x " + spec_to_string(sx) + " w " + spec_to_string(sw) + " out " +
                       spec_to_string(so));
          ParamTree in = {{"x", spmd::shard(x, sx)}, {"w", spmd::shard(w, sw)}};
          Array cs = spmd::shard(cot, so);
          auto g = value_and_grad(
              [&](const ParamTree& p) { return spmd::sum(spmd::mul(spmd::einsum(p.at("x"), p.at("w"), {"batch", "mlp"}, so), cs)); }, in);
          EXPECT_LE(rel_err(spmd::gather(g.value), ref_g.value), 1e-5);
          EXPECT_LE(rel_err(spmd::gather(g.grads.at("x")), ref_g.grads.at("x")), 1e-5);
          EXPECT_LE(rel_err(spmd::gather(g.grads.at("w")), ref_g.grads.at("w")), 1e-5);
        }
    Array xc = randn(x.shape(), 14);
    // Reshard between every pair: value and gradient (identity map, so the
    // gradient is the cotangent itself).
    for (const P& a : specs)
      for (const P& b : specs) {
        SCOPED_TRACE(mesh_name(*ctx) + " reshard " + spec_to_string(a) + " -> " + spec_to_string(b));
        Array xs = spmd::shard(x, a);
        Array cb = spmd::shard(xc, b);
        auto g = value_and_grad([&](const ParamTree& p) { return spmd::sum(spmd::mul(spmd::reshard(p.at("x"), b), cb)); },
                                {{"x", xs}});
        EXPECT_TRUE(array_equal(spmd::gather(spmd::reshard(xs, b)), x));
        EXPECT_LE(rel_err(spmd::gather(g.grads.at("x")), xc), 1e-6);
      }
  }
}

// bfloat16 activations with a float32 scale on a split embed (2-D activation
// rules) with mesh_invariant off: the split rms_norm computes the one-process
// op (ops/fused.cpp) in its dtypes -- x widened to float32, y rounded once to
// bf16 (fused kernel) or bf16(x * rstd) * bf16(scale) (reference) -- where it
// used to multiply bf16 x by the float32 scale and fail ("[mul] dtype
// mismatch"). Only the sum of squares is split (local sums + all-reduce), so
// rstd may differ from one process's by a float32 ulp or so, and a bf16
// result (y, dx) then round to the neighbouring bf16 value: each element is
// allowed 1 bf16 ulp (on these inputs they are bitwise). dscale is float32
// with the kernel (a float32 sum over the rows: 1e-5 relative, seen 2.4e-7);
// the reference's is summed in bf16 (its scale is cast to x's dtype), in
// per-shard partial sums when the rows are split over 'data', so 1e-2
// (2^-7 relative is one bf16 ulp; seen 4.5e-3). The same for the split-vocab
// cross-entropy on bf16 logits: a float32 loss (1e-5), the logits' gradient
// within 1 bf16 ulp. The losses read y through a cast to float32, so y's
// cotangent arrives wide (float32, ops/autodiff.h): the kernel rounds it to
// bf16 before its backward, and so must the split path (else dx is off by
// hundreds of bf16 ulps).

// The largest |a - b| over the elements in bf16 ulps of b (ulp of b's power
// of two: 2^(floor(log2 |b|) - 7)); zeros in b count in the ulp of the
// smallest normal bf16.
double max_bf16_ulps(const Array& a, const Array& b) {
  std::vector<float> x = a.to_floats(), y = b.to_floats();
  if (x.size() != y.size()) return 1e9;
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double mag = std::max(double(std::fabs(y[i])), 1.1754944e-38);
    const double ulp = std::ldexp(1.0, int(std::floor(std::log2(mag))) - 7);
    m = std::max(m, std::fabs(double(x[i]) - double(y[i])) / ulp);
  }
  return m;
}

TEST(SpmdOps, Bf16RmsNormAndCrossEntropyOnSplitDimsAreTheOneProcessOps) {
  using P = PartitionSpec;
  const Array x = cast(mul(randn(Shape{{"batch", 4}, {"length", 3}, {"embed", 64}}, 51), 2.0), DType::bf16);
  const Array scale = add(mul(randn(Shape{{"embed", 64}}, 52), 0.1), 1.0);  // float32, as t5x's params
  const Array cot = randn(x.shape(), 53);
  const Array logits = cast(mul(randn(Shape{{"batch", 4}, {"length", 3}, {"vocab", 16}}, 54), 3.0), DType::bf16);
  std::vector<int64_t> tv;
  for (int i = 0; i < 12; ++i) tv.push_back((i * 7 + 3) % 16);
  const Array targets = Array::from_ints(Shape{{"batch", 4}, {"length", 3}}, tv, DType::i32);
  auto norm_loss = [&](const Array& y, bool s, const Array& c) {
    return s ? spmd::sum(spmd::mul(spmd::unary(y, [](const Array& a) { return cast(a, DType::f32); }), c))
             : sum(mul(cast(y, DType::f32), c));
  };
  const bool fused_before = fused_kernels_enabled();
  for (bool fused : {true, false}) {
    set_fused_kernels_enabled(fused);
    const Array ref_y = rms_norm(x, scale);
    const auto ref_g = value_and_grad(
        [&](const ParamTree& p) { return norm_loss(rms_norm(p.at("x"), p.at("s")), false, cot); }, {{"x", x}, {"s", scale}});
    const CrossEntropy ref_ce = softmax_cross_entropy_with_integer_labels(logits, targets, 1e-2, 0.1);
    const auto ref_ce_g = value_and_grad(
        [&](const ParamTree& p) { return sum(softmax_cross_entropy_with_integer_labels(p.at("l"), targets, 1e-2, 0.1).loss); },
        {{"l", logits}});
    for (const auto& ctx : contexts()) {
      if (ctx->mesh().axis_size("model") < 2) continue;
      spmd::ContextScope scope(ctx);
      ASSERT_FALSE(ctx->mesh_invariant());
      const bool data = ctx->mesh().axis_size("data") > 1;
      std::vector<P> x_specs = {P({{}, {}, {"model"}})};
      if (data) x_specs.push_back(P({{"data"}, {}, {"model"}}));
      for (const P& sx : x_specs)
        for (const P& ss : {P::replicated(1), P({{"model"}})}) {
          SCOPED_TRACE(std::string(fused ? "fused" : "reference") + " " + mesh_name(*ctx) + " x " +
                       spec_to_string(sx) + " scale " + spec_to_string(ss));
          const Array xs = spmd::shard(x, sx), scs = spmd::shard(scale, ss), cs = spmd::shard(cot, sx);
          const Array y = spmd::rms_norm(xs, scs);
          EXPECT_EQ(y.dtype(), DType::bf16);
          EXPECT_LE(max_bf16_ulps(spmd::gather(y), ref_y), 1.0) << "forward";
          const auto g = value_and_grad(
              [&](const ParamTree& p) { return norm_loss(spmd::rms_norm(p.at("x"), p.at("s")), true, cs); },
              {{"x", xs}, {"s", scs}});
          EXPECT_LE(rel_err(spmd::gather(g.value), ref_g.value), 1e-5) << "loss";
          EXPECT_EQ(g.grads.at("x").dtype(), DType::bf16);
          EXPECT_EQ(g.grads.at("s").dtype(), DType::f32);
          EXPECT_EQ(g.grads.at("s").local_shape(), scs.local_shape());
          EXPECT_LE(max_bf16_ulps(spmd::gather(g.grads.at("x")), ref_g.grads.at("x")), 1.0) << "dx";
          // The reference's dscale is a bf16 product summed over the rows.
          EXPECT_LE(rel_err(spmd::gather(g.grads.at("s")), ref_g.grads.at("s")), fused ? 1e-5 : 1e-2) << "dscale";
        }
      // Cross-entropy over a split vocab.
      SCOPED_TRACE(std::string(fused ? "fused" : "reference") + " " + mesh_name(*ctx) + " cross-entropy");
      const P sl({{}, {}, {"model"}});
      const Array ls = spmd::shard(logits, sl), ts = spmd::shard(targets, P({{}, {}}));
      const CrossEntropy ce = spmd::softmax_cross_entropy_with_integer_labels(ls, ts, 1e-2, 0.1);
      EXPECT_EQ(ce.loss.dtype(), DType::f32);
      EXPECT_EQ(ce.z_loss.dtype(), DType::f32);
      EXPECT_LE(rel_err(spmd::gather(ce.loss), ref_ce.loss), 1e-5);
      EXPECT_LE(rel_err(spmd::gather(ce.z_loss), ref_ce.z_loss), 1e-5);
      const auto g = value_and_grad(
          [&](const ParamTree& p) {
            return spmd::sum(spmd::softmax_cross_entropy_with_integer_labels(p.at("l"), ts, 1e-2, 0.1).loss);
          },
          {{"l", ls}});
      EXPECT_LE(rel_err(spmd::gather(g.value), ref_ce_g.value), 1e-5);
      EXPECT_EQ(g.grads.at("l").dtype(), DType::bf16);
      EXPECT_LE(max_bf16_ulps(spmd::gather(g.grads.at("l")), ref_ce_g.grads.at("l")), 1.0) << "dlogits";
    }
  }
  set_fused_kernels_enabled(fused_before);
}

TEST(SpmdOps, ShardingConstraintFollowsRules) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    Array x = randn(act(), 21);
    Array xs = spmd::shard(x, PartitionSpec::replicated(3));
    for (const auto& pr : presets()) {
      LogicalAxisRules rules = standard_logical_axis_rules(pr.act, pr.param);
      Array c = spmd::with_sharding_constraint(xs, rules);
      EXPECT_EQ(c.sharding().spec, spmd::param_spec(act(), rules));
      EXPECT_TRUE(array_equal(spmd::gather(c), x));
    }
    // Misuse is reported with the op name.
    EXPECT_THROW(spmd::with_sharding_constraint(xs, {"batch"}, standard_logical_axis_rules()), std::invalid_argument);
  }
}

}  // namespace
}  // namespace t5x::testing_spmd

namespace t5x::testing_spmd {
namespace {

// The op layer's typed lowering methods reach the same spmd:: lowerings.
TEST(SpmdDispatch, LoweringMethodsMatchThePlainOps) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    LogicalAxisRules rules = standard_logical_axis_rules(2, 2);
    Array x = randn(act(), 31), w = randn(Shape{{"embed", 4}, {"mlp", 4}}, 32);
    Array xs = spmd::shard(x, spmd::param_spec(x.shape(), rules)), ws = spmd::shard(w, spmd::param_spec(w.shape(), rules));
    NoGradGuard g;
    const spmd::Lowering& l = spmd::lowering();
    const std::vector<std::string> out = {"batch", "length", "mlp"};
    EXPECT_LE(rel_err(spmd::gather(l.einsum(xs, ws, out)), einsum(x, w, out)), 1e-5);
    EXPECT_LE(rel_err(spmd::gather(l.reduce(Reduction::Sum, xs, {"embed"})), sum(x, {"embed"})), 1e-5);
    EXPECT_LE(rel_err(spmd::gather(l.unary(UnaryOp::Exp, xs)), exp(x)), 1e-6);
    EXPECT_LE(rel_err(spmd::gather(l.binary_scalar(BinaryOp::Mul, xs, 3.0)), mul(x, 3.0)), 1e-6);
    EXPECT_LE(rel_err(spmd::gather(l.softmax(xs, "embed", false)), softmax(x, "embed")), 1e-5);
    EXPECT_LE(rel_err(spmd::gather(l.softmax(xs, "embed", true)), log_softmax(x, "embed")), 1e-5);
    EXPECT_LE(rel_err(spmd::gather(l.cumsum(xs, "embed", true, true)), cumsum(x, "embed", true, true)), 1e-6);
    const std::vector<std::string> order = {"embed", "length", "batch"};
    EXPECT_TRUE(array_equal(spmd::gather(l.transpose(xs, order)), transpose(x, order)));
    EXPECT_TRUE(array_equal(spmd::gather(l.slice(xs, "embed", 1, 2)), slice(x, "embed", 1, 2)));
    Array scale = randn(Shape{{"embed", 4}}, 33);
    EXPECT_LE(rel_err(spmd::gather(l.rms_norm(xs, spmd::shard(scale, spmd::param_spec(scale.shape(), rules)), "embed", 1e-6)),
                      rms_norm(x, scale)), 1e-5);
    // add(a, 2.0)-style scalar forms exist only for the arithmetic ops.
    EXPECT_THROW(l.binary_scalar(BinaryOp::Eq, xs, 0.0), std::invalid_argument);
    // Collectives take local arrays; a sharded global one is misuse.
    if (!xs.is_fully_local()) {
      try {
        spmd::all_gather(xs, "batch", {"data"});
        ADD_FAILURE() << "no error";
      } catch (const std::invalid_argument& err) {
        EXPECT_NE(std::string(err.what()).find("[all_gather] expects a local array"), std::string::npos) << err.what();
      }
    }
    EXPECT_FALSE(spmd::installed());
  }
}

TEST(SpmdParams, UnusedParamGradKeepsLayout) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    LogicalAxisRules rules = standard_logical_axis_rules(1, 2);
    ParamTree host = {{"used", randn(Shape{{"embed", 4}, {"mlp", 4}}, 41)}, {"unused", randn(Shape{{"embed", 4}, {"mlp", 4}}, 42)}};
    ParamTree p = spmd::shard_params(host, rules);
    auto g = spmd::value_and_grad([](const ParamTree& t) { return spmd::sum(spmd::mul(t.at("used"), t.at("used"))); }, p);
    EXPECT_EQ(g.grads.at("unused").local_shape(), p.at("unused").local_shape());
    EXPECT_EQ(spmd::gather(g.grads.at("unused")).to_floats(), std::vector<float>(16, 0.f));
    EXPECT_LE(rel_err(spmd::gather(g.grads.at("used")), mul(host.at("used"), 2.0)), 1e-6);
  }
}

// Grouped K/V (kv_heads, the fused kernel's GQA form): with the batch split
// it equals the single-device result; with q's heads split the group map
// would be wrong on every shard, so it is refused (issue 21).
TEST(SpmdOps, GroupedAttentionBatchSplitOrRefused) {
  Array q = randn(Shape{{"batch", 4}, {"length", 3}, {"heads", 4}, {"kv", 2}}, 31);
  Array k = randn(Shape{{"batch", 4}, {"kv_length", 3}, {"kv_heads", 2}, {"kv", 2}}, 32);
  Array v = randn(k.shape(), 33);
  AttentionOptions o;
  o.causal = true;
  const Array ref = dot_product_attention(q, k, v, o);
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    const PartitionSpec by_batch({{"data"}, {}, {}, {}});
    Array got = spmd::dot_product_attention(spmd::shard(q, by_batch), spmd::shard(k, by_batch),
                                            spmd::shard(v, by_batch), o);
    EXPECT_LE(rel_err(spmd::gather(got), ref), 1e-6);
    if (ctx->mesh().axis_size("model") > 1) {
      try {
        spmd::dot_product_attention(spmd::shard(q, PartitionSpec({{}, {}, {"model"}, {}})), k, v, o);
        FAIL() << "expected an error";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("repeat the K/V heads"), std::string::npos) << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace t5x::testing_spmd
