// The fused Adafactor fast path (kernels::cpu::adafactor_*_update) against the generic
// element walker: same rule, so params and every slot must agree within
// 1e-6 relative (the golden tolerance) over several steps, for factored and
// unfactored params of rank 1-3, both factor orientations, batch dims, row
// lengths that are not a multiple of the vector width, and the options that
// change the last pass (momentum, weight decay, clipping, scaling, NaN skip).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backend/cpu/simd.h"
#include "t5x/optim/adafactor.h"

namespace t5x {
namespace {

struct Leaf {
  std::string path;
  Shape shape;
};

// Deterministic pseudo-random values in [-scale, scale) + shift.
std::vector<float> noise(int64_t n, uint64_t seed, float scale, float shift) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = scale * (float(x >> 40) / float(1ull << 23) - 1.0f) + shift;
  }
  return v;
}

ParamTree make_tree(const std::vector<Leaf>& leaves, uint64_t seed, float scale, float shift) {
  ParamTree t;
  for (size_t i = 0; i < leaves.size(); ++i)
    t[leaves[i].path] = Array::from_vector(leaves[i].shape, noise(leaves[i].shape.numel(), seed + i, scale, shift));
  return t;
}

// |got - want| <= 1e-6 * |want|, or within 1e-6 of the array's largest
// magnitude (values near zero); NaN only where the reference has NaN.
void expect_close(const Array& got, const Array& want, const std::string& what) {
  const std::vector<float> g = got.to_floats(), w = want.to_floats();
  ASSERT_EQ(g.size(), w.size()) << what;
  double scale = 0;
  for (float v : w)
    if (!std::isnan(v)) scale = std::max(scale, double(std::abs(v)));
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) || std::isnan(g[i])) {
      if (std::isnan(w[i]) != std::isnan(g[i]) && bad++ < 3) ADD_FAILURE() << what << "[" << i << "] NaN mismatch";
      continue;
    }
    const double d = std::abs(double(g[i]) - double(w[i]));
    if (d > 1e-6 * std::abs(double(w[i])) && d > 1e-6 * scale && bad++ < 3)
      ADD_FAILURE() << what << "[" << i << "]: fast " << g[i] << " generic " << w[i];
  }
}

void run_both(const AdafactorConfig& c, const std::vector<Leaf>& leaves, int steps, bool nan_grad = false) {
  Adafactor fast(c), generic(c);
  generic.set_fast_path(false);
  for (const auto& l : leaves) {
    EXPECT_TRUE(fast.fast_path_applies(l.path, l.shape)) << l.path << " " << l.shape.to_string();
    EXPECT_FALSE(generic.fast_path_applies(l.path, l.shape));
  }
  ParamTree pf = make_tree(leaves, 1, 0.5f, 0.02f), pg = make_tree(leaves, 1, 0.5f, 0.02f);
  OptimizerState sf = fast.init(pf), sg = generic.init(pg);
  for (int t = 0; t < steps; ++t) {
    ParamTree grads = make_tree(leaves, 100 + uint64_t(t) * 17, 0.01f * float(t + 1), 0.001f);
    if (nan_grad && t == 1)
      for (const char* k : {"wi", "scale"}) grads.at(k).data<float>()[3] = std::nanf("");
    const double lr = 0.05 / (t + 1);
    fast.apply_gradient(pf, sf, grads, lr);
    generic.apply_gradient(pg, sg, grads, lr);
    const std::string at = "step " + std::to_string(t + 1) + " ";
    for (const auto& l : leaves) {
      expect_close(pf.at(l.path), pg.at(l.path), at + l.path);
      for (float v : pf.at(l.path).to_floats()) ASSERT_TRUE(std::isfinite(v)) << at << l.path;
    }
    for (const auto& [k, v] : sg.slots) expect_close(sf.slots.at(k), v, at + k);
    EXPECT_EQ(sf.step, sg.step);
  }
}

// Heuristic factoring (no rules): both orientations, odd row lengths, and
// unfactored matrices / vectors.
const std::vector<Leaf> kHeuristic = {
    {"wi", Shape{{"embed", 136}, {"mlp", 203}}},    // ROW outer, COLUMN inner (203 = 25 * 8 + 3)
    {"wo", Shape{{"mlp", 301}, {"embed", 130}}},    // COLUMN outer, ROW inner
    {"logits", Shape{{"embed", 129}, {"vocab", 1100}}},  // rows longer than one 512-element sum block
    {"small", Shape{{"a", 12}, {"b", 2000}}},       // unfactored matrix
    {"scale", Shape{{"embed", 1003}}},              // 1-D
};

// Standard logical factor rules: rank-3 kernels and scanned (BATCH) params.
const std::vector<Leaf> kRules = {
    {"q", Shape{{"embed", 40}, {"heads", 3}, {"kv", 13}}},           // ROW, COL, COL
    {"o", Shape{{"heads", 3}, {"kv", 13}, {"embed", 40}}},           // COL, COL, ROW
    {"layers_wi", Shape{{"layers", 3}, {"embed", 24}, {"mlp", 37}}}, // BATCH, ROW, COL
    {"layers_scale", Shape{{"layers", 2}, {"embed", 50}}},           // BATCH + lone ROW: unfactored per layer
    {"relpos", Shape{{"heads", 4}, {"relpos_buckets", 32}}},         // heuristic, unfactored
};

TEST(AdafactorFastPath, DefaultsMatchGenericPath) {
  run_both(AdafactorConfig{}, kHeuristic, 4);
  AdafactorConfig r;
  r.logical_factor_rules = standard_logical_factor_rules();
  run_both(r, kRules, 4);
}

TEST(AdafactorFastPath, MomentumWeightDecayClippingMatchGenericPath) {
  AdafactorConfig c;
  c.beta1 = 0.9;
  c.weight_decay_rate = 1e-3;
  c.clipping_threshold = 0.5;  // below the first steps' update RMS: clipping is active
  c.global_norm_clip_threshold = 0.1;
  c.max_parameter_scale = 0.3;
  run_both(c, kHeuristic, 5);
  c.logical_factor_rules = standard_logical_factor_rules();
  c.weight_decay_rate_lr_exponent = 1.0;
  run_both(c, kRules, 5);
}

TEST(AdafactorFastPath, NoClippingNoParameterScaleMatchGenericPath) {
  AdafactorConfig c;
  c.clipping_threshold.reset();
  c.multiply_by_parameter_scale = false;
  c.decay_rate = 0.5;
  run_both(c, kHeuristic, 3);
}

TEST(AdafactorFastPath, SkipNanUpdatesMatchGenericPath) {
  AdafactorConfig c;
  c.skip_nan_updates = true;
  c.beta1 = 0.8;
  run_both(c, kHeuristic, 3, /*nan_grad=*/true);
}

// The fast path gives the same bits on every SIMD target the CPU supports
// (AVX-512, AVX2, SSE4, SSSE3, the portable fallback): CPUs old and new
// train alike.
TEST(AdafactorFastPath, EveryTargetAgreesBitwise) {
  const std::vector<int64_t> targets = cpu::simd_targets();
  ASSERT_GE(targets.size(), 2u) << "this test needs a CPU with more than one SIMD target";
  AdafactorConfig c;
  c.beta1 = 0.9;
  c.weight_decay_rate = 1e-3;
  const std::vector<Leaf>& leaves = kHeuristic;  // factored both ways, unfactored, 1-D
  auto run = [&](int64_t target) {
    cpu::ScopedSimdTarget scope(target);
    EXPECT_EQ(cpu::simd_target(), cpu::simd_target_name(target));
    Adafactor opt(c);
    ParamTree p = make_tree(leaves, 1, 0.5f, 0.02f);
    OptimizerState st = opt.init(p);
    for (int t = 0; t < 3; ++t) opt.apply_gradient(p, st, make_tree(leaves, 100 + uint64_t(t), 0.01f, 0.001f), 0.05);
    std::vector<std::vector<float>> out;
    for (const auto& l : leaves) out.push_back(p.at(l.path).to_floats());
    for (const auto& [k, v] : st.slots) out.push_back(v.to_floats());
    return out;
  };
  const auto best = run(targets.front());
  for (size_t t = 1; t < targets.size(); ++t) {
    const auto got = run(targets[t]);
    ASSERT_EQ(best.size(), got.size());
    for (size_t i = 0; i < best.size(); ++i)
      EXPECT_EQ(best[i], got[i]) << cpu::simd_target_name(targets[t]) << " vs " << cpu::simd_target_name(targets[0])
                                 << ", array " << i;
  }
}

// Rows of a factored gradient that are all +0.0 (embedding rows no token
// looked up) are passed over by the clip and apply passes (SkipZeroRows,
// backend/cpu/adafactor.cpp). Against the same gradient with those rows
// -0.0, which the passes compute in full and which give the same update
// wherever no param is -0.0, every param and slot agrees bit for bit; and
// the skipped rows' params stay as they were, NaN and -0.0 included.
TEST(AdafactorFastPath, ZeroGradientRowsGiveTheComputedUpdateBitForBit) {
  const std::vector<Leaf> leaves = {
      {"embedding", Shape{{"vocab", 520}, {"embed", 130}}},  // outer lines: vocab rows
      {"wi", Shape{{"embed", 136}, {"mlp", 203}}},
  };
  auto bits = [](const Array& a) {
    const std::vector<float> f = a.to_floats();
    std::vector<uint32_t> u(f.size());
    std::memcpy(u.data(), f.data(), f.size() * sizeof(float));
    return u;
  };
  auto touched = [](int64_t r) { return r % 37 == 5 || r == 0; };  // a few rows carry gradient
  for (const bool skip_nan : {false, true}) {
    AdafactorConfig c;  // t5x's defaults: update clipping at 1.0, parameter scale
    c.skip_nan_updates = skip_nan;
    Adafactor opt(c);
    for (const auto& l : leaves) ASSERT_TRUE(opt.fast_path_applies(l.path, l.shape)) << l.path;
    ParamTree pa = make_tree(leaves, 3, 0.5f, 0.02f), pb = make_tree(leaves, 3, 0.5f, 0.02f);
    for (const auto& l : leaves)
      for (float v : pa.at(l.path).to_floats()) ASSERT_NE(v, 0.0f) << "the -0.0 comparison needs no zero params";
    OptimizerState sa = opt.init(pa), sb = opt.init(pb);
    for (int t = 0; t < 3; ++t) {
      ParamTree ga = make_tree(leaves, 50 + uint64_t(t), 0.02f, 0.0f), gb;
      for (const auto& l : leaves) {
        const int64_t rows = l.shape.dims()[0].size, cols = l.shape.dims()[1].size;
        float* g = ga.at(l.path).data<float>();
        std::vector<float> neg(g, g + rows * cols);
        for (int64_t r = 0; r < rows; ++r)
          if (!touched(r))
            for (int64_t k = 0; k < cols; ++k) {
              g[r * cols + k] = 0.0f;
              neg[size_t(r * cols + k)] = -0.0f;
            }
        gb[l.path] = Array::from_vector(l.shape, neg);
      }
      const ParamTree before{{"embedding", pa.at("embedding").copy()}, {"wi", pa.at("wi").copy()}};
      opt.apply_gradient(pa, sa, ga, 0.05);
      opt.apply_gradient(pb, sb, gb, 0.05);
      for (const auto& l : leaves) {
        EXPECT_EQ(bits(pa.at(l.path)), bits(pb.at(l.path))) << "step " << t + 1 << " " << l.path;
        const std::vector<uint32_t> now = bits(pa.at(l.path)), was = bits(before.at(l.path));
        const int64_t rows = l.shape.dims()[0].size, cols = l.shape.dims()[1].size;
        int changed = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t k = 0; k < cols; ++k) {
            const size_t i = size_t(r * cols + k);
            if (!touched(r)) ASSERT_EQ(now[i], was[i]) << l.path << " row " << r;
            else changed += now[i] != was[i];
          }
        EXPECT_GT(changed, 0) << l.path << ": the touched rows must move";
      }
      for (const auto& [k, v] : sa.slots) EXPECT_EQ(bits(v), bits(sb.slots.at(k))) << "step " << t + 1 << " " << k;
    }
  }
  // A NaN and a -0.0 in untouched rows come through unchanged (without the
  // parameter scale, which a NaN param would make NaN for the whole param).
  AdafactorConfig c;
  c.multiply_by_parameter_scale = false;
  Adafactor opt(c);
  ParamTree p = make_tree(leaves, 4, 0.5f, 0.02f);
  OptimizerState st = opt.init(p);
  float* e = p.at("embedding").data<float>();
  e[130 * 2] = std::nanf("");
  e[130 * 3 + 7] = -0.0f;
  const std::vector<uint32_t> was = bits(p.at("embedding"));
  ParamTree g = make_tree(leaves, 90, 0.02f, 0.0f);
  for (const auto& l : leaves) {
    const int64_t rows = l.shape.dims()[0].size, cols = l.shape.dims()[1].size;
    float* gp = g.at(l.path).data<float>();
    for (int64_t r = 0; r < rows; ++r)
      if (!touched(r)) std::fill(gp + r * cols, gp + (r + 1) * cols, 0.0f);
  }
  opt.apply_gradient(p, st, g, 0.05);
  const std::vector<uint32_t> now = bits(p.at("embedding"));
  EXPECT_EQ(now[130 * 2], was[130 * 2]);
  EXPECT_EQ(now[130 * 3 + 7], was[130 * 3 + 7]);
  EXPECT_NE(now[5 * 130], was[5 * 130]);  // row 5 carries gradient
}

TEST(AdafactorFastPath, OtherLayoutsFallBackToTheGenericPath) {
  AdafactorConfig c;
  c.logical_factor_rules = standard_logical_factor_rules();
  Adafactor opt(c);
  // BATCH dim between the factored dims: the generic walker handles it.
  EXPECT_FALSE(opt.fast_path_applies("x", Shape{{"embed", 8}, {"layers", 2}, {"mlp", 16}}));
  EXPECT_TRUE(opt.fast_path_applies("x", Shape{{"layers", 2}, {"embed", 8}, {"mlp", 16}}));
  AdafactorConfig m;
  m.factor_map = HParamMap<FactorRule>{{{"interleaved", {FactorDim::kRow, FactorDim::kColumn, FactorDim::kRow}},
                                        {".*", {FactorDim::kRow, FactorDim::kColumn, FactorDim::kColumn}}}};
  Adafactor mapped(m);
  EXPECT_FALSE(mapped.fast_path_applies("interleaved", Shape{{"a", 4}, {"b", 5}, {"c", 6}}));
  EXPECT_TRUE(mapped.fast_path_applies("k", Shape{{"a", 4}, {"b", 5}, {"c", 6}}));
  // The interleaved layout still updates (generic path) and agrees with a
  // forced-generic run bit for bit.
  Adafactor forced(m);
  forced.set_fast_path(false);
  ParamTree a{{"interleaved", Array::from_vector(Shape{{"a", 4}, {"b", 5}, {"c", 6}}, noise(120, 7, 1.f, 0.f))}};
  ParamTree b{{"interleaved", a.at("interleaved").copy()}};
  ParamTree g{{"interleaved", Array::from_vector(Shape{{"a", 4}, {"b", 5}, {"c", 6}}, noise(120, 8, 0.1f, 0.f))}};
  OptimizerState sa = mapped.init(a), sb = forced.init(b);
  mapped.apply_gradient(a, sa, g, 0.1);
  forced.apply_gradient(b, sb, g, 0.1);
  EXPECT_EQ(a.at("interleaved").to_floats(), b.at("interleaved").to_floats());
  EXPECT_NE(a.at("interleaved").to_floats(), noise(120, 7, 1.f, 0.f));
}

}  // namespace
}  // namespace t5x
