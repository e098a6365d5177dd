// moe_block on meshes (data, expert, model) = (1,1,1), (2,1,1), (1,2,1),
// (2,2,1), (1,4,1) with t5x's MoE logical-axis rules (batch -> (expert,
// data), expert -> expert): output, metrics and every gradient equal one
// process's run with the same grouping (R from the mesh); the layer is expert
// parallel: each device holds E/|expert| experts' kernels, the only traffic
// besides the loss / metric sums and the data-parallel gradient sums is one
// all-to-all over 'expert' each way (forward: expert_in and expert_out;
// backward: their cotangents), of the formula below, and nothing is
// all-gathered (no expert kernel is gathered). Run by mpiexec with 1, 2 and 4
// processes; rank 0 prints the bytes each collective moved.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>

#include "../common/mpi_gtest_main.h"
#include "mesh/communicator.h"
#include "mesh/logical_axis_rules.h"
#include "nn/constraint.h"
#include "nn/moe.h"
#include "ops/ops.h"
#include "spmd/spmd.h"

namespace t5x::nn {
namespace {

std::shared_ptr<Communicator> g_world;

double rel_err(const Array& got, const Array& want) {
  auto g = got.to_floats(), w = want.to_floats();
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    num = std::max(num, std::fabs(double(g[i]) - w[i]));
    den = std::max(den, std::fabs(double(w[i])));
  }
  return num / std::max(den, 1e-30);
}

TEST(MoeMesh, ExpertsSplitOverExpertAxisEqualOneProcess) {
  spmd::install();
  const int n = g_world->size();
  const LogicalAxisRules rules = moe_logical_axis_rules(1, 1);
  for (auto [D, X] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 1}, {1, 2}, {2, 2}, {1, 4}}) {
    if (D * X != n) continue;
    for (RouterType router : {RouterType::kTokensChooseMasked, RouterType::kExpertsChooseMasked}) {
      MoeConfig cfg;
      cfg.num_experts = 4;
      cfg.expert_mlp_dim = 16;
      cfg.activations = {"gelu", "linear"};
      cfg.router = router;
      cfg.num_selected_experts = 2;
      cfg.batch_prioritized_routing = true;
      cfg.train_capacity_factor = 1.0;
      cfg.min_expert_capacity = 1;
      cfg.max_group_size = 8;
      cfg.num_expert_partitions = X;
      const int64_t R = std::max<int64_t>(1, D * X / X);
      SCOPED_TRACE("mesh (data, expert) = (" + std::to_string(D) + ", " + std::to_string(X) + "), R " +
                   std::to_string(R) + (router == RouterType::kExpertsChooseMasked ? ", experts-choose" : ", top-2"));
      ParamTree full = init_params(moe_param_specs("mlp", 8, cfg), prng_key(21));
      full["mlp/router/router_weights/w/kernel"] = mul(full["mlp/router/router_weights/w/kernel"], 40.0);
      full["x"] = normal(prng_key(22), Shape{{"batch", 4}, {"length", 8}, {"embed", 8}});
      const Array cot = normal(prng_key(23), Shape{{"batch", 4}, {"length", 8}, {"embed", 8}});
      auto loss = [&](const ParamTree& p, const Array& c, MoeMetrics* m) {
        Dropout none;
        MoeMetrics mm;
        Array y = moe_block(p, "mlp", p.at("x"), cfg, true, std::nullopt, none, &mm);
        if (m) *m = mm;
        return add(sum(mul(y, c)), add(mul(mm.auxiliary_loss, 0.5), mul(mm.router_z_loss, 0.25)));
      };
      ValueAndGrad ref;
      MoeMetrics ref_m;
      {
        spmd::ContextScope single(nullptr);
        cfg.num_expert_replicas = R;  // the mesh's grouping on one process
        ref = value_and_grad([&](const ParamTree& p) { return loss(p, cot, &ref_m); }, full);
        cfg.num_expert_replicas = 0;  // on the mesh: from x's mesh
      }
      auto ctx = std::make_shared<spmd::Context>(Mesh({D, X, 1}, {"data", "expert", "model"}, g_world->rank()),
                                                 g_world);
      spmd::ContextScope scope(ctx);
      ActivationConstraintScope hook([&](const Array& a) { return spmd::with_sharding_constraint(a, rules); });
      ParamTree sharded = spmd::shard_params(full, rules);
      // Each device holds only its E/X experts' kernels.
      for (const char* k : {"mlp/expert/wi_0/kernel", "mlp/expert/wi_1/kernel", "mlp/expert/wo/kernel"})
        EXPECT_EQ(sharded.at(k).local_shape().size("expert"), 4 / X) << k;
      // The all-to-all formula (docs/models.md): expert_in [G, E, C, embed]
      // (f32) is split over X * D devices before the all-to-all; each of the
      // two forward all-to-alls (expert_in, expert_out) sends (X-1)/X of that
      // local size; backward sends the same again for the cotangents.
      const int64_t G = num_groups(4 * 8, cfg.max_group_size, 4, R, false);
      const int64_t C = expert_capacity(4 * 8 / G, 4, cfg.train_capacity_factor, cfg.min_expert_capacity);
      const double local_bytes = double(G * 4 * C * 8 * 4) / double(D * X);
      const double a2a_forward = 2 * local_bytes * double(X - 1) / double(X);
      const Array cot_s = spmd::shard(cot, PartitionSpec({{"expert", "data"}, {}, {}}));
      CommCounters fwd;
      {
        NoGradGuard ng;
        ctx->groups().reset_counters();
        Dropout none;
        moe_block(sharded, "mlp", sharded.at("x"), cfg, true, std::nullopt, none, nullptr);
        fwd = ctx->groups().total_counters();
      }
      ctx->groups().reset_counters();
      MoeMetrics m;
      auto got = spmd::value_and_grad([&](const ParamTree& p) { return loss(p, cot_s, &m); }, sharded);
      const CommCounters c = ctx->groups().total_counters();
      EXPECT_NEAR(got.value.item(), ref.value.item(), 1e-5 * std::max(1.0, std::fabs(ref.value.item())));
      EXPECT_NEAR(spmd::gather(m.auxiliary_loss).item(), ref_m.auxiliary_loss.item(), 1e-5);
      EXPECT_NEAR(spmd::gather(m.router_z_loss).item(), ref_m.router_z_loss.item(), 1e-5 * ref_m.router_z_loss.item());
      EXPECT_NEAR(spmd::gather(m.fraction_tokens_left_behind).item(), ref_m.fraction_tokens_left_behind.item(), 1e-6);
      EXPECT_NEAR(spmd::gather(m.router_confidence).item(), ref_m.router_confidence.item(), 1e-6);
      EXPECT_NEAR(spmd::gather(m.expert_usage).item(), ref_m.expert_usage.item(), 1e-6);
      const size_t a2a = size_t(Collective::kAllToAll), ag = size_t(Collective::kAllGather);
      EXPECT_EQ(fwd.bytes[a2a], a2a_forward) << "forward all-to-all bytes";
      EXPECT_EQ(c.bytes[a2a], 2 * a2a_forward) << "forward + backward all-to-all bytes";
      EXPECT_EQ(fwd.bytes[ag], 0.0) << "nothing gathered (expert kernels stay split)";
      EXPECT_EQ(c.bytes[ag], 0.0) << "nothing gathered (expert kernels stay split)";
      for (const auto& [name, g] : ref.grads) {
        const Array& gs = got.grads.at(name);
        EXPECT_EQ(gs.local_shape(), sharded.at(name).local_shape()) << "grad layout of " << name;
        EXPECT_LE(rel_err(spmd::gather(gs), g), 1e-5) << "grad of " << name;
      }
      if (g_world->rank() == 0) {
        for (auto [what, cc] : {std::pair<const char*, const CommCounters*>{"forward", &fwd}, {"loss+grads", &c}}) {
          std::printf("[moe mesh (data=%lld, expert=%lld) %s] %s, bytes sent by rank 0:", (long long)D,
                      (long long)X, router == RouterType::kExpertsChooseMasked ? "EC" : "top-2", what);
          for (int i = 0; i < kNumCollectives; ++i)
            if (cc->calls[size_t(i)])
              std::printf(" %s %lld calls %.0f B;", collective_name(Collective(i)), (long long)cc->calls[size_t(i)],
                          cc->bytes[size_t(i)]);
          std::printf("\n");
        }
      }
    }
  }
}

}  // namespace
}  // namespace t5x::nn

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  t5x::nn::g_world = t5x::init_communicator(t5x::CommBackend::kAny);
  const int rc = t5x::testing_mpi::run_all_tests_on_every_rank(*t5x::nn::g_world);
  t5x::spmd::set_context(nullptr);
  return rc;
}
