#!/usr/bin/env bash
# suite: MoE (Switch Mini) vs dense T5.1.1 Mini training step in A/B pairs: ms/step, FLOPs, MoE/dense ratio
# Usage: scripts/bench.sh moe [--repeats N] [--steps N] [--warmup N] [--isa native|avx2] [--out FILE]
#          [--models "moe/mini t5_1_1/mini"]
# --models: the MoE gin and its dense twin below configs/models/ (default:
# Switch Mini, 8 experts in every other layer, top-1, and T5.1.1 Mini, the
# dense model of the same dims and so of equal active FLOPs per token).
# --repeats: A/B pairs (default 3); each pair runs both models as their own
# processes, dense first in odd pairs and MoE first in even ones, so that a
# change in the machine's load falls on both. Shapes are the main job's
# (configs/examples/bible/translate_en_es_demo.gin): batch 32, inputs 64,
# targets 64, vocab 8192 (BATCH, INPUTS, TARGETS, VOCAB override).
# scripts/bench/moe_compare.py prints both FLOP counts (bench/model/flops.h:
# the dense count, the MoE's router and dispatch / combine products on top),
# min / median ms per step and the MoE/dense ratios.
set -euo pipefail
cd "$(dirname "$0")/../.."
# Idle threads sleep, so CPU time per step tracks the work on a shared machine.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
source scripts/bench/model_common.bash
MODELS="moe/mini t5_1_1/mini"; STEPS=3; WARMUP=1; REPEATS=3; PEERS=""; PEER_DTYPES=""
OUT_JSONL=${OUT_JSONL:-/tmp/t5x_bench_moe.jsonl}
parse_suite_args moe "$@"
read -r -a pair <<< "$MODELS"
if [ ${#pair[@]} -ne 2 ] || [ -n "$PEERS" ]; then
  echo "scripts/bench.sh moe: --models takes two gin files below configs/models/ (MoE, then dense); no --peers" >&2
  exit 2
fi
for g in "${pair[@]}"; do
  [ -f "configs/models/$g.gin" ] || { echo "scripts/bench.sh moe: no configs/models/$g.gin" >&2; exit 2; }
done
: > "$OUT_JSONL"
build_model_bench
ARGS=(--mode train --gin.network.T5Config.vocab_size="${VOCAB:-8192}" --batch "${BATCH:-32}"
      --inputs "${INPUTS:-64}" --targets "${TARGETS:-64}" --steps "$STEPS" --warmup "$WARMUP")
echo "# $(date -u +%FT%TZ) isa=${ISA:-native} $("$BUILD_DIR/bin/t5x" cpu 2>/dev/null || true) $(uptime)" >&2
for r in $(seq "$REPEATS"); do
  order=("${pair[1]}" "${pair[0]}")
  (( r % 2 )) || order=("${pair[0]}" "${pair[1]}")
  for g in "${order[@]}"; do run_impl t5x --gin_file "configs/models/$g.gin" "${ARGS[@]}"; done
done
echo "# finished $(date -u +%FT%TZ) $(uptime)" >&2
python3 scripts/bench/moe_compare.py "$OUT_JSONL" "${ISA:-native}"
