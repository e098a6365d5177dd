#!/usr/bin/env bash
# suite: GEMM GFLOP/s on T5-shaped products vs the fp32 peak (JSON lines)
# Usage: scripts/bench.sh gemm [--threads N] [--min-time S] [--filter SUBSTR]
# Builds (or updates) build/bin/t5x_gemm_bench (BUILD_DIR overrides build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/t5x_gemm_bench"
# Build (or bring up to date) the benchmark like scripts/build.sh does (T5X_ARCH etc.).
TARGETS=t5x_gemm_bench scripts/build.sh >&2
exec "$BIN" "$@"
