"""Writes a tiny random SwitchTransformersForConditionalGeneration (transformers)
with save_pretrained, for `t5x ckpt import-hf` in run_hf_switch.cmake.

usage: make_tiny_switch.py OUT_DIR NUM_EXPERTS NUM_LAYERS NUM_SPARSE DENSE_ACT TIE SEED
NUM_SPARSE is transformers' num_sparse_{encoder,decoder}_layers (sparse at
i % (NUM_LAYERS / NUM_SPARSE) == 1). expert_capacity stays 64, above the
7 tokens of t5x_ckpt_hf_logits' sequences, so transformers drops no token.
The router kernel is scaled by 5 so tokens spread over the experts with
clear margins (a near-tie could pick a different expert under rounding).
"""
import sys

import torch
from transformers import SwitchTransformersConfig, SwitchTransformersForConditionalGeneration


def main():
    out, e, layers, sparse, act, tie, seed = sys.argv[1:]
    torch.manual_seed(int(seed))
    cfg = SwitchTransformersConfig(
        vocab_size=96, d_model=32, d_kv=8, d_ff=48, num_heads=4, num_layers=int(layers),
        num_decoder_layers=int(layers), num_experts=int(e), num_sparse_encoder_layers=int(sparse),
        num_sparse_decoder_layers=int(sparse), dense_act_fn=act, tie_word_embeddings=tie == "tie",
        expert_capacity=64, router_jitter_noise=0.0, decoder_start_token_id=0)
    model = SwitchTransformersForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        # transformers 5 unties the stacks' embed_tokens from shared when
        # tie_word_embeddings is False; t5x has one embedding.
        model.encoder.embed_tokens.weight.copy_(model.shared.weight)
        model.decoder.embed_tokens.weight.copy_(model.shared.weight)
        for name, p in model.named_parameters():
            if name.endswith("router.classifier.weight"):
                p.mul_(5.0)
    model.save_pretrained(out, safe_serialization=True)
    sparse_layers = [i for i, b in enumerate(model.encoder.block) if b.is_sparse]
    print(f"wrote {out}: {e} experts, sparse encoder/decoder layers {sparse_layers} of {layers}, "
          f"dense_act_fn {act}, tie_word_embeddings {cfg.tie_word_embeddings}")


if __name__ == "__main__":
    main()
