#!/usr/bin/env bash
# Benchmarks: scripts/bench.sh <suite> [args...] runs scripts/bench/<suite>.sh.
# Without a suite (or with an unknown one) it lists the available suites.
set -euo pipefail
cd "$(dirname "$0")/.."
list_suites() {
  echo "available suites:" >&2
  for f in scripts/bench/*.sh; do
    [ -e "$f" ] || continue
    name=$(basename "$f" .sh)
    desc=$(sed -n 's/^# *suite: *//p' "$f" | head -n1)
    printf '  %-12s %s\n' "$name" "$desc" >&2
  done
}
if [ $# -lt 1 ]; then
  echo "usage: scripts/bench.sh <suite> [args...]" >&2
  list_suites
  exit 2
fi
suite=$1
shift
if [ ! -f "scripts/bench/$suite.sh" ]; then
  echo "scripts/bench.sh: unknown suite '$suite'" >&2
  list_suites
  exit 2
fi
exec bash "scripts/bench/$suite.sh" "$@"
