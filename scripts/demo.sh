#!/usr/bin/env bash
# The main job in one command, on a fresh Debian machine:
#   1. install the Debian packages (scripts/deps.sh --data),
#   2. build (scripts/build.sh),
#   3. prepare the Bible corpora and the SentencePiece vocabulary (cached),
#   4. train T5.1.1 Mini from scratch on bible_translate_en_es
#      (configs/examples/bible/translate_en_es_demo.gin), decoding the
#      validation books every EVAL_PERIOD steps for BLEU,
#   5. translate the test books with `t5x infer` and score them with
#      `seqio metric bleu`, next to the copy-the-input baseline,
#   6. draw the loss and BLEU over steps (gnuplot) and print sample translations.
#
#   scripts/demo.sh [RUN_DIR]        (default runs/demo)
#
# Environment: DEMO_STEPS (training steps; default from the gin file),
# DEMO_THREADS (OMP threads; default all cores), BUILD_DIR (default build/).
# As an AVX2-only machine would run it: scripts/avx2.sh scripts/demo.sh. Re-running resumes: a finished
# run skips straight to the evaluation. Outputs in RUN_DIR:
#   checkpoint_*/               t5x checkpoints (the last two)
#   train/, training_eval/, inference_eval/   TensorBoard event files + JSONL metrics
#   test_predictions.jsonl      t5x infer on the test split
#   chart.png                   loss and validation BLEU over steps
#   results.json                test BLEU of the model and of the baseline
set -euo pipefail
cd "$(dirname "$0")/.."
RUN_DIR=${1:-runs/demo}
BIN=${BUILD_DIR:-build}/bin
GIN=configs/examples/bible/translate_en_es_demo.gin
TASK=bible_translate_en_es
PREFIX="translate English to Spanish: "
t_start=$(date +%s)
stage() { printf '\n[demo %s +%ds] %s\n' "$(date +%H:%M:%S)" $(( $(date +%s) - t_start )) "$*"; }

stage "1/6 Debian packages"
scripts/deps.sh --data

stage "2/6 building the three programs (${BUILD_DIR:-build}/; minutes on a fresh machine, seconds with ccache)"
mkdir -p "$RUN_DIR"
build_rc=0
TARGETS="t5x_cli seqio_cli t5x_prepare_bible" scripts/build.sh > >(tee "$RUN_DIR/build.log" |
  grep --line-buffered -E '^\[ *[0-9]+%\] (Built|Linking)|error' || true) 2>&1 || build_rc=$?
if ((build_rc != 0)); then
  sleep 1  # let the progress filter finish
  echo "demo: the build failed (exit $build_rc); the end of $RUN_DIR/build.log:" >&2
  tail -n 30 "$RUN_DIR/build.log" >&2
  exit 1
fi

stage "3/6 data: three Bibles from diatheke, cleaned and aligned; SentencePiece vocabulary"
scripts/prepare_data.sh

stage "4/6 training T5.1.1 Mini on $TASK (progress: step, loss, tokens/s, ETA)"
export OMP_NUM_THREADS=${DEMO_THREADS:-$(nproc)}
steps=()
[[ -n "${DEMO_STEPS:-}" ]] && steps=("--gin.TRAIN_STEPS=$DEMO_STEPS")
"$BIN/t5x" train --gin_file="$GIN" --gin.MODEL_DIR="$RUN_DIR" "${steps[@]}"

stage "5/6 translating the test books (Ruth, Jonah, Titus, Philemon, Jude) with t5x infer"
ckpt=$(ls -d "$RUN_DIR"/checkpoint_* | grep -E 'checkpoint_[0-9]+$' | sort -t_ -k2 -n | tail -1)
rm -rf "$RUN_DIR/infer"
"$BIN/t5x" infer --gin_file=configs/models/t5_1_1/mini.gin --gin_file=configs/runs/infer.gin \
  --gin_file=configs/examples/bible/common.gin --gin.MIXTURE_OR_TASK_NAME="$TASK" \
  --gin.CHECKPOINT_PATH="$ckpt" --gin.INFER_OUTPUT_DIR="$RUN_DIR/infer" \
  --gin.TASK_FEATURE_LENGTHS="{'inputs': 128, 'targets': 128}" --gin.utils.RestoreCheckpointConfig.dtype="'float32'"
cat "$RUN_DIR"/infer/"$TASK"-predict.jsonl-* > "$RUN_DIR/test_predictions.jsonl"
model=$("$BIN/seqio" metric bleu --predictions "$RUN_DIR/test_predictions.jsonl")
copy=$("$BIN/seqio" metric bleu --predictions "$RUN_DIR/test_predictions.jsonl" \
         --prediction_field inputs.inputs_pretokenized --strip_prefix "$PREFIX")
acc=$("$BIN/seqio" metric sequence_accuracy --predictions "$RUN_DIR/test_predictions.jsonl")
bleu_model=$(jq -r .bleu <<<"$model")
bleu_copy=$(jq -r .bleu <<<"$copy")
jq -n --arg ckpt "$ckpt" --argjson m "$model" --argjson c "$copy" --argjson a "$acc" \
  '{checkpoint: $ckpt, test_bleu: $m.bleu, test_sequence_accuracy: $a.sequence_accuracy,
    copy_input_baseline_bleu: $c.bleu}' > "$RUN_DIR/results.json"

stage "6/6 chart and samples"
# "step value" pairs of one metric from a t5x JSONL metrics file.
series() {
  [[ -f "$1" ]] || return 0
  jq -r --arg k "$2" 'select(has($k)) | "\(.step) \(.[$k])"' "$1"
}
series "$RUN_DIR/train/metrics.jsonl" loss_per_nonpadding_target_token > "$RUN_DIR/chart_train_loss.dat"
series "$RUN_DIR/training_eval/$TASK/metrics.jsonl" loss_per_nonpadding_target_token > "$RUN_DIR/chart_eval_loss.dat"
series "$RUN_DIR/inference_eval/$TASK-metrics.jsonl" bleu > "$RUN_DIR/chart_bleu.dat"
gnuplot <<EOF
set terminal pngcairo size 1000,560 font "sans,11" noenhanced
set output "$RUN_DIR/chart.png"
set title "T5.1.1 Mini on $TASK (2 CPU cores)"
set xlabel "training step"
set ylabel "loss per target token (nats)"
set y2label "validation BLEU"
set ytics nomirror
set y2tics
set y2range [0:*]
set grid
set key top right
plot "$RUN_DIR/chart_train_loss.dat" using 1:2 with lines lw 2 title "train loss", \
     "$RUN_DIR/chart_eval_loss.dat" using 1:2 with linespoints lw 2 title "validation loss", \
     "$RUN_DIR/chart_bleu.dat" using 1:2 axes x1y2 with linespoints lw 2 pt 7 title "validation BLEU"
EOF

echo
echo "Sample translations (test split):"
# Six verses spread over the five test books.
jq -rs --arg p "$PREFIX" '. as $all | [range(0; length; (length / 6 | ceil))] | .[] | $all[.] |
  "  EN   : \(.inputs.inputs_pretokenized | ltrimstr($p))\n  REF  : \(.inputs.targets_pretokenized)\n  MODEL: \(.prediction)\n"' \
  "$RUN_DIR/test_predictions.jsonl"
echo "Test BLEU (corpus BLEU, sacrebleu's 13a tokenisation, 0-100):"
printf '  T5.1.1 Mini after %s steps : %6.2f\n' "$(basename "$ckpt" | cut -d_ -f2)" "$bleu_model"
printf '  copy-the-input baseline      : %6.2f\n' "$bleu_copy"
if awk -v m="$bleu_model" -v c="$bleu_copy" 'BEGIN { exit !(m > c) }'; then
  echo "  -> the model beats the baseline"
else
  echo "  -> the model does NOT beat the baseline (train longer: DEMO_STEPS=...)"
fi
echo
echo "Outputs in $RUN_DIR: chart.png, results.json, test_predictions.jsonl, checkpoints,"
echo "TensorBoard logs (tensorboard --logdir $RUN_DIR). Took $(( ($(date +%s) - t_start) / 60 )) min."
