#!/usr/bin/env bash
# suite: greedy decoding tokens/s at batch 1 and 8, t5x.cpp vs PyTorch and JAX
# Usage: scripts/bench.sh decode [--models "small tiny"] [--steps N] [--warmup N]
#          [--repeats N] [--peers "torch jax"] [--peer-dtypes "bfloat16 float32"]
#          [--t5x-dtypes "bfloat16 float32"] [--isa native|avx2] [--out FILE]
# Encodes 128 input tokens, then decodes 32 tokens greedily with the KV cache
# (no early stop at EOS), at batch 1 and 8 (BATCHES, INPUTS, TARGETS override). Every
# implementation runs as its own process, one after the other, on the same
# shapes; each prints one JSON line (bench/model/model_bench.cpp,
# bench/peers/*.py), and bench/peers/compare.py prints the table with
# ratios. t5x.cpp runs its configured dtype (ACTIVATION_DTYPE bfloat16), or
# each of --t5x-dtypes (the first is the row the ratios are taken for);
# peers run every dtype in --peer-dtypes and the table compares with each.
# KV_HEADS="2 1" adds t5x.cpp rows with grouped-query / multi-query decoders
# (model t5_1_1_<size>_kv<G>; no peer runs them).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/bench/model_common.bash
MODELS="small"; STEPS=5; WARMUP=2; REPEATS=1; PEERS="torch jax"; PEER_DTYPES="bfloat16 float32"; T5X_DTYPES=""
OUT_JSONL=${OUT_JSONL:-/tmp/t5x_bench_decode.jsonl}
parse_suite_args decode "$@"
: > "$OUT_JSONL"
build_model_bench
if [[ " $PEERS " == *" torch "* ]]; then
  pick_torch || { echo "bench: PyTorch did not import; skipping that peer" >&2; PEERS=${PEERS/torch/}; }
fi
if [[ " $PEERS " == *" jax "* ]]; then
  pick_jax || { echo "bench: JAX did not import; skipping that peer" >&2; PEERS=${PEERS/jax/}; }
fi
SHAPE=(--inputs "${INPUTS:-128}" --targets "${TARGETS:-32}" --steps "$STEPS" --warmup "$WARMUP")
echo "# $(date -u +%FT%TZ) isa=${ISA:-native} $("$BUILD_DIR/bin/t5x" cpu 2>/dev/null || true) $(uptime)" >&2
for model in $MODELS; do
  for b in ${BATCHES:-1 8}; do
    for r in $(seq "$REPEATS"); do
      run_t5x --mode decode --model "$model" --batch "$b" "${SHAPE[@]}"
      for g in ${KV_HEADS:-}; do
        run_impl t5x --mode decode --model "$model" --batch "$b" --num_kv_heads "$g" "${SHAPE[@]}"
      done
      for peer in $PEERS; do
        for dt in $PEER_DTYPES; do
          run_impl "$peer" --mode decode --model "$model" --batch "$b" --dtype "$dt" "${SHAPE[@]}"
        done
      done
    done
  done
done
python3 bench/peers/compare.py "$OUT_JSONL"
