#!/usr/bin/env bash
# The test command: installs what is missing, builds into build/, runs ctest.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
scripts/build.sh "$@"
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${CTEST_JOBS:-2}"
