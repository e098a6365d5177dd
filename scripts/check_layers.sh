#!/usr/bin/env bash
# The layering rules of docs/architecture.md that a grep can check (issue 16's
# acceptance): the op layer (src/ops) reaches the CPU backend only through the
# device seam (backend/kernels.h, backend/device.h) and holds no intrinsic;
# no source chooses code by a compiler ISA macro (kernels are chosen at run
# time by Highway's dispatch). Run by ctest (ops_layering_check); prints each
# offending line and exits 1.
# Usage: scripts/check_layers.sh [source root]
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root" || exit 2
[ -d src/ops ] || { echo "check_layers: no src/ops below $root" >&2; exit 2; }
status=0
report() {
  local what=$1 hits=$2
  if [ -n "$hits" ]; then
    echo "check_layers: $what:" >&2
    echo "$hits" >&2
    status=1
  fi
}
report "src/ops names the CPU backend or an intrinsic (move the loop to src/backend/cpu/<family>.cpp behind backend/kernels.h)" \
  "$(grep -rnE 'backend/cpu|__AVX512|_mm512|_mm256|_mm_|immintrin|__m256|__m512' src/ops)"
report "src/ops includes a backend header other than the seam (backend/kernels.h, backend/device.h)" \
  "$(grep -rnE '#include "backend/' src/ops | grep -vE '#include "backend/(kernels|device)\.h"')"
report "a source chooses code by a compiler ISA macro (use the Highway dispatch, backend/cpu/simd.h)" \
  "$(grep -rnE '#[[:space:]]*(if|ifdef|ifndef|elif).*__(AVX|AVX2|AVX512[A-Z_]*|FMA|SSE[0-9_]*|F16C)__' src)"
[ $status -eq 0 ] && echo "check_layers: ok"
exit $status
