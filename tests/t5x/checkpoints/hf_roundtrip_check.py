"""Loads a `t5x ckpt export-hf` directory with transformers and compares its
logits with t5x.cpp's (written by t5x_ckpt_hf_logits) on the same inputs.
A config.json of model_type switch_transformers loads as
SwitchTransformersForConditionalGeneration (its routing is also reported:
tokens per expert in each sparse layer, and tokens over expert_capacity),
mt5 as MT5ForConditionalGeneration, umt5 as UMT5ForConditionalGeneration.

usage: hf_roundtrip_check.py [--tolerance=T] HF_DIR LOGITS.safetensors [HF_DIR LOGITS ...]
Needs torch, transformers and safetensors (PyPI). Exit 0 when, for every
pair, the largest absolute difference of the logits is within T (default
1e-4) and each sequence's log-likelihood of its targets (the sum over
non-padding targets of log_softmax(logits)[target], as `t5x score` sums it)
agrees within 1e-4 relative.
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file
from transformers import (MT5ForConditionalGeneration, SwitchTransformersForConditionalGeneration,
                          T5ForConditionalGeneration, UMT5ForConditionalGeneration)

MODEL_CLASSES = {"switch_transformers": SwitchTransformersForConditionalGeneration,
                 "mt5": MT5ForConditionalGeneration, "umt5": UMT5ForConditionalGeneration}


def check(hf_dir, logits_file, tol):
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    switch = cfg.get("model_type") == "switch_transformers"
    cls = MODEL_CLASSES.get(cfg.get("model_type"), T5ForConditionalGeneration)
    model = cls.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    ref = load_file(logits_file)
    enc = ref["encoder_input_tokens"].long()
    dec_in = ref["decoder_input_tokens"].long()
    dec_tgt = ref["decoder_target_tokens"].long()
    with torch.no_grad():
        out = model(input_ids=enc, attention_mask=(enc > 0).long(),
                    decoder_input_ids=dec_in,
                    decoder_attention_mask=(dec_tgt > 0).long(),
                    **({"output_router_logits": True} if switch else {}))
    if switch and not report_routing(out, cfg):
        return 1
    got = out.logits.float()
    want = ref["logits"].float()
    if got.shape != want.shape:
        print(f"FAIL: logits shape {tuple(got.shape)} (transformers) vs {tuple(want.shape)} (t5x.cpp)")
        return 1
    diff = (got - want).abs().max().item()
    scale = want.abs().max().item()
    act = cfg.get("feed_forward_proj", cfg.get("dense_act_fn"))
    print(f"{cfg.get('model_type')} {act} tie={cfg['tie_word_embeddings']}: logits {tuple(got.shape)}, "
          f"max |t5x.cpp - transformers| = {diff:.3e} (max |logit| {scale:.3f}, tolerance {tol:g})")
    if scale < 1e-3:
        print("FAIL: logits are all near zero; the comparison would prove nothing")
        return 1
    if diff > tol:
        print("FAIL: difference above tolerance")
        return 1

    def log_likelihood(logits):
        lp = torch.log_softmax(logits.double(), dim=-1)
        tok = lp.gather(-1, dec_tgt.unsqueeze(-1)).squeeze(-1)
        return (tok * (dec_tgt > 0).double()).sum(-1)

    ll_got, ll_want = log_likelihood(got), log_likelihood(want)
    rel = ((ll_got - ll_want).abs() / ll_want.abs().clamp_min(1e-12)).max().item()
    print(f"  log-likelihoods {[round(v, 4) for v in ll_want.tolist()]}: "
          f"max relative difference {rel:.3e} (tolerance 1e-4)")
    if rel > 1e-4:
        print("FAIL: log-likelihoods differ")
        return 1
    return 0


def report_routing(out, cfg):
    """Prints each sparse layer's tokens per expert (top-1 of the router
    logits, padding included); False when a token was over expert_capacity
    (transformers would drop it: the comparison assumes no drops) or when
    every token went to one expert (the experts' mapping would go untested)."""
    ok, spread = True, False
    for side in ("encoder", "decoder"):
        logits = getattr(out, f"{side}_router_logits", None) or ()
        for i, lg in enumerate(logits):
            if lg is None or lg.dim() != 3:
                continue
            top = lg.argmax(-1)  # [batch, length]
            counts = torch.stack([(top == e).sum(-1) for e in range(cfg["num_experts"])], -1)  # [batch, E]
            print(f"  {side} router {i}: tokens per expert {counts.tolist()}")
            spread |= bool((counts.sum(0) > 0).sum() > 1)
            if counts.max().item() > cfg["expert_capacity"]:
                print(f"FAIL: more than expert_capacity = {cfg['expert_capacity']} tokens of a sequence "
                      "chose one expert; transformers drops them, t5x's per-group capacity differs")
                ok = False
    if not spread:
        print("FAIL: every token went to one expert")
        ok = False
    return ok


def main():
    args = sys.argv[1:]
    tol = 1e-4
    if args and args[0].startswith("--tolerance="):
        tol = float(args.pop(0).split("=", 1)[1])
    if not args or len(args) % 2:
        print(__doc__)
        return 64
    failures = 0
    for i in range(0, len(args), 2):
        failures += check(args[i], args[i + 1], tol)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
