# Shared by scripts/bench/{train,decode}.sh: builds t5x_model_bench, picks
# the peers' Python interpreters, runs one implementation and appends its JSON
# line to $OUT_JSONL. Sourced, not run.
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/t5x_model_bench"
THREADS=${THREADS:-$(nproc)}
# Idle OpenMP threads sleep instead of spinning: on a shared machine a
# spinning team member steals the core its partner needs (measured 4x slower
# 2-thread steps at load 6 with the default policy). Applies to t5x.cpp and
# PyTorch (both libgomp); JAX's thread pool ignores it.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMP_NUM_THREADS=$THREADS

build_model_bench() {
  TARGETS=t5x_model_bench scripts/build.sh >&2
}

# PyTorch: the pyenv/PATH python3 when it has torch + transformers (PyPI
# build), else Debian's python3-torch (OpenBLAS needs SkylakeX there).
TORCH_PY=${TORCH_PY:-}
TORCH_ENV=()
pick_torch() {
  if [ -n "$TORCH_PY" ]; then return 0; fi
  if python3 -c "import torch, transformers" 2>/dev/null; then
    TORCH_PY=python3
  elif /usr/bin/python3 -c "import torch, transformers" 2>/dev/null; then
    TORCH_PY=/usr/bin/python3
    TORCH_ENV=(OPENBLAS_CORETYPE=SkylakeX)
  else
    return 1
  fi
}
JAX_PY=${JAX_PY:-python3}

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

# Parses the options the train and decode suites share into MODELS, STEPS,
# WARMUP, REPEATS, PEERS, PEER_DTYPES and OUT_JSONL (the caller sets defaults).
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
      --out) OUT_JSONL=$2; shift 2 ;;
      *) echo "usage: scripts/bench.sh $suite [--models M] [--steps N] [--warmup N] [--repeats N] [--peers P] [--peer-dtypes D] [--out FILE]" >&2
         exit 2 ;;
    esac
  done
}
