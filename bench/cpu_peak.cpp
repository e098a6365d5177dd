#include "cpu_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <time.h>

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
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    p.isa = "avx512";
    p.flop_per_cycle = 64;  // 2 units x 16 lanes x 2
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.isa = "avx2";
    p.flop_per_cycle = 32;
  } else {
    p.isa = "sse";
    p.flop_per_cycle = 8;
  }
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

#if defined(__AVX512F__)
__attribute__((noinline)) static float fma_loop(int64_t iters) {
  // 16 independent accumulators hide the 4-cycle FMA latency on 2 ports.
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
constexpr int kFlopPerIter = 16 * 16 * 2;
#else
__attribute__((noinline)) static float fma_loop(int64_t iters) {
  float acc[8] = {0};
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 8; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  float s = 0;
  for (float v : acc) s += v;
  return s;
}
constexpr int kFlopPerIter = 8 * 2;
#endif

static double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

FmaRate measure_fma_gflops(int threads) {
  const int64_t iters = 20'000'000;
  volatile float sink = 0;
  fma_loop(iters / 20);  // warm up the clock
  double c0 = cpu_seconds();
  auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
  {
    float r = fma_loop(iters);
#pragma omp critical
    sink = sink + r;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = cpu_seconds() - c0;
  double flop = double(iters) * kFlopPerIter * threads;
  return {flop / s / 1e9, flop / cpu / 1e9};
}

}  // namespace t5x::bench
