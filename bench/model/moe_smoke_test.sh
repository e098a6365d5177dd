#!/usr/bin/env bash
# ctest model_bench_moe_smoke: `scripts/bench.sh moe`'s two runs, on the toy
# configs (configs/models/moe/tiny.gin against t5_1_1/tiny.gin), one training
# step each. Checks the JSON lines, the MoE FLOP counts against hand-computed
# values (bench/model/flops.h), and that scripts/bench/moe_compare.py reads
# them. No timing is checked.
# Usage: moe_smoke_test.sh T5X_MODEL_BENCH PYTHON   (run from the source root)
set -euo pipefail
BIN=$1
PY=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
args=(--mode train --gin.network.T5Config.vocab_size=512 --batch 2 --inputs 8 --targets 8 --steps 1 --warmup 0
      --threads 1)
"$BIN" --gin_file configs/models/moe/tiny.gin "${args[@]}" > "$out/runs.jsonl"
"$BIN" --gin_file configs/models/t5_1_1/tiny.gin "${args[@]}" >> "$out/runs.jsonl"
"$PY" - "$out/runs.jsonl" <<'EOF'
import json, math, sys
moe, dense = [json.loads(l) for l in open(sys.argv[1])]
def eq(what, got, want):
    if got != want and not (isinstance(want, float) and math.isclose(got, want, rel_tol=1e-8)):
        sys.exit(f"{what}: got {got!r}, want {want!r}")
eq("moe model", moe["model"], "moe_tiny")
eq("dense model", dense["model"], "t5_1_1_tiny")
for r in (moe, dense):
    eq("steps", len(r["ms_all"]), 1)
    if not math.isfinite(r["loss"]) or r["loss"] <= 0:
        sys.exit(f"{r['model']}: loss {r['loss']}")
# tiny: embed M=8, 4 heads x 3, mlp 16 (gated GELU: P = 3*8*16 = 384), 2+2
# layers; vocab 512; 2 x (8 + 8) tokens. Dense count (flops.h t5_train_flops):
# encoder 184320 + decoder 294912 + logits 393216.
dense_flops = 872448e-9
eq("dense count", dense["dense_gflop_per_step"], dense_flops)
eq("moe's dense count", moe["dense_gflop_per_step"], dense_flops)
eq("params (4 experts instead of 1 MLP in 2 layers, + routers [8, 4])", moe["params"] - dense["params"],
   2 * (3 * 384 + 8 * 4))
# One sparse layer per stack (MIXED), E=4, top-1; 16 tokens -> G=4 groups
# (at least E) of S=4, capacity max(round(1.25*4/4), min 4) = 4.
stack = {"sparse_layers": 1, "groups": 4, "group_size": 4, "capacity": 4}
eq("moe dims", moe["moe"], {"experts": 4, "selected": 1, "expert_mlp": 16, "encoder": stack, "decoder": stack})
eq("router", moe["moe_router_gflop"], 2 * 6 * 16 * 8 * 4 * 1e-9)                   # 6*T*M*E per layer
eq("dispatch/combine", moe["moe_dispatch_combine_gflop"], 2 * 10 * 4 * 4 * 4 * 4 * 8 * 1e-9)  # 10*G*S*E*C*M
eq("experts beyond dense", moe["moe_experts_gflop"], 0)
eq("executed", moe["moe_executed_gflop_per_step"],
   (872448 + 6144 + 40960 + 2 * 6 * 384 * (4 * 4 * 4 - 16)) * 1e-9)   # + slack 6*P*(G*E*C - T)
EOF
"$PY" scripts/bench/moe_compare.py "$out/runs.jsonl" > "$out/table.md"
grep -q "MoE/dense step time: median" "$out/table.md" || { cat "$out/table.md"; exit 1; }
grep -q "executed (experts over every capacity slot) 0.001141" "$out/table.md" || { cat "$out/table.md"; exit 1; }
echo "moe smoke: ok"
