"""Shared helpers of the peer benchmarks: T5.1.1 sizes, the FLOP formula
(the same as bench/model/flops.h), timing statistics and the JSON line."""
import argparse
import json
import os
import resource
import statistics

# configs/models/t5_1_1/*.gin
SIZES = {
    "tiny": dict(emb_dim=8, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, head_dim=3, mlp_dim=16),
    "small": dict(emb_dim=512, num_heads=6, num_encoder_layers=8, num_decoder_layers=8, head_dim=64, mlp_dim=1024),
    "base": dict(emb_dim=768, num_heads=12, num_encoder_layers=12, num_decoder_layers=12, head_dim=64, mlp_dim=2048),
}
VOCAB = 32128


def parse_args():
    """The command line every peer shares with t5x_model_bench."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["train", "decode"], default="train")
    ap.add_argument("--model", default="small")
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], default="bfloat16")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--inputs", type=int, default=128)
    ap.add_argument("--targets", type=int, default=32)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    # adamw: AdamW (lr 1e-4, weight decay 0.01) after clipping the global
    # gradient norm to 1.0, t5x's recipe for AdamW; adafactor: each peer's
    # t5x-like Adafactor (training only).
    ap.add_argument("--optimizer", choices=["adafactor", "adamw"], default="adafactor")
    return ap.parse_args()


def size(name):
    d = dict(SIZES[name])
    d["vocab"] = VOCAB
    return d


def train_flops(d, batch, li, lt):
    """(honest, naive) FLOPs of one training step; see bench/model/flops.h."""
    e, hk, mlp = d["emb_dim"], d["num_heads"] * d["head_dim"], d["mlp_dim"]
    attn_qo = attn_kv = 2 * e * hk
    mlp_p = 3 * e * mlp
    ti, tt = batch * li, batch * lt

    def attn(lq, lk):
        return 3 * 2 * (2 * lq * lk * hk) * batch

    enc = d["num_encoder_layers"] * (6 * (attn_qo + attn_kv + mlp_p) * ti + attn(li, li))
    dec = d["num_decoder_layers"] * (6 * (2 * attn_qo + attn_kv + mlp_p) * tt + 6 * attn_kv * ti
                                     + attn(lt, lt) + attn(lt, li))
    honest = enc + dec + 6 * e * d["vocab"] * tt
    enc_p = d["num_encoder_layers"] * (attn_qo + attn_kv + mlp_p + 2 * e) + e + d["num_heads"] * 32
    dec_p = d["num_decoder_layers"] * (2 * (attn_qo + attn_kv) + mlp_p + 3 * e) + e + d["num_heads"] * 32
    params = enc_p + dec_p + 2 * e * d["vocab"]
    return honest, 6 * params * (ti + tt)


def decode_flops(d, batch, li, steps):
    e, hk, mlp = d["emb_dim"], d["num_heads"] * d["head_dim"], d["mlp_dim"]
    mlp_p = 3 * e * mlp
    f = d["num_encoder_layers"] * (2 * (4 * e * hk + mlp_p) * batch * li + 4 * li * li * hk * batch)
    f += d["num_decoder_layers"] * 2 * (2 * e * hk) * batch * li
    for t in range(steps):
        f += d["num_decoder_layers"] * (2 * (6 * e * hk + mlp_p) * batch + 4 * (t + 1) * hk * batch
                                        + 4 * li * hk * batch)
        f += 2 * e * d["vocab"] * batch
    return f


def cpu_peak_gflops(threads):
    """cores x 64 FLOP/cycle (AVX-512, 2 FMA units) x 'cpu MHz' (bench/cpu_peak.h)."""
    mhz, avx512 = 0.0, False
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz") and not mhz:
                mhz = float(line.split(":")[1])
            if line.startswith("flags") and " avx512f" in line:
                avx512 = True
    return threads * (64 if avx512 else 32) * mhz / 1000.0


def report(impl, mode, model, dtype, batch, li, lt, threads, ms, flops, naive, tokens, extra=None):
    load = os.getloadavg()[0]
    med, mn = statistics.median(ms), min(ms)
    peak = cpu_peak_gflops(threads)
    out = {
        "impl": impl, "mode": mode, "model": "t5_1_1_" + model, "dtype": dtype, "batch": batch,
        "inputs": li, "targets": lt, "threads": threads, "steps": len(ms),
        "ms_median": round(med, 2), "ms_min": round(mn, 2), "ms_all": [round(x, 2) for x in ms],
        "tokens_per_s_median": round(tokens / (med / 1e3), 1), "tokens_per_s_max": round(tokens / (mn / 1e3), 1),
        "gflop_per_step": round(flops / 1e9, 2), "naive_gflop_per_step": round(naive / 1e9, 2),
        "gflops_median": round(flops / 1e9 / (med / 1e3), 1), "gflops_max": round(flops / 1e9 / (mn / 1e3), 1),
        "peak_gflops_fp32": round(peak, 1),
        "mfu_median": round(flops / 1e9 / (med / 1e3) / peak, 3), "mfu_max": round(flops / 1e9 / (mn / 1e3) / peak, 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "loadavg_1min": round(load, 2),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
    }
    if extra:
        out.update(extra)
    print(json.dumps(out), flush=True)
