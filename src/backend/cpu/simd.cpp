#include "backend/cpu/simd.h"

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <hwy/highway.h>
#include <hwy/targets.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace t5x::cpu {
namespace {

struct Cap {
  const char* name;
  int64_t target;
  dnnl::cpu_isa onednn;
};

// Best first. avx512 needs F+BW+DQ+VL (Skylake-SP, Zen 4 and later).
const Cap kCaps[] = {
    {"avx512", HWY_AVX3, dnnl::cpu_isa::avx512_core}, {"avx3", HWY_AVX3, dnnl::cpu_isa::avx512_core},
    {"avx2", HWY_AVX2, dnnl::cpu_isa::avx2},          {"sse4", HWY_SSE4, dnnl::cpu_isa::sse41},
    {"ssse3", HWY_SSSE3, dnnl::cpu_isa::sse41},       {"emu128", HWY_EMU128, dnnl::cpu_isa::sse41},
    {"scalar", HWY_EMU128, dnnl::cpu_isa::sse41},
};

std::string g_cap;

void apply_cap() {
  const char* v = std::getenv("T5X_CPU_ISA");
  if (v == nullptr || *v == 0) return;
  std::string s(v);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const Cap& c : kCaps) {
    if (s != c.name) continue;
    g_cap = s;
    // Disable every target better than the cap (lower bits are better).
    hwy::DisableTargets(c.target - 1);
    hwy::GetChosenTarget().Update(hwy::SupportedTargets());
    if (std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) dnnl::set_max_cpu_isa(c.onednn);
    return;
  }
  throw std::invalid_argument("T5X_CPU_ISA='" + std::string(v) +
                              "' is not a CPU target; use one of avx512, avx2, sse4, ssse3, emu128 "
                              "(or unset it for the best this CPU has)");
}

}  // namespace

void simd_init() {
  static std::once_flag once;
  std::call_once(once, apply_cap);
}

std::string simd_cap() {
  simd_init();
  return g_cap;
}

std::string simd_target_name(int64_t target) { return hwy::TargetName(target); }

std::vector<int64_t> simd_targets() {
  simd_init();
  return hwy::SupportedAndGeneratedTargets();
}

std::string simd_target() {
  simd_init();
  const int64_t supported = hwy::SupportedTargets() & HWY_TARGETS;
  return supported ? hwy::TargetName(supported & -supported) : "none";
}

ScopedSimdTarget::ScopedSimdTarget(int64_t target) {
  simd_init();
  hwy::SetSupportedTargetsForTest(target);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

ScopedSimdTarget::~ScopedSimdTarget() {
  hwy::SetSupportedTargetsForTest(0);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

}  // namespace t5x::cpu
