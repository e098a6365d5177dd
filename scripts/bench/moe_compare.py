"""Reads the JSON lines of scripts/bench.sh moe (t5x_model_bench --mode train
of an MoE model and its dense twin, in A/B pairs) and prints markdown: both
FLOP counts per step (bench/model/flops.h), each model's ms per step (min /
median over the timed steps of all its processes), its value_and_grad and
optimizer parts, its CPU time per step (both threads; idle OpenMP threads
sleep under OMP_WAIT_POLICY=passive, so on a loaded machine this tracks the
work done while wall time tracks the load), and the MoE/dense ratios of both:
pooled median / median, min / min, and for wall time the median of the
per-pair ratios (k-th MoE process against the k-th dense one).

Usage: moe_compare.py FILE.jsonl [ISA]
"""
import json
import statistics
import sys


def summary(runs):
    ms = [x for r in runs for x in r["ms_all"]]
    cpu = [x for r in runs for x in r["cpu_ms"]]
    return dict(med=statistics.median(ms), min=min(ms), n=len(ms), cpu_med=statistics.median(cpu), cpu_min=min(cpu),
                grad=statistics.median([x for r in runs for x in r["ms_value_and_grad"]]),
                opt=statistics.median([x for r in runs for x in r["ms_optimizer"]]),
                load=[r["loadavg_1min"] for r in runs])


def main(path, isa="native"):
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    moe = [r for r in rows if "moe" in r]
    dense = [r for r in rows if "moe" not in r]
    if not moe or not dense:
        sys.exit(f"moe_compare.py: {path} needs runs of both an MoE and a dense model "
                 f"(got {len(moe)} MoE, {len(dense)} dense)")
    m0, d0 = moe[0], dense[0]
    f = m0
    # The precise fields (gflop_per_step has 2 decimals).
    dense_gf = d0["dense_gflop_per_step"]
    active = (f["dense_gflop_per_step"] + f["moe_router_gflop"] + f["moe_dispatch_combine_gflop"] +
              f["moe_experts_gflop"])
    print(f"\n### {m0['model']} vs {d0['model']} training step, batch {m0['batch']}, inputs {m0['inputs']}, "
          f"targets {m0['targets']}, {m0['dtype']}, {m0['threads']} threads, isa {isa}\n")
    stacks = ", ".join(f"{s} {f['moe'][s]['sparse_layers']} sparse layers, G={f['moe'][s]['groups']} "
                       f"S={f['moe'][s]['group_size']} C={f['moe'][s]['capacity']}"
                       for s in ("encoder", "decoder") if f["moe"][s]["sparse_layers"])
    print(f"FLOPs per step (matmuls, training = forward + backward): dense {dense_gf:.4g} GFLOP; "
          f"MoE active {active:.4g} = its dense count {f['dense_gflop_per_step']:.4g} "
          f"+ router {f['moe_router_gflop']:.4g} + dispatch/combine {f['moe_dispatch_combine_gflop']:.4g} "
          f"+ experts beyond the dense MLP {f['moe_experts_gflop']:.4g}; executed (experts over every capacity "
          f"slot) {f['moe_executed_gflop_per_step']:.4g}. E={f['moe']['experts']}, top-{f['moe']['selected']}, "
          f"{stacks}. Parameters: MoE {f['params']:,}, dense {d0['params']:,}.\n")
    sm, sd = summary(moe), summary(dense)
    print("| model | processes x steps | ms/step min / median | value_and_grad ms (median) | optimizer ms (median) "
          "| CPU ms/step min / median | GFLOP/step counted | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, s, runs, gf in ((m0["model"], sm, moe, active), (d0["model"], sd, dense, dense_gf)):
        print(f"| {name} | {len(runs)} x {s['n'] // len(runs)} | {s['min']:.1f} / {s['med']:.1f} | {s['grad']:.1f} "
              f"| {s['opt']:.1f} | {s['cpu_min']:.0f} / {s['cpu_med']:.0f} | {gf:.4g} | {', '.join(f'{x:.1f}' for x in s['load'])} |")
    pairs = [statistics.median(a["ms_all"]) / statistics.median(b["ms_all"]) for a, b in zip(moe, dense)]
    print(f"\nMoE/dense step time: median {sm['med'] / sd['med']:.2f}x, min {sm['min'] / sd['min']:.2f}x; "
          f"per pair {', '.join(f'{x:.2f}' for x in pairs)} (median {statistics.median(pairs):.2f}x); "
          f"CPU time per step: median {sm['cpu_med'] / sd['cpu_med']:.2f}x, min {sm['cpu_min'] / sd['cpu_min']:.2f}x. "
          f"Counted FLOPs MoE/dense: active {active / dense_gf:.3f}, "
          f"executed {f['moe_executed_gflop_per_step'] / dense_gf:.3f}.")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin", *sys.argv[2:3])
