// What the CPU backend runs on, for the startup line and the benchmarks.
//
// Three things can differ from one machine to another, and all three decide
// speed and, for bf16, the path a product takes:
//   - the SIMD target the project's own kernels run on: the best the CPU
//     has, chosen at run time, capped by T5X_CPU_ISA (backend/cpu/simd.h),
//   - oneDNN's effective ISA: what the CPU has, capped by ONEDNN_MAX_CPU_ISA,
//   - which GEMM runs f32 and bf16 products: oneDNN (natively for bf16), our
//     packed GEMM, or oneDNN on bf16 widened to f32 (gemm.h).
#pragma once
#include <string>

namespace t5x::cpu {

// Vector class of fp32 FMA that the GEMM runs at: "avx512" (16 lanes),
// "avx2" (8 lanes, with FMA), or "sse" (4 lanes, no FMA).
struct CpuInfo {
  std::string kernels;         // Highway target of our kernels: "AVX3" (AVX-512), "AVX2", "SSE4", "EMU128", ...
  std::string kernels_cap;     // T5X_CPU_ISA as given (lower case), "" when unset
  std::string onednn_isa;      // oneDNN's effective ISA after any cap, e.g. "avx2", "avx512_core_amx"
  std::string onednn_version;  // "2.6.3"
  std::string gemm_vector;     // "avx512" | "avx2" | "sse" | "neon": the fp32 FMA width of the products
  bool bf16_native = false;    // gemm_bf16_native()
  std::string f32_kernel;      // gemm_kernel(false): "packed" | "oneDNN"
  std::string bf16_kernel;     // gemm_kernel(true): "packed" | "oneDNN" | "oneDNN via f32"
  bool block_invariant = false;  // gemm_block_invariant()
};

const CpuInfo& cpu_info();

// One line, e.g. "cpu: kernels AVX2 (cap T5X_CPU_ISA=avx2), oneDNN 2.6.3 at avx2; products f32
// packed, bf16 packed" (natively on an AVX512-BF16 CPU: "products f32 oneDNN, bf16 oneDNN"),
// with "; products not block-invariant (mesh-invariant runs match one process
// to rounding, not bitwise)" where gemm_block_invariant() is false. Queries oneDNN on first use (creates
// its engine and runs the probes of gemm.h, a few milliseconds).
std::string describe_cpu();

// Throws std::invalid_argument when the OpenMP team (OMP_NUM_THREADS) is
// larger than the threads this user may start (RLIMIT_NPROC, `ulimit -u`):
// libgomp then crashed in the first parallel region, with no message.
void check_thread_count();

}  // namespace t5x::cpu
