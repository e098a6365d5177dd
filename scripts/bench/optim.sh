#!/usr/bin/env bash
# suite: optimizer steps (AdamW + clip_by_global_norm, global norm, microbatch sums) on T5-small shapes, Google Benchmark
# Usage: scripts/bench.sh optim [--benchmark_filter=REGEX] [other Google Benchmark flags]
# Builds (or updates) build/bin/t5x_optim_bench (BUILD_DIR overrides build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/t5x_optim_bench"
# Build (or bring up to date) the benchmark like scripts/build.sh does (T5X_ARCH etc.).
TARGETS=t5x_optim_bench scripts/build.sh >&2
exec "$BIN" "$@"
