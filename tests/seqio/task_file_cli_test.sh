#!/usr/bin/env bash
# Task files through the programs (docs/seqio.md, "Tasks declared in gin"): what
# a new user runs on examples/my_tsv, with no C++ and no rebuild: list and show
# with `seqio`, then train 20 steps of a tiny T5, evaluate and infer with `t5x`,
# and the named error of a malformed task file. Run from the source root.
# usage: task_file_cli_test.sh SEQIO T5X
set -euo pipefail
seqio=$1 t5x=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { grep -q -- "$1" "$2" || { cat "$2" >&2; fail "'$1' not in $2"; }; }

# seqio: --module FILE.gin and --gin_file FILE.
"$seqio" --module examples/my_tsv/tasks.gin list > "$tmp/list"
expect "task     my_tsv_en_es  splits=train,validation  features=inputs:int32,targets:int32  cacheable" "$tmp/list"
expect "mixture  my_tsv_both  tasks=my_tsv_en_es:2,my_tsv_es_en:1" "$tmp/list"
"$seqio" --gin_file examples/my_tsv/tasks.gin show my_tsv_es_en --split validation -n 1 > "$tmp/show"
expect '"inputs_pretokenized":"El gato bebe leche.","targets":' "$tmp/show"

# `seqio cache` takes a Task; given a Mixture it names the member tasks that can be cached.
if "$seqio" --module examples/my_tsv/tasks.gin cache my_tsv_both --output "$tmp/cache" 2> "$tmp/err"; then
  fail "seqio cache accepted a mixture"
fi
expect "'my_tsv_both' is a Mixture; \`seqio cache\` writes one Task's cache" "$tmp/err"
expect "hint: cache each of its tasks with a cache step (my_tsv_en_es) into the same --output" "$tmp/err"

# A malformed task file: exit 1, file:line:column, the field and the nearest name.
sed 's/@seqio.preprocessors.tokenize,/@seqio.preprocessors.tokenise,/' examples/my_tsv/tasks.gin > "$tmp/bad.gin"
if "$seqio" --module "$tmp/bad.gin" list 2> "$tmp/err"; then fail "bad task file accepted"; fi
expect "bad.gin:31:[0-9]*: .*seqio.preprocessors.tokenise" "$tmp/err"
expect "hint: .*seqio.preprocessors.tokenize" "$tmp/err"

# t5x: train (the task file is included by train.gin), evaluate, infer.
# Without Bible data the run says nothing about the Bible tasks: it does not use them.
T5X_DATA_DIR="$tmp/no-data" "$t5x" train --gin_file=examples/my_tsv/train.gin --gin.MODEL_DIR="$tmp/run" > "$tmp/train" 2>&1
expect "done at step 20" "$tmp/train"
if grep -q "Bible tasks" "$tmp/train"; then fail "a run on my_tsv notes the Bible tasks: $(grep Bible "$tmp/train")"; fi
expect "training_eval/my_tsv_en_es step 20: loss" "$tmp/train"
"$t5x" eval --gin_file=examples/my_tsv/model.gin --gin_file=configs/runs/eval.gin \
  --gin.MIXTURE_OR_TASK_NAME=my_tsv_en_es --gin.MIXTURE_OR_TASK_SPLIT=validation \
  --gin.CHECKPOINT_PATH="$tmp/run/checkpoint_20" --gin.EVAL_OUTPUT_DIR="$tmp/eval" > "$tmp/eval.log" 2>&1
expect "my_tsv_en_es (.*checkpoint_20, split validation): bleu [0-9.]* sequence_accuracy [0-9.]*" "$tmp/eval.log"
# A split no task has is an error naming the splits there are, not a silent success.
if "$t5x" eval --gin_file=examples/my_tsv/model.gin --gin_file=configs/runs/eval.gin \
  --gin.MIXTURE_OR_TASK_NAME=my_tsv_en_es --gin.MIXTURE_OR_TASK_SPLIT=test \
  --gin.CHECKPOINT_PATH="$tmp/run/checkpoint_20" --gin.EVAL_OUTPUT_DIR="$tmp/eval_test" > "$tmp/eval_test.log" 2>&1; then
  fail "eval on a missing split exited 0"
fi
expect "no task of 'my_tsv_en_es' has split 'test'" "$tmp/eval_test.log"
expect "task 'my_tsv_en_es': splits train, validation" "$tmp/eval_test.log"
# A task name that is not registered: the error, and then why the Bible tasks are missing.
if T5X_DATA_DIR="$tmp/no-data" "$t5x" eval --gin_file=examples/my_tsv/model.gin --gin_file=configs/runs/eval.gin \
  --gin.MIXTURE_OR_TASK_NAME=bible_translate_en_es --gin.CHECKPOINT_PATH="$tmp/run/checkpoint_20" \
  --gin.EVAL_OUTPUT_DIR="$tmp/eval_nope" > "$tmp/eval_nope.log" 2>&1; then
  fail "eval of an unregistered task exited 0"
fi
expect "No Task or Mixture found with name 'bible_translate_en_es'" "$tmp/eval_nope.log"
expect "note: Bible tasks not registered: .*T5X_DATA_DIR" "$tmp/eval_nope.log"
# infer names the task file with t5x's MIXTURE_OR_TASK_MODULE instead of a --gin_file
# (found through --gin_search_paths, as gin files are).
"$t5x" infer --gin_file=configs/models/t5_1_1/tiny.gin --gin_file=configs/runs/infer.gin \
  --gin_search_paths=examples/my_tsv --gin.MIXTURE_OR_TASK_MODULE="'tasks.gin'" \
  --gin.SENTENCEPIECE_MODEL_FILE="'tests/golden/seqio/vocab/spm1000.model'" \
  --gin.seqio.SentencePieceVocabulary.extra_ids=100 --gin.network.T5Config.vocab_size=1152 \
  --gin.MIXTURE_OR_TASK_NAME=my_tsv_en_es --gin.MIXTURE_OR_TASK_SPLIT=validation \
  --gin.TASK_FEATURE_LENGTHS="{'inputs': 32, 'targets': 32}" \
  --gin.CHECKPOINT_PATH="$tmp/run/checkpoint_20" --gin.INFER_OUTPUT_DIR="$tmp/infer" > "$tmp/infer.log" 2>&1
expect "wrote 8 examples" "$tmp/infer.log"
[[ $(wc -l < "$tmp/infer/my_tsv_en_es-predict.jsonl-00000-of-00001") == 8 ]] || fail "8 predictions expected"
expect '"targets_pretokenized":"El gato bebe leche."},"prediction":' "$tmp/infer/my_tsv_en_es-predict.jsonl-00000-of-00001"
echo "task_file_cli_test: ok"
