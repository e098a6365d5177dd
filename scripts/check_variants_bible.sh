#!/usr/bin/env bash
# The model variants of docs/models.md train on the main job's Bible task: GQA-2, MQA, the FNet
# encoder and Sparse Mixer (Mini sizes), and T5.1.1 Mini under configs/runs/lion.gin's optimizer
# (chain([optax.clip, optax.lion])), each train 40 steps on bible_translate_en_es through
# `t5x train`, and their loss per target token must fall by a tenth (mean of steps 1-5 against
# mean of steps 36-40). Needs the prepared data (scripts/prepare_data.sh; .ci/run runs it through
# scripts/demo.sh first) and build/bin/t5x.
#
#   scripts/check_variants_bible.sh [WORK_DIR]      (default runs/variants_bible)
#   VARIANTS="lion fnet" scripts/check_variants_bible.sh    (some of them)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin/t5x
WORK=${1:-runs/variants_bible}
STEPS=40
[[ -x "$BIN" ]] || { echo "check_variants_bible: $BIN is missing: run scripts/build.sh first" >&2; exit 1; }
[[ -f data/COMPLETED ]] || { echo "check_variants_bible: no prepared data in data/: run scripts/prepare_data.sh first" >&2; exit 1; }
unpacked=(--gin.train/utils.DatasetConfig.pack=False --gin.train_eval/utils.DatasetConfig.pack=False)
fail=0
for v in ${VARIANTS:-gqa2 mqa fnet sparse_mixer lion}; do
  extra=()
  case $v in
    gqa2) gin=configs/models/t5_1_1/mini_gqa2.gin ;;
    mqa) gin=configs/models/t5_1_1/mini_mqa.gin ;;
    fnet) gin=configs/models/t5_1_1/mini_fnet.gin; extra=("${unpacked[@]}") ;;
    sparse_mixer) gin=configs/models/sparse_mixer/mini.gin; extra=("${unpacked[@]}" --gin.ENCODER_MIXING_LENGTH=64) ;;
    # Not a model variant: the optimizer of configs/runs/lion.gin, chain([optax.clip, optax.lion]).
    lion) gin=configs/models/t5_1_1/mini.gin
          extra=(--gin_file=configs/runs/lion.gin --gin.LION_PEAK_LEARNING_RATE=1e-3 --gin.LION_WARMUP_STEPS=5) ;;
  esac
  dir=$WORK/$v
  rm -rf "$dir"
  mkdir -p "$dir"
  if ! "$BIN" train --gin_file="$gin" --gin_file=configs/runs/pretrain.gin --gin_file=configs/examples/bible/common.gin \
      --gin.MODEL_DIR="'$dir'" --gin.MIXTURE_OR_TASK_NAME="'bible_translate_en_es'" \
      --gin.TASK_FEATURE_LENGTHS="{'inputs': 64, 'targets': 64}" --gin.TRAIN_STEPS=$STEPS --gin.BATCH_SIZE=16 \
      --gin.RANDOM_SEED=0 --gin.train_script.train.stats_period=1 --gin.train_script.train.eval_period=$STEPS \
      "${extra[@]}" > "$dir.log" 2>&1; then
    echo "check_variants_bible: $v: t5x train failed; the end of $dir.log:" >&2
    tail -n 20 "$dir.log" >&2
    fail=1
    continue
  fi
  if ! python3 - "$dir/train/metrics.jsonl" "$v" "$STEPS" <<'PY'
import json, sys
path, name, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
loss = {}
for line in open(path):
    j = json.loads(line)
    if 'loss_per_nonpadding_target_token' in j:
        loss[j['step']] = j['loss_per_nonpadding_target_token']
if sorted(loss) != list(range(1, steps + 1)):
    sys.exit(f"check_variants_bible: {name}: {path} has steps {sorted(loss)[:3]}..., not 1..{steps}")
first = sum(loss[s] for s in range(1, 6)) / 5
last = sum(loss[s] for s in range(steps - 4, steps + 1)) / 5
ok = last < 0.9 * first
print(f"{name}: loss per target token {first:.3f} (steps 1-5) -> {last:.3f} (steps {steps-4}-{steps})"
      + ("" if ok else "  DID NOT FALL"))
sys.exit(0 if ok else 1)
PY
  then fail=1; fi
done
exit $fail
