#!/usr/bin/env bash
# suite: fused CPU kernels (attention, rms_norm, cross-entropy, gated GELU), Google Benchmark
# Usage: scripts/bench.sh kernels [--benchmark_filter=REGEX] [other Google Benchmark flags]
# Builds (or updates) build/bin/t5x_kernels_bench (BUILD_DIR overrides build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/t5x_kernels_bench"
# Build (or bring up to date) the benchmark like scripts/build.sh does (T5X_ARCH etc.).
TARGETS=t5x_kernels_bench scripts/build.sh >&2
exec "$BIN" "$@"
