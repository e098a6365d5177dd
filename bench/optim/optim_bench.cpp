// Optimizer-step microbenchmarks on T5.1.1-small-shaped parameters: the
// shared embedding [vocab 32128, embed 512] and eight [embed 512, mlp 1024]
// kernels (20.6M float32 values, 82 MB). What a step does besides the model:
// Adafactor (t5x's default), AdamW with optax's clip_by_global_norm (the t5x
// recipe for AdamW), Lion behind optax.clip, the global norm alone, and the microbatch gradient sum
// (GradAccumulator), through the public t5x/optim API. Bytes per second count each array read
// or written once.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "backend/kernels.h"
#include "ops/ops.h"
#include "t5x/optim/adafactor.h"
#include "t5x/optim/adamw.h"
#include "t5x/optim/grad_utils.h"
#include "t5x/optim/lion.h"

namespace {

using namespace t5x;

ParamTree t5_small_like(uint64_t seed, float scale, DType dtype = DType::f32) {
  ParamTree t;
  t["token_embedder/embedding"] = cast(mul(normal(prng_key(seed), Shape{{"vocab", 32128}, {"embed", 512}}), scale), dtype);
  for (int i = 0; i < 8; ++i)
    t["layers_" + std::to_string(i) + "/mlp/wi"] =
        cast(mul(normal(prng_key(seed + 1 + uint64_t(i)), Shape{{"embed", 512}, {"mlp", 1024}}), scale), dtype);
  return t;
}

int64_t values(const ParamTree& t) {
  int64_t n = 0;
  for (const auto& [k, a] : t) n += a.size();
  return n;
}

// AdamW with clip_by_global_norm(1.0) (active: the gradients' norm is ~4500).
void BM_AdamWClipped(benchmark::State& st) {
  ParamTree p = t5_small_like(1, 0.05f);
  const ParamTree g = t5_small_like(100, 1.0f);
  AdamWConfig c;
  c.chain = {ChainedClip::global_norm(1.0)};
  c.weight_decay = 0.01;
  AdamW opt(c);
  OptimizerState s = opt.init(p);
  for (auto _ : st) opt.apply_gradient(p, s, g, 1e-3);
  // Reads param, grad (twice: norm, update), mu, nu; writes param, mu, nu.
  st.SetBytesProcessed(st.iterations() * values(p) * 4 * 8);
}

// Lion behind optax.clip(1.0), t5x's base_wmt_from_scratch_lion.gin recipe
// (active: the gradients are N(0, 1)). Arg 0: the clamp inside Lion's update
// (chain [clip]); arg 1: the clamp into a copy first (the backend's
// clip_grads kernel, into arrays allocated once), then Lion without a chain:
// what the fusion saves.
void BM_LionClipped(benchmark::State& st) {
  ParamTree p = t5_small_like(1, 0.05f);
  const ParamTree g = t5_small_like(100, 1.0f);
  LionConfig c;
  const bool fused = st.range(0) == 0;
  if (fused) c.chain = {ChainedClip::value(1.0)};
  Lion opt(c);
  OptimizerState s = opt.init(p);
  ParamTree clipped;
  for (const auto& [k, a] : g) clipped[k] = Array(a.shape(), a.dtype());
  kernels::GradClip clamp;
  clamp.clamp = true, clamp.max_delta = 1.0f;
  for (auto _ : st) {
    if (fused) {
      opt.apply_gradient(p, s, g, 1e-4);
    } else {
      for (const auto& [k, a] : g)
        kernels::cpu::clip_grads(a.dtype(), a.raw_data(), a.local_size(), clamp, clipped.at(k).raw_data());
      opt.apply_gradient(p, s, clipped, 1e-4);
    }
  }
  // Reads param, grad, mu; writes param, mu (the copy's read and write uncounted).
  st.SetBytesProcessed(st.iterations() * values(p) * 4 * 5);
}

// One Adafactor step with t5x's defaults (factored second moments, update
// clipping at 1.0, parameter scale). Arg 1 runs the generic element walk
// (set_fast_path(false)): what every param split across processes ran
// before the backend's phases served them (kernels.h); the phases are the
// fast path's passes with the statistics exchanged between them.
void BM_AdafactorStep(benchmark::State& st) {
  ParamTree p = t5_small_like(1, 0.05f);
  const ParamTree g = t5_small_like(100, 1.0f);
  Adafactor opt{AdafactorConfig{}};
  opt.set_fast_path(st.range(0) == 0);
  OptimizerState s = opt.init(p);
  for (auto _ : st) opt.apply_gradient(p, s, g, 1e-3);
  // Reads param twice and grad three times (one per pass), writes param.
  st.SetBytesProcessed(st.iterations() * values(p) * 4 * 6);
}

void BM_GlobalNorm(benchmark::State& st) {
  const ParamTree g = t5_small_like(100, 1.0f);
  for (auto _ : st) benchmark::DoNotOptimize(global_norm(g));
  st.SetBytesProcessed(st.iterations() * values(g) * 4);
}

// One microbatch's gradients added into the float32 sums; arg 1: bf16 grads.
void BM_GradAccumulatorAdd(benchmark::State& st) {
  const DType dt = st.range(0) ? DType::bf16 : DType::f32;
  const ParamTree p = t5_small_like(1, 0.05f);
  const ParamTree g = t5_small_like(100, 1.0f, dt);
  GradAccumulator acc(p);
  for (auto _ : st) acc.add(g);
  st.SetBytesProcessed(st.iterations() * values(g) * (4 * 2 + int64_t(dtype_size(dt))));
}

// The step on the embedding alone as a T5.1.1-small batch leaves its
// gradient (8 x 160 tokens: at most 1280 of 32128 rows non-zero, the rest
// +0.0), which the clip and apply passes pass over (backend/cpu/adafactor.cpp,
// SkipZeroRows); arg 1: every row non-zero, for comparison.
void BM_AdafactorSparseEmbedding(benchmark::State& st) {
  ParamTree p{{"token_embedder/embedding",
               mul(normal(prng_key(1), Shape{{"vocab", 32128}, {"embed", 512}}), 0.05f)}};
  Array g = normal(prng_key(2), Shape{{"vocab", 32128}, {"embed", 512}});
  if (st.range(0) == 0) {
    float* gp = g.data<float>();
    for (int64_t r = 0; r < 32128; ++r)
      if (r % 25 != 0) std::fill(gp + r * 512, gp + (r + 1) * 512, 0.0f);  // 1286 rows kept
  }
  const ParamTree grads{{"token_embedder/embedding", g}};
  Adafactor opt{AdafactorConfig{}};
  OptimizerState s = opt.init(p);
  for (auto _ : st) opt.apply_gradient(p, s, grads, 1e-3);
  st.SetBytesProcessed(st.iterations() * values(p) * 4 * 6);
}

BENCHMARK(BM_AdafactorStep)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdafactorSparseEmbedding)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamWClipped)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LionClipped)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GlobalNorm)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GradAccumulatorAdd)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
