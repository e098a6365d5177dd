#!/usr/bin/env bash
# suite: T5.1.1 training step, t5x.cpp vs PyTorch and JAX (ms/step, tokens/s, MFU, RSS)
# Usage: scripts/bench.sh train [--models "small tiny"] [--steps N] [--warmup N]
#          [--repeats N] [--peers "torch jax"] [--peer-dtypes "bfloat16 float32"]
#          [--t5x-dtypes "bfloat16 float32"] [--isa native|avx2] [--out FILE]
#          [--optimizer adafactor|adamw]
# Batch 8, inputs 128, targets 32 (BATCH, INPUTS, TARGETS override). Every
# implementation runs as its own process, one after the other, on the same
# shapes; each prints one JSON line (bench/model/model_bench.cpp,
# bench/peers/*.py), and bench/peers/compare.py prints the table with
# ratios. t5x.cpp runs its configured dtype (ACTIVATION_DTYPE bfloat16), or
# each of --t5x-dtypes (the first is the row the ratios are taken for);
# peers run every dtype in --peer-dtypes and the table compares with each.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/model_common.bash
MODELS="small tiny"; STEPS=5; WARMUP=2; REPEATS=1; PEERS="torch jax"; PEER_DTYPES="bfloat16 float32"; T5X_DTYPES=""
OPTIMIZER=adafactor  # adamw: AdamW after clip_by_global_norm(1.0) in every implementation
OUT_JSONL=${OUT_JSONL:-/tmp/t5x_bench_train.jsonl}
parse_suite_args train "$@"
: > "$OUT_JSONL"
build_model_bench
if [[ " $PEERS " == *" torch "* ]]; then
  pick_torch || { echo "bench: PyTorch did not import; skipping that peer" >&2; PEERS=${PEERS/torch/}; }
fi
if [[ " $PEERS " == *" jax "* ]]; then
  pick_jax || { echo "bench: JAX did not import; skipping that peer" >&2; PEERS=${PEERS/jax/}; }
fi
SHAPE=(--batch "${BATCH:-8}" --inputs "${INPUTS:-128}" --targets "${TARGETS:-32}" --steps "$STEPS" --warmup "$WARMUP"
       --optimizer "$OPTIMIZER")
echo "# $(date -u +%FT%TZ) isa=${ISA:-native} $("$BUILD_DIR/bin/t5x" cpu 2>/dev/null || true) $(uptime)" >&2
for model in $MODELS; do
  for r in $(seq "$REPEATS"); do
    run_t5x --mode train --model "$model" "${SHAPE[@]}"
    for peer in $PEERS; do
      for dt in $PEER_DTYPES; do run_impl "$peer" --mode train --model "$model" --dtype "$dt" "${SHAPE[@]}"; done
    done
  done
done
python3 bench/peers/compare.py "$OUT_JSONL"
