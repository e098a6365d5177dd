#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ into build-fuzz/ (clang, with ASan
# and UBSan; -DT5X_FUZZ=ON) and runs each for SECONDS on a copy of its seed
# corpus fuzz/corpus/<harness>/. Fails on any crash, sanitizer report, leak,
# hang (an input taking over FUZZ_TIMEOUT s, default 10) or an input needing
# over FUZZ_RSS_MB (default 2048) of memory. Failing inputs are kept in
# runs/fuzz/<harness>/ (rerun one: build-fuzz/fuzz/<harness> FILE).
# Usage: scripts/fuzz.sh SECONDS [HARNESS...]   (default: every harness)
# FUZZ_JOBS=N runs N harnesses at once; FUZZ_NO_BUILD=1 uses build-fuzz/ as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 && $1 =~ ^[0-9]+$ ]] || { echo "usage: scripts/fuzz.sh SECONDS [HARNESS...]" >&2; exit 64; }
secs=$1; shift
scripts/deps.sh --fuzz
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [[ -z ${FUZZ_NO_BUILD:-} ]]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DT5X_FUZZ=ON \
    -DT5X_BUILD_TESTS=OFF -DT5X_BUILD_BENCH=OFF >/dev/null
  cmake --build build-fuzz -j "${JOBS:-$(nproc)}" --target fuzzers
fi
harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  for f in fuzz/*_fuzzer.cpp; do harnesses+=("$(basename "$f" .cpp)"); done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One harness: fuzz a copy of its seeds in an empty working directory (gin
# includes resolve against it), with TMPDIR inside the scratch folder.
run_one() {
  local h=$1 exe=$PWD/build-fuzz/fuzz/$1 log=runs/fuzz/$1.log rc=0
  mkdir -p "$work/$h/corpus" "$work/$h/cwd" "runs/fuzz/$h"
  cp fuzz/corpus/"$h"/* "$work/$h/corpus/"
  (cd "$work/$h/cwd" && TMPDIR=$work/$h "$exe" -max_total_time="$secs" -timeout="${FUZZ_TIMEOUT:-10}" \
     -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -print_final_stats=1 \
     -artifact_prefix="$OLDPWD/runs/fuzz/$h/" "$work/$h/corpus") >"$log" 2>&1 || rc=$?
  local execs cov
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)
  if ((rc != 0)); then
    echo "[fuzz] $h: FAILED (exit $rc) after ${execs:-?} runs; see $log and runs/fuzz/$h/"
    grep -E "^==[0-9]+==ERROR|runtime error|SUMMARY|Test unit written" "$log" | head -5 || true
    touch "$work/$h.failed"
  else
    echo "[fuzz] $h: ${execs:-?} runs in ${secs}s, no finding (${cov:-})"
  fi
}
for h in "${harnesses[@]}"; do
  [[ -x build-fuzz/fuzz/$h ]] || { echo "fuzz: no harness $h (fuzz/$h.cpp)" >&2; exit 64; }
done
# FUZZ_JOBS harnesses at a time (default 1: each harness gets a core).
for h in "${harnesses[@]}"; do
  while (($(jobs -rp | wc -l) >= ${FUZZ_JOBS:-1})); do wait -n || true; done
  run_one "$h" &
done
wait
failed=()
for h in "${harnesses[@]}"; do [[ -e $work/$h.failed ]] && failed+=("$h"); done
((${#failed[@]} == 0)) || { echo "[fuzz] failed: ${failed[*]}" >&2; exit 1; }
