// The splittable reshape (MTF): a dim split over a mesh axis that becomes
// several dims keeps the split on the major new dim, with no communication,
// e.g. a model-split [embed, joined_kv] kernel -> [embed, heads, kv].
// GSPMD's merge/split rule: a split major dim merged with minor dims (or a
// dim split over several axes split into several dims) keeps its axes on the
// major new dims when the shard boundaries line up, else the reshape gathers.
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

// `spec` without the mesh axes of size 1 (which split nothing).
std::string effective(const Mesh& mesh, const PartitionSpec& spec) {
  PartitionSpec e = spec;
  for (auto& d : e.dims) std::erase_if(d, [&](const std::string& a) { return mesh.axis_size(a) == 1; });
  return spec_to_string(e);
}

// Runs spmd::reshape of x laid out as `spec` to `to`; checks the value, the
// bytes sent (none when `local`) and, when local, the output spec (up to
// axes of size 1).
void check_reshape(spmd::Context& ctx, const Array& x, const PartitionSpec& spec, const Shape& to, bool local,
                   const PartitionSpec& want = PartitionSpec()) {
  const double before = sent_bytes(ctx);
  Array r = spmd::reshape(spmd::shard(x, spec), to);
  const double sent = sent_bytes(ctx) - before;
  EXPECT_EQ(spmd::gather(r).to_floats(), reshape(x, to).to_floats());
  if (local) {
    EXPECT_EQ(sent, 0.0) << spec_to_string(spec) << " " << x.shape().to_string() << " -> " << to.to_string();
    EXPECT_EQ(effective(ctx.mesh(), spmd::spec_of(r)), effective(ctx.mesh(), want))
        << x.shape().to_string() << " -> " << to.to_string();
  } else {
    EXPECT_GT(sent, 0.0) << "expected a gather: " << spec_to_string(spec) << " " << x.shape().to_string() << " -> "
                         << to.to_string();
    EXPECT_EQ(spec_to_string(spmd::spec_of(r)), spec_to_string(PartitionSpec::replicated(size_t(to.rank()))));
  }
}

TEST(SpmdReshape, MergeKeepsTheSplitOnTheMajorDim) {
  // [batch, length] -> [group, token] with batch split n ways: local when
  // group % n == 0 (each shard's tokens are whole groups), and back.
  Array x = randn(Shape{{"batch", 4}, {"length", 6}, {"embed", 2}}, 51);
  const Shape g{{"group", 8}, {"token", 3}, {"embed", 2}};
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    const PartitionSpec bs({{"data"}, {}, {}});
    check_reshape(*ctx, x, bs, g, true, bs);
    check_reshape(*ctx, reshape(x, g), bs, x.shape(), true, bs);
    // Gradient through the merge: the cotangent comes back batch-split.
    Array c = randn(g, 52);
    auto vg = spmd::value_and_grad(
        [&](const ParamTree& q) { return spmd::sum(spmd::mul(spmd::reshape(q.at("x"), g), spmd::shard(c, bs)), {"group", "token", "embed"}); },
        {{"x", spmd::shard(x, bs)}});
    EXPECT_EQ(vg.grads.at("x").local_shape(), spmd::shard(x, bs).local_shape());
    EXPECT_LE(rel_err(spmd::gather(vg.grads.at("x")), reshape(c, x.shape())), 1e-6);
  }
}

TEST(SpmdReshape, TwoAxesSplitOverTwoDims) {
  // MoE's group split ('model', 'data') -> [M, group / M] (M = |model|): the
  // major dim takes 'model' whole, the next one 'data'; and back.
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    const int64_t m = ctx->mesh().axis_size("model");
    Array x = randn(Shape{{"group", 8 * m}, {"embed", 2}}, 53);
    const Shape to{{"chunk", m}, {"group", 8}, {"embed", 2}};
    check_reshape(*ctx, x, PartitionSpec({{"model", "data"}, {}}), to, true, PartitionSpec({{"model"}, {"data"}, {}}));
    check_reshape(*ctx, reshape(x, to), PartitionSpec({{"model"}, {"data"}, {}}), x.shape(), true,
                  PartitionSpec({{"model", "data"}, {}}));
  }
}

TEST(SpmdReshape, MisalignedOrMinorSplitsGather) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    const int64_t d = ctx->mesh().axis_size("data"), m = ctx->mesh().axis_size("model");
    // 3 groups of 4 tokens over 2 shards of 6 tokens: a group straddles them.
    if (d == 2)
      check_reshape(*ctx, randn(Shape{{"batch", 4}, {"length", 3}}, 54), PartitionSpec({{"data"}, {}}),
                    Shape{{"group", 3}, {"token", 4}}, false);
    // A split minor dim merged with an unsplit major one is not contiguous.
    if (m > 1)
      check_reshape(*ctx, randn(Shape{{"batch", 4}, {"length", 6}}, 55), PartitionSpec({{}, {"model"}}),
                    Shape{{"flat", 24}}, false);
    // [a split 'data', b split 'model'] -> [flat]: contiguous only when a is
    // fully split (local size 1), then flat takes ('data', 'model').
    if (m > 1 && d > 1) {
      Array ab = randn(Shape{{"a", 4}, {"b", 4}}, 56);
      const bool whole = d == 4;
      check_reshape(*ctx, ab, PartitionSpec({{"data"}, {"model"}}), Shape{{"flat", 16}}, whole,
                    PartitionSpec(std::vector<std::vector<std::string>>{{"data", "model"}}));
    }
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
