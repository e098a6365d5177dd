"""Reads the JSON lines of scripts/bench.sh train|decode and prints a
markdown table per (mode, model, batch): each implementation's ms per step
(median / min over the timed steps of all its runs), tokens/s, achieved
GFLOP/s, MFU against the nominal fp32 peak and against the FMA peak t5x.cpp's
bench measured in the same run (the same for every row), peak RSS, the 1-minute load average, and
the speed-up over it of the first t5x.cpp row (tokens/s ratio, median and
best), also over other t5x.cpp dtypes when several ran."""
import json
import statistics
import sys
from collections import OrderedDict


def main(path):
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    groups = OrderedDict()
    for r in rows:
        groups.setdefault((r["mode"], r["model"], r["batch"], r["inputs"], r["targets"]), []).append(r)
    for (mode, model, batch, li, lt), rs in groups.items():
        impls = OrderedDict()
        for r in rs:
            impls.setdefault((r["impl"], r["dtype"]), []).append(r)
        agg = {}
        for key, runs in impls.items():
            ms = [x for r in runs for x in r["ms_all"]]
            tok = runs[0]["tokens_per_s_median"] * runs[0]["ms_median"] / 1e3  # tokens per step
            gf = runs[0]["gflop_per_step"]
            agg[key] = dict(med=statistics.median(ms), min=min(ms), tok=tok, gf=gf,
                            naive=runs[0].get("naive_gflop_per_step", 0), peak=runs[0]["peak_gflops_fp32"],
                            rss=max(r["peak_rss_mib"] for r in runs), load=[r["loadavg_1min"] for r in runs],
                            threads=runs[0]["threads"])
        base_key = next((k for k in agg if k[0] == "t5x.cpp"), None)
        base = agg[base_key] if base_key else None
        what = "training step" if mode == "train" else f"greedy decode of {lt} tokens"
        a0 = next(iter(agg.values()))
        fma = next((r["fma_gflops_measured"] for r in rs if r.get("fma_gflops_measured")), None)
        print(f"\n### {model} {what}, batch {batch}, inputs {li}, targets {lt} "
              f"({a0['gf']:.2f} GFLOP per step counted; naive 6·N·D {a0['naive']:.2f}; "
              f"peak {a0['peak']:.1f} GFLOP/s fp32 nominal"
              + (f", {fma:.1f} measured FMA" if fma else "") + f", {a0['threads']} threads)\n")
        print("| impl | dtype | ms/step median / min | tokens/s median / best | GFLOP/s median / best "
              "| MFU median / best | MFU of measured FMA peak | peak RSS MiB | load (1 min) | t5x.cpp "
              f"{base_key[1] if base_key else ''} speed-up median / best |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for (impl, dt), v in agg.items():
            sp = "" if base is None or (impl, dt) == base_key else \
                f"{v['med'] / base['med']:.2f}x / {v['min'] / base['min']:.2f}x"
            print(f"| {impl} | {dt} | {v['med']:.1f} / {v['min']:.1f} | {v['tok'] / v['med'] * 1e3:.1f} / "
                  f"{v['tok'] / v['min'] * 1e3:.1f} | {v['gf'] / v['med'] * 1e3:.1f} / {v['gf'] / v['min'] * 1e3:.1f} | "
                  f"{v['gf'] / v['med'] * 1e3 / v['peak']:.3f} / {v['gf'] / v['min'] * 1e3 / v['peak']:.3f} | "
                  + (f"{v['gf'] / v['med'] * 1e3 / fma:.3f} / {v['gf'] / v['min'] * 1e3 / fma:.3f} | " if fma else "| ")
                  + f"{v['rss']:.0f} | {', '.join(f'{x:.1f}' for x in v['load'])} | {sp} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin")
