#!/usr/bin/env bash
# `t5x config` prints, for each case of testdata/operative/cases.tsv, the
# operative config that Python gin-config 0.5.0 read back
# (gin_operative_golden.py wrote NAME.gin after gin-config parsed it).
# Usage: operative_golden.sh PATH/TO/t5x   (run from the repository root)
set -uo pipefail
T5X="$1"
D=tests/t5x/gin/testdata/operative
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
n=0
while IFS=$'\t' read -r -a cells; do
  [[ ${#cells[@]} -eq 0 || "${cells[0]}" == \#* ]] && continue
  name="${cells[0]}"
  "$T5X" config "${cells[@]:1}" > "$T/$name.gin" 2> "$T/err" || { echo "FAIL: $name: $(cat "$T/err")" >&2; exit 1; }
  diff -u "$D/$name.gin" "$T/$name.gin" > "$T/diff" || {
    echo "FAIL: $name: t5x config differs from the text gin-config read (rerun gin_operative_golden.py):" >&2
    head -40 "$T/diff" >&2
    exit 1
  }
  n=$((n + 1))
done < "$D/cases.tsv"
[ "$n" -ge 6 ] || { echo "FAIL: only $n cases" >&2; exit 1; }
# `t5x config` lists the macros a run still needs on stderr, and exits 0.
"$T5X" config --gin_file=configs/models/t5_1_1/tiny.gin --gin_file=configs/runs/eval.gin > /dev/null 2> "$T/err" ||
  { echo "FAIL: t5x config with missing macros: $(cat "$T/err")" >&2; exit 1; }
grep -q "^t5x config: note: macro CHECKPOINT_PATH is not set (needed by utils.RestoreCheckpointConfig.path at configs/runs/eval.gin:" "$T/err" ||
  { echo "FAIL: missing macro note: $(cat "$T/err")" >&2; exit 1; }
echo "ok: $n operative configs as gin-config read them"
