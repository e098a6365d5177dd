// GEMM throughput on T5-shaped products; one JSON object per case per line.
//
//   t5x_gemm_bench [--threads N] [--min-time S] [--filter SUBSTR] [--no-fma-check] [--cold]
//   t5x_gemm_bench --step-products [--rounds N] [--threads N] [--flush]
//   t5x_gemm_bench --kernel-cast [--rounds N] [--threads N]
//   t5x_gemm_bench --backward-pairs [--rounds N] [--threads N]
//
// --step-products: every product of a T5.1.1-small training step (batch 8,
// 128 + 32 tokens: the shapes and per-step counts of its op profile), on
// oneDNN and on the packed GEMM, f32 and bf16 (bf16 output), taken round-robin
// (each round runs every shape on every implementation, so slow spells of a
// shared machine hit all alike); per shape the best of N rounds, and per
// implementation the step's product time, sum over shapes of count x best.
// With --flush the caches are flushed (a 64 MiB write) before every call:
// in a step the kernels and the saved activations come from memory.
//
// --kernel-cast: the step's products whose B is a float32 kernel taken as
// bf16 (a bf16 step's forward and activation-gradient products), on the
// packed GEMM, two ways: the kernel cast to bf16 by a pass first (the cast
// op, then the bf16 product), and rounded as it is packed (F32AsBf16,
// ops/einsum.h's operand_dtype). Before every call the caches are flushed
// (a 64 MiB write), as a training step finds each kernel in memory after
// the optimizer's pass over all parameters. Per shape the best of N rounds,
// round-robin; per way the step's time (count x best, summed).
//
// --cold: B cycles through copies filling 256 MiB (more than the caches), so
// each call reads B from memory, as a decode step reads each layer's kernel.
//
// GFLOP/s = 2*m*n*k*batch / seconds. Each case is warmed up (primitive
// creation, JIT, caches), then timed until both `repeats >= 5` and the total
// time exceeds --min-time. gflops_min / gflops_median / gflops_max are over
// those repeats; ratio_* divide by the fp32 peak from cpu_peak.h (for bf16
// too, so the ratios are comparable). The first line describes the machine,
// including the 1-minute load average: other processes on the same cores
// lower every wall-clock figure.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <time.h>

#include "backend/cpu/convert.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/packed_gemm.h"
#include "backend/cpu/cpu_info.h"
#include "cpu_peak.h"

namespace {

using t5x::bfloat16;
using t5x::cpu::GemmShape;

struct Case {
  const char* name;
  const char* dtype;
  int64_t batch, m, k, n;
  bool trans_a, trans_b;
  int64_t stride_b;  // -1: packed per batch, 0: broadcast
};

// T5.1.1-small dims: embed 512, mlp 1024, heads 6 x kv 64, vocab 32128;
// 4096 rows = batch 32 x length 128 (or 8 x 512).
const Case kCases[] = {
    {"ffn_wi", "f32", 1, 4096, 512, 1024, false, false, -1},
    {"ffn_wi_dgrad", "f32", 1, 4096, 1024, 512, false, true, -1},
    {"ffn_wi_wgrad", "f32", 1, 512, 4096, 1024, true, false, -1},
    {"logits", "f32", 1, 4096, 512, 32128, false, false, -1},
    {"decode_ffn", "f32", 1, 1, 512, 1024, false, false, -1},
    {"decode_ffn_b8", "f32", 1, 8, 512, 1024, false, false, -1},
    {"attn_qk", "f32", 48, 128, 64, 128, false, true, -1},
    {"decode_logits", "f32", 1, 1, 512, 32128, false, false, -1},
    {"decode_logits_b8", "f32", 1, 8, 512, 32128, false, false, -1},
    {"ffn_wi", "bf16", 1, 4096, 512, 1024, false, false, -1},
    {"train_wi", "f32", 1, 1024, 512, 1024, false, false, -1},
    {"train_wi", "bf16", 1, 1024, 512, 1024, false, false, -1},
    {"train_q", "f32", 1, 1024, 512, 384, false, false, -1},
    {"train_q", "bf16", 1, 1024, 512, 384, false, false, -1},
    // T5.1.1-small training step (batch 8 x 128 tokens): the backward's
    // transposed products, which dominate the step.
    {"train_wi_dgrad", "f32", 1, 1024, 1024, 512, false, true, -1},
    {"train_wi_dgrad", "bf16", 1, 1024, 1024, 512, false, true, -1},
    {"train_q_wgrad", "f32", 1, 512, 1024, 384, true, false, -1},
    {"train_q_wgrad", "bf16", 1, 512, 1024, 384, true, false, -1},
    {"train_logits_dgrad", "f32", 1, 256, 32128, 512, false, true, -1},
    // The decoder's products in the same step (8 x 32 target rows): fewer
    // rows than columns, so the threads split the columns.
    {"train_dec_q", "f32", 1, 256, 512, 384, false, false, -1},
    {"train_dec_q_dgrad", "f32", 1, 256, 384, 512, false, true, -1},
    {"train_dec_wi", "f32", 1, 256, 512, 1024, false, false, -1},
    {"logits", "bf16", 1, 4096, 512, 32128, false, false, -1},
    {"decode_ffn", "bf16", 1, 1, 512, 1024, false, false, -1},
    // A decode step's products on weights in the decode layout
    // (BaseTransformerModel::decode_params: kernels stored [out, in]).
    {"decode_ffn_tB", "bf16", 1, 1, 512, 1024, false, true, -1},
    {"decode_q", "bf16", 1, 1, 512, 384, false, false, -1},
    {"decode_q_tB", "bf16", 1, 1, 512, 384, false, true, -1},
    {"decode_wo", "bf16", 1, 1, 1024, 512, false, false, -1},
    // Attention's output kernel: k = heads x head_dim = 384, one and a half
    // k blocks (skinny_gemm's split of B over threads).
    {"decode_attn_out", "bf16", 1, 1, 384, 512, false, false, -1},
    // Kernels concatenated along their outputs: q, k and v as one product
    // (not used: no faster than three); an MLP's wi_0 and wi_1 as one (the
    // decode layout's wi_fused, nn::fuse_gated_wi).
    {"decode_qkv", "bf16", 1, 1, 512, 1152, false, false, -1},
    {"decode_wi01", "bf16", 1, 1, 512, 2048, false, false, -1},
    {"decode_wi01_b8", "bf16", 1, 8, 512, 2048, false, false, -1},
    {"decode_wo_tB", "bf16", 1, 1, 1024, 512, false, true, -1},
    {"decode_ffn_b8", "bf16", 1, 8, 512, 1024, false, false, -1},
    {"decode_ffn_b8_tB", "bf16", 1, 8, 512, 1024, false, true, -1},
    {"decode_logits_tB", "f32", 1, 1, 512, 32128, false, true, -1},
    {"decode_logits_b8_tB", "f32", 1, 8, 512, 32128, false, true, -1},
    {"attn_qk", "bf16", 48, 128, 64, 128, false, true, -1},
    // A batch-1 decode's encoder (128 input tokens), bf16: q (k and v, and
    // the cross-attention's k and v, alike), the fused wi_0 | wi_1, wo.
    {"enc_b1_q", "bf16", 1, 128, 512, 384, false, false, -1},
    {"enc_b1_wi01", "bf16", 1, 128, 512, 2048, false, false, -1},
    {"enc_b1_wo", "bf16", 1, 128, 1024, 512, false, false, -1},
};

template <typename T>
std::vector<T> random_buffer(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<T> v(n);
  for (auto& x : v) x = T(d(gen));
  return v;
}

// A T5.1.1-small training-step product: op(A) [m, k], op(B) [k, n], and how
// many times a step runs it (T5X_OP_PROFILE of t5x_model_bench --mode train).
struct StepProduct {
  int64_t m, n, k;
  bool trans_a, trans_b;
  int per_step;
};
const StepProduct kStepProducts[] = {
    {512, 384, 1024, true, false, 40}, {512, 1024, 1024, true, false, 16}, {1024, 1024, 512, false, false, 16},
    {1024, 512, 1024, false, true, 16}, {1024, 512, 384, false, true, 40}, {1024, 384, 512, false, false, 40},
    {256, 32128, 512, false, false, 1}, {1024, 512, 1024, true, false, 8},  {256, 1024, 512, false, false, 16},
    {1024, 1024, 512, false, true, 8},  {256, 512, 32128, false, true, 1}, {1024, 512, 1024, false, false, 8},
    {512, 32128, 256, true, false, 1},  {256, 512, 1024, false, true, 16}, {512, 1024, 256, true, false, 16},
    {512, 384, 256, true, false, 32},   {384, 512, 1024, true, false, 8},  {256, 512, 384, false, true, 32},
    {1024, 512, 384, false, false, 8},  {256, 384, 512, false, false, 32}, {256, 512, 1024, false, false, 8},
    {1024, 384, 512, false, true, 8},   {256, 512, 384, false, false, 16}, {384, 512, 256, true, false, 16},
    {1024, 512, 256, true, false, 8},   {256, 1024, 512, false, true, 8},  {256, 384, 512, false, true, 16},
};

std::vector<float> random_floats(size_t n, uint32_t seed) { return random_buffer<float>(n, seed); }

int run_step_products(int threads, int rounds, bool flush_caches) {
  using t5x::cpu::packed_gemm;
  const char* names[4] = {"oneDNN f32", "packed f32", "oneDNN bf16", "packed bf16"};
  struct Bufs {
    std::vector<float> a, b, c;
    std::vector<bfloat16> ah, bh, ch;
    GemmShape s;
    double best[4] = {1e30, 1e30, 1e30, 1e30};
  };
  std::vector<Bufs> bufs;
  uint32_t seed = 1;
  for (const StepProduct& p : kStepProducts) {
    Bufs u;
    u.a = random_floats(size_t(p.m * p.k), seed++);
    u.b = random_floats(size_t(p.k * p.n), seed++);
    u.c.resize(size_t(p.m * p.n));
    u.ah = std::vector<bfloat16>(u.a.begin(), u.a.end());
    u.bh = std::vector<bfloat16>(u.b.begin(), u.b.end());
    u.ch.resize(u.c.size());
    u.s = GemmShape{p.m, p.n, p.k, p.trans_a, p.trans_b, p.trans_a ? p.m : p.k, p.trans_b ? p.k : p.n, p.n};
    bufs.push_back(std::move(u));
  }
  std::vector<char> flush(flush_caches ? size_t(64) << 20 : 0);
  char tick = 0;
  for (int r = 0; r <= rounds; ++r)  // round 0 warms up (oneDNN's JIT, packing buffers)
    for (Bufs& u : bufs)
      for (int v = 0; v < 4; ++v) {
        if (flush_caches) std::memset(flush.data(), ++tick, flush.size());
        const auto t0 = std::chrono::steady_clock::now();
        if (v == 0) t5x::cpu::gemm_f32(u.s, 1.f, u.a.data(), u.b.data(), 0.f, u.c.data());
        if (v == 1) packed_gemm(u.s, 1, 0, 0, 0, 1.f, u.a.data(), u.b.data(), 0.f, u.c.data(), threads);
        if (v == 2)
          t5x::cpu::gemm_batched_bf16_out_bf16(u.s, 1, 0, 0, 0, 1.f, u.ah.data(), u.bh.data(), 0.f, u.ch.data());
        if (v == 3) packed_gemm(u.s, 1, 0, 0, 0, 1.f, u.ah.data(), u.bh.data(), 0.f, u.ch.data(), threads);
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) u.best[v] = std::min(u.best[v], dt);
      }
  double step[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < bufs.size(); ++i) {
    const StepProduct& p = kStepProducts[i];
    const double flop = 2.0 * double(p.m) * double(p.n) * double(p.k);
    std::printf("{\"suite\":\"gemm_step\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"trans_a\":%s,\"trans_b\":%s,"
                "\"per_step\":%d",
                (long long)p.m, (long long)p.n, (long long)p.k, p.trans_a ? "true" : "false",
                p.trans_b ? "true" : "false", p.per_step);
    for (int v = 0; v < 4; ++v) {
      step[v] += bufs[i].best[v] * p.per_step;
      std::printf(",\"%s gflops_best\":%.1f", names[v], flop / bufs[i].best[v] / 1e9);
    }
    std::printf("}\n");
  }
  std::printf("{\"suite\":\"gemm_step\",\"rounds\":%d,\"threads\":%d,\"flush\":%s", rounds, threads,
              flush_caches ? "true" : "false");
  for (int v = 0; v < 4; ++v) std::printf(",\"%s ms_per_step\":%.1f", names[v], step[v] * 1e3);
  std::printf(",\"packed over oneDNN f32\":%.3f,\"packed over oneDNN bf16\":%.3f}\n", step[0] / step[1],
              step[2] / step[3]);
  return 0;
}

int run_kernel_cast(int threads, int rounds) {
  using t5x::cpu::F32AsBf16;
  using t5x::cpu::packed_gemm;
  const char* names[2] = {"cast pass then bf16 product", "rounded in the packing"};
  struct Bufs {
    std::vector<float> b;
    std::vector<bfloat16> ah, bh, ch;
    GemmShape s;
    int per_step;
    double best[2] = {1e30, 1e30};
  };
  std::vector<Bufs> bufs;
  uint32_t seed = 1;
  for (const StepProduct& p : kStepProducts) {
    if (p.trans_a || p.n > 4096 || p.k > 4096) continue;  // weight gradients; the f32 logits
    Bufs u;
    const auto a = random_floats(size_t(p.m * p.k), seed++);
    u.b = random_floats(size_t(p.k * p.n), seed++);
    u.ah = std::vector<bfloat16>(a.begin(), a.end());
    u.bh.resize(u.b.size());
    u.ch.resize(size_t(p.m * p.n));
    u.s = GemmShape{p.m, p.n, p.k, false, p.trans_b, p.k, p.trans_b ? p.k : p.n, p.n};
    u.per_step = p.per_step;
    bufs.push_back(std::move(u));
  }
  std::vector<char> flush(size_t(64) << 20);
  char tick = 0;
  for (int r = 0; r <= rounds; ++r)  // round 0 warms up (packing buffers)
    for (Bufs& u : bufs)
      for (int v = 0; v < 2; ++v) {
        std::memset(flush.data(), ++tick, flush.size());
        const auto t0 = std::chrono::steady_clock::now();
        if (v == 0) {
          t5x::cpu::convert_f32_to_bf16(u.b.data(), u.bh.data(), int64_t(u.b.size()));
          packed_gemm(u.s, 1, 0, 0, 0, 1.f, u.ah.data(), u.bh.data(), 0.f, u.ch.data(), threads);
        } else {
          packed_gemm(u.s, 1, 0, 0, 0, 1.f, u.ah.data(), reinterpret_cast<const F32AsBf16*>(u.b.data()), 0.f,
                      u.ch.data(), threads);
        }
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) u.best[v] = std::min(u.best[v], dt);
      }
  double step[2] = {0, 0};
  for (const Bufs& u : bufs) {
    std::printf("{\"suite\":\"gemm_kernel_cast\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"trans_b\":%s,\"per_step\":%d",
                (long long)u.s.m, (long long)u.s.n, (long long)u.s.k, u.s.trans_b ? "true" : "false", u.per_step);
    for (int v = 0; v < 2; ++v) {
      step[v] += u.best[v] * u.per_step;
      std::printf(",\"%s ms\":%.3f", names[v], u.best[v] * 1e3);
    }
    std::printf("}\n");
  }
  std::printf("{\"suite\":\"gemm_kernel_cast\",\"rounds\":%d,\"threads\":%d", rounds, threads);
  for (int v = 0; v < 2; ++v) std::printf(",\"%s ms_per_step\":%.1f", names[v], step[v] * 1e3);
  std::printf(",\"rounded over cast\":%.3f}\n", step[1] / step[0]);
  return 0;
}

// --backward-pairs: each forward product Y[m,n] = X[m,k] W[k,n] of the step
// has two backward products of equal FLOPs, dX = dY W^T and dW = X^T dY,
// independent of each other. Two ways: one after the other, each split over
// the threads, and side by side, each on one thread (no split, no barrier,
// each thread's L2 holds its own operands). Caches flushed before each pair.
struct ForwardProduct {
  int64_t m, n, k;
  int per_step;
};
const ForwardProduct kForwardProducts[] = {
    {1024, 384, 512, 40}, {1024, 512, 384, 8}, {1024, 1024, 512, 16}, {1024, 512, 1024, 8}, {256, 384, 512, 32},
    {256, 512, 384, 16},  {256, 1024, 512, 16}, {256, 512, 1024, 8},  {256, 32128, 512, 1},
};

int run_backward_pairs(int threads, int rounds) {
  using t5x::cpu::packed_gemm;
  struct Bufs {
    std::vector<float> x, w, dy, dx, dw;
    GemmShape sx, sw;
    int per_step;
    double best[2] = {1e30, 1e30}, sum[2] = {0, 0};
  };
  std::vector<Bufs> bufs;
  uint32_t seed = 1;
  for (const ForwardProduct& p : kForwardProducts) {
    Bufs u;
    u.x = random_floats(size_t(p.m * p.k), seed++);
    u.w = random_floats(size_t(p.k * p.n), seed++);
    u.dy = random_floats(size_t(p.m * p.n), seed++);
    u.dx.resize(u.x.size());
    u.dw.resize(u.w.size());
    u.sx = GemmShape{p.m, p.k, p.n, false, true, p.n, p.n, p.k};  // dY [m,n] W^T
    u.sw = GemmShape{p.k, p.n, p.m, true, false, p.k, p.n, p.n};  // X^T [k,m] dY
    u.per_step = p.per_step;
    bufs.push_back(std::move(u));
  }
  std::vector<char> flush(size_t(64) << 20);
  char tick = 0;
  for (int r = 0; r <= rounds; ++r)
    for (Bufs& u : bufs)
      for (int v0 = 0; v0 < 2; ++v0) {
        const int v = (v0 + r) % 2;  // alternate which way goes first
        std::memset(flush.data(), ++tick, flush.size());
        const auto t0 = std::chrono::steady_clock::now();
        if (v == 0) {
          packed_gemm(u.sx, 1, 0, 0, 0, 1.f, u.dy.data(), u.w.data(), 0.f, u.dx.data(), threads);
          packed_gemm(u.sw, 1, 0, 0, 0, 1.f, u.x.data(), u.dy.data(), 0.f, u.dw.data(), threads);
        } else {
#pragma omp parallel sections num_threads(2)
          {
#pragma omp section
            packed_gemm(u.sx, 1, 0, 0, 0, 1.f, u.dy.data(), u.w.data(), 0.f, u.dx.data(), 1);
#pragma omp section
            packed_gemm(u.sw, 1, 0, 0, 0, 1.f, u.x.data(), u.dy.data(), 0.f, u.dw.data(), 1);
          }
        }
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) {
          u.best[v] = std::min(u.best[v], dt);
          u.sum[v] += dt;
        }
      }
  double best[2] = {0, 0}, mean[2] = {0, 0};
  for (const Bufs& u : bufs) {
    std::printf("{\"suite\":\"gemm_backward_pairs\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"per_step\":%d,"
                "\"split ms\":%.3f,\"side by side ms\":%.3f}\n",
                (long long)u.sx.m, (long long)u.sw.n, (long long)u.sx.n, u.per_step, u.best[0] * 1e3, u.best[1] * 1e3);
    for (int v = 0; v < 2; ++v) {
      best[v] += u.best[v] * u.per_step;
      mean[v] += u.sum[v] / rounds * u.per_step;
    }
  }
  std::printf("{\"suite\":\"gemm_backward_pairs\",\"rounds\":%d,\"split ms_per_step best\":%.1f,"
              "\"side by side ms_per_step best\":%.1f,\"split mean\":%.1f,\"side by side mean\":%.1f}\n",
              rounds, best[0] * 1e3, best[1] * 1e3, mean[0] * 1e3, mean[1] * 1e3);
  return 0;
}

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = omp_get_max_threads();
  double min_time = 1.0;
  std::string filter;
  bool fma_check = true;
  bool cold = false, flush = false;
  bool step_products = false, kernel_cast = false, backward_pairs = false;
  int rounds = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::stoi(argv[++i]);
    else if (a == "--min-time" && i + 1 < argc) min_time = std::stod(argv[++i]);
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--no-fma-check") fma_check = false;
    else if (a == "--cold") cold = true;
    else if (a == "--flush") flush = true;
    else if (a == "--step-products") step_products = true;
    else if (a == "--kernel-cast") kernel_cast = true;
    else if (a == "--backward-pairs") backward_pairs = true;
    else if (a == "--rounds" && i + 1 < argc) rounds = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: %s [--threads N] [--min-time S] [--filter SUBSTR] [--no-fma-check] [--cold]\n"
                   "       %s --step-products [--rounds N] [--threads N] [--flush]\n"
                   "       %s --kernel-cast [--rounds N] [--threads N]\n"
                   "       %s --backward-pairs [--rounds N] [--threads N]\n",
                   argv[0], argv[0], argv[0], argv[0]);
      return 2;
    }
  }
  // The oneDNN legs of --step-products need gemm_f32 etc. on oneDNN (set
  // before the first product decides; the packed legs call it directly).
  if (step_products) setenv("T5X_GEMM_KERNEL", "onednn", 1);
  omp_set_num_threads(threads);
  t5x::bench::CpuPeak peak = t5x::bench::detect_cpu_peak(threads);
  t5x::bench::FmaRate fma;
  if (fma_check) fma = t5x::bench::measure_fma_gflops(threads);
  // Other processes sharing the cores make every figure lower: say so.
  double load1 = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load1) != 1) load1 = 0;
    std::fclose(f);
  }
  std::printf(
      "{\"suite\":\"gemm\",\"machine\":true,\"loadavg_1min\":%.2f,\"threads\":%d,\"isa\":\"%s\",\"flop_per_cycle\":%d,"
      "\"clock_ghz\":%.3f,\"clock_source\":\"%s\",\"peak_gflops\":%.1f,"
      "\"measured_fma_gflops\":%.1f,\"measured_fma_gflops_per_cpu_s\":%.1f,"
      "\"core_peak_gflops\":%.1f,\"cpu\":\"%s\"}\n",
      load1, threads, peak.isa.c_str(), peak.flop_per_cycle, peak.clock_ghz, peak.clock_source.c_str(),
      peak.gflops(), fma.gflops, fma.gflops_per_cpu_s, peak.gflops() / threads,
      t5x::cpu::describe_cpu().c_str());
  std::fflush(stdout);
  if (step_products) return run_step_products(threads, rounds, flush);
  if (kernel_cast) return run_kernel_cast(threads, rounds);
  if (backward_pairs) return run_backward_pairs(threads, rounds);

  for (const Case& c : kCases) {
    std::string label = std::string(c.name) + "_" + c.dtype;
    if (!filter.empty() && label.find(filter) == std::string::npos) continue;
    bool bf16 = std::strcmp(c.dtype, "bf16") == 0;
    GemmShape s{c.m, c.n, c.k, c.trans_a, c.trans_b};
    int64_t sa = c.m * c.k, sb = c.stride_b < 0 ? c.k * c.n : c.stride_b, sc = c.m * c.n;
    size_t na = size_t(sa * c.batch), nb = size_t(std::max<int64_t>(sb * c.batch, c.k * c.n));
    std::vector<float> out(size_t(sc * c.batch));
    std::vector<float> af, bfv;
    std::vector<bfloat16> ah, bh;
    const size_t copies = cold ? std::max<size_t>(2, (size_t(256) << 20) / (nb * (bf16 ? 2 : 4))) : 1;
    if (bf16) {
      ah = random_buffer<bfloat16>(na, 1);
      bh = random_buffer<bfloat16>(nb * copies, 2);
    } else {
      af = random_buffer<float>(na, 1);
      bfv = random_buffer<float>(nb * copies, 2);
    }
    size_t copy = 0;
    auto once = [&] {
      copy = (copy + 1) % copies;
      if (bf16)
        t5x::cpu::gemm_batched_bf16(s, c.batch, sa, sb, sc, 1.f, ah.data(), bh.data() + copy * nb, 0.f,
                                    out.data());
      else
        t5x::cpu::gemm_batched_f32(s, c.batch, sa, sb, sc, 1.f, af.data(), bfv.data() + copy * nb, 0.f,
                                   out.data());
    };
    for (int w = 0; w < 3; ++w) once();
    std::vector<double> secs, cpu_secs;
    double total = 0;
    while (secs.size() < 5 || (total < min_time && secs.size() < 100000)) {
      double c0 = cpu_seconds();
      auto t0 = std::chrono::steady_clock::now();
      once();
      double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      cpu_secs.push_back(cpu_seconds() - c0);
      secs.push_back(dt);
      total += dt;
    }
    std::sort(secs.begin(), secs.end());
    std::sort(cpu_secs.begin(), cpu_secs.end());
    double flop = 2.0 * double(c.m) * double(c.n) * double(c.k) * double(c.batch);
    double g_max = flop / secs.front() / 1e9;
    double g_min = flop / secs.back() / 1e9;
    double g_med = flop / secs[secs.size() / 2] / 1e9;
    // GFLOP per CPU-second of this process: the rate while scheduled, which
    // other processes on the same cores do not dilute (OpenMP spin-waits
    // still count as CPU time). Compare with the per-core peak.
    double g_cpu = flop / cpu_secs[cpu_secs.size() / 2] / 1e9;
    double core_peak = peak.gflops() / threads;
    std::printf(
        "{\"suite\":\"gemm\",\"case\":\"%s\",\"dtype\":\"%s\",\"shape\":\"[%lldx%lld]x[%lldx%lld]\","
        "\"batch\":%lld,\"m\":%lld,\"k\":%lld,\"n\":%lld,\"trans_a\":%s,\"trans_b\":%s,"
        "\"threads\":%d,\"threads_used\":%d,\"cold\":%s,\"repeats\":%zu,\"ms_median\":%.4f,\"gflops_min\":%.1f,"
        "\"gflops_median\":%.1f,\"gflops_max\":%.1f,\"peak_gflops\":%.1f,"
        "\"ratio_median\":%.3f,\"ratio_max\":%.3f,\"gflops_per_cpu_s_median\":%.1f,"
        "\"ratio_per_core_while_running\":%.3f,\"ratio_vs_measured_fma_while_running\":%.3f}\n",
        c.name, c.dtype, (long long)c.m, (long long)c.k, (long long)c.k, (long long)c.n,
        (long long)c.batch, (long long)c.m, (long long)c.k, (long long)c.n,
        c.trans_a ? "true" : "false", c.trans_b ? "true" : "false", threads,
        t5x::cpu::gemm_threads_for(s, c.batch), cold ? "true" : "false", secs.size(),
        secs[secs.size() / 2] * 1e3, g_min, g_med, g_max, peak.gflops(), g_med / peak.gflops(),
        g_max / peak.gflops(), g_cpu, g_cpu / core_peak,
        fma.gflops_per_cpu_s > 0 ? g_cpu / fma.gflops_per_cpu_s : 0.0);
    std::fflush(stdout);
  }
  return 0;
}
