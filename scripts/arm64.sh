#!/usr/bin/env bash
# The CPU backend on 64-bit ARM. Cross-compiles src/core and src/backend with
# their tests for aarch64 (Debian's g++-aarch64-linux-gnu and :arm64
# libraries) and runs the tests under qemu-user: every SIMD kernel on NEON and
# on the portable EMU128 target, the targets agreeing bitwise, as on x86.
# Usage: scripts/arm64.sh [build-dir]    (default build-arm64)
# Needs Debian 12 (multiarch) and root or sudo: for apt, and to register
# qemu-aarch64 with binfmt_misc (gtest's death tests re-execute the binary).
# The rest of the program (ops, models, data) is not built here.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build-arm64}
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"

# Packages. Two -dev packages cannot sit beside their amd64 versions, which
# the native build needs: libdnnl-dev (their dnnl_config.h differ) is unpacked
# into a private prefix below, and of jemalloc only the library is taken.
pkgs=(cmake make pkg-config ccache g++-aarch64-linux-gnu qemu-user qemu-user-binfmt
      libhwy-dev:arm64 libgtest-dev:arm64 libdnnl2:arm64 libfftw3-dev:arm64 libjemalloc2:arm64
      libgomp1:arm64 libstdc++6:arm64)
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "[arm64] dpkg --add-architecture arm64"
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[arm64] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  # --no-remove: never trade an amd64 package the native build needs for its arm64 twin.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}"
fi
dnnl=${XDG_CACHE_HOME:-$HOME/.cache}/t5x.cpp/arm64-dnnl
lib=$dnnl/usr/lib/aarch64-linux-gnu
if [[ ! -f $lib/cmake/dnnl/dnnl-config.cmake ]]; then
  tmp=$(mktemp -d)
  chmod 777 "$tmp"  # apt-get download runs as _apt where it can
  (cd "$tmp" && apt-get download -qq libdnnl-dev:arm64)
  mkdir -p "$dnnl"
  dpkg -x "$tmp"/libdnnl-dev_*_arm64.deb "$dnnl"
  rm -rf "$tmp"
fi
for so in /usr/lib/aarch64-linux-gnu/libdnnl.so.*; do ln -sf "$so" "$lib/"; done

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

cmake -S . -B "$B" -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DT5X_COMPONENTS="core;backend" -DT5X_BUILD_BENCH=OFF -Ddnnl_DIR="$lib/cmake/dnnl" \
  -DT5X_JEMALLOC_LIBRARY=/usr/lib/aarch64-linux-gnu/libjemalloc.so.2 > /dev/null
cmake --build "$B" -j "${JOBS:-$(nproc)}"
cd "$B"
ctest -j "$(nproc)" --output-on-failure --timeout 900
