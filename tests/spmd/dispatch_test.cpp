// spmd::Lowering methods for the ops the models apply to batch-shaped arrays
// (comparisons, logical ops, rename, gated_gelu), called directly rather
// than through the plain ops (plain_ops_test.cpp covers that route).
#include "spmd_test_util.h"

namespace t5x::testing_spmd {
namespace {

const spmd::Lowering& L() { return spmd::lowering(); }

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
      for (BinaryOp op : {BinaryOp::Eq, BinaryOp::Ne, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge}) {
        Array got = spmd::gather(L().binary(op, p.at("x"), p.at("y")));
        Array want = L().binary(op, x, y);  // fully local: the plain op
        EXPECT_EQ(got.dtype(), DType::boolean) << op_name(op);
        EXPECT_EQ(got.to_ints(), want.to_ints()) << op_name(op);
      }
      // Token masks, as the models build them: (tok > 0) and (tok == tok').
      Array zero = Array::from_ints(Shape{}, {0}, DType::i32);
      Array pos = L().binary(BinaryOp::Gt, p.at("tok"), zero);
      EXPECT_EQ(spmd::gather(pos).to_ints(), gt(tok, 0.0).to_ints());
      Array both = L().binary(BinaryOp::LogicalAnd, pos, L().binary(BinaryOp::Ne, p.at("tok"), zero));
      EXPECT_EQ(spmd::gather(both).to_ints(), logical_and(gt(tok, 0.0), ne(tok, 0.0)).to_ints());
      // rename keeps the layout on the renamed dim.
      Array r = L().rename(p.at("x"), {{"length", "kv_length"}});
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
            return spmd::sum(spmd::mul(L().gated_gelu(q.at("x"), q.at("y")), cs), {"batch", "length", "mlp"});
          },
          {{"x", p.at("x")}, {"y", p.at("y")}});
      EXPECT_LE(rel_err(spmd::gather(got.value), want.value), 1e-5);
      for (const char* k : {"x", "y"}) EXPECT_LE(rel_err(spmd::gather(got.grads.at(k)), want.grads.at(k)), 1e-5) << k;
    }
  }
}

}  // namespace
}  // namespace t5x::testing_spmd
