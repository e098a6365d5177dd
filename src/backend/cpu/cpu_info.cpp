#include "backend/cpu/cpu_info.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <sys/resource.h>

#include <stdexcept>

#include "backend/cpu/gemm.h"
#include "backend/cpu/simd.h"

namespace t5x::cpu {
namespace {

const char* isa_name(dnnl::cpu_isa isa) {
#if defined(__aarch64__)
  return "aarch64";  // oneDNN 2.6 names only x86 ISAs
#endif
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

const char* gemm_vector(dnnl::cpu_isa isa) {
#if defined(__aarch64__)
  return "neon";
#endif
  switch (isa) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
    case dnnl::cpu_isa::avx512_mic:
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512";
    case dnnl::cpu_isa::avx2:
    case dnnl::cpu_isa::avx2_vnni: return "avx2";
    default: return "sse";
  }
}

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = [] {
    CpuInfo i;
    i.kernels = simd_target();
    i.kernels_cap = simd_cap();
    const auto isa = dnnl::get_effective_cpu_isa();
    i.onednn_isa = isa_name(isa);
    i.gemm_vector = gemm_vector(isa);
    const dnnl_version_t* v = dnnl_version();
    i.onednn_version = std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                       std::to_string(v->patch);
    i.bf16_native = gemm_bf16_native();
    i.f32_kernel = gemm_kernel(false);
    i.bf16_kernel = gemm_kernel(true);
    i.block_invariant = gemm_block_invariant();
    return i;
  }();
  return info;
}

std::string describe_cpu() {
  const CpuInfo& i = cpu_info();
  const std::string cap = i.kernels_cap.empty() ? "" : " (cap T5X_CPU_ISA=" + i.kernels_cap + ")";
  return "cpu: kernels " + i.kernels + cap + ", oneDNN " + i.onednn_version + " at " + i.onednn_isa +
         "; products f32 " + i.f32_kernel + ", bf16 " + i.bf16_kernel +
         (i.block_invariant ? ""
                            : "; products not block-invariant (mesh-invariant runs match one process to "
                              "rounding, not bitwise)");
}

void check_thread_count() {
  const int threads = omp_get_max_threads();
  rlimit lim{};
  if (::getrlimit(RLIMIT_NPROC, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY || rlim_t(threads) <= lim.rlim_cur) return;
  throw std::invalid_argument("OMP_NUM_THREADS asks for " + std::to_string(threads) +
                              " threads, more than this user may start (ulimit -u: " + std::to_string(lim.rlim_cur) +
                              ")\n  hint: set OMP_NUM_THREADS to the cores the run should use, or leave it unset "
                              "for all of them");
}

}  // namespace t5x::cpu
