"""Loads a `t5x ckpt export-hf` directory with transformers and compares its
logits with t5x.cpp's (written by t5x_ckpt_hf_logits) on the same inputs.

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
from transformers import T5ForConditionalGeneration


def check(hf_dir, logits_file, tol):
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    model = T5ForConditionalGeneration.from_pretrained(hf_dir, torch_dtype=torch.float32)
    model.eval()
    ref = load_file(logits_file)
    enc = ref["encoder_input_tokens"].long()
    dec_in = ref["decoder_input_tokens"].long()
    dec_tgt = ref["decoder_target_tokens"].long()
    with torch.no_grad():
        out = model(input_ids=enc, attention_mask=(enc > 0).long(),
                    decoder_input_ids=dec_in,
                    decoder_attention_mask=(dec_tgt > 0).long())
    got = out.logits.float()
    want = ref["logits"].float()
    if got.shape != want.shape:
        print(f"FAIL: logits shape {tuple(got.shape)} (transformers) vs {tuple(want.shape)} (t5x.cpp)")
        return 1
    diff = (got - want).abs().max().item()
    scale = want.abs().max().item()
    print(f"{cfg['feed_forward_proj']} tie={cfg['tie_word_embeddings']}: logits {tuple(got.shape)}, "
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
