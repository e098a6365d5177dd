// The machine's theoretical fp32 peak, for reporting GEMM and MFU ratios.
//
//   peak = cores x FLOP/cycle/core x clock
//
// FLOP/cycle/core: 2 (FMA = mul + add) x SIMD lanes x FMA units. With
// AVX-512 we assume 2 FMA-512 units (all Xeon Gold 6xxx / Platinum and
// Sapphire/Emerald Rapids parts): 2 x 16 x 2 = 64. AVX2+FMA: 2 x 8 x 2 = 32.
// Clock: "cpu MHz" from /proc/cpuinfo (on KVM guests this is the TSC rate,
// i.e. the nominal clock; turbo/AVX-512 licence clocks are not visible), or
// BogoMIPS / 2 when that line is missing. The vector class is the one oneDNN
// runs its products at (cpu_info.h: the CPU's, capped by ONEDNN_MAX_CPU_ISA),
// and measure_fma_gflops() times a loop of independent FMAs of that class, so
// that the assumption can be checked on the machine, and under the cap, at hand.
// It matters: on AMD Zen 4 (AVX-512 on 256-bit FMA units, turbo above the
// nominal clock) the loop measured about 225 GFLOP/s on 2 cores both at AVX2
// and at AVX-512, against nominal figures of 166 and 332; t5x_model_bench
// reports MFU against both (mfu_*, mfu_fma_*).
#pragma once
#include <cstdint>
#include <string>

namespace t5x::bench {

struct CpuPeak {
  int cores = 1;               // threads the measurement uses
  int flop_per_cycle = 0;      // per core, fp32
  double clock_ghz = 0;
  std::string isa;             // "avx512" | "avx2" | "sse"
  std::string clock_source;    // "cpu MHz" | "BogoMIPS/2"
  double gflops() const { return cores * flop_per_cycle * clock_ghz; }
};

CpuPeak detect_cpu_peak(int cores);

// Achieved fp32 GFLOP/s of a register-only FMA loop on `threads` threads:
// per wall-clock second, and per CPU-second of the process (the per-core
// rate while scheduled, which checks the FLOP/cycle x clock assumption even
// when other processes share the cores).
struct FmaRate {
  double gflops = 0;             // wall clock, all threads
  double gflops_per_cpu_s = 0;   // per core while running
};
FmaRate measure_fma_gflops(int threads);

}  // namespace t5x::bench
