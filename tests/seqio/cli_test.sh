#!/usr/bin/env bash
# CLI-level checks of build/bin/seqio: determinism, --start tail, shard
# union, resume, cache, vocab round trip, error messages.
# Usage: cli_test.sh PATH/TO/seqio   (run from the repository root)
set -euo pipefail
SEQIO="$1"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$SEQIO" list > "$T/list"
grep -q '^task     gpl3_lm ' "$T/list" || fail "list misses gpl3_lm"
grep -q '^mixture  gpl3_mix ' "$T/list" || fail "list misses gpl3_mix"

# Same seed => byte-identical, on any thread count.
args=(show gpl3_lines_copy --shuffle --epochs 2 --block-size 50 --lengths inputs=12,targets=12 --seed)
args4=("${args[@]}" 4)
args+=(3)
"$SEQIO" "${args[@]}" > "$T/a" 2>/dev/null
"$SEQIO" "${args[@]}" --threads 2 > "$T/b" 2>/dev/null
cmp -s "$T/a" "$T/b" || fail "threads change the output"
"$SEQIO" "${args4[@]}" > "$T/c" 2>/dev/null
cmp -s "$T/a" "$T/c" && fail "seed has no effect"
n=$(wc -l < "$T/a")
[ "$n" -eq $((2 * 533)) ] || fail "expected 1066 examples, got $n"

# --start N equals the tail of the run from 0.
for start in 1 49 50 777; do
  "$SEQIO" "${args[@]}" --start "$start" > "$T/s" 2>/dev/null
  tail -n +$((start + 1)) "$T/a" | cmp -s - "$T/s" || fail "--start $start is not the tail"
done

# Resume from a saved position equals the tail.
"$SEQIO" "${args[@]}" -n 123 --position-out "$T/pos.json" > /dev/null 2>&1
"$SEQIO" "${args[@]}" --resume "$T/pos.json" > "$T/r" 2>/dev/null
tail -n +124 "$T/a" | cmp -s - "$T/r" || fail "--resume is not the tail"

# Union of shards = unsharded set (file-level with 2 shards, example-level with 3).
for count in 2 3; do
  : > "$T/u"
  for ((i = 0; i < count; i++)); do
    "$SEQIO" "${args[@]}" --shard "$i/$count" >> "$T/u" 2>/dev/null
  done
  sort "$T/u" | cmp -s - <(sort "$T/a") || fail "union of $count shards differs"
done

# Mixture determinism.
"$SEQIO" show gpl3_mix --seed 1 --shuffle -n 200 > "$T/m1" 2>/dev/null
"$SEQIO" show gpl3_mix --seed 1 --shuffle -n 200 --threads 2 > "$T/m2" 2>/dev/null
cmp -s "$T/m1" "$T/m2" || fail "mixture not deterministic"

# Vocabulary round trip on a real line.
line="This License refers to version 3 of the GNU General Public License."
for spec in "sentencepiece:tests/golden/seqio/vocab/spm1000.model:extra_ids=100" byte; do
  out=$(echo "$line" | "$SEQIO" vocab encode --vocab "$spec" | "$SEQIO" vocab decode --vocab "$spec")
  [ "$out" = "$line" ] || fail "vocab round trip ($spec): $out"
done
[ "$(echo '<extra_id_0>' | "$SEQIO" vocab encode --vocab sentencepiece:tests/golden/seqio/vocab/spm1000.model:extra_ids=100)" = "1099" ] \
  || fail "extra_id_0 is not vocab_size-1"

# Offline cache: same examples, incomplete cache refused.
"$SEQIO" cache gpl3_prefix --output "$T/cache" > "$T/cache.json"
[ -f "$T/cache/gpl3_prefix/COMPLETED" ] || fail "no COMPLETED marker"
"$SEQIO" show gpl3_prefix --lengths inputs=32,targets=32 > "$T/fly" 2>/dev/null
"$SEQIO" show gpl3_prefix --lengths inputs=32,targets=32 --use-cached --cache-dir "$T/cache" > "$T/cached" 2>/dev/null
cmp -s "$T/fly" "$T/cached" || fail "cached examples differ"
rm "$T/cache/gpl3_prefix/COMPLETED"
if "$SEQIO" show gpl3_prefix --use-cached --cache-dir "$T/cache" > /dev/null 2> "$T/err"; then fail "incomplete cache accepted"; fi
grep -q "no completed cache" "$T/err" || fail "unclear incomplete-cache message: $(cat "$T/err")"

# Overwriting one split of a cache keeps the others (issue 22, finding 11).
"$SEQIO" cache gpl3_prefix --output "$T/cache2" > /dev/null
"$SEQIO" cache gpl3_prefix --output "$T/cache2" --split validation --overwrite > /dev/null
ls "$T/cache2/gpl3_prefix" | grep -q '^train\.tfrecord-' || fail "cache --split validation --overwrite deleted train"
[ -f "$T/cache2/gpl3_prefix/COMPLETED" ] || fail "no COMPLETED after a split overwrite"
"$SEQIO" show gpl3_prefix --lengths inputs=32,targets=32 --use-cached --cache-dir "$T/cache2" > "$T/cached2" 2>/dev/null
cmp -s "$T/fly" "$T/cached2" || fail "train examples changed by a validation overwrite"

# --use-cached on a task without a cache step says so (seqio reads it on the fly).
"$SEQIO" show gpl3_lm -n 1 --use-cached --cache-dir "$T/cache" > /dev/null 2> "$T/err"
grep -q "task 'gpl3_lm' has no cache step" "$T/err" || fail "--use-cached on gpl3_lm silent: $(cat "$T/err")"

# A position resumes only the stream that wrote it.
"$SEQIO" show gpl3_lines_copy --seed 3 -n 5 --position-out "$T/pos2.json" > /dev/null 2>&1
if "$SEQIO" show gpl3_lines_copy --seed 3 --split validation --resume "$T/pos2.json" > /dev/null 2> "$T/err"; then
  fail "position of the train split resumed validation"
fi
grep -q 'position of split "train", but this run has split "validation"' "$T/err" || fail "resume mismatch: $(cat "$T/err")"
if "$SEQIO" show gpl3_lm --seed 3 --resume "$T/pos2.json" > /dev/null 2> "$T/err"; then fail "position of another task resumed"; fi
grep -q 'position of name "gpl3_lines_copy"' "$T/err" || fail "resume task mismatch: $(cat "$T/err")"

# No examples is said, not silent.
"$SEQIO" show gpl3_lines_copy --start 1000000 > "$T/none" 2> "$T/err"
[ ! -s "$T/none" ] || fail "examples past the end"
grep -q "gave no examples" "$T/err" || fail "empty output silent: $(cat "$T/err")"

# Usage errors exit 64, as t5x does; --help exits 0.
rc=0; "$SEQIO" show > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 64 ] || fail "usage error exit $rc, want 64"
rc=0; "$SEQIO" frobnicate > /dev/null 2> "$T/err" || rc=$?
[ "$rc" -eq 64 ] || fail "unknown subcommand exit $rc, want 64"
grep -q "^seqio: unknown command 'frobnicate'" "$T/err" || fail "unknown command not named: $(cat "$T/err")"
rc=0; "$SEQIO" --module "$T/none.gin" frobnicate > /dev/null 2> "$T/err" || rc=$?
[ "$rc" -eq 64 ] && grep -q "unknown command 'frobnicate'" "$T/err" || fail "after --module: $rc $(cat "$T/err")"
"$SEQIO" show --help > /dev/null || fail "--help failed"

# Without prepared data, `seqio list` says why the Bible tasks are missing.
T5X_DATA_DIR="$T/no-data" "$SEQIO" list 2> "$T/err" > /dev/null
grep -q "note: Bible tasks not registered: .*T5X_DATA_DIR" "$T/err" || fail "list without Bible data silent: $(cat "$T/err")"

# Bad input names the line.
if printf '{"text": "a"}\n\n' | "$SEQIO" vocab decode --vocab byte > /dev/null 2> "$T/err"; then fail "bad ids accepted"; fi
grep -q "stdin:1:" "$T/err" || fail "decode error lacks line: $(cat "$T/err")"
# An id the vocabulary refuses (SentencePiece: negative) names its line too.
if printf '3 4\n5 -2\n' | "$SEQIO" vocab decode --vocab sentencepiece:tests/golden/seqio/vocab/spm1000.model \
  > /dev/null 2> "$T/err"; then fail "negative id accepted"; fi
grep -q "stdin:2:.*negative id -2" "$T/err" || fail "vocabulary's decode error lacks line: $(cat "$T/err")"
if "$SEQIO" show gpl3_lm --shard 3/2 > /dev/null 2> "$T/err"; then fail "bad shard accepted"; fi

if "$SEQIO" convert --converter lm --lengths targets=4 < /dev/null > /dev/null 2>&1; then
  if printf '{"targets":[3,9,1]}\n\n' | "$SEQIO" convert --converter lm --lengths targets=5 > /dev/null 2> "$T/err"; then
    fail "empty line accepted"
  fi
  grep -q "stdin:2: empty line" "$T/err" || fail "convert error lacks line: $(cat "$T/err")"
  got=$(printf '{"targets":[3,9,1]}\n' | "$SEQIO" convert --converter lm --lengths targets=5 2>/dev/null)
  [ "$got" = '{"decoder_input_tokens":[0,3,9,1,0],"decoder_loss_weights":[1,1,1,0,0],"decoder_target_tokens":[3,9,1,0,0]}' ] \
    || fail "convert lm: $got"
  # An example longer than --lengths: the hint is the flag, not a library call.
  if printf '{"targets":[3]}\n{"targets":[3,9,1,4,4,4,4]}\n' | "$SEQIO" convert --converter lm --lengths targets=5 \
    > /dev/null 2> "$T/err"; then fail "a too-long example converted"; fi
  grep -q "has length 7, not less than or equal to the expected length of 5" "$T/err" || fail "too long: $(cat "$T/err")"
  grep -q "hint: raise that feature's --lengths value" "$T/err" || fail "too long, hint: $(cat "$T/err")"
  if grep -q "trim_to_lengths" "$T/err"; then fail "the hint names a C++ call: $(cat "$T/err")"; fi
fi
# metric: JSONL predictions (t5x infer's layout and inference_eval's) give the
# same score as line files; --strip_prefix scores a copy-the-input baseline.
{
  printf 'the cat sat on the mat\nel gato\nhello world again\n' > "$T/tgt"
  printf 'the cat sat on a mat\nel perro\nhello world again\n' > "$T/pred"
  printf '%s\n' '{"inputs":{"inputs_pretokenized":"copy: the cat sat on the mat","targets_pretokenized":"the cat sat on the mat"},"prediction":"the cat sat on a mat"}' \
    '{"inputs":{"inputs_pretokenized":"copy: el gato","targets_pretokenized":"el gato"},"prediction":"el perro"}' \
    '{"inputs":{"inputs_pretokenized":"copy: hello world again","targets_pretokenized":"hello world again"},"prediction":"hello world again"}' > "$T/infer.jsonl"
  printf '%s\n' '{"input":"x","target":"the cat sat on the mat","prediction":"the cat sat on a mat"}' \
    '{"input":"y","target":"el gato","prediction":"el perro"}' \
    '{"input":"z","target":"hello world again","prediction":"hello world again"}' > "$T/eval.jsonl"
  lines=$("$SEQIO" metric sequence_accuracy --targets "$T/tgt" --predictions "$T/pred")
  [ "$lines" = '{"sequence_accuracy":33.333333333333336}' ] \
    || fail "metric on lines: $lines"
  [ "$("$SEQIO" metric sequence_accuracy --predictions "$T/infer.jsonl")" = "$lines" ] || fail "metric on infer JSONL"
  [ "$("$SEQIO" metric sequence_accuracy --predictions "$T/eval.jsonl")" = "$lines" ] || fail "metric on eval JSONL"
  # A file with Windows line ends ("\r\n") scores as its text.
  sed 's/$/\r/' "$T/pred" > "$T/pred_crlf"
  [ "$("$SEQIO" metric sequence_accuracy --targets "$T/tgt" --predictions "$T/pred_crlf")" = "$lines" ] \
    || fail "metric on CRLF lines: $("$SEQIO" metric sequence_accuracy --targets "$T/tgt" --predictions "$T/pred_crlf")"
  b1=$("$SEQIO" metric bleu --targets "$T/tgt" --predictions "$T/pred")
  [ "$("$SEQIO" metric bleu --predictions "$T/infer.jsonl")" = "$b1" ] || fail "bleu on infer JSONL"
  # Copying the inputs (prefix stripped) reproduces the targets exactly.
  copy=$("$SEQIO" metric sequence_accuracy --predictions "$T/infer.jsonl" \
           --prediction_field inputs.inputs_pretokenized --strip_prefix "copy: ")
  [ "$copy" = '{"sequence_accuracy":100.0}' ] || fail "copy baseline: $copy"
  if "$SEQIO" metric bleu --predictions "$T/infer.jsonl" --prediction_field nope > /dev/null 2> "$T/err"; then
    fail "missing field accepted"
  fi
  grep -q "infer.jsonl:1: no field nope" "$T/err" || fail "metric error lacks place: $(cat "$T/err")"
  # A number where a text metric wants a string is named; a label metric takes it.
  printf '%s\n' '{"target":"1","prediction":"1"}' '{"target":"2","prediction":3}' > "$T/num.jsonl"
  if "$SEQIO" metric bleu --predictions "$T/num.jsonl" > /dev/null 2> "$T/err"; then fail "bleu scored a number"; fi
  grep -q "num.jsonl:2: prediction is 3, not a string; bleu scores text" "$T/err" || fail "number for bleu: $(cat "$T/err")"
  [ "$("$SEQIO" metric accuracy --predictions "$T/num.jsonl")" = '{"accuracy":50.0}' ] || fail "accuracy on numbers"
  # Plain-text predictions need --targets; empty predictions are an error, not a zero score.
  if "$SEQIO" metric bleu --predictions "$T/pred" > /dev/null 2> "$T/err"; then fail "plain predictions without targets"; fi
  grep -q "one prediction per line and no --targets" "$T/err" || fail "plain predictions: $(cat "$T/err")"
  : > "$T/empty"
  if "$SEQIO" metric bleu --predictions "$T/empty" --targets "$T/empty" > "$T/out" 2> "$T/err"; then
    fail "empty predictions scored $(cat "$T/out")"
  fi
  grep -q "no predictions" "$T/err" || fail "empty predictions: $(cat "$T/err")"
  # convert: a length past 2^20 tokens and an id past int32 are named (they ran out of memory / wrapped).
  if printf '{"inputs":[1],"targets":[2]}\n' | "$SEQIO" convert --converter enc_dec \
       --lengths inputs=2000000000,targets=4 > /dev/null 2> "$T/err"; then fail "length 2e9 accepted"; fi
  grep -q "is longer than 1048576 tokens" "$T/err" || fail "long length: $(cat "$T/err")"
  if printf '{"inputs":[99999999999],"targets":[2]}\n' | "$SEQIO" convert --converter enc_dec \
       --lengths inputs=4,targets=4 > /dev/null 2> "$T/err"; then fail "id 99999999999 accepted"; fi
  grep -q "holds id 99999999999, outside the int32 range" "$T/err" || fail "big id: $(cat "$T/err")"
  # A --lengths name no task outputs (a typo), or one given twice, is refused (it trimmed nothing).
  if "$SEQIO" show gpl3_lines_copy -n 1 --lengths input=5 > /dev/null 2> "$T/err"; then fail "--lengths input=5 accepted"; fi
  grep -q "'input' is no output feature of 'gpl3_lines_copy'" "$T/err" || fail "unknown length name: $(cat "$T/err")"
  if "$SEQIO" show gpl3_lines_copy -n 1 --lengths targets=5,targets=7 > /dev/null 2> "$T/err"; then
    fail "--lengths targets twice accepted"; fi
  grep -q "'targets' is given twice" "$T/err" || fail "length twice: $(cat "$T/err")"
  # A negative token id or BOS id is refused (it was passed through into the model features).
  if printf '{"inputs":[1],"targets":[2]}\n{"inputs":[-1,-5],"targets":[2]}\n' | "$SEQIO" convert \
       --converter enc_dec --lengths inputs=4,targets=4 > /dev/null 2> "$T/err"; then fail "id -1 accepted"; fi
  grep -q "stdin:2: field 'inputs' holds id -1, a negative token id" "$T/err" || fail "negative id: $(cat "$T/err")"
  if printf '{"inputs":[1],"targets":[2]}\n' | "$SEQIO" convert --converter enc_dec --bos -7 \
       --lengths inputs=4,targets=4 > /dev/null 2> "$T/err"; then fail "--bos -7 accepted"; fi
  grep -q -- "--bos" "$T/err" || fail "negative bos: $(cat "$T/err")"
  # A directory for a file, and a negative count, are named.
  if "$SEQIO" metric bleu --predictions "$T" > /dev/null 2> "$T/err"; then fail "a directory scored"; fi
  grep -q "is a directory" "$T/err" || fail "directory predictions: $(cat "$T/err")"
  if "$SEQIO" show gpl3_lines_copy -n -5 > /dev/null 2> "$T/err"; then fail "-n -5 accepted"; fi
  grep -q "must be >= 0" "$T/err" || fail "-n -5: $(cat "$T/err")"
  # A prediction nested 300000 levels deep is an error at its line, not a stack overflow.
  python3 -c "print('{\"prediction\": ' + '['*300000 + ']'*300000 + ', \"target\": \"a\"}')" > "$T/deep.jsonl"
  rc=0
  "$SEQIO" metric bleu --predictions "$T/deep.jsonl" > /dev/null 2> "$T/err" || rc=$?
  [ "$rc" = 1 ] || fail "deep JSON: exit $rc"
  grep -q "deep.jsonl:1: JSON nests deeper than 256 levels" "$T/err" || fail "deep JSON: $(cat "$T/err")"
}
echo "cli_test: all checks passed"
