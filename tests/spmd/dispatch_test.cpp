// spmd::dispatch entries for the ops the models apply to batch-shaped arrays
// (comparisons, logical ops, rename, gated_gelu), called directly: the
// op layer does not yet route these to the dispatcher (docs/spmd.md 10).
#include "spmd_test_util.h"

namespace t5x::testing_spmd {
namespace {

std::vector<Array> call(const char* op, const std::vector<Array>& in, OpArgs a = {}) { return spmd::dispatch(op, in, a); }

TEST(SpmdDispatch, ComparisonsLogicalRenameGatedGelu) {
  Shape s{{"batch", 4}, {"length", 2}, {"mlp", 4}};
  Array x = randn(s, 51), y = randn(s, 52);
  std::vector<int64_t> tv;
  for (int i = 0; i < 8; ++i) tv.push_back(i % 3);
  Array tok = Array::from_ints(Shape{{"batch", 4}, {"length", 2}}, tv, DType::i32);
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    for (const auto& pr : presets()) {
      LogicalAxisRules rules = standard_logical_axis_rules(pr.act, pr.param);
      SCOPED_TRACE(mesh_name(*ctx) + " rules (" + std::to_string(pr.act) + "," + std::to_string(pr.param) + ")");
      ParamTree p = spmd::shard_params({{"x", x}, {"y", y}, {"tok", tok}}, rules);
      for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) {
        Array got = spmd::gather(call(op, {p.at("x"), p.at("y")})[0]);
        Array want = spmd::dispatch(op, {x, y}, {})[0];  // fully local: the plain op
        EXPECT_EQ(got.dtype(), DType::boolean) << op;
        EXPECT_EQ(got.to_ints(), want.to_ints()) << op;
      }
      // Token masks, as the models build them: (tok > 0) and (tok == tok').
      Array zero = Array::from_ints(Shape{}, {0}, DType::i32);
      Array pos = call("gt", {p.at("tok"), zero})[0];
      EXPECT_EQ(spmd::gather(pos).to_ints(), gt(tok, 0.0).to_ints());
      Array both = call("logical_and", {pos, call("ne", {p.at("tok"), zero})[0]})[0];
      EXPECT_EQ(spmd::gather(both).to_ints(), logical_and(gt(tok, 0.0), ne(tok, 0.0)).to_ints());
      // rename keeps the layout on the renamed dim.
      OpArgs ra;
      ra.dims = {"length", "kv_length"};
      Array r = call("rename", {p.at("x")}, ra)[0];
      EXPECT_TRUE(r.has_dim("kv_length"));
      EXPECT_EQ(r.local_shape().sizes(), p.at("x").local_shape().sizes());
      EXPECT_EQ(spmd::gather(r).to_floats(), rename(x, {{"length", "kv_length"}}).to_floats());
      // gated_gelu: value and gradients.
      Array c = randn(s, 53);
      Array cs = spmd::shard(c, spmd::param_spec(s, rules));
      auto want = value_and_grad([&](const ParamTree& q) { return sum(mul(gated_gelu(q.at("x"), q.at("y")), c)); },
                                 {{"x", x}, {"y", y}});
      auto got = spmd::value_and_grad(
          [&](const ParamTree& q) {
            return spmd::sum(spmd::mul(call("gated_gelu", {q.at("x"), q.at("y")})[0], cs), {"batch", "length", "mlp"});
          },
          {{"x", p.at("x")}, {"y", p.at("y")}});
      EXPECT_LE(rel_err(spmd::gather(got.value), want.value), 1e-5);
      for (const char* k : {"x", "y"}) EXPECT_LE(rel_err(spmd::gather(got.grads.at(k)), want.grads.at(k)), 1e-5) << k;
    }
  }
}

}  // namespace
}  // namespace t5x::testing_spmd
