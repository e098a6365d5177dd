#!/usr/bin/env bash
# Installs the Debian packages t5x.cpp builds and runs with, when missing.
# Usage: scripts/deps.sh [--data] [--fuzz] [--arm64]
#   --data adds the corpora and tools of the main job;
#   --fuzz adds clang and its libFuzzer / sanitizer runtimes (scripts/fuzz.sh);
#   --arm64 adds the aarch64 cross build of scripts/arm64.sh: dpkg's arm64
#     architecture, the cross compiler, qemu-user and the :arm64 libraries;
#     the arm64 -dev packages of oneDNN, SentencePiece, zlib, zstd, leveldb
#     and snappy are unpacked into the user's cache instead (see the end).
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
arm64=0
for arg in "$@"; do
  case "$arg" in
    --data) pkgs+=(diatheke sword-text-web sword-text-kjv sword-text-sparv wordnet-base gnuplot-nox jq) ;;
    --fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
    # Of jemalloc only the library: its -dev package would replace the
    # amd64 one, which the native build needs.
    --arm64) arm64=1
             pkgs+=(g++-aarch64-linux-gnu qemu-user qemu-user-binfmt
                    libhwy-dev:arm64 libgtest-dev:arm64 libdnnl2:arm64 libfftw3-dev:arm64
                    libjemalloc2:arm64 libgomp1:arm64 libstdc++6:arm64
                    zlib1g:arm64 libzstd1:arm64 libleveldb1d:arm64 libsnappy1v5:arm64) ;;
    *) echo "usage: scripts/deps.sh [--data] [--fuzz] [--arm64]" >&2; exit 64 ;;
  esac
done
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
if ((arm64)) && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "[deps] dpkg --add-architecture arm64"
  $SUDO dpkg --add-architecture arm64
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  # --no-remove: never trade an amd64 package the native build needs for its
  # arm64 twin.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}"
fi
if ((arm64)); then
  # -dev packages that cannot be installed beside their amd64 versions are
  # unpacked into the user's cache: oneDNN's (the two dnnl_config.h differ,
  # and its :arm64 library is installed above) and SentencePiece's (neither
  # its library nor its -dev package is multi-arch). So are the checkpoint
  # formats' (zlib, zstd, leveldb, snappy): they are multi-arch, but through
  # libc6-dev:arm64 they pull arm64 packages whose versions must equal the
  # amd64 ones, and apt would upgrade the host's packages to match.
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/t5x.cpp
  unpack() {  # unpack DIR MARKER PACKAGE...: PACKAGEs (:arm64) into $cache/DIR
    local dir=$cache/$1 marker=$2 tmp
    shift 2
    [[ -f $dir/$marker ]] && return
    tmp=$(mktemp -d)
    chmod 777 "$tmp"  # apt-get download runs as _apt where it can
    (cd "$tmp" && apt-get download -qq "$@")
    mkdir -p "$dir"
    for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$dir"; done
    rm -rf "$tmp"
  }
  lib=usr/lib/aarch64-linux-gnu
  unpack arm64-dnnl $lib/cmake/dnnl/dnnl-config.cmake libdnnl-dev:arm64
  for so in /$lib/libdnnl.so.*; do ln -sf "$so" "$cache/arm64-dnnl/$lib/"; done
  unpack arm64-sentencepiece $lib/libsentencepiece.so.0 libsentencepiece0:arm64 libsentencepiece-dev:arm64
  sed -i "s|^prefix=.*|prefix=$cache/arm64-sentencepiece/usr|" "$cache/arm64-sentencepiece/$lib/pkgconfig/sentencepiece.pc"
  unpack arm64-storage $lib/cmake/leveldb/leveldbConfig.cmake \
    zlib1g-dev:arm64 libzstd-dev:arm64 libleveldb-dev:arm64 libsnappy-dev:arm64
  # Their libraries are the ones installed above (the links in the -dev
  # packages are relative).
  for so in /$lib/lib{z,zstd,leveldb,snappy}.so.*; do ln -sf "$so" "$cache/arm64-storage/$lib/"; done
  sed -i -e "s|^prefix=.*|prefix=$cache/arm64-storage/usr|" \
    -e 's|^libdir=${exec_prefix}/lib$|libdir=${exec_prefix}/lib/aarch64-linux-gnu|' \
    "$cache/arm64-storage/$lib"/pkgconfig/*.pc
fi
