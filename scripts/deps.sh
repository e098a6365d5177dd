#!/usr/bin/env bash
# Installs the Debian packages t5x.cpp builds and runs with, when missing.
# Usage: scripts/deps.sh [--data] [--fuzz]
#   --data adds the corpora and tools of the main job;
#   --fuzz adds clang and its libFuzzer / sanitizer runtimes (scripts/fuzz.sh).
set -euo pipefail
# ocl-icd-opencl-dev: Debian's oneDNN CMake package (dnnl-config.cmake) looks
# for OpenCL, which libdnnl-dev only recommends. python3-venv: the interop
# checks' venv (scripts/python_env.sh). python3-dev, pybind11-dev: the Python
# module t5xcpp.seqio (python/). iproute2: `ip netns` of the multi-host
# test (tests/t5x/trainer/multihost_netns_test.sh). libjemalloc-dev: the
# programs' malloc (cmake/t5x_helpers.cmake, t5x_link_jemalloc).
pkgs=(cmake g++ make ccache pkg-config
      libdnnl-dev ocl-icd-opencl-dev libomp-dev
      libsentencepiece-dev sentencepiece
      libmsgpack-dev libmsgpack-cxx-dev nlohmann-json3-dev
      zlib1g-dev libzstd-dev
      libprotobuf-dev protobuf-compiler libleveldb-dev libsnappy-dev
      libcli11-dev libhwy-dev libfftw3-dev
      libopenmpi-dev openmpi-bin iproute2 libjemalloc-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      python3 python3-venv python3-dev pybind11-dev)
for arg in "$@"; do
  case "$arg" in
    --data) pkgs+=(diatheke sword-text-web sword-text-kjv sword-text-sparv wordnet-base gnuplot-nox jq) ;;
    --fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
    *) echo "usage: scripts/deps.sh [--data] [--fuzz]" >&2; exit 64 ;;
  esac
done
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
