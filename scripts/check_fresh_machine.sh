#!/usr/bin/env bash
# Runs the README's two set-up commands, scripts/demo.sh and scripts/test.sh,
# on a fresh Debian 12 (bookworm) made by debootstrap (minbase: less than any
# real install has), in a chroot, and prints each stage's time. It checks
# that the project's own scripts install everything they need.
#
#   sudo scripts/check_fresh_machine.sh [ROOT]     (default /var/tmp/t5x-fresh)
#
# ROOT is removed and made anew. The committed HEAD is cloned into it (commit
# first). Environment:
#   DEMO_STEPS      training steps of the demo (default 20)
#   MIRROR          Debian mirror (default: the first URI of this machine's apt sources)
#   SHARE_CACHES=0  do not share this machine's ccache and pip download cache
#                   (default 1: a cold build takes ~20 min on 2 cores)
#   KEEP=1          leave ROOT in place afterwards (default: removed on success)
#   ARM64=1         then also scripts/arm64.sh (CI's ARM leg: every
#                   component's tests but MPI's and the Python module's,
#                   cross-compiled for aarch64, run under qemu-user)
# What the chroot gets from this machine besides the clone: its network
# settings (resolver, apt sources and options, trusted CA certificates, pip
# configuration), which belong to the machine, not to the project; and, with
# SHARE_CACHES, the caches above (caches only: every package is installed
# into the chroot by the project's scripts).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
ROOT=${1:-/var/tmp/t5x-fresh}
DEMO_STEPS=${DEMO_STEPS:-20}
SHARE_CACHES=${SHARE_CACHES:-1}
if [[ $(id -u) -ne 0 ]]; then echo "check_fresh_machine.sh: run as root (debootstrap, chroot, mounts)" >&2; exit 1; fi
if [[ -z "${MIRROR:-}" ]]; then
  MIRROR=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources \
             /etc/apt/sources.list.d/*.list 2>/dev/null | grep -v security | head -1 | awk '{print $2}' || true)
  MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi

t_start=$(date +%s)
times=()
stage_begin() { current_stage=$1; t_stage=$(date +%s); printf '\n[fresh %s +%ds] %s\n' "$(date +%H:%M:%S)" $((t_stage - t_start)) "$1"; }
stage_end() { local d=$(( $(date +%s) - t_stage )); times+=("$(printf '%-44s %4d min %02d s' "$1" $((d / 60)) $((d % 60)))"); }

mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null || true; done
}
summary() {
  local rc=$?
  cleanup
  if ((rc != 0)); then
    echo
    echo "check_fresh_machine.sh: FAILED (exit $rc) in: ${current_stage:-setup}; stages done:"
    printf '  %s\n' "${times[@]}"
  fi
}
trap summary EXIT
bind() {  # bind SRC DST (inside ROOT)
  mkdir -p "$ROOT$2"
  mount --bind "$1" "$ROOT$2"
  mounts+=("$ROOT$2")
}

# Removes ROOT only when nothing is mounted below it (a bind mount of /dev or
# of the caches must never be deleted through).
remove_root() {
  [[ -e "$ROOT" ]] || return 0
  for m in $(awk -v r="$ROOT/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" || true; done
  if mountpoint -q "$ROOT"; then umount -l "$ROOT"; fi
  if awk -v r="$ROOT/" 'index($2, r) == 1 {found = 1} END {exit !found}' /proc/mounts; then
    echo "check_fresh_machine.sh: something is still mounted under $ROOT; not removing it" >&2
    return 1
  fi
  rm -rf --one-file-system "$ROOT"
}

command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
remove_root

stage_begin "debootstrap bookworm (minbase) from $MIRROR into $ROOT"
debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR" > /tmp/t5x-fresh-debootstrap.log 2>&1 ||
  { tail -20 /tmp/t5x-fresh-debootstrap.log; exit 1; }
stage_end "debootstrap (minbase)"

# The machine's network settings.
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true
rm -f "$ROOT/etc/apt/sources.list"
cp -a /etc/apt/sources.list.d/. "$ROOT/etc/apt/sources.list.d/" 2>/dev/null || true
[[ -f /etc/apt/sources.list ]] && cp /etc/apt/sources.list "$ROOT/etc/apt/sources.list"
find "$ROOT/etc/apt/sources.list.d" -name '*disabled*' -delete
[[ -n "$(ls "$ROOT/etc/apt/sources.list.d" 2>/dev/null)" || -f "$ROOT/etc/apt/sources.list" ]] ||
  echo "deb $MIRROR bookworm main" > "$ROOT/etc/apt/sources.list"
for f in /etc/apt/apt.conf.d/*; do
  grep -qiE 'Acquire|proxy' "$f" 2>/dev/null && cp "$f" "$ROOT/etc/apt/apt.conf.d/"
done
mkdir -p "$ROOT/etc/ssl/certs" "$ROOT/usr/local/share/ca-certificates"
cp -L /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/ca-certificates.crt" 2>/dev/null || true
cp -a /usr/local/share/ca-certificates/. "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$ROOT/etc/pip.conf"

# The chroot's / a mount point, as on a real machine: `ip netns exec` and
# `unshare --mount` (the multi-host and full-disk tests) change the
# propagation of /, which fails on a plain directory.
mount --bind "$ROOT" "$ROOT" && mounts+=("$ROOT")
bind /proc /proc
bind /sys /sys
bind /dev /dev
bind /dev/pts /dev/pts
mkdir -p "$ROOT/dev/shm"
mount -t tmpfs -o size=4g tmpfs "$ROOT/dev/shm" && mounts+=("$ROOT/dev/shm")
if [[ "$SHARE_CACHES" == 1 ]]; then
  mkdir -p "${CCACHE_DIR:-$HOME/.cache/ccache}" "$HOME/.cache/pip"
  bind "${CCACHE_DIR:-$HOME/.cache/ccache}" /root/.cache/ccache
  bind "$HOME/.cache/pip" /root/.cache/pip
fi

git clone -q "$repo" "$ROOT/root/t5x.cpp"
# The commit checked is the clone's: the checkout may move on while this runs.
checked=$(git -C "$ROOT/root/t5x.cpp" rev-parse --short HEAD)
echo "cloned $checked into $ROOT/root/t5x.cpp"
# The third-party test data the tests read from ../shared/fixtures (never
# committed), beside the clone as CI has it.
if [[ -d "$repo/../shared/fixtures" ]]; then
  mkdir -p "$ROOT/root/shared"
  cp -a "$repo/../shared/fixtures" "$ROOT/root/shared/"
fi

# A login-like, clean environment: nothing of this shell's leaks in.
in_chroot() {
  chroot "$ROOT" /usr/bin/env -i HOME=/root USER=root LOGNAME=root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CCACHE_DIR=/root/.cache/ccache PIP_CERT=/etc/ssl/certs/ca-certificates.crt DEMO_STEPS="$DEMO_STEPS" \
    /bin/bash -c "cd /root/t5x.cpp && $1"
}

stage_begin "README command 1: scripts/demo.sh (DEMO_STEPS=$DEMO_STEPS)"
in_chroot "scripts/demo.sh runs/demo < /dev/null" 2>&1 | tee /tmp/t5x-fresh-demo.log
stage_end "scripts/demo.sh (packages, build, data, train, test BLEU)"
grep -E '^\[demo [0-9:]+ \+[0-9]+s\]' /tmp/t5x-fresh-demo.log > /tmp/t5x-fresh-demo-stages.txt || true

stage_begin "README command 2: scripts/test.sh"
in_chroot "scripts/test.sh < /dev/null" 2>&1 | tee /tmp/t5x-fresh-test.log
stage_end "scripts/test.sh (venv, build of the tests, ctest)"

if [[ "${ARM64:-0}" == 1 ]]; then
  stage_begin "scripts/arm64.sh (CI's ARM leg)"
  in_chroot "scripts/arm64.sh < /dev/null" 2>&1 | tee /tmp/t5x-fresh-arm64.log
  stage_end "scripts/arm64.sh (cross build, qemu-user ctest)"
fi

echo
echo "Fresh Debian 12 chroot ($ROOT, $checked, $(nproc) cores):"
printf '  %s\n' "${times[@]}"
echo "  demo stages (their start, seconds from the demo's start):"
sed 's/^/    /' /tmp/t5x-fresh-demo-stages.txt
grep -E 'tests passed|tests failed' /tmp/t5x-fresh-test.log | sed 's/^/  ctest: /' || true
if [[ "${ARM64:-0}" == 1 ]]; then
  grep -E 'tests passed|tests failed' /tmp/t5x-fresh-arm64.log | sed 's/^/  ctest (aarch64): /' || true
fi
if [[ "${KEEP:-0}" != 1 ]]; then cleanup; mounts=(); remove_root; fi
echo "check_fresh_machine.sh: both README commands passed"
