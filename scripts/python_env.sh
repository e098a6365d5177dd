#!/usr/bin/env bash
# Makes (once) the Python environment of the interop checks and prints its
# interpreter: a venv from PyPI with the pinned versions of
# scripts/python-requirements.txt (tensorstore, zarr, msgpack, TensorBoard,
# safetensors, torch, transformers: the real readers of what we write).
# The venv lives outside the checkout, keyed by the requirements' hash, so
# clones and CI runs share it: ${T5X_VENV_ROOT:-~/.cache/t5x.cpp}/venv-<hash>.
# Needs python3 and python3-venv (scripts/deps.sh). Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
req=scripts/python-requirements.txt
hash=$(sha256sum "$req" | cut -c1-12)
root=${T5X_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/t5x.cpp}
venv="$root/venv-$hash"
if [[ ! -f "$venv/.complete" ]]; then
  echo "[python_env] creating $venv from $req (PyPI; several GB with torch, once)" >&2
  rm -rf "$venv"
  mkdir -p "$root"
  /usr/bin/python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" >&2
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
