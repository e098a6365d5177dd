#!/usr/bin/env bash
# suite: everything: gemm, kernels, ops, optim, fnet, pipeline, train, decode, moe (one after the other)
# Usage: scripts/bench.sh all   (each suite with its defaults; outputs go to stdout)
set -euo pipefail
cd "$(dirname "$0")/../.."
for s in gemm kernels ops optim fnet pipeline train decode moe; do
  echo "===== $s ($(date -u +%FT%TZ), $(uptime | sed 's/.*load/load/'))"
  bash "scripts/bench/$s.sh" || echo "bench: suite $s failed" >&2
done
