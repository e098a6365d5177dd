#!/usr/bin/env bash
# suite: FNet Fourier mixing (FFTW) vs T5 self-attention, lengths 128..8192, with the crossover
# Usage: scripts/bench.sh fnet [--batch=1] [--embed=512] [--heads=8] [--min_length=128]
#                              [--max_length=8192] [--min_seconds=1.0]
# Builds (or updates) build/bin/t5x_fnet_mixing_bench (BUILD_DIR overrides build/).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/t5x_fnet_mixing_bench"
TARGETS=t5x_fnet_mixing_bench scripts/build.sh >&2
echo "# $(date -u +%FT%TZ) $(nproc) cores, $(uptime | sed 's/.*load/load/')"
exec "$BIN" "$@"
