#!/usr/bin/env bash
# The t5x program's usage errors and its `cpu` subcommand: exit statuses
# (64 for a usage error, 1 for a bad setting) and messages, never an abort.
# Usage: cli_usage_test.sh PATH/TO/t5x   (run from the repository root)
set -uo pipefail
T5X="$1"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$T5X" cpu > "$T/out" 2>&1 || fail "t5x cpu: $(cat "$T/out")"
grep -q "kernels" "$T/out" || fail "t5x cpu prints no CPU line: $(cat "$T/out")"
T5X_CPU_ISA=bogus "$T5X" cpu > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" -eq 1 ] || fail "bad T5X_CPU_ISA: exit $rc (want 1): $(cat "$T/err")"
grep -q "^t5x cpu: T5X_CPU_ISA='bogus' is not a CPU target; use one of" "$T/err" || fail "bad T5X_CPU_ISA: $(cat "$T/err")"
"$T5X" cpu --help > "$T/out" 2>&1; rc=$?
[ "$rc" -eq 0 ] && grep -q "^usage: t5x cpu" "$T/out" || fail "t5x cpu --help: exit $rc: $(cat "$T/out")"
"$T5X" cpu extra > /dev/null 2>&1; rc=$?
[ "$rc" -eq 64 ] || fail "t5x cpu extra: exit $rc (want 64)"

# A malformed --mesh / --processes / --rank is a usage error, like an unknown flag.
for flag in --mesh=foo --processes=x --rank=1.5; do
  "$T5X" partition --gin_file=configs/runs/pretrain.gin "$flag" > /dev/null 2> "$T/err"; rc=$?
  [ "$rc" -eq 64 ] || fail "$flag: exit $rc (want 64): $(cat "$T/err")"
  grep -q "^t5x: " "$T/err" && grep -q "^usage: t5x" "$T/err" || fail "$flag: $(cat "$T/err")"
done
grep -q "not data=N or model=N" <("$T5X" partition --gin_file=x --mesh=foo 2>&1) || fail "--mesh=foo names the form"

# `t5x partition` reads no task (its batch is synthetic), so the task need not
# be registered (it had to be since the vocabulary check of 3d8d16d); a 'model'
# axis that does not divide a parameter's dim names the parameter and the
# bindings to change (the dim and mesh alone before).
P=(--gin_file=configs/models/t5_1_1/tiny.gin --gin_file=configs/runs/pretrain.gin --gin.MODEL_DIR="'$T/unused'"
   --gin.MIXTURE_OR_TASK_NAME="'c4_v220_span_corruption'" "--gin.TASK_FEATURE_LENGTHS={'inputs': 64, 'targets': 16}"
   --gin.BATCH_SIZE=8 --gin.TRAIN_STEPS=1 --gin.DROPOUT_RATE=0.0)
"$T5X" partition "${P[@]}" --mesh=data=1,model=2 > "$T/out" 2> "$T/err"; rc=$?
[ "$rc" -eq 0 ] && grep -q "over model: all_reduce" "$T/out" || fail "partition, unregistered task: exit $rc: $(cat "$T/err")"
"$T5X" partition "${P[@]}" --mesh=data=1,model=5 > /dev/null 2> "$T/err"; rc=$?
[ "$rc" -eq 1 ] || fail "partition on model=5: exit $rc (want 1): $(cat "$T/err")"
grep -q "parameter 'token_embedder/embedding': dim 0 'vocab' of size 32128 is not divisible by 5, the size of" "$T/err" &&
  grep -q "hint: a dim that logical_axis_rules split over a mesh axis must be a multiple" "$T/err" ||
  fail "partition on model=5: $(cat "$T/err")"

# The usage lists every checkpoint tool.
"$T5X" --help | grep -q "info, export-hf, import-hf, import-tf, convert-gqa, upcycle" || fail "t5x --help misses a ckpt tool"
# Each mode's --help says what that mode needs and writes; exit 0, before any gin is read.
for m in train eval infer score partition config; do
  "$T5X" "$m" --help > "$T/out" 2>&1; rc=$?
  [ "$rc" -eq 0 ] && grep -q "^usage: t5x $m " "$T/out" || fail "t5x $m --help: exit $rc: $(cat "$T/out")"
done
"$T5X" train --help | grep -q "MODEL_DIR, MIXTURE_OR_TASK_NAME, TASK_FEATURE_LENGTHS, TRAIN_STEPS" || fail "train --help misses its macros"
"$T5X" eval --help | grep -q "CHECKPOINT_PATH" || fail "eval --help misses CHECKPOINT_PATH"
"$T5X" score --help | grep -q "score.jsonl" || fail "score --help misses its output"
"$T5X" --help train | grep -q "^usage: t5x train " || fail "t5x --help train"
"$T5X" bogus --help | grep -q "^usage: t5x train|eval|infer|score" || fail "an unknown mode's --help prints the general usage"
echo OK
