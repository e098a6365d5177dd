#!/usr/bin/env bash
# Issue 6's multi-process check on a real task: the same `t5x train` run on one
# process and under mpirun on (data, model) meshes (2,1), (1,2) and (2,2),
# compared step by step (relative difference of the per-step train loss).
#
# Each mesh is compared with the single-process run of the same bindings and
# with the one whose arithmetic it has: over 'data', D processes compute the
# gradient blocks of one process running num_microbatches = D (the startup
# line says which), so a second single-process run with 2 microbatches is the
# reference for the meshes with data = 2.
#
# Usage: scripts/mesh_losses.sh [--steps N] [--out DIR] [--gin.KEY=VALUE ...]
#   defaults: 20 steps of tiny.gin + pretrain.gin on bible_translate_en_es,
#   batch 8, {'inputs': 64, 'targets': 64}, vocabulary 8192, RANDOM_SEED 0,
#   the gin default activation dtype (bfloat16). Extra --gin.* flags go to
#   every run (e.g. --gin.ACTIVATION_DTYPE="'float32'", or
#   --gin.partitioning.PjitPartitioner.mesh_invariant=False for GSPMD-style
#   partial sums over 'model').
# Needs build/bin/t5x, mpirun and the prepared data (scripts/prepare_data.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=20
OUT=/tmp/t5x_mesh_losses
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --gin.*) EXTRA+=("$1"); shift ;;
    *) echo "mesh_losses.sh: unknown argument '$1' (--steps N, --out DIR, --gin.KEY=VALUE)" >&2; exit 2 ;;
  esac
done
[ -x build/bin/t5x ] || { echo "mesh_losses.sh: build/bin/t5x missing; run scripts/build.sh" >&2; exit 1; }
[ -f data/vocab/bible_spm.model ] || { echo "mesh_losses.sh: no data; run scripts/prepare_data.sh" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
MPIRUN=(mpirun --oversubscribe --bind-to none --mca btl self,vader)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
run() {  # name np num_partitions [extra gin flags]
  local name=$1 np=$2 parts=$3 cmd=()
  shift 3
  [ "$np" -gt 1 ] && cmd=("${MPIRUN[@]}" -np "$np")
  cmd+=(build/bin/t5x train --gin_file=configs/models/t5_1_1/tiny.gin --gin_file=configs/runs/pretrain.gin
        --gin.MODEL_DIR="$OUT/$name" --gin.MIXTURE_OR_TASK_NAME=bible_translate_en_es
        --gin.TASK_FEATURE_LENGTHS="{'inputs': 64, 'targets': 64}" --gin.TRAIN_STEPS="$STEPS"
        --gin.network.T5Config.vocab_size=8192 --gin.BATCH_SIZE=8 --gin.USE_CACHED_TASKS=False
        --gin.RANDOM_SEED=0 --gin.train_script.train.stats_period=1
        --gin.partitioning.PjitPartitioner.num_partitions="$parts" "${EXTRA[@]}" "$@")
  echo "== $name: ${cmd[*]}" >&2
  OMP_NUM_THREADS=$((2 / np > 0 ? 2 / np : 1)) "${cmd[@]}" > "$OUT/$name.log" 2>&1 ||
    { tail -20 "$OUT/$name.log" >&2; exit 1; }
}
run np1 1 1
run np1_mb2 1 1 --gin.trainer.Trainer.num_microbatches=2
run data2 2 1
run model2 2 2
run data2_model2 4 2
python3 - "$OUT" "$STEPS" <<'PY'
import json, sys
out, steps = sys.argv[1], int(sys.argv[2])
def losses(name):
    d = {}
    for line in open(f"{out}/{name}/train/metrics.jsonl"):
        j = json.loads(line)
        if "loss" in j: d[j["step"]] = j["loss"]
    return d
ref = losses("np1")
ref_mb2 = losses("np1_mb2")
def worst(got, ref):
    rel = {s: abs(got[s] - ref[s]) / abs(ref[s]) for s in range(1, steps + 1)}
    w = max(rel, key=rel.get)
    equal = sum(got[s] == ref[s] for s in range(1, steps + 1))
    return f"worst {rel[w]:.2e} (step {w}), {equal}/{steps} steps bitwise equal, within 1e-4: {'yes' if rel[w] <= 1e-4 else 'no'}"
for name, mesh in [("data2", "(2,1)"), ("model2", "(1,2)"), ("data2_model2", "(2,2)")]:
    got = losses(name)
    print(f"mesh {mesh} vs one process, same bindings:       {worst(got, ref)}")
    print(f"mesh {mesh} vs one process, num_microbatches = 2: {worst(got, ref_mb2)}")
PY
