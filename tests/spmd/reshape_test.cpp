// The splittable reshape (MTF): a dim split over a mesh axis that becomes
// several dims keeps the split on the major new dim, with no communication,
// e.g. a model-split [embed, joined_kv] kernel -> [embed, heads, kv].
// Also: bool masks reshard (moved as int32), as a dropout mask meeting a
// split activation does.
#include "spmd_test_util.h"

namespace t5x::testing_spmd {
namespace {

TEST(SpmdReshape, SplitDimIntoMajorMinorIsLocal) {
  Array w = randn(Shape{{"embed", 4}, {"joined_kv", 8}}, 31);
  Array o = randn(Shape{{"joined_kv", 8}, {"embed", 4}}, 32);
  const Shape wh{{"embed", 4}, {"heads", 2}, {"kv", 4}}, oh{{"heads", 2}, {"kv", 4}, {"embed", 4}};
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    const LogicalAxisRules rules = standard_logical_axis_rules(1, 1);
    ParamTree p = spmd::shard_params({{"w", w}, {"o", o}}, rules);
    const double before = sent_bytes(*ctx);
    Array rw = spmd::reshape(p.at("w"), wh), ro = spmd::reshape(p.at("o"), oh);
    EXPECT_EQ(sent_bytes(*ctx), before) << "a splittable reshape sends nothing";
    const int64_t m = ctx->mesh().axes_size({"model"});
    EXPECT_EQ(rw.local_shape().size("heads"), 2 / m);
    EXPECT_EQ(ro.local_shape().size("heads"), 2 / m);
    EXPECT_EQ(spmd::gather(rw).to_floats(), reshape(w, wh).to_floats());
    EXPECT_EQ(spmd::gather(ro).to_floats(), reshape(o, oh).to_floats());
    // Gradient through it: d/dw sum(reshape(w) * c) = c reshaped back.
    Array c = randn(wh, 33);
    Array cs = spmd::shard(c, spmd::param_spec(c.shape(), rules));
    auto g = spmd::value_and_grad([&](const ParamTree& q) { return spmd::sum(spmd::mul(spmd::reshape(q.at("w"), wh), cs), {"embed", "heads", "kv"}); },
                                  {{"w", p.at("w")}});
    EXPECT_EQ(g.grads.at("w").local_shape(), p.at("w").local_shape());
    EXPECT_LE(rel_err(spmd::gather(g.grads.at("w")), reshape(c, w.shape())), 1e-6);
  }
}

TEST(SpmdReshard, BoolMasksMoveBetweenLayouts) {
  Array x = randn(Shape{{"batch", 4}, {"mlp", 8}}, 41);
  Array mask = gt(x, 0.0);
  const PartitionSpec specs[] = {PartitionSpec({{}, {}}), PartitionSpec({{"data"}, {}}), PartitionSpec({{}, {"model"}}),
                                 PartitionSpec({{"data"}, {"model"}}), PartitionSpec({{"model"}, {"data"}})};
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    for (const auto& a : specs)
      for (const auto& b : specs) {
        Array m = spmd::reshard(spmd::shard(mask, a), b);
        EXPECT_EQ(m.dtype(), DType::boolean);
        EXPECT_EQ(spmd::gather(m).to_ints(), mask.to_ints()) << spec_to_string(a) << " -> " << spec_to_string(b);
      }
  }
}

}  // namespace
}  // namespace t5x::testing_spmd
