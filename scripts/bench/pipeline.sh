#!/usr/bin/env bash
# suite: seqio input pipeline (tokenize + span corruption + packing) examples/s and tokens/s on 1 and 2 threads (JSON lines)
# Usage: scripts/bench.sh pipeline [--examples N] [--threads T]
# Builds (or updates) build/bin/seqio_pipeline_bench (BUILD_DIR overrides build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/seqio_pipeline_bench"
# Build (or bring up to date) the benchmark like scripts/build.sh does (T5X_ARCH etc.).
TARGETS=seqio_pipeline_bench scripts/build.sh >&2
SEQIO_DATA_ROOT=${SEQIO_DATA_ROOT:-$PWD} exec "$BIN" "$@"
