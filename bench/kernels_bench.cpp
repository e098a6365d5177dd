// Google Benchmark microbenchmarks for the fused CPU kernels, on T5.1.1-small
// shapes (embed 512, mlp 1024, heads 6 x kv 64, vocab 32128).
//   build/bin/t5x_kernels_bench [--benchmark_filter=attention]
//   T5X_CPU_ISA=avx2 build/bin/t5x_kernels_bench   (as on an AVX2-only CPU)
// Counters: bytes_per_second for memory-bound kernels (the skinny GEMMs of
// decoding count the B bytes they stream), FLOP/s ("flops") for the small
// GEMM tiles and attention (4 * b * h * q * k * d per forward, counted without causal
// savings; the backward is counted as 2.5x the forward, as in FlashAttention).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/cross_entropy.h"
#include "backend/cpu/gated_gelu.h"
#include "backend/cpu/rms_norm.h"
#include "backend/cpu/skinny_gemm.h"
#include "backend/cpu/small_gemm.h"
#include "backend/kernels.h"
#include "core/dtype_bf16.h"

namespace {

using namespace t5x::cpu;

// The "min" aggregate of --benchmark_repetitions (beside mean, median, stddev):
// on a shared machine the fastest repetition is the least disturbed one.
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

std::vector<float> rnd(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

void BM_RmsNormForward(benchmark::State& st) {
  int64_t rows = st.range(0), embed = 512;
  auto x = rnd(rows * embed, 1), s = rnd(embed, 2);
  std::vector<float> y(x.size()), r(rows);
  for (auto _ : st) rms_norm_forward(rows, embed, x.data(), s.data(), 1e-6f, y.data(), r.data());
  st.SetBytesProcessed(st.iterations() * rows * embed * 8);
}
BENCHMARK(BM_RmsNormForward)->Arg(4096)->UseRealTime()->ComputeStatistics("min", min_of);

void BM_RmsNormBackward(benchmark::State& st) {
  int64_t rows = st.range(0), embed = 512;
  auto x = rnd(rows * embed, 1), s = rnd(embed, 2), dy = rnd(rows * embed, 3);
  std::vector<float> dx(x.size()), ds(embed);
  for (auto _ : st)
    rms_norm_backward(rows, embed, x.data(), s.data(), nullptr, dy.data(), 1e-6f, dx.data(), ds.data());
  st.SetBytesProcessed(st.iterations() * rows * embed * 12);
}
BENCHMARK(BM_RmsNormBackward)->Arg(4096)->UseRealTime()->ComputeStatistics("min", min_of);

void BM_GatedGeluForward(benchmark::State& st) {
  int64_t n = st.range(0) * 1024;
  auto h0 = rnd(n, 1), h1 = rnd(n, 2);
  std::vector<float> out(n);
  for (auto _ : st) gated_gelu_forward(n, h0.data(), h1.data(), out.data());
  st.SetBytesProcessed(st.iterations() * n * 12);
}
BENCHMARK(BM_GatedGeluForward)->Arg(1024)->Arg(4096)->UseRealTime()->ComputeStatistics("min", min_of);

// The bf16 step's activations (widened on load, rounded on store). Arg: rows
// of 1024 (1024 = a T5.1.1 small encoder's MLP input at batch 8 x 128).
void BM_GatedGeluForwardBf16(benchmark::State& st) {
  int64_t n = st.range(0) * 1024;
  const auto f0 = rnd(n, 1), f1 = rnd(n, 2);
  const std::vector<t5x::bfloat16> h0(f0.begin(), f0.end()), h1(f1.begin(), f1.end());
  std::vector<t5x::bfloat16> out(n);
  for (auto _ : st) gated_gelu_forward_bf16(n, h0.data(), h1.data(), out.data());
  st.SetBytesProcessed(st.iterations() * n * 6);
}
BENCHMARK(BM_GatedGeluForwardBf16)->Arg(1024)->Arg(4096)->UseRealTime()->ComputeStatistics("min", min_of);

void BM_GatedGeluBackward(benchmark::State& st) {
  int64_t n = st.range(0) * 1024;
  auto h0 = rnd(n, 1), h1 = rnd(n, 2), g = rnd(n, 3);
  std::vector<float> d0(n), d1(n);
  for (auto _ : st) gated_gelu_backward(n, h0.data(), h1.data(), g.data(), d0.data(), d1.data());
  st.SetBytesProcessed(st.iterations() * n * 20);
}
BENCHMARK(BM_GatedGeluBackward)->Arg(16)->Arg(4096)->UseRealTime()->ComputeStatistics("min", min_of);

void BM_GatedGeluBackwardBf16(benchmark::State& st) {
  int64_t n = st.range(0) * 1024;
  const auto f0 = rnd(n, 1), f1 = rnd(n, 2), fg = rnd(n, 3);
  const std::vector<t5x::bfloat16> h0(f0.begin(), f0.end()), h1(f1.begin(), f1.end()), g(fg.begin(), fg.end());
  std::vector<t5x::bfloat16> d0(n), d1(n);
  for (auto _ : st) gated_gelu_backward_bf16(n, h0.data(), h1.data(), g.data(), d0.data(), d1.data());
  st.SetBytesProcessed(st.iterations() * n * 10);
}
BENCHMARK(BM_GatedGeluBackwardBf16)->Arg(16)->Arg(4096)->UseRealTime()->ComputeStatistics("min", min_of);

void BM_CrossEntropyForward(benchmark::State& st) {
  int64_t rows = st.range(0), vocab = 32128;
  auto x = rnd(rows * vocab, 1);
  std::vector<int32_t> t(rows, 7);
  std::vector<float> loss(rows), z(rows), lse(rows);
  for (auto _ : st)
    cross_entropy_forward(rows, vocab, x.data(), t.data(), {1e-4f, 0.f}, loss.data(), z.data(), lse.data());
  st.SetBytesProcessed(st.iterations() * rows * vocab * 4);
}
BENCHMARK(BM_CrossEntropyForward)->Arg(256)->UseRealTime()->ComputeStatistics("min", min_of);

void BM_CrossEntropyBackward(benchmark::State& st) {
  int64_t rows = st.range(0), vocab = 32128;
  auto x = rnd(rows * vocab, 1);
  std::vector<int32_t> t(rows, 7);
  std::vector<float> g(rows, 1.f), lse(rows), loss(rows), dx(x.size());
  cross_entropy_forward(rows, vocab, x.data(), t.data(), {1e-4f, 0.f}, loss.data(), nullptr, lse.data());
  for (auto _ : st)
    cross_entropy_backward(rows, vocab, x.data(), t.data(), lse.data(), g.data(), {1e-4f, 0.f}, dx.data());
  st.SetBytesProcessed(st.iterations() * rows * vocab * 8);
}
BENCHMARK(BM_CrossEntropyBackward)->Arg(256)->UseRealTime()->ComputeStatistics("min", min_of);

// Decode-step products C[m, n] = A[m, k] B[k, n] (skinny_gemm.h). Args: m, k,
// n, cold: m = 1 or 8 rows (batch of one token), k = embed 512, n = mlp 1024,
// 2048 (the two halves of a gated MLP) or vocab 32128 (the logits, 64 MiB:
// out of cache by itself); cold=1 streams 64 MiB between calls, as a decode
// step's other layers do.
template <typename T, typename TC>
void BM_SkinnyGemm(benchmark::State& st) {
  const int64_t m = st.range(0), k = st.range(1), n = st.range(2);
  const auto fa = rnd(size_t(m * k), 1), fb = rnd(size_t(k * n), 2);
  const std::vector<T> a(fa.begin(), fa.end()), b(fb.begin(), fb.end());
  std::vector<TC> c(size_t(m * n));
  std::vector<float> flush(st.range(3) != 0 ? size_t(16) << 20 : 0);
  for (auto _ : st) {
    if (!flush.empty()) {
      st.PauseTiming();
      for (size_t i = 0; i < flush.size(); i += 16) flush[i] += 1.f;
      benchmark::ClobberMemory();
      st.ResumeTiming();
    }
    skinny_gemm<T, T, TC>(m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(st.iterations() * k * n * int64_t(sizeof(T)));
}
void skinny_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 8}) {
    for (int64_t n : {1024, 2048}) b->Args({m, 512, n, 0})->Args({m, 512, n, 1});
    b->Args({m, 512, 32128, 0});
  }
}
BENCHMARK(BM_SkinnyGemm<float, float>)->Name("BM_SkinnyGemmF32")->Apply(skinny_shapes)->UseRealTime()->ComputeStatistics("min", min_of);
BENCHMARK(BM_SkinnyGemm<t5x::bfloat16, float>)->Name("BM_SkinnyGemmBf16")->Apply(skinny_shapes)->UseRealTime()->ComputeStatistics("min", min_of);

// The attention tiles' accumulate-GEMM (small_gemm.h): one 32-query x
// 64-key logits tile (k = head_dim 64) and its P v product. Args: m, n, k.
void BM_SmallGemm(benchmark::State& st) {
  const int64_t m = st.range(0), n = st.range(1), k = st.range(2);
  const auto a = rnd(size_t(m * k), 1), b = rnd(size_t(k * n), 2);
  std::vector<float> c(size_t(m * n));
  for (auto _ : st) {
    small_gemm_acc(m, n, k, a.data(), k, 1, b.data(), n, c.data(), n);
    benchmark::ClobberMemory();
  }
  st.counters["flops"] = benchmark::Counter(2.0 * double(m * n * k) * double(st.iterations()),
                                            benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SmallGemm)->Args({32, 64, 64})->Args({31, 50, 64})->UseRealTime()->ComputeStatistics("min", min_of);

// Args: batch, length, causal, kv length (0: the length), masks. With masks
// = 1 the call is as T5.1.1 small's step makes it: q_mask and kv_mask given
// (all tokens real, as in the model benchmark's batches) and, for a
// cross-attention (kv length != length), no position bias. The step's shapes:
// 8 x 128 (encoder), 8 x 32 causal (decoder), 8 x 32 against 128 (cross).
struct AttnData {
  AttentionShape s;
  std::vector<float> q, k, v, bias, out, lse, dout, dq, dk, dv, db;
  std::vector<uint8_t> q_mask, kv_mask;
  AttentionParams p;
  AttnData(int64_t b, int64_t len, bool causal, int64_t kv_len = 0, bool masks = false) {
    if (kv_len == 0) kv_len = len;
    s = AttentionShape{b, len, kv_len, 6, 6, 64};
    size_t n = size_t(b * len * 6 * 64), nkv = size_t(b * kv_len * 6 * 64);
    q = rnd(n, 1); k = rnd(nkv, 2); v = rnd(nkv, 3); dout = rnd(n, 4);
    out.resize(n); dq.resize(n); dk.resize(nkv); dv.resize(nkv);
    lse.resize(size_t(b * 6 * len));
    if (!masks || kv_len == len) {
      bias = rnd(size_t(6 * len * kv_len), 5);
      db.resize(bias.size());
      p.bias = bias.data();
      p.bias_layout = AttentionBiasLayout::kHeads;
    }
    if (masks) {
      q_mask.assign(size_t(b * len), 1);
      kv_mask.assign(size_t(b * kv_len), 1);
      p.q_mask = q_mask.data();
      p.kv_mask = kv_mask.data();
    }
    p.causal = causal;
  }
  double flops() const { return 4.0 * s.batch * s.heads * s.q_length * s.kv_length * s.head_dim; }
};

// The forward's and the backward's cases (AttnData's arguments).
void AttentionCases(benchmark::internal::Benchmark* b) {
  b->Args({8, 128, 0, 0, 0})->Args({8, 128, 1, 0, 0})->Args({2, 512, 1, 0, 0});
  b->Args({8, 128, 0, 0, 1})->Args({8, 32, 1, 0, 1})->Args({8, 32, 0, 128, 1});
}

void BM_AttentionForward(benchmark::State& st) {
  AttnData d(st.range(0), st.range(1), st.range(2) != 0, st.range(3), st.range(4) != 0);
  for (auto _ : st)
    attention_forward(d.s, d.p, d.q.data(), d.k.data(), d.v.data(), d.out.data(), d.lse.data());
  st.counters["flops"] = benchmark::Counter(d.flops() * double(st.iterations()),
                                            benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionForward)->Apply(AttentionCases)->UseRealTime()->ComputeStatistics("min", min_of);

// The same with bf16 q, k and v (a bf16 training step's activations; out,
// dout and the gradients f32), the cases of one T5.1.1 small step.
void BM_AttentionForwardBf16(benchmark::State& st) {
  AttnData d(st.range(0), st.range(1), st.range(2) != 0, st.range(3), st.range(4) != 0);
  const std::vector<t5x::bfloat16> q(d.q.begin(), d.q.end()), k(d.k.begin(), d.k.end()), v(d.v.begin(), d.v.end());
  for (auto _ : st) attention_forward(d.s, d.p, q.data(), k.data(), v.data(), d.out.data(), d.lse.data());
  st.counters["flops"] = benchmark::Counter(d.flops() * double(st.iterations()), benchmark::Counter::kIsRate);
}
void StepAttentionCases(benchmark::internal::Benchmark* b) {
  b->Args({8, 128, 0, 0, 1})->Args({8, 32, 1, 0, 1})->Args({8, 32, 0, 128, 1});
}
BENCHMARK(BM_AttentionForwardBf16)->Apply(StepAttentionCases)->UseRealTime()->ComputeStatistics("min", min_of);

// One decode step's attention: a single query per row against the cache.
// Args: batch, kv_length (T5.1.1 small: 128 encoder positions for the
// cross-attention, 32 target positions for the self-attention).
// Query, keys and values as a bf16 decode step finds them: bf16 (the
// activations' and the cache's dtype), and with cold=1 out of cache (a 64 MiB
// buffer is streamed between calls, as the layer weights are in a step).
void BM_AttentionDecode(benchmark::State& st) {
  AttnData d(st.range(0), 1, false, st.range(1));
  const std::vector<t5x::bfloat16> q(d.q.begin(), d.q.end()), k(d.k.begin(), d.k.end()), v(d.v.begin(), d.v.end());
  const bool cold = st.range(2) != 0;
  std::vector<float> flush(cold ? size_t(16) << 20 : 0);
  for (auto _ : st) {
    if (cold) {
      st.PauseTiming();
      for (size_t i = 0; i < flush.size(); i += 16) flush[i] += 1.f;
      benchmark::ClobberMemory();
      st.ResumeTiming();
    }
    attention_forward(d.s, d.p, q.data(), k.data(), v.data(), d.out.data(), nullptr);
  }
  st.counters["flops"] = benchmark::Counter(d.flops() * double(st.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionDecode)
    ->Args({1, 128, 0})
    ->Args({8, 128, 0})
    ->Args({8, 128, 1})
    ->Args({8, 32, 0})
    ->Args({8, 32, 1})
    ->UseRealTime()
    ->ComputeStatistics("min", min_of);

void BM_AttentionBackward(benchmark::State& st) {
  AttnData d(st.range(0), st.range(1), st.range(2) != 0, st.range(3), st.range(4) != 0);
  attention_forward(d.s, d.p, d.q.data(), d.k.data(), d.v.data(), d.out.data(), d.lse.data());
  for (auto _ : st)
    attention_backward(d.s, d.p, d.q.data(), d.k.data(), d.v.data(), d.out.data(), d.lse.data(),
                       d.dout.data(), d.dq.data(), d.dk.data(), d.dv.data(), d.p.bias ? d.db.data() : nullptr);
  st.counters["flops"] = benchmark::Counter(2.5 * d.flops() * double(st.iterations()),
                                            benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionBackward)->Apply(AttentionCases)->UseRealTime()->ComputeStatistics("min", min_of);

void BM_AttentionBackwardBf16(benchmark::State& st) {
  AttnData d(st.range(0), st.range(1), st.range(2) != 0, st.range(3), st.range(4) != 0);
  const std::vector<t5x::bfloat16> q(d.q.begin(), d.q.end()), k(d.k.begin(), d.k.end()), v(d.v.begin(), d.v.end());
  attention_forward(d.s, d.p, q.data(), k.data(), v.data(), d.out.data(), d.lse.data());
  for (auto _ : st)
    attention_backward(d.s, d.p, q.data(), k.data(), v.data(), d.out.data(), d.lse.data(), d.dout.data(),
                       d.dq.data(), d.dk.data(), d.dv.data(), d.p.bias ? d.db.data() : nullptr);
  st.counters["flops"] = benchmark::Counter(2.5 * d.flops() * double(st.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_AttentionBackwardBf16)->Apply(StepAttentionCases)->UseRealTime()->ComputeStatistics("min", min_of);

// One Adafactor step (defaults plus update clipping) of a factored
// [outer, inner] param: the token embedding [32128, 512] and an MLP kernel
// [512, 1024]. Bytes: param read and written, grad read twice (three passes
// read it; the second is counted as cache-resident).
void BM_AdafactorFactored(benchmark::State& st) {
  const int64_t outer = st.range(0), inner = st.range(1), n = outer * inner;
  t5x::kernels::AdafactorScalars s;
  s.decay = 0.8f, s.mixing = 0.2f, s.eps1 = 1e-30f, s.eps2 = 1e-3f, s.lr = 0.01f, s.clip = true;
  t5x::kernels::FactoredLayout l;
  l.n_outer = outer, l.n_inner = inner;
  auto p = rnd(size_t(n), 1), g = rnd(size_t(n), 2);
  std::vector<float> vr(static_cast<size_t>(outer)), vc(static_cast<size_t>(inner));
  for (auto _ : st) t5x::kernels::cpu::adafactor_factored_update(l, s, p.data(), g.data(), vr.data(), vc.data(), nullptr);
  st.SetBytesProcessed(st.iterations() * n * 4 * 4);
}
BENCHMARK(BM_AdafactorFactored)->Args({32128, 512})->Args({512, 1024})->UseRealTime()->ComputeStatistics("min", min_of);

}  // namespace

BENCHMARK_MAIN();
