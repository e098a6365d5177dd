#!/usr/bin/env bash
# Configures and builds t5x.cpp into build/ (binaries in build/bin/).
# Extra arguments are passed to cmake's configure step. Environment: BUILD_DIR,
# BUILD_TYPE, JOBS, TARGETS (space-separated; default all), T5X_ARCH, T5X_PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# Let ccache share hits between checkouts in different folders (CI clones).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
args=(-DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}")
# T5X_ARCH: a fixed -march target for the whole program (default: portable).
[[ -n "${T5X_ARCH:-}" ]] && args+=(-DT5X_ARCH="$T5X_ARCH")
# T5X_PYTHON: the interpreter of the interop checks (scripts/python_env.sh).
[[ -n "${T5X_PYTHON:-}" ]] && args+=(-DT5X_PYTHON="$T5X_PYTHON")
cmake -S . -B "$BUILD_DIR" "${args[@]}" "$@" >/dev/null
# TARGETS: build only these (the main job needs three programs, not the tests).
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
