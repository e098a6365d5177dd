#!/usr/bin/env bash
# suite: public ops (elementwise, reductions, einsum, fused ops, autodiff) on T5-small shapes, Google Benchmark
# Usage: scripts/bench.sh ops [--benchmark_filter=REGEX] [other Google Benchmark flags]
# Builds build/bin/t5x_ops_bench when it is missing (BUILD_DIR overrides build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/t5x_ops_bench"
if [ ! -x "$BIN" ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target t5x_ops_bench >&2
fi
exec "$BIN" "$@"
