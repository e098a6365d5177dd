#!/usr/bin/env bash
# suite: GEMM GFLOP/s on T5-shaped products vs the fp32 peak (JSON lines)
# Usage: scripts/bench.sh gemm [--threads N] [--min-time S] [--filter SUBSTR]
# Builds build/bin/t5x_gemm_bench when it is missing (BUILD_DIR overrides build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/t5x_gemm_bench"
if [ ! -x "$BIN" ]; then
  # Configure like scripts/build.sh, then build only this target.
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target t5x_gemm_bench >&2
fi
exec "$BIN" "$@"
