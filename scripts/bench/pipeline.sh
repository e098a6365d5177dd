#!/usr/bin/env bash
# suite: seqio input pipeline: C++ examples/s and tokens/s on 1 and 2 threads, then t5xcpp.seqio (Python) against seqio 0.0.20 on TensorFlow (JSON lines, ratio)
# Usage: scripts/bench.sh pipeline [--examples N] [--threads T]
# Part 1 builds (or updates) build/bin/seqio_pipeline_bench (BUILD_DIR overrides
# build/) and passes it the arguments. Part 2 (PIPELINE_VS_SEQIO=0 skips it)
# builds the Python module t5xcpp.seqio and times the same task and converter
# through it and through seqio 0.0.20 from PyPI (in its own venv, made once:
# scripts/bench/seqio-requirements.txt, ~/.cache/t5x.cpp/bench-seqio-<hash>);
# PIPELINE_EPOCHS (default 20) epochs of gpl3_lines_copy, see pipeline_vs_seqio.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/bin/seqio_pipeline_bench"
# Build (or bring up to date) the benchmark like scripts/build.sh does (T5X_ARCH etc.).
TARGETS=seqio_pipeline_bench scripts/build.sh >&2
SEQIO_DATA_ROOT=${SEQIO_DATA_ROOT:-$PWD} "$BIN" "$@"
[[ "${PIPELINE_VS_SEQIO:-1}" == 0 ]] && exit 0

T5X_PYTHON=${T5X_PYTHON:-$(scripts/python_env.sh)}
TARGETS=t5xcpp_seqio T5X_PYTHON=$T5X_PYTHON scripts/build.sh -DT5X_PYTHON_MODULE=ON >&2
req=scripts/bench/seqio-requirements.txt
venv="${T5X_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/t5x.cpp}/bench-seqio-$(sha256sum "$req" | cut -c1-12)"
if [[ ! -f "$venv/.complete" ]]; then
  echo "[bench] creating $venv from $req (PyPI: seqio 0.0.20, TensorFlow; once)" >&2
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
  touch "$venv/.complete"
fi
epochs=${PIPELINE_EPOCHS:-20}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for threads in 1 2; do
  PYTHONPATH="$BUILD_DIR/python" "$T5X_PYTHON" scripts/bench/pipeline_vs_seqio.py t5xcpp "$PWD" "$epochs" "$threads" |
    tee -a "$out"
done
"$venv/bin/python" scripts/bench/pipeline_vs_seqio.py seqio "$PWD" "$epochs" | tee -a "$out"
# The ratio of tokens/s, each t5xcpp run against seqio (the same task and converter).
"$T5X_PYTHON" - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peer = next(r for r in rows if r["impl"] == "seqio")
for r in rows:
    if r["impl"] == "t5xcpp":
        same = r["sha256"] == peer["sha256"]
        print(json.dumps({"compare": "t5xcpp.seqio / seqio 0.0.20", "threads": r["threads"],
                          "tokens_per_s_ratio": round(r["tokens_per_s"] / peer["tokens_per_s"], 2),
                          "steady_tokens_per_s_ratio": round(r["steady_tokens_per_s"] / peer["steady_tokens_per_s"], 2),
                          "same_batches": same}))
PY
