#include "cpu_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <time.h>

#include "backend/cpu/cpu_info.h"

namespace t5x::bench {
namespace {

double read_cpuinfo_number(const std::string& key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    try {
      return std::stod(line.substr(colon + 1));
    } catch (...) {
      return 0;
    }
  }
  return 0;
}

}  // namespace

CpuPeak detect_cpu_peak(int cores) {
  CpuPeak p;
  p.cores = cores;
  // The class oneDNN's products run at: what the CPU has, capped by
  // ONEDNN_MAX_CPU_ISA (scripts/avx2.sh), not merely what the CPU has.
  p.isa = t5x::cpu::cpu_info().gemm_vector;
  if (p.isa == "avx512") p.flop_per_cycle = 64;     // 2 units x 16 lanes x 2
  else if (p.isa == "avx2") p.flop_per_cycle = 32;  // 2 units x 8 lanes x 2
  else p.flop_per_cycle = 8;                        // mul + add, 4 lanes each
  double mhz = read_cpuinfo_number("cpu MHz");
  if (mhz > 0) {
    p.clock_source = "cpu MHz";
  } else {
    mhz = read_cpuinfo_number("bogomips") / 2;
    p.clock_source = "BogoMIPS/2";
  }
  p.clock_ghz = mhz / 1000.0;
  return p;
}

// One register-only FMA loop per vector class, each compiled for its own ISA
// (target attributes) so that any build measures the class oneDNN runs at.
// 16 independent accumulators hide the 4-cycle FMA latency on 2 ports.
__attribute__((noinline, target("avx512f"))) static float fma_loop_avx512(int64_t iters) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  }
  __m512 s = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// 12 accumulators: with the two constants that is 14 of AVX2's 16 vector
// registers (16 accumulators spilled, and the loop measured 129 GFLOP/s
// where oneDNN's f32 GEMM reached 160). 12 independent chains still cover
// 2 FMA units x 4 cycles of latency.
constexpr int kAvx2Chains = 12;
__attribute__((noinline, target("avx2,fma"))) static float fma_loop_avx2(int64_t iters) {
  __m256 acc[kAvx2Chains];
#pragma GCC unroll 16
  for (int i = 0; i < kAvx2Chains; ++i) acc[i] = _mm256_set1_ps(float(i) * 1e-3f);
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kAvx2Chains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  }
  __m256 s = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < kAvx2Chains; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

// SSE: no FMA; a multiply and an add per element (8 FLOP/cycle on 2 ports).
__attribute__((noinline)) static float fma_loop_sse(int64_t iters) {
  __m128 acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm_set1_ps(float(i) * 1e-3f);
  const __m128 m = _mm_set1_ps(0.999999f), a = _mm_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm_add_ps(_mm_mul_ps(acc[i], m), a);
  }
  __m128 s = acc[0];
#pragma GCC unroll 16
  for (int i = 1; i < 16; ++i) s = _mm_add_ps(s, acc[i]);
  alignas(16) float v[4];
  _mm_store_ps(v, s);
  return v[0] + v[1] + v[2] + v[3];
}

// FLOP of one iteration of each loop: accumulators x lanes x 2.
static float fma_loop(const std::string& isa, int64_t iters, int* flop_per_iter) {
  if (isa == "avx512") { *flop_per_iter = 16 * 16 * 2; return fma_loop_avx512(iters); }
  if (isa == "avx2") { *flop_per_iter = kAvx2Chains * 8 * 2; return fma_loop_avx2(iters); }
  *flop_per_iter = 16 * 4 * 2;
  return fma_loop_sse(iters);
}

static double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

FmaRate measure_fma_gflops(int threads) {
  const int64_t iters = 20'000'000;
  volatile float sink = 0;
  const std::string isa = t5x::cpu::cpu_info().gemm_vector;
  int flop_per_iter = 0;
  fma_loop(isa, iters / 20, &flop_per_iter);  // warm up the clock
  double c0 = cpu_seconds();
  auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
  {
    int unused = 0;
    float r = fma_loop(isa, iters, &unused);
#pragma omp critical
    sink = sink + r;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = cpu_seconds() - c0;
  double flop = double(iters) * flop_per_iter * threads;
  return {flop / s / 1e9, flop / cpu / 1e9};
}

}  // namespace t5x::bench
