// Per-process parameter + optimizer-state bytes of T5.1.1-small under t5x's
// four standard rule presets (sharding.md 4.3, T4.4; issue 3's acceptance:
// 2-D parameter partitioning on 4 processes keeps <= 30% of the total).
// Shapes: t5x.md section 4 (emb 512, 6 heads x 64, mlp 1024, 8+8 layers,
// vocab 32128, untied logits). Optimizer: t5x Adafactor without momentum;
// 2-D kernels keep factored v_row/v_col (replicated), 1-D params keep v with
// the param's axes.
#include <gtest/gtest.h>

#include <cstdio>

#include "mesh/logical_axis_rules.h"
#include "mesh/partition_spec.h"

namespace t5x {
namespace {

struct Param {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
};

std::vector<Param> t5_1_1_small() {
  const int64_t emb = 512, heads = 6, kv = 64, mlp = 1024, vocab = 32128, layers = 8;
  std::vector<Param> p;
  p.push_back({{"vocab", "embed"}, {vocab, emb}});
  p.push_back({{"embed", "vocab"}, {emb, vocab}});  // decoder/logits_dense
  auto attention = [&] {
    for (int i = 0; i < 3; ++i) p.push_back({{"embed", "joined_kv"}, {emb, heads * kv}});
    p.push_back({{"joined_kv", "embed"}, {heads * kv, emb}});
  };
  auto mlp_block = [&] {
    p.push_back({{"embed", "mlp"}, {emb, mlp}});
    p.push_back({{"embed", "mlp"}, {emb, mlp}});
    p.push_back({{"mlp", "embed"}, {mlp, emb}});
  };
  for (int stack = 0; stack < 2; ++stack) {
    p.push_back({{"heads", "relpos_buckets"}, {heads, 32}});
    p.push_back({{"embed"}, {emb}});  // final norm
    for (int l = 0; l < layers; ++l) {
      attention();
      if (stack == 1) attention();  // encoder-decoder attention
      mlp_block();
      for (int n = 0; n < (stack == 0 ? 2 : 3); ++n) p.push_back({{"embed"}, {emb}});
    }
  }
  return p;
}

// Bytes per process (params + Adafactor state, f32) and the unsharded total.
std::pair<double, double> bytes_per_process(const MeshDesc& mesh, const LogicalAxisRules& rules) {
  double local = 0, total = 0;
  for (const Param& p : t5_1_1_small()) {
    NamedShape shape;
    for (size_t d = 0; d < p.names.size(); ++d) shape.push_back({p.names[d], p.sizes[d]});
    PartitionSpec spec = logical_to_mesh_axes(p.names, rules);
    auto loc = local_shape(mesh, shape, spec);
    double n_loc = 1, n = 1;
    for (size_t d = 0; d < loc.size(); ++d) n_loc *= double(loc[d]), n *= double(p.sizes[d]);
    double state_loc = n_loc, state = n;  // 1-D: v like the param
    if (p.sizes.size() == 2) state_loc = state = double(p.sizes[0] + p.sizes[1]);  // v_row + v_col, replicated
    local += 4 * (n_loc + state_loc);
    total += 4 * (n + state);
  }
  return {local, total};
}

TEST(ParamPartitioning, T5SmallBytesPerProcessUnderPresets) {
  for (MeshDesc mesh : {MeshDesc{{"data", "model"}, {2, 2}, 0}, MeshDesc{{"data", "model"}, {4, 2}, 0}}) {
    const double n = double(mesh.num_devices());
    for (auto [act, param] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
      auto [local, total] = bytes_per_process(mesh, standard_logical_axis_rules(act, param));
      const double frac = local / total;
      std::printf("mesh %lldx%lld rules (%d,%d): %.0f of %.0f bytes per process = %.2f%%\n",
                  (long long)mesh.axis_sizes[0], (long long)mesh.axis_sizes[1], act, param, local, total,
                  100 * frac);
      EXPECT_GE(frac, 1.0 / n - 1e-12);  // nothing is split more than N ways
      if (param == 2) {
        // 2-D params: every kernel split over data x model; only small factored
        // states and per-dim scales are not split N ways.
        EXPECT_LE(frac, 1.0 / n + 0.05);
        if (mesh.num_devices() == 4) {
          EXPECT_LE(frac, 0.30);
        }
      } else {
        // 1-D params: split over 'model' only.
        const double m = double(mesh.axis_sizes[1]);
        EXPECT_GE(frac, 1.0 / m - 0.01);
        EXPECT_LE(frac, 1.0 / m + 0.01);
      }
    }
  }
}

TEST(ParamPartitioning, ParamCountMatchesT5Small) {
  // T5.1.1-small has about 77M parameters (untied logits).
  double n = 0;
  for (const Param& p : t5_1_1_small()) {
    double k = 1;
    for (int64_t s : p.sizes) k *= double(s);
    n += k;
  }
  EXPECT_NEAR(n / 1e6, 76.96, 0.1);
}

}  // namespace
}  // namespace t5x
