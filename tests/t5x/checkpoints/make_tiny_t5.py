"""Writes a tiny random T5ForConditionalGeneration (transformers) for
`t5x ckpt import-hf` in run_hf_t5_import.cmake, in one of the logits forms
transformers 5 computes (its T5Config always ties lm_head to shared.weight
unless the file holds lm_head.weight, and scales the decoder output by
d_model^-0.5 when scale_decoder_outputs, else tie_word_embeddings != false):

  v5_t511   T5Config(tie_word_embeddings=False) saved by save_pretrained:
            config tie true + scale_decoder_outputs false, no lm_head in the
            file -> logits = decoder_out @ shared.T, unscaled
  v5_t510   T5Config() (relu) saved by save_pretrained -> scaled, shared
  v4_t511   a transformers-4 style file: tie_word_embeddings false (no
            scale_decoder_outputs) and its own lm_head.weight
  v4_t511_f64  v4_t511 written in float64 (import casts to float32)
  v5_mt5    MT5ForConditionalGeneration (T5.1.1's names; transformers' MT5
            never scales the decoder output)
  v5_umt5   UMT5ForConditionalGeneration(tie_word_embeddings=False): a
            relative-position table in every layer's self-attention
  v4_umt5   v5_umt5 as a transformers-4 file (its own lm_head.weight)

usage: make_tiny_t5.py OUT_DIR FORM
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import (MT5Config, MT5ForConditionalGeneration, T5Config, T5ForConditionalGeneration, UMT5Config,
                          UMT5ForConditionalGeneration)


def main():
    out, form = sys.argv[1:]
    torch.manual_seed(7)
    gated = form != "v5_t510"
    config_cls, model_cls = T5Config, T5ForConditionalGeneration
    if form.endswith("_mt5"):
        config_cls, model_cls = MT5Config, MT5ForConditionalGeneration
    elif form.endswith("_umt5"):
        config_cls, model_cls = UMT5Config, UMT5ForConditionalGeneration
    cfg = config_cls(vocab_size=96, d_model=32, d_ff=48, d_kv=8, num_heads=4, num_layers=2, num_decoder_layers=2,
                     feed_forward_proj="gated-gelu" if gated else "relu", dropout_rate=0.0,
                     decoder_start_token_id=0, tie_word_embeddings=form == "v5_t510")
    model = model_cls(cfg).eval()
    if form.endswith("mt5"):
        # Tables larger than transformers' initialisation (std d_model^-0.5),
        # so that a table read by the wrong layer moves the logits far past
        # the tolerance.
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "relative_attention_bias" in name:
                    p.copy_(torch.randn_like(p))
    model.save_pretrained(out, safe_serialization=True)
    if form.startswith("v4_"):
        sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if "embed_tokens" not in k}
        sd["lm_head.weight"] = torch.randn(96, 32) * 0.3
        if form.endswith("_f64"):
            sd = {k: v.double() for k, v in sd.items()}
        save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        path = os.path.join(out, "config.json")
        with open(path) as f:
            c = json.load(f)
        c.pop("scale_decoder_outputs", None)
        c["tie_word_embeddings"] = False
        with open(path, "w") as f:
            json.dump(c, f, indent=2)
    with open(os.path.join(out, "config.json")) as f:
        c = json.load(f)
    print(f"wrote {out} ({form}): tie_word_embeddings {c.get('tie_word_embeddings')}, "
          f"scale_decoder_outputs {c.get('scale_decoder_outputs')}")


if __name__ == "__main__":
    main()
