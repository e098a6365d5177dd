#!/usr/bin/env bash
# Runs a command as an AVX2-only machine would (no AVX-512, no bf16 or AMX
# instructions; e.g. AMD Zen 3, Intel before Skylake-SP), on any x86-64 CPU
# with AVX2 and FMA: the same portable build, with our SIMD kernels capped at
# their AVX2 target (T5X_CPU_ISA, src/backend/cpu/simd.h) and oneDNN at AVX2.
# f32 and bf16 products then run on the packed GEMM (src/backend/cpu/gemm.h).
#
#   scripts/avx2.sh scripts/test.sh
#   scripts/avx2.sh scripts/demo.sh runs/demo_avx2
#   scripts/avx2.sh scripts/bench.sh kernels
set -euo pipefail
if (($# == 0)); then
  echo "usage: scripts/avx2.sh COMMAND [ARGS...]" >&2
  exit 64
fi
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || {
  echo "scripts/avx2.sh: this CPU has no AVX2+FMA; run the command as it is" >&2
  exit 1
}
export T5X_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2
exec "$@"
