"""Oracle of t5x_fnet_hf_parity: a small randomly initialised Hugging Face
FNetModel (nothing downloaded), saved as safetensors + config.json, and its
outputs on fixed inputs.

    python fnet_hf_oracle.py OUT_DIR

Writes OUT_DIR/hf/{config.json,model.safetensors} and OUT_DIR/expected.safetensors
(input_ids, token_type_ids int32 [2, 11]; last_hidden_state float32 [2, 11, 24];
pooler_output float32 [2, 24]). Row 1 ends in padding (pad_token_id 3), which
FNet mixes like any other token.
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import FNetConfig, FNetModel


def main(out):
    torch.manual_seed(0)
    cfg = FNetConfig(vocab_size=97, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                     max_position_embeddings=32, type_vocab_size=4, hidden_dropout_prob=0.0)
    model = FNetModel(cfg).eval()
    # Perturb every tensor (LayerNorm scales are ones and biases zeros at init)
    # so that each one is exercised by the comparison.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(os.path.join(out, "hf"), safe_serialization=True)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(4, cfg.vocab_size, (2, 11), generator=g)
    ids[1, 7:] = cfg.pad_token_id
    types = torch.randint(0, cfg.type_vocab_size, (2, 11), generator=g)
    with torch.no_grad():
        o = model(input_ids=ids, token_type_ids=types)
    save_file({"input_ids": ids.to(torch.int32).contiguous(), "token_type_ids": types.to(torch.int32).contiguous(),
               "last_hidden_state": o.last_hidden_state.contiguous(), "pooler_output": o.pooler_output.contiguous()},
              os.path.join(out, "expected.safetensors"))
    print("wrote", out, tuple(o.last_hidden_state.shape))


if __name__ == "__main__":
    main(sys.argv[1])
