#!/usr/bin/env bash
# The whole program on 64-bit ARM, MPI aside. Cross-compiles every component
# (src/*, the examples and the `t5x` and `seqio` programs) with its tests for
# aarch64 (Debian's g++-aarch64-linux-gnu and :arm64 libraries) and runs the
# tests under qemu-user: every SIMD kernel on NEON and on the portable EMU128
# target, the targets agreeing bitwise, as on x86; the op layer with its
# autodiff and fused ops; the mesh and its simulated communicator; the layers
# and MoE; seqio; the models, checkpoints, optimizers and trainer (kill and
# resume bitwise, the CLI); and the interop checks, where the Python packages
# on the host (x86-64) read back what the aarch64 programs wrote.
# Usage: scripts/arm64.sh [build-dir]    (default build-arm64)
# Needs Debian 12 (multiarch) and root or sudo: for apt, and to register
# qemu-aarch64 with binfmt_misc (gtest's death tests re-execute the binary).
# Not built here: MPI (the distributed tests), the Python module and the
# benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-arm64}
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"

scripts/deps.sh --arm64
# oneDNN's, SentencePiece's and the checkpoint formats' -dev packages,
# unpacked by deps.sh --arm64.
cache=${XDG_CACHE_HOME:-$HOME/.cache}/t5x.cpp
lib=$cache/arm64-dnnl/usr/lib/aarch64-linux-gnu
storage=$cache/arm64-storage/usr
export PKG_CONFIG_PATH=$cache/arm64-sentencepiece/usr/lib/aarch64-linux-gnu/pkgconfig:$storage/lib/aarch64-linux-gnu/pkgconfig

# qemu-user runs the binaries; the libraries are the multiarch ones under /
# (the cross toolchain's own libc in /usr/aarch64-linux-gnu is another
# version, and mixing the two hangs the first thread that starts).
export QEMU_LD_PREFIX=/
# (In a chroot binfmt_misc may be unmounted while the kernel already holds the
# entry: mount first, then register only what is missing.)
[[ -e /proc/sys/fs/binfmt_misc/register ]] ||
  $SUDO mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
[[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] ||
  $SUDO sh -c 'cat /usr/lib/binfmt.d/qemu-aarch64.conf > /proc/sys/fs/binfmt_misc/register'
[[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]] || {
  echo "[arm64] could not register qemu-aarch64 with binfmt_misc (/proc/sys/fs/binfmt_misc)" >&2
  exit 1
}

# The interop checks: what the aarch64 programs write, read back by the
# Python packages (x86-64, scripts/python_env.sh), as in scripts/test.sh.
T5X_PYTHON=${T5X_PYTHON:-$(scripts/python_env.sh)}
# ccache hits across clones (as scripts/build.sh).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# -L: leveldb's CMake package names snappy bare (-lsnappy). The install RPATH
# keeps the unpacked libraries' folders, for the installed programs that
# tests/examples/plugin_out_of_tree_test.sh runs.
cmake -S . -B "$B" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DT5X_COMPONENTS="core;backend;ops;mesh;spmd;nn;t5x;seqio;examples;apps" \
  -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DT5X_BUILD_BENCH=OFF -Ddnnl_DIR="$lib/cmake/dnnl" \
  -DCMAKE_PREFIX_PATH="$storage" -DCMAKE_EXE_LINKER_FLAGS="-L$storage/lib/aarch64-linux-gnu" \
  -DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON -DT5X_PYTHON="$T5X_PYTHON" \
  -DT5X_JEMALLOC_LIBRARY=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2 > /dev/null
cmake --build "$B" -j "${JOBS:-$(nproc)}"
cd "$B"
ctest -j "$(nproc)" --output-on-failure --timeout 900
