// Byte counters of sharded einsums and reshards against the ring formulas of
// sharding.md section 0 (within 1%), and parameter + optimizer-slot bytes per
// process under 1-D and 2-D parameter partitioning.
#include <cstdio>

#include "spmd_test_util.h"

namespace t5x::testing_spmd {
namespace {

using P = PartitionSpec;

struct Counted {
  double bytes = 0;
  CommCounters c;
};

template <typename F>
Counted count(spmd::Context& ctx, F&& f) {
  ctx.groups().reset_counters();
  f();
  Counted r;
  r.c = ctx.groups().total_counters();
  r.bytes = r.c.total_bytes();
  return r;
}

bool is_root() { return g_world->rank() == 0; }

std::string g_mesh;  // for the printed table

void expect_bytes(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 0.01 * want + 1e-9) << what;
  if (is_root() && want > 0)
    std::printf("[bytes] %s %s: measured %.1f B, ring formula %.1f B, ratio %.4f\n", g_mesh.c_str(), what.c_str(), got,
                want, got / want);
}

TEST(SpmdBytes, EinsumCollectivesMatchRingFormulas) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    g_mesh = mesh_name(*ctx);
    const Mesh& m = ctx->mesh();
    const double km = double(m.axis_size("model")), kd = double(m.axis_size("data"));
    Array x = randn(Shape{{"batch", 8}, {"embed", 8}}, 1), w = randn(Shape{{"embed", 8}, {"mlp", 4}}, 2);
    const double s_out = 8 * 4 * 4;  // [batch, mlp] f32, replicated

    // Contracted dim split over model in both operands, replicated output:
    // one all-reduce of 2*S_out*(k-1)/k.
    Array xs = spmd::shard(x, P({{}, {"model"}})), ws = spmd::shard(w, P({{"model"}, {}}));
    auto r = count(*ctx, [&] { NoGradGuard g; spmd::einsum(xs, ws, {"batch", "mlp"}); });
    expect_bytes(r.bytes, 2 * s_out * (km - 1) / km, "all-reduce");
    EXPECT_EQ(r.c.calls_of(Collective::kAllReduce), km > 1 ? 1 : 0);
    // Same with the output split over model on mlp: one reduce-scatter, S_out*(k-1)/k.
    r = count(*ctx, [&] { NoGradGuard g; spmd::einsum(xs, ws, {"batch", "mlp"}, P({{}, {"model"}})); });
    expect_bytes(r.bytes, s_out * (km - 1) / km, "reduce-scatter");
    EXPECT_EQ(r.c.calls_of(Collective::kReduceScatter), km > 1 ? 1 : 0);
    EXPECT_EQ(r.c.calls_of(Collective::kAllReduce), 0);

    // Data parallel: x split over data, w replicated. Forward: no traffic;
    // backward: the gradient all-reduce of w over data, 2*S_w*(k-1)/k.
    Array xd = spmd::shard(x, P({{"data"}, {}})), wr = spmd::shard(w, P({{}, {}}));
    Array cot = spmd::shard(randn(Shape{{"batch", 8}, {"mlp", 4}}, 3), P({{"data"}, {}}));
    const double s_w = 8 * 4 * 4;
    r = count(*ctx, [&] { NoGradGuard g; spmd::einsum(xd, wr, {"batch", "mlp"}); });
    EXPECT_EQ(r.bytes, 0.0);
    auto fn = [](const std::vector<Array>& v) { return std::vector<Array>{spmd::einsum(v[0], v[1], {"batch", "mlp"})}; };
    r = count(*ctx, [&] { vjp(fn, {xd, wr}, {cot}); });
    expect_bytes(r.bytes, 2 * s_w * (kd - 1) / kd, "data-parallel gradient all-reduce");

    // ZeRO-3: w split over data on embed while the batch is over data: the
    // forward all-gathers w (S_loc*(k-1)), the backward reduce-scatters its
    // gradient (S_w*(k-1)/k).
    Array wz = spmd::shard(w, P({{"data"}, {}}));
    r = count(*ctx, [&] { vjp(fn, {xd, wz}, {cot}); });
    expect_bytes(r.c.bytes_of(Collective::kAllGather), (s_w / kd) * (kd - 1), "ZeRO-3 weight all-gather");
    expect_bytes(r.c.bytes_of(Collective::kReduceScatter), s_w * (kd - 1) / kd, "ZeRO-3 gradient reduce-scatter");
    expect_bytes(r.bytes, (s_w / kd) * (kd - 1) + s_w * (kd - 1) / kd, "ZeRO-3 total");

    // Megatron FFN (sharding.md T1.12): exactly one all-reduce over model in
    // the forward pass, of the [batch/|data|, embed] slice.
    // (mlp = 4 x embed, as in Transformers: the all-reduce is cheaper than
    // gathering the mlp-split operands.)
    Array wi = spmd::shard(randn(Shape{{"embed", 8}, {"mlp", 32}}, 4), P({{}, {"model"}}));
    Array wo = spmd::shard(randn(Shape{{"mlp", 32}, {"embed", 8}}, 5), P({{"model"}, {}}));
    r = count(*ctx, [&] {
      NoGradGuard g;
      Array h = spmd::unary(spmd::einsum(xd, wi, {"batch", "mlp"}), [](const Array& a) { return relu(a); });
      spmd::einsum(h, wo, {"batch", "embed"});
    });
    const double s_act = 8 / kd * 8 * 4;
    expect_bytes(r.bytes, 2 * s_act * (km - 1) / km, "FFN forward all-reduce");
    EXPECT_EQ(r.c.calls_of(Collective::kAllReduce), km > 1 ? 1 : 0);
  }
}

// Lazy all-reduce: two model-split contractions added before one all-reduce
// (MTF LazyAllreduceSum) move half the bytes of two eager einsums and give the
// same value and gradients.
TEST(SpmdBytes, LazyAllReduceHalvesTraffic) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    g_mesh = mesh_name(*ctx);
    const double km = double(ctx->mesh().axis_size("model"));
    ParamTree host = {{"h1", randn(Shape{{"batch", 8}, {"mlp", 16}}, 51)}, {"w1", randn(Shape{{"mlp", 16}, {"embed", 8}}, 52)},
                      {"h2", randn(Shape{{"batch", 8}, {"heads", 16}}, 53)}, {"w2", randn(Shape{{"heads", 16}, {"embed", 8}}, 54)}};
    LogicalAxisRules rules = standard_logical_axis_rules(1, 1);
    ParamTree p = spmd::shard_params(host, rules);
    std::vector<std::string> o = {"batch", "embed"};
    Array cot = randn(Shape{{"batch", 8}, {"embed", 8}}, 55);
    Array cot_s = spmd::shard(cot, spmd::param_spec(cot.shape(), rules));
    auto ref = value_and_grad([&](const ParamTree& t) {
      return sum(mul(add(einsum(t.at("h1"), t.at("w1"), o), einsum(t.at("h2"), t.at("w2"), o)), cot));
    }, host);
    auto lazy = [&](const ParamTree& t) {
      return spmd::resolve(spmd::add(spmd::einsum_partial(t.at("h1"), t.at("w1"), o), spmd::einsum_partial(t.at("h2"), t.at("w2"), o)));
    };
    const double s_out = 8.0 / double(ctx->mesh().axis_size("data")) * 8 * 4;
    Counted r = count(*ctx, [&] { NoGradGuard g; lazy(p); });
    expect_bytes(r.bytes, 2 * s_out * (km - 1) / km, "lazy all-reduce of two partial sums");
    EXPECT_EQ(r.c.calls_of(Collective::kAllReduce), km > 1 ? 1 : 0);
    Counted eager = count(*ctx, [&] { NoGradGuard g; spmd::add(spmd::einsum(p.at("h1"), p.at("w1"), o), spmd::einsum(p.at("h2"), p.at("w2"), o)); });
    EXPECT_NEAR(eager.bytes, 2 * r.bytes, 1e-9);
    auto got = spmd::value_and_grad([&](const ParamTree& t) { return spmd::sum(spmd::mul(lazy(t), cot_s)); }, p);
    EXPECT_LE(rel_err(spmd::gather(got.value), ref.value), 1e-5);
    for (const auto& [k, g] : ref.grads) EXPECT_LE(rel_err(spmd::gather(got.grads.at(k)), g), 1e-5) << k;
  }
}

TEST(SpmdBytes, ReshardsMatchRingFormulas) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    g_mesh = mesh_name(*ctx);
    const Mesh& m = ctx->mesh();
    const double km = double(m.axis_size("model")), kd = double(m.axis_size("data"));
    Array x = randn(Shape{{"batch", 8}, {"embed", 8}}, 6);
    const double s = 8 * 8 * 4;
    NoGradGuard g;
    Array a = spmd::shard(x, P({{"data"}, {}}));
    auto r = count(*ctx, [&] { spmd::reshard(a, P({{}, {"data"}})); });
    expect_bytes(r.bytes, (s / kd) * (kd - 1) / kd, "all-to-all");
    Array b = spmd::shard(x, P({{}, {"model"}}));
    r = count(*ctx, [&] { spmd::reshard(b, P({{}, {}})); });
    expect_bytes(r.bytes, (s / km) * (km - 1), "all-gather");
    Array c = spmd::shard(x, P({{}, {}}));
    r = count(*ctx, [&] { spmd::reshard(c, P({{"data"}, {"model"}})); });
    EXPECT_EQ(r.bytes, 0.0) << "slicing";
    if (kd == 2 && km == 2) {
      Array d = spmd::shard(x, P({{"data"}, {"model"}}));
      r = count(*ctx, [&] { spmd::reshard(d, P({{"model"}, {"data"}})); });
      const bool moves = m.coord("data") != m.coord("model");
      expect_bytes(r.bytes, moves ? s / 4 : 0.0, "collective-permute");
    }
  }
}

// Parameters of a T5.1.1-small-sized 2-layer block (+ token embedding),
// dim names = logical axes; Adam-like 2 slots per param.
std::map<std::string, Shape> block_shapes(int64_t E, int64_t H, int64_t K, int64_t M, int64_t V) {
  std::map<std::string, Shape> s;
  s["token_embedder"] = Shape{{"vocab", V}, {"embed", E}};
  for (int l = 0; l < 2; ++l) {
    std::string p = "layers_" + std::to_string(l) + "/";
    s[p + "pre_attention_norm/scale"] = Shape{{"embed", E}};
    for (const char* n : {"query", "key", "value"}) s[p + "attention/" + n] = Shape{{"embed", E}, {"heads", H}, {"kv", K}};
    s[p + "attention/out"] = Shape{{"heads", H}, {"kv", K}, {"embed", E}};
    s[p + "pre_mlp_norm/scale"] = Shape{{"embed", E}};
    s[p + "mlp/wi"] = Shape{{"embed", E}, {"mlp", M}};
    s[p + "mlp/wo"] = Shape{{"mlp", M}, {"embed", E}};
  }
  return s;
}

TEST(SpmdBytes, ParamAndOptimizerBytesPerProcess) {
  for (const auto& ctx : contexts()) {
    spmd::ContextScope scope(ctx);
    SCOPED_TRACE(mesh_name(*ctx));
    auto shapes = block_shapes(512, 8, 64, 1024, 32128);
    std::map<std::string, double> frac;
    for (const auto& pr : presets()) {
      auto b = spmd::param_bytes(shapes, DType::f32, standard_logical_axis_rules(pr.act, pr.param), 2);
      std::string key = "(" + std::to_string(pr.act) + "," + std::to_string(pr.param) + ")";
      frac[key] = b.fraction();
      if (is_root())
        std::printf("[params] %s rules %s: %.2f MB of %.2f MB per process = %.2f%%\n", mesh_name(*ctx).c_str(),
                    key.c_str(), b.per_process / 1e6, b.unsharded / 1e6, 100 * b.fraction());
    }
    if (ctx->mesh().num_devices() == 4) {
      EXPECT_LE(frac["(1,2)"], 0.30);
      EXPECT_LE(frac["(2,2)"], 0.30);
    }
    // The count agrees with the shards actually held (small shapes).
    auto small = block_shapes(8, 2, 2, 8, 16);
    LogicalAxisRules rules = standard_logical_axis_rules(1, 2);
    double held = 0;
    for (const auto& [k, s] : small) held += 3.0 * double(spmd::shard(Array::zeros(s), spmd::param_spec(s, rules)).nbytes());
    EXPECT_DOUBLE_EQ(held, spmd::param_bytes(small, DType::f32, rules, 2).per_process);
  }
}

}  // namespace
}  // namespace t5x::testing_spmd
