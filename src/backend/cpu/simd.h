// Which SIMD target the CPU kernels run on (Google Highway runtime dispatch).
//
// Every kernel in backend/cpu is compiled once per x86 target (the portable
// fallback: SCALAR in Highway 1.0.3, EMU128 later; SSSE3, SSE4, AVX2, AVX3 =
// AVX-512 F/BW/DQ/VL; NEON on ARM) and the best one
// the CPU supports is chosen at the first call, so a binary built on one
// machine runs at full speed on another. Results are bitwise identical on
// every target (simd-inl.h says how), so the cap below changes speed only.
//
// Cap: the environment variable T5X_CPU_ISA (read once, before the first
// kernel runs) names the best target allowed: avx512 | avx2 | sse4 | ssse3 |
// emu128 (also: avx3 = avx512; scalar = emu128 = the portable fallback).
// When it is set and ONEDNN_MAX_CPU_ISA is not, oneDNN is capped to match
// (avx512_core, avx2, sse41), so one variable makes this machine behave like
// an older one. An unknown value is an error naming the valid ones.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace t5x::cpu {

// Applies T5X_CPU_ISA (once; later calls return at once). Called by every
// dispatched kernel and by the GEMM before oneDNN's first use.
// Throws std::invalid_argument on an unknown T5X_CPU_ISA.
void simd_init();

// The target the kernels run on now, e.g. "AVX2", "AVX3", "SSE4", "EMU128",
// as the dispatch itself reports it (a dispatched probe), and its Highway bit.
std::string simd_target();
int64_t simd_running_target();

// The cap in force ("" when T5X_CPU_ISA is unset).
std::string simd_cap();

// Every target this build compiled that the CPU supports (after the cap),
// best first, as Highway target bits.
std::vector<int64_t> simd_targets();
std::string simd_target_name(int64_t target);

// For tests and benchmarks: restricts dispatch to one target for the scope's
// lifetime, then restores the previous choice. Not thread-safe: create it
// where no kernel runs concurrently.
class ScopedSimdTarget {
 public:
  explicit ScopedSimdTarget(int64_t target);
  ~ScopedSimdTarget();
  ScopedSimdTarget(const ScopedSimdTarget&) = delete;
  ScopedSimdTarget& operator=(const ScopedSimdTarget&) = delete;
};

}  // namespace t5x::cpu

// Calls the best compiled version of per-target function FN (HWY_EXPORTed in
// the same file) after applying the cap.
#define T5X_DISPATCH(FN) (::t5x::cpu::simd_init(), HWY_DYNAMIC_DISPATCH(FN))
