// T5X_CPU_ISA caps the SIMD target (run by ctest under several values; see
// tests/backend/CMakeLists.txt). Without the variable the best target runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/cpu_info.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/simd.h"
#include "backend/cpu/unary.h"

namespace t5x::cpu {
namespace {

std::string env_cap() {
  const char* v = std::getenv("T5X_CPU_ISA");
  return v ? v : "";
}

TEST(SimdCap, TheCapNamesTheTargetThatRuns) {
  const std::string cap = env_cap();
  if (cap == "bogus") {
    try {
      simd_init();
      FAIL() << "T5X_CPU_ISA=bogus was accepted";
    } catch (const std::invalid_argument& e) {
#if defined(__x86_64__)
      const std::string names = "use one of avx512, avx2, sse4, ssse3, emu128";
#else
      const std::string names = "use one of neon, emu128";
#endif
      EXPECT_NE(std::string(e.what()).find("T5X_CPU_ISA='bogus' is not a CPU target; " + names), std::string::npos)
          << e.what();
    }
    return;
  }
  const std::string best = simd_target_name(simd_targets().front());
  if (cap.empty()) {
    EXPECT_EQ(simd_cap(), "");
    EXPECT_EQ(simd_target(), best);
    return;
  }
  EXPECT_EQ(simd_cap(), cap);
  // The cap is the best target left (this CPU has each capped one: the test
  // runs on x86-64 CPUs with AVX2 and on aarch64, where NEON is baseline).
  // emu128 caps at the portable fallback, which Highway 1.0.3 compiles as
  // SCALAR (one lane) and later versions as EMU128.
  std::string want = cap == "avx2" ? "AVX2" : cap == "sse4" ? "SSE4" : cap == "neon" ? "NEON" : "?";
  if (cap == "emu128") want = simd_target() == "SCALAR" ? "SCALAR" : "EMU128";
  EXPECT_EQ(simd_target(), want);
  EXPECT_EQ(best, want);
  // oneDNN follows the cap (unless ONEDNN_MAX_CPU_ISA says otherwise), even
  // when a product is the first thing that runs.
  if (std::getenv("ONEDNN_MAX_CPU_ISA") == nullptr) {
    GemmShape g;
    g.m = g.n = g.k = 8;
    std::vector<float> a(64, 1.f), b(64, 0.5f), c(64);
    gemm_f32(g, 1.f, a.data(), b.data(), 0.f, c.data());
    EXPECT_EQ(c[0], 4.f);
    const std::string onednn = cpu_info().onednn_isa;
    if (cap == "avx2") { EXPECT_EQ(onednn, "avx2"); }
#if defined(__x86_64__)
    if (cap == "sse4" || cap == "emu128") { EXPECT_EQ(onednn, "sse41"); }
#else
    EXPECT_EQ(onednn, "aarch64");  // oneDNN has no cap on ARM
#endif
  }
  // And the kernels run there, also after everything that asks which
  // targets exist (Highway 1.0.3's SupportedTargets() used to point the
  // dispatch back at the best target while the CPU line still named the cap).
  (void)describe_cpu();
  (void)simd_targets();
  (void)simd_target();
  EXPECT_EQ(simd_target_name(simd_running_target()), want);
  EXPECT_EQ(describe_cpu().find("kernels " + want), 5u) << describe_cpu();
  float x[3] = {0.f, 1.f, -1.f}, y[3];
  unary_f32(UnaryKernel::Exp, x, y, 3);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_NEAR(y[1], 2.7182817f, 1e-6f);
}

}  // namespace
}  // namespace t5x::cpu
