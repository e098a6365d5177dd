#include "backend/cpu/simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/simd.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace t5x::cpu {
namespace HWY_NAMESPACE {

// Which compiled version the dispatch runs: the only honest answer to "which
// target is in force", since Highway's own bookkeeping can disagree (below).
int64_t RunningTarget() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace t5x::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <hwy/targets.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace t5x::cpu {

HWY_EXPORT(RunningTarget);

namespace {

struct Cap {
  const char* name;
  int64_t target;
  dnnl::cpu_isa onednn;  // x86 only: oneDNN's own cap to match
};

// Best first.
#if HWY_ARCH_X86
// avx512 needs F+BW+DQ+VL (Skylake-SP, Zen 4 and later).
const Cap kCaps[] = {
    {"avx512", HWY_AVX3, dnnl::cpu_isa::avx512_core}, {"avx3", HWY_AVX3, dnnl::cpu_isa::avx512_core},
    {"avx2", HWY_AVX2, dnnl::cpu_isa::avx2},          {"sse4", HWY_SSE4, dnnl::cpu_isa::sse41},
    {"ssse3", HWY_SSSE3, dnnl::cpu_isa::sse41},       {"emu128", HWY_EMU128, dnnl::cpu_isa::sse41},
    {"scalar", HWY_EMU128, dnnl::cpu_isa::sse41},
};
const char kCapNames[] = "avx512, avx2, sse4, ssse3, emu128";
#else
// aarch64 (and other builds): the kernels' targets; oneDNN keeps its own.
const Cap kCaps[] = {
    {"neon", HWY_NEON, dnnl::cpu_isa::all}, {"emu128", HWY_EMU128, dnnl::cpu_isa::all},
    {"scalar", HWY_EMU128, dnnl::cpu_isa::all},
};
const char kCapNames[] = "neon, emu128";
#endif

std::string g_cap;
// The targets dispatch may choose (after the cap), read once. Highway 1.0.3's
// hwy::SupportedTargets() re-detects the CPU and points the dispatch at every
// target the CPU has, cap or not, before it returns the capped set: calling it
// after start-up silently lifts the cap. So it is called only here and in
// ScopedSimdTarget, each time followed by the Update that puts the cap back.
std::atomic<int64_t> g_supported{0};

int64_t update_dispatch() {
  const int64_t t = hwy::SupportedTargets();
  hwy::GetChosenTarget().Update(t);
  return t;
}

void apply_cap() {
  const char* v = std::getenv("T5X_CPU_ISA");
  if (v == nullptr || *v == 0) {
    g_supported = update_dispatch();
    return;
  }
  std::string s(v);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const Cap& c : kCaps) {
    if (s != c.name) continue;
    g_cap = s;
    // Disable every target better than the cap (lower bits are better).
    hwy::DisableTargets(c.target - 1);
    g_supported = update_dispatch();
    if (HWY_ARCH_X86 && std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) dnnl::set_max_cpu_isa(c.onednn);
    return;
  }
  throw std::invalid_argument("T5X_CPU_ISA='" + std::string(v) +
                              "' is not a CPU target; use one of " + kCapNames +
                              " (or unset it for the best this CPU has)");
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
  std::vector<int64_t> out;
  for (int64_t t = g_supported.load() & HWY_TARGETS; t != 0; t &= t - 1) out.push_back(t & -t);
  return out;
}

int64_t simd_running_target() {
  simd_init();
  return HWY_DYNAMIC_DISPATCH(RunningTarget)();
}

std::string simd_target() { return hwy::TargetName(simd_running_target()); }

ScopedSimdTarget::ScopedSimdTarget(int64_t target) {
  simd_init();
  hwy::SetSupportedTargetsForTest(target);
  update_dispatch();
}

ScopedSimdTarget::~ScopedSimdTarget() {
  hwy::SetSupportedTargetsForTest(0);
  update_dispatch();
}

}  // namespace t5x::cpu
#endif  // HWY_ONCE
