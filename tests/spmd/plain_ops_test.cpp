// The plain ops (t5x::einsum, t5x::add, ...) on split arrays, once a sharded
// lowering is installed (ops/lowering.h): results equal the single-device
// results, gradients through the plain ops equal the single-device gradients,
// and spmd::install() routes them to the same lowering as the spmd:: calls.
#include <atomic>

#include "ops/lowering.h"
#include "spmd_test_util.h"

namespace t5x::testing_spmd {
namespace {

std::atomic<int> g_calls{0};
// spmd's lowering, counting the calls of a few op families.
class CountingLowering : public spmd::Lowering {
 public:
  Array binary(BinaryOp op, const Array& a, const Array& b) const override {
    ++g_calls;
    return spmd::Lowering::binary(op, a, b);
  }
  Array einsum(const Array& x, const Array& y, const std::vector<std::string>& out) const override {
    ++g_calls;
    return spmd::Lowering::einsum(x, y, out);
  }
  Array reduce(Reduction op, const Array& x, const std::vector<std::string>& dims) const override {
    ++g_calls;
    return spmd::Lowering::reduce(op, x, dims);
  }
};

using Fn = std::function<Array(const ParamTree&)>;
struct PlainCase {
  std::string name;
  ParamTree inputs;
  Fn fn;
  bool differentiable = true;
};

std::vector<PlainCase> plain_cases() {
  Shape act{{"batch", 4}, {"length", 2}, {"embed", 4}};
  Array x = randn(act, 1), y = transpose(randn(act, 2), {"embed", "batch", "length"});
  Array b = randn(Shape{{"embed", 4}}, 3), wi = randn(Shape{{"embed", 4}, {"mlp", 4}}, 4);
  Array logits = randn(Shape{{"batch", 4}, {"length", 2}, {"vocab", 8}}, 7);
  Array emb = randn(Shape{{"vocab", 8}, {"embed", 4}}, 8);
  Array q = randn(Shape{{"batch", 4}, {"length", 2}, {"heads", 2}, {"kv", 2}}, 9);
  Array k = randn(Shape{{"batch", 4}, {"kv_length", 2}, {"heads", 2}, {"kv", 2}}, 10);
  Array v = randn(k.shape(), 15);
  std::vector<int64_t> idv;
  for (int i = 0; i < 8; ++i) idv.push_back((i * 5 + 3) % 8);
  Array ids = Array::from_ints(Shape{{"batch", 4}, {"length", 2}}, idv, DType::i32);
  auto X = [](const ParamTree& p) -> const Array& { return p.at("x"); };
  std::vector<PlainCase> c;
  c.push_back({"add_bias_mul", {{"x", x}, {"b", b}, {"y", y}},
               [](const ParamTree& p) { return mul(add(p.at("x"), p.at("b")), p.at("y")); }});
  c.push_back({"scalar_unary_chain", {{"x", x}},
               [=](const ParamTree& p) { return tanh(add(mul(gelu(X(p)), 0.5), 1.0)) + exp(neg(square(X(p)))); }});
  c.push_back({"sum_mean_max", {{"x", x}}, [=](const ParamTree& p) {
                 return add(sum(X(p), {"embed"}), sub(mean(X(p), {"embed"}), max(X(p), {"embed"})));
               }});
  c.push_back({"softmax_logsumexp", {{"l", logits}}, [](const ParamTree& p) {
                 return add(mul(softmax(p.at("l"), "vocab"), 3.0), logsumexp(p.at("l"), {"vocab"}));
               }});
  c.push_back({"einsum_rms_norm", {{"x", x}, {"b", b}, {"w", wi}},
               [](const ParamTree& p) { return einsum(rms_norm(p.at("x"), p.at("b")), p.at("w"), {"batch", "length", "mlp"}); }});
  c.push_back({"take_einsum_logits", {{"e", emb}, {"ids", ids}}, [](const ParamTree& p) {
                 Array h = take(p.at("e"), p.at("ids"), "vocab");
                 return log_softmax(einsum(h, p.at("e"), {"batch", "length", "vocab"}), "vocab");
               }});
  c.push_back({"cross_entropy", {{"l", logits}, {"ids", ids}}, [](const ParamTree& p) {
                 CrossEntropy r = softmax_cross_entropy_with_integer_labels(p.at("l"), p.at("ids"), 1e-2, 0.1);
                 return add(r.loss, r.z_loss);
               }});
  c.push_back({"attention", {{"q", q}, {"k", k}, {"v", v}}, [](const ParamTree& p) {
                 AttentionOptions o;
                 o.causal = true;
                 return dot_product_attention(p.at("q"), p.at("k"), p.at("v"), o);
               }});
  c.push_back({"fourier_mix", {{"x", x}}, [=](const ParamTree& p) { return fourier_mix(X(p)); }});
  c.push_back({"layout_ops", {{"x", x}}, [=](const ParamTree& p) {
                 Array t = transpose(X(p), {"embed", "batch", "length"});
                 Array r = reshape(X(p), Shape{{"batch", 4}, {"length", 2}, {"heads", 2}, {"kv", 2}});
                 Array s = slice(pad(X(p), "batch", 1, 3, 0.5), "batch", 2, 4);
                 Array cc = concat({X(p), X(p)}, "embed");
                 return add(add(sum(t, {"embed"}), sum(r, {"heads", "kv"})), add(sum(s, {"embed"}), sum(cc, {"embed"})));
               }});
  c.push_back({"stack_cumsum_dynamic_slice", {{"x", x}}, [=](const ParamTree& p) {
                 Array st = sum(stack({X(p), cumsum(X(p), "embed", true)}, "layers", 0), {"layers"});
                 return dynamic_slice(st, {{"length", 1}}, {{"length", 1}});
               }});
  c.push_back({"argmax_top_k_one_hot", {{"l", logits}, {"ids", ids}}, [](const ParamTree& p) {
                 Array a = cast(argmax(p.at("l"), "vocab"), DType::f32);
                 Array t = cast(top_k(p.at("l"), 2, "vocab").second, DType::f32);
                 Array oh = sum(one_hot(p.at("ids"), 8, "vocab"), {"vocab"});
                 return add(add(a, sum(t, {"vocab"})), oh);
               }, false});
  return c;
}

TEST(SpmdPlainOps, DispatchedPlainOpsEqualSingleDevice) {
  const auto all = plain_cases();
  const CountingLowering counting;
  LoweringScope lowering(&counting);
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    for (const auto& pr : presets()) {
      LogicalAxisRules rules = standard_logical_axis_rules(pr.act, pr.param);
      for (const auto& c : all) {
        SCOPED_TRACE(mesh_name(*ctx) + " rules (" + std::to_string(pr.act) + "," + std::to_string(pr.param) + ") " +
                     c.name);
        Array ref = c.fn(c.inputs);
        ParamTree sharded = spmd::shard_params(c.inputs, rules);
        EXPECT_LE(rel_err(spmd::gather(c.fn(sharded)), ref), 1e-5) << "forward";
        if (!c.differentiable) continue;
        Array cot = randn(ref.shape(), 77);
        Array cot_s = spmd::shard(cot, spmd::param_spec(cot.shape(), rules));
        auto want = value_and_grad([&](const ParamTree& p) { return sum(mul(c.fn(p), cot)); }, c.inputs);
        auto got = value_and_grad([&](const ParamTree& p) { return sum(mul(c.fn(p), cot_s)); }, sharded);
        EXPECT_LE(rel_err(spmd::gather(got.value), want.value), 1e-5) << "loss";
        for (const auto& [name, g] : want.grads) {
          ASSERT_TRUE(got.grads.count(name)) << name;
          EXPECT_EQ(got.grads.at(name).local_shape(), sharded.at(name).local_shape()) << "grad layout of " << name;
          EXPECT_LE(rel_err(spmd::gather(got.grads.at(name)), g), 1e-5) << "grad of " << name;
        }
      }
    }
  }
  // With more than one device some inputs are split, so apply() must lower them.
  if (g_world->size() > 1) {
    EXPECT_GT(g_calls.load(), 0);
  }
}

// FNet's mixing with its length and embed dims split (layouts the presets do
// not make): they are gathered, a split batch stays split; value and gradient
// equal the single-device ones.
TEST(SpmdPlainOps, FourierMixGathersSplitLengthAndEmbed) {
  using P = PartitionSpec;
  Array x = randn(Shape{{"batch", 8}, {"length", 8}, {"embed", 4}}, 31), cot = randn(x.shape(), 32);
  auto want = value_and_grad([&](const ParamTree& p) { return sum(mul(fourier_mix(p.at("x")), cot)); }, {{"x", x}});
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    spmd::InstallScope installed;
    for (const P& spec : {P({{"data"}, {"model"}, {}}), P({{}, {"data"}, {"model"}}), P({{"model"}, {}, {"data"}}),
                          P({{}, {"data", "model"}, {}}), P({{"data", "model"}, {}, {}})}) {
      SCOPED_TRACE(mesh_name(*ctx) + " x " + spec_to_string(spec));
      Array xs = spmd::shard(x, spec), cs = spmd::shard(cot, spec);
      Array y = fourier_mix(xs);
      EXPECT_LE(rel_err(spmd::gather(y), fourier_mix(x)), 1e-5);
      // The batch split is kept; length and embed come back whole.
      EXPECT_EQ(y.local_shape()[0].size, xs.local_shape()[0].size);
      EXPECT_EQ(y.local_shape()[1].size, 8);
      EXPECT_EQ(y.local_shape()[2].size, 4);
      auto got = value_and_grad([&](const ParamTree& p) { return sum(mul(fourier_mix(p.at("x")), cs)); }, {{"x", xs}});
      EXPECT_LE(rel_err(spmd::gather(got.value), want.value), 1e-5);
      EXPECT_EQ(got.grads.at("x").local_shape(), xs.local_shape());
      EXPECT_LE(rel_err(spmd::gather(got.grads.at("x")), want.grads.at("x")), 1e-5);
    }
  }
}

TEST(SpmdPlainOps, InstallRoutesToSpmdLowering) {
  Array x = randn(Shape{{"batch", 4}, {"length", 2}, {"embed", 4}}, 21);
  Array w = randn(Shape{{"embed", 4}, {"mlp", 4}}, 22);
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    LogicalAxisRules rules = standard_logical_axis_rules(2, 2);
    Array xs = spmd::shard(x, spmd::param_spec(x.shape(), rules));
    Array ws = spmd::shard(w, spmd::param_spec(w.shape(), rules));
    const bool split = !xs.is_fully_local() || !ws.is_fully_local();
    // No lowering: the op layer refuses split inputs, naming the op.
    ASSERT_EQ(sharded_lowering(), nullptr);
    EXPECT_FALSE(spmd::installed());
    if (split) {
      try {
        einsum(xs, ws, {"batch", "length", "mlp"});
        ADD_FAILURE() << "no error";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("[einsum] sharded inputs not supported yet"), std::string::npos)
            << e.what();
      }
    }
    {
      spmd::InstallScope installed;
      EXPECT_TRUE(spmd::installed());
      Array plain = einsum(xs, ws, {"batch", "length", "mlp"});
      Array lowered = spmd::einsum(xs, ws, {"batch", "length", "mlp"});
      EXPECT_EQ(plain.local_shape(), lowered.local_shape());
      EXPECT_EQ(spmd::gather(plain).to_floats(), spmd::gather(lowered).to_floats());
      EXPECT_EQ(spmd::gather(softmax(plain, "mlp")).to_floats(), spmd::gather(spmd::softmax(lowered, "mlp")).to_floats());
      // Comparisons route to their lowering too (element-wise, layout kept).
      EXPECT_EQ(spmd::gather(gt(plain, 0.0)).to_ints(), gt(spmd::gather(plain), 0.0).to_ints());
      {
        // A nested scope restores spmd's lowering after it.
        const CountingLowering counting;
        LoweringScope inner(&counting);
        EXPECT_FALSE(spmd::installed());
        const int before = g_calls.load();
        Array again = einsum(xs, ws, {"batch", "length", "mlp"});
        EXPECT_EQ(spmd::gather(again).to_floats(), spmd::gather(lowered).to_floats());
        if (split) {
          EXPECT_EQ(g_calls.load(), before + 1);
        }
      }
      EXPECT_TRUE(spmd::installed());
    }
    EXPECT_FALSE(spmd::installed());
    // install() keeps the lowering until it is replaced.
    spmd::install();
    EXPECT_TRUE(spmd::installed());
    set_sharded_lowering(nullptr);
    EXPECT_FALSE(spmd::installed());
  }
}

}  // namespace
}  // namespace t5x::testing_spmd
