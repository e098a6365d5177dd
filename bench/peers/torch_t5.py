"""PyTorch peer: Hugging Face T5ForConditionalGeneration (T5.1.1 config built
locally, random init, nothing downloaded) on the CPU.

train: loss (cross entropy, mean over target tokens) + backward + Adafactor
(transformers.optimization.Adafactor, t5x-like settings: factored, parameter
scaling, decay 0.8, clipping 1.0, lr 0.01) on synthetic batches.
decode: greedy generate() of exactly --targets new tokens (EOS suppressed via
min_new_tokens) with the KV cache.
--dtype float32 runs everything in f32; --dtype bfloat16 runs the forward and
backward under torch.autocast("cpu", bfloat16) (parameters f32, matmuls in
bf16 on oneDNN/AMX), the closest match to t5x's ACTIVATION_DTYPE.
Prints one JSON line (bench/peers/common.py).
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
from transformers import T5Config, T5ForConditionalGeneration  # noqa: E402


def build(model_name):
    d = common.size(model_name)
    cfg = T5Config(vocab_size=d["vocab"], d_model=d["emb_dim"], d_kv=d["head_dim"], d_ff=d["mlp_dim"],
                   num_layers=d["num_encoder_layers"], num_decoder_layers=d["num_decoder_layers"],
                   num_heads=d["num_heads"], feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                   dropout_rate=0.0, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    return d, T5ForConditionalGeneration(cfg)


def make_optimizer(params, kind):
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, weight_decay=0.01), "torch.optim.AdamW+clip_grad_norm_"
    try:
        from transformers.optimization import Adafactor
        return Adafactor(params, lr=0.01, scale_parameter=True, relative_step=False, warmup_init=False,
                         decay_rate=-0.8, clip_threshold=1.0), "transformers.Adafactor"
    except ImportError:
        return torch.optim.Adafactor(params, lr=0.01, beta2_decay=-0.8), "torch.optim.Adafactor"


def main():
    a = common.parse_args()
    torch.set_num_threads(a.threads)
    d, model = build(a.model)
    g = torch.Generator().manual_seed(1234)
    bf16 = a.dtype == "bfloat16"
    ms = []
    if a.mode == "train":
        model.train()
        opt, opt_name = make_optimizer(model.parameters(), a.optimizer)
        for s in range(a.warmup + a.steps):
            enc = torch.randint(2, d["vocab"], (a.batch, a.inputs), generator=g)
            tgt = torch.randint(2, d["vocab"], (a.batch, a.targets), generator=g)
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model(input_ids=enc, labels=tgt)
            out.loss.backward()
            if a.optimizer == "adamw":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            dt = (time.perf_counter() - t0) * 1e3
            if s >= a.warmup:
                ms.append(dt)
        flops, naive = common.train_flops(d, a.batch, a.inputs, a.targets)
        tokens = a.batch * (a.inputs + a.targets)
        extra = {"optimizer": opt_name, "loss": round(float(out.loss), 4)}
    else:
        model.eval()
        with torch.inference_mode():
            for s in range(a.warmup + a.steps):
                enc = torch.randint(2, d["vocab"], (a.batch, a.inputs), generator=g)
                t0 = time.perf_counter()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    out = model.generate(input_ids=enc, attention_mask=torch.ones_like(enc), max_new_tokens=a.targets,
                                         min_new_tokens=a.targets, do_sample=False, num_beams=1)
                dt = (time.perf_counter() - t0) * 1e3
                assert out.shape[1] == a.targets + 1, out.shape  # start token + targets
                if s >= a.warmup:
                    ms.append(dt)
        flops, naive = common.decode_flops(d, a.batch, a.inputs, a.targets), 0.0
        tokens = a.batch * a.targets
        extra = {}
    extra["torch"] = torch.__version__
    common.report("pytorch", a.mode, a.model, a.dtype, a.batch, a.inputs, a.targets, a.threads, ms, flops, naive,
                  tokens, extra)


if __name__ == "__main__":
    main()
