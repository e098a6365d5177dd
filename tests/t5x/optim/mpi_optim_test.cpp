// The optimizers on shards under mpiexec: on a (data=1, model=N) mesh, N =
// the number of processes, each process updates its shards of params split
// over 'model' (factored Adafactor params along their ROW and along their
// COLUMN dim, an unfactored one, a replicated one; AdamW and SGD with their
// global-norm clip) and must hold one process's values bit for bit; the byte counters
// show that only the stats vectors and scalars cross processes, through the
// collectives the split needs (float64; ring bytes: all-reduce 2*S*(k-1)/k,
// all-gather S*(k-1) for S bytes per process).
#include <gtest/gtest.h>

#include "../../common/mpi_gtest_main.h"
#include "shard_sim.h"
#include "spmd/shard_comm.h"
#include "t5x/optim/adafactor.h"
#include "t5x/optim/adamw.h"
#include "t5x/optim/lion.h"
#include "t5x/optim/sgd.h"

namespace t5x {
namespace {

std::shared_ptr<Communicator> g_world;

Array ramp(const Shape& s, float scale, float shift) {
  std::vector<float> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * (float((i * 37) % 101) / 50.f - 1.f) + shift;
  return Array::from_vector(s, v);
}

struct Leaf {
  std::string path;
  Shape shape;
  PartitionSpec spec;
};

// Runs `steps` updates of `opt` on one process (whole arrays) and on this
// process's shards (through spmd::shard_comm()); returns the names of the
// params / slots whose shards differ, and the all-reduce bytes per step.
template <typename Opt>
std::pair<std::string, CommCounters> run_both(const Opt& opt, const std::vector<Leaf>& leaves, int steps) {
  const int n = g_world->size();
  auto ctx = std::make_shared<spmd::Context>(Mesh({1, n}, {"data", "model"}, g_world->rank()), g_world);
  spmd::ContextScope scope(ctx);
  auto grads_at = [&](int t) {
    ParamTree g;
    for (const auto& l : leaves) g[l.path] = ramp(l.shape, 0.05f * float(t + 1), 0.02f);
    return g;
  };
  ParamTree ref, p;
  for (const auto& l : leaves) {
    ref[l.path] = ramp(l.shape, 0.3f, 0.01f);
    p[l.path] = testing::shard_of(ref[l.path], ctx->desc(), l.spec);
  }
  OptimizerState ref_st = opt.init(ref), st = opt.init(p);
  const ShardComm comm = spmd::shard_comm();
  ctx->groups().reset_counters();
  for (int t = 0; t < steps; ++t) {
    opt.apply_gradient(ref, ref_st, grads_at(t), 0.05);
    ParamTree g;
    for (const auto& l : leaves) g[l.path] = testing::shard_of(grads_at(t).at(l.path), ctx->desc(), l.spec);
    opt.apply_gradient(p, st, g, 0.05, &comm);
  }
  const CommCounters counted = ctx->groups().total_counters();
  std::string bad;
  for (const auto& l : leaves)
    if (p.at(l.path).to_floats() != testing::shard_of(ref.at(l.path), ctx->desc(), l.spec).to_floats()) bad += " " + l.path;
  for (const auto& [k, v] : st.slots) {
    const Array& full = ref_st.slots.at(k);
    const Array want = v.is_fully_local() ? full : testing::shard_of(full, ctx->desc(), v.sharding().spec);
    if (v.to_floats() != want.to_floats()) bad += " " + k;
  }
  return {bad, counted};
}

double ring_all_reduce_bytes(double values) {
  const double k = double(g_world->size());
  return 2.0 * 8.0 * values * (k - 1) / k;
}
// `values` in all, values / k from each process.
double ring_all_gather_bytes(double values) {
  const double k = double(g_world->size());
  return 8.0 * values / k * (k - 1);
}

TEST(OptimizersOnShards, AdafactorEqualsOneProcessAndMovesOnlyItsStatistics) {
  const PartitionSpec cols({{}, {"model"}}), rows({{"model"}, {}});
  // Heuristic factoring: mlp (larger) is COLUMN, embed ROW.
  const std::vector<Leaf> leaves = {{"b", Shape{{"embed", 8}, {"mlp", 16}}, cols},
                                    {"s", Shape{{"embed", 16}}, PartitionSpec::replicated(1)},
                                    {"w_col", Shape{{"embed", 128}, {"mlp", 256}}, cols},
                                    {"w_row", Shape{{"embed", 128}, {"mlp", 256}}, rows}};
  for (const bool clip : {true, false}) {
    AdafactorConfig c;
    c.beta1 = 0.9;
    c.clipping_threshold = clip ? std::optional<double>(0.5) : std::nullopt;
    c.multiply_by_parameter_scale = true;
    const int steps = 3;
    auto [bad, counted] = run_both(Adafactor(c), leaves, steps);
    EXPECT_EQ(bad, "") << "clip " << clip;
    // Per step: all-reduces of b's RMS(p) sum, w_col's [RMS(p) sum, v_row's
    // 128 row sums] (its columns are split), w_row's [RMS(p) sum, v_col's
    // 256 column sums] (its rows are split), and one clipping RMS sum each;
    // all-gathers of w_col's v_col (256) and w_row's v_row (128) slices.
    const double summed = 1 + (1 + 128) + (1 + 256) + (clip ? 3 : 0);
    EXPECT_EQ(counted.calls_of(Collective::kAllReduce), steps * (clip ? 6 : 3));
    EXPECT_EQ(counted.calls_of(Collective::kAllGather), steps * 2);
    EXPECT_DOUBLE_EQ(counted.bytes_of(Collective::kAllReduce), steps * ring_all_reduce_bytes(summed)) << clip;
    EXPECT_DOUBLE_EQ(counted.bytes_of(Collective::kAllGather), steps * ring_all_gather_bytes(256 + 128)) << clip;
    EXPECT_EQ(counted.total_bytes(),
              counted.bytes_of(Collective::kAllReduce) + counted.bytes_of(Collective::kAllGather));
    // The largest one moves the stats vectors of a param, not the param.
    EXPECT_LT(ring_all_reduce_bytes(1 + 256), 4.0 * 128 * 256 / 20);
  }
}

// Split params of every fast-path layout run the backend's phases on their
// shards (kernels.h, adafactor_*_stats / _clip_sums / _apply), and one of no
// such layout walks its elements; each must give the one-process bits with
// every option that changes a pass on: momentum, weight decay, update and
// global-norm clipping, NaN skipping. Standard rules: embed ROW, mlp / heads
// / kv COLUMN, layers BATCH.
TEST(OptimizersOnShards, AdafactorShardLayoutsAndOptionsEqualOneProcess) {
  const PartitionSpec first({{"model"}, {}, {}}), last({{}, {}, {"model"}}), second({{}, {"model"}});
  const std::vector<Leaf> leaves = {
      {"o_col_outer_split", Shape{{"heads", 4}, {"kv", 16}, {"embed", 24}}, first},  // COL outer, split
      {"o_row_inner_split", Shape{{"heads", 4}, {"kv", 16}, {"embed", 24}}, last},   // ROW inner, split
      {"layers_wi", Shape{{"layers", 2}, {"embed", 24}, {"mlp", 32}}, last},         // BATCH, ROW, COL split
      {"layers_scale", Shape{{"layers", 2}, {"embed", 64}}, second},                 // unfactored per layer
      {"interleaved", Shape{{"embed", 8}, {"layers", 2}, {"mlp", 16}}, last},        // no fast layout
  };
  for (const bool clip : {true, false}) {
    AdafactorConfig c;
    c.logical_factor_rules = standard_logical_factor_rules();
    c.beta1 = 0.9;
    c.weight_decay_rate = 1e-3;
    c.clipping_threshold = clip ? std::optional<double>(0.5) : std::nullopt;
    c.global_norm_clip_threshold = 0.1;  // below the ramps' norm: active
    c.skip_nan_updates = true;
    auto [bad, counted] = run_both(Adafactor(c), leaves, 3);
    EXPECT_EQ(bad, "") << "clip " << clip;
  }
}

TEST(OptimizersOnShards, AdamWIsElementwiseAndItsClipSumsOneScalar) {
  AdamWConfig c;
  c.chain = {ChainedClip::global_norm(0.05)};  // active
  const std::vector<Leaf> leaves = {{"r", Shape{{"embed", 16}}, PartitionSpec::replicated(1)},
                                    {"w", Shape{{"embed", 8}, {"mlp", 16}}, PartitionSpec({{}, {"model"}})}};
  const int steps = 3;
  auto [bad, counted] = run_both(AdamW(c), leaves, steps);
  EXPECT_EQ(bad, "");
  EXPECT_EQ(counted.calls_of(Collective::kAllReduce), g_world->size() > 1 ? steps : 0);
  EXPECT_DOUBLE_EQ(counted.total_bytes(), steps * ring_all_reduce_bytes(1));
}

// SGD after optax.clip_by_global_norm: the same one scalar as AdamW's.
TEST(OptimizersOnShards, SgdAfterClipSumsOneScalar) {
  SgdConfig c;
  c.momentum = 0.9;
  c.chain = {ChainedClip::global_norm(0.05)};  // active
  const std::vector<Leaf> leaves = {{"r", Shape{{"embed", 16}}, PartitionSpec::replicated(1)},
                                    {"w", Shape{{"embed", 8}, {"mlp", 16}}, PartitionSpec({{}, {"model"}})}};
  const int steps = 3;
  auto [bad, counted] = run_both(Sgd(c), leaves, steps);
  EXPECT_EQ(bad, "");
  EXPECT_EQ(counted.calls_of(Collective::kAllReduce), g_world->size() > 1 ? steps : 0);
  EXPECT_DOUBLE_EQ(counted.total_bytes(), steps * ring_all_reduce_bytes(1));
}

// Lion after t5x's two clips (clip(0.01) clamps most of the ramps' values,
// then clip_by_global_norm(0.05) on what is left): elementwise on shards,
// one scalar summed per step for the norm.
TEST(OptimizersOnShards, LionAfterTwoClipsSumsOneScalar) {
  LionConfig c;
  c.chain = {ChainedClip::value(0.01), ChainedClip::global_norm(0.05)};
  const std::vector<Leaf> leaves = {{"r", Shape{{"embed", 16}}, PartitionSpec::replicated(1)},
                                    {"w", Shape{{"embed", 8}, {"mlp", 16}}, PartitionSpec({{}, {"model"}})}};
  const int steps = 3;
  auto [bad, counted] = run_both(Lion(c), leaves, steps);
  EXPECT_EQ(bad, "");
  EXPECT_EQ(counted.calls_of(Collective::kAllReduce), g_world->size() > 1 ? steps : 0);
  EXPECT_DOUBLE_EQ(counted.total_bytes(), steps * ring_all_reduce_bytes(1));
}

}  // namespace
}  // namespace t5x

int main(int argc, char** argv) {
  return t5x::testing_mpi::main_on_every_rank(argc, argv, t5x::g_world, [] { t5x::spmd::set_context(nullptr); });
}
