// Op-layer microbenchmarks on T5.1.1-small-shaped activations
// [batch=8, length=128, embed=512 / mlp=1024 / vocab=32128]: the public ops
// (validation, broadcasting by name, dispatch and kernels) rather than the raw
// kernels that bench/kernels_bench.cpp measures. Each case reports bytes or
// FLOPs processed per second as Google Benchmark counters.
#include <benchmark/benchmark.h>

#include "ops/ops.h"

namespace {

using namespace t5x;

Shape activ(int64_t last, const char* name = "embed") {
  return Shape{{"batch", 8}, {"length", 128}, {name, last}};
}

Array randn(const Shape& s, uint64_t seed) { return normal(prng_key(seed), s); }

void BM_add_broadcast(benchmark::State& st) {  // [b, l, e] + [e]
  Array x = randn(activ(512), 1), b = randn(Shape{{"embed", 512}}, 2);
  for (auto _ : st) benchmark::DoNotOptimize(add(x, b));
  st.SetBytesProcessed(st.iterations() * x.nbytes() * 2);
}

void BM_gelu(benchmark::State& st) {
  Array x = randn(activ(1024, "mlp"), 3);
  for (auto _ : st) benchmark::DoNotOptimize(gelu(x));
  st.SetBytesProcessed(st.iterations() * x.nbytes() * 2);
}

void BM_softmax_vocab(benchmark::State& st) {
  Array x = randn(Shape{{"batch", 8}, {"length", 32}, {"vocab", 32128}}, 4);
  for (auto _ : st) benchmark::DoNotOptimize(softmax(x, "vocab"));
  st.SetBytesProcessed(st.iterations() * x.nbytes() * 2);
}

void BM_sum_embed(benchmark::State& st) {
  Array x = randn(activ(512), 5);
  for (auto _ : st) benchmark::DoNotOptimize(sum(x, std::vector<std::string>{"embed"}));
  st.SetBytesProcessed(st.iterations() * x.nbytes());
}

void BM_einsum_mlp(benchmark::State& st) {  // [b, l, e] x [e, m] -> [b, l, m]
  Array x = randn(activ(512), 6), w = randn(Shape{{"embed", 512}, {"mlp", 1024}}, 7);
  for (auto _ : st) benchmark::DoNotOptimize(einsum(x, w, {"batch", "length", "mlp"}));
  st.counters["GFLOP/s"] = benchmark::Counter(2.0 * 8 * 128 * 512 * 1024 * st.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

void BM_rms_norm(benchmark::State& st) {
  Array x = randn(activ(512), 8), scale = Array::ones(Shape{{"embed", 512}});
  for (auto _ : st) benchmark::DoNotOptimize(rms_norm(x, scale));
  st.SetBytesProcessed(st.iterations() * x.nbytes() * 2);
}

void BM_cross_entropy(benchmark::State& st) {
  Array logits = randn(Shape{{"batch", 8}, {"length", 32}, {"vocab", 32128}}, 9);
  std::vector<int64_t> ids(8 * 32);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i * 7919 % 32128);
  Array targets = Array::from_ints(Shape{{"batch", 8}, {"length", 32}}, ids);
  for (auto _ : st) benchmark::DoNotOptimize(softmax_cross_entropy_with_integer_labels(logits, targets, 1e-4));
  st.SetBytesProcessed(st.iterations() * logits.nbytes());
}

// Forward + backward of a small MLP block through the autodiff tape.
void BM_value_and_grad_mlp(benchmark::State& st) {
  Array x = randn(activ(512), 10);
  ParamTree p{{"wi", randn(Shape{{"embed", 512}, {"mlp", 1024}}, 11)},
              {"wo", randn(Shape{{"mlp", 1024}, {"embed", 512}}, 12)}};
  auto loss = [&](const ParamTree& q) {
    Array h = gelu(einsum(x, q.at("wi"), {"batch", "length", "mlp"}));
    return sum(square(einsum(h, q.at("wo"), {"batch", "length", "embed"})));
  };
  for (auto _ : st) benchmark::DoNotOptimize(value_and_grad(loss, p));
  st.counters["GFLOP/s"] = benchmark::Counter(3 * 2 * 2.0 * 8 * 128 * 512 * 1024 * st.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

// The op layer's own cost per call, at a batch-1 decode step's scale: one
// token's [batch 1, length 1, embed 8] activations against an [8, 8] kernel
// (bf16, as a bf16 decode step's layer kernels), so that the product itself
// is a few nanoseconds and the time is the op's validation, naming,
// allocation and dispatch (a decode step makes ~300 such calls per token).
void BM_op_overhead_einsum(benchmark::State& st) {
  NoGradGuard ng;
  Array x = cast(randn(Shape{{"batch", 1}, {"length", 1}, {"embed", 8}}, 13), DType::bf16);
  Array w = cast(randn(Shape{{"embed", 8}, {"mlp", 8}}, 14), DType::bf16);
  for (auto _ : st) benchmark::DoNotOptimize(einsum(x, w, {"batch", "length", "mlp"}));
}
void BM_op_overhead_add(benchmark::State& st) {
  NoGradGuard ng;
  Array x = cast(randn(Shape{{"batch", 1}, {"length", 1}, {"embed", 8}}, 15), DType::bf16);
  Array y = cast(randn(Shape{{"batch", 1}, {"length", 1}, {"embed", 8}}, 16), DType::bf16);
  for (auto _ : st) benchmark::DoNotOptimize(add(x, y));
}
void BM_op_overhead_rms_norm(benchmark::State& st) {
  NoGradGuard ng;
  Array x = cast(randn(Shape{{"batch", 1}, {"length", 1}, {"embed", 8}}, 17), DType::bf16);
  Array scale = Array::ones(Shape{{"embed", 8}});
  for (auto _ : st) benchmark::DoNotOptimize(rms_norm(x, scale));
}

void BM_op_overhead_attention(benchmark::State& st) {  // one query against 4 keys, as a decode step's
  NoGradGuard ng;
  Array q = cast(randn(Shape{{"batch", 1}, {"length", 1}, {"heads", 1}, {"kv", 8}}, 18), DType::bf16);
  Array k = cast(randn(Shape{{"batch", 1}, {"kv_length", 4}, {"heads", 1}, {"kv", 8}}, 19), DType::bf16);
  Array v = cast(randn(Shape{{"batch", 1}, {"kv_length", 4}, {"heads", 1}, {"kv", 8}}, 20), DType::bf16);
  AttentionOptions o;
  o.kv_mask = gt(randn(Shape{{"batch", 1}, {"kv_length", 4}}, 21), -100.0);
  o.bias = cast(randn(Shape{{"heads", 1}, {"length", 1}, {"kv_length", 4}}, 22), DType::bf16);
  for (auto _ : st) benchmark::DoNotOptimize(dot_product_attention(q, k, v, o));
}

BENCHMARK(BM_op_overhead_einsum)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_op_overhead_attention)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_op_overhead_add)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_op_overhead_rms_norm)->Unit(benchmark::kNanosecond);
BENCHMARK(BM_add_broadcast)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gelu)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_softmax_vocab)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_sum_embed)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_einsum_mlp)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_rms_norm)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cross_entropy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_value_and_grad_mlp)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
