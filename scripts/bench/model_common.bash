# Shared by scripts/bench/{train,decode,moe}.sh: builds t5x_model_bench, picks
# the peers' Python interpreters, runs one implementation and appends its JSON
# line to $OUT_JSONL. Sourced, not run.
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/t5x_model_bench"
THREADS=${THREADS:-$(nproc)}
# OpenMP's wait policy is the user's (libgomp's default unless set): idle
# threads spin a while, then sleep. It applies to t5x.cpp and PyTorch (both
# libgomp); JAX's thread pool ignores it. On free cores the default is what a
# user gets and the faster choice: with OMP_WAIT_POLICY=passive every parallel
# region wakes a sleeping thread, and a 2-thread batch-1 decode took 2x its
# default-policy time (docs/performance.md). On a loaded machine, where a
# spinning thread takes the core its partner needs, set
# OMP_WAIT_POLICY=passive (scripts/bench/moe.sh does, for its CPU-time ratios).
export OMP_NUM_THREADS=$THREADS

# BENCH_TARGETS: what to build (t5x_cli only prints the CPU line).
build_model_bench() {
  TARGETS="${BENCH_TARGETS:-t5x_model_bench t5x_cli}" scripts/build.sh >&2
}

# The peers run in the project's pinned venv (scripts/python_env.sh: torch,
# transformers, jax, optax from PyPI), so anyone reproduces the same table;
# TORCH_PY / JAX_PY override.
TORCH_PY=${TORCH_PY:-}
TORCH_ENV=()
pick_torch() {
  if [ -z "$TORCH_PY" ]; then TORCH_PY=$(scripts/python_env.sh); fi
  "$TORCH_PY" -c "import torch, transformers" 2>/dev/null
}
JAX_PY=${JAX_PY:-}
pick_jax() {
  if [ -z "$JAX_PY" ]; then JAX_PY=$(scripts/python_env.sh); fi
  "$JAX_PY" -c "import jax, optax" 2>/dev/null
}

# --isa avx2: every implementation capped at AVX2 (as an AVX2-only CPU runs):
# t5x.cpp's kernels (T5X_CPU_ISA) and oneDNN; PyTorch's ATen kernels and its
# oneDNN; XLA's code generation.
apply_isa_cap() {
  case ${1:-native} in
    native) ;;
    avx2)
      export T5X_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
      export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_cpu_max_isa=AVX2" ;;
    *) echo "bench: --isa must be native or avx2, got '$1'" >&2; exit 2 ;;
  esac
}

# run_impl <impl: t5x|torch|jax> <args...>: one process, its JSON line to $OUT_JSONL.
run_impl() {
  local impl=$1
  shift
  local line rc=0
  case $impl in
    t5x) line=$("$BIN" --threads "$THREADS" "$@" | tail -n1) || rc=$? ;;
    torch) line=$(env "${TORCH_ENV[@]}" "$TORCH_PY" bench/peers/torch_t5.py --threads "$THREADS" "$@" 2>/dev/null |
                  tail -n1) || rc=$? ;;
    jax) line=$("$JAX_PY" bench/peers/jax_t5.py --threads "$THREADS" "$@" 2>/dev/null | tail -n1) || rc=$? ;;
  esac
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "bench: $impl $* failed (rc=$rc)" >&2
    return 0
  fi
  echo "$line" >> "$OUT_JSONL"
  echo "$line" >&2
}

# t5x.cpp with ARGS, once in its configured dtype, or once per T5X_DTYPES.
run_t5x() {
  if [ -z "${T5X_DTYPES:-}" ]; then
    run_impl t5x "$@"
  else
    local dt
    for dt in $T5X_DTYPES; do run_impl t5x "$@" --dtype "$dt"; done
  fi
}

# Parses the options the train and decode suites share into MODELS, STEPS,
# WARMUP, REPEATS, PEERS, PEER_DTYPES, T5X_DTYPES, OPTIMIZER and OUT_JSONL (the caller
# sets defaults; T5X_DTYPES empty: t5x.cpp runs its configured dtype only).
parse_suite_args() {
  local suite=$1
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      --models) MODELS=$2; shift 2 ;;
      --steps) STEPS=$2; shift 2 ;;
      --warmup) WARMUP=$2; shift 2 ;;
      --repeats) REPEATS=$2; shift 2 ;;
      --peers) PEERS=$2; shift 2 ;;
      --peer-dtypes) PEER_DTYPES=$2; shift 2 ;;
      --t5x-dtypes) T5X_DTYPES=$2; shift 2 ;;
      --out) OUT_JSONL=$2; shift 2 ;;
      --isa) apply_isa_cap "$2"; ISA=$2; shift 2 ;;
      --optimizer) OPTIMIZER=$2; shift 2 ;;
      *) echo "usage: scripts/bench.sh $suite [--models M] [--steps N] [--warmup N] [--repeats N] [--peers P] [--peer-dtypes D] [--t5x-dtypes D] [--isa native|avx2] [--optimizer adafactor|adamw] [--out FILE]" >&2
         exit 2 ;;
    esac
  done
}
