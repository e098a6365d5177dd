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

usage: make_tiny_t5.py OUT_DIR FORM
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import T5Config, T5ForConditionalGeneration


def main():
    out, form = sys.argv[1:]
    torch.manual_seed(7)
    gated = form != "v5_t510"
    cfg = T5Config(vocab_size=96, d_model=32, d_ff=48, d_kv=8, num_heads=4, num_layers=2, num_decoder_layers=2,
                   feed_forward_proj="gated-gelu" if gated else "relu", dropout_rate=0.0,
                   decoder_start_token_id=0, tie_word_embeddings=form == "v5_t510")
    model = T5ForConditionalGeneration(cfg).eval()
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
