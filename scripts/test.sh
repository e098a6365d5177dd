#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages; the interop
# checks' Python venv from PyPI), builds into build/, runs ctest.
# Exits non-zero on any failure. Extra arguments go to CMake's configure step.
# As an AVX2-only machine would run it: scripts/avx2.sh scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
T5X_PYTHON=$(scripts/python_env.sh)
export T5X_PYTHON
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# The Python module t5xcpp.seqio and its tests (python/) are part of the suite.
scripts/build.sh -DT5X_PYTHON_MODULE=ON "$@"
cd "${BUILD_DIR:-build}"
echo "[test] $(./bin/t5x cpu)${ONEDNN_MAX_CPU_ISA:+ (ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA)}${T5X_CPU_ISA:+ (T5X_CPU_ISA=$T5X_CPU_ISA)}"
ctest --output-on-failure -j "${CTEST_JOBS:-2}"
