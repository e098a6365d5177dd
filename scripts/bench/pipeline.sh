#!/usr/bin/env bash
# suite: seqio input pipeline (tokenize + span corruption + packing) examples/s and tokens/s on 1 and 2 threads (JSON lines)
# Usage: scripts/bench.sh pipeline [--examples N] [--threads T]
# Builds build/bin/seqio_pipeline_bench when it is missing (BUILD_DIR overrides build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/seqio_pipeline_bench"
if [ ! -x "$BIN" ]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} >/dev/null
  cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target seqio_pipeline_bench >&2
fi
SEQIO_DATA_ROOT=${SEQIO_DATA_ROOT:-$PWD} exec "$BIN" "$@"
