#!/usr/bin/env python3
"""Golden files for the T5 model parity tests (tests/t5x/models/parity_test.cpp).

1. Hugging Face transformers' T5ForConditionalGeneration (PyTorch, CPU, fp32)
   with small random T5.1.1 (gated-gelu, untied) and T5.1.0 (relu, tied)
   configs: weights (HF names, safetensors), config.json, random inputs with
   padding, and HF's logits, mean loss over non -100 labels and per-token
   log-probabilities.
2. A decoder-only (prefix LM) T5 decoder in plain numpy, written from t5x's
   examples/decoder_only/network.py semantics: weights under t5x names,
   inputs, logits and per-token log-probabilities.

Run (Debian's torch 1.13 + transformers<4.40):
  OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 scripts/golden/models_hf_parity.py
Writes tests/golden/models/*.safetensors and *.json.
"""
import json
import math
import os

import numpy as np
import torch
from safetensors.numpy import save_file as save_np
from transformers import T5Config, T5ForConditionalGeneration

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "models")
VOCAB, D_MODEL, D_KV, HEADS, D_FF = 96, 32, 8, 4, 64


def random_tokens(rng, lengths, width):
  out = np.zeros((len(lengths), width), np.int32)
  for b, n in enumerate(lengths):
    out[b, : n - 1] = rng.integers(2, VOCAB, n - 1)
    out[b, n - 1] = 1  # EOS
  return out


def hf_case(name, ff_proj, tie, seed):
  torch.manual_seed(seed)
  cfg = T5Config(vocab_size=VOCAB, d_model=D_MODEL, d_kv=D_KV, d_ff=D_FF, num_layers=2,
                 num_decoder_layers=2, num_heads=HEADS, relative_attention_num_buckets=32,
                 relative_attention_max_distance=128, dropout_rate=0.0, layer_norm_epsilon=1e-6,
                 feed_forward_proj=ff_proj, tie_word_embeddings=tie, decoder_start_token_id=0,
                 pad_token_id=0, eos_token_id=1)
  model = T5ForConditionalGeneration(cfg).eval()
  with torch.no_grad():
    for n, p in model.named_parameters():
      if n.endswith("layer_norm.weight"):  # exercise the RMSNorm scales
        p.copy_(1.0 + 0.2 * torch.randn_like(p))
      elif "relative_attention_bias" in n:
        p.copy_(0.5 * torch.randn_like(p))
  rng = np.random.default_rng(seed)
  enc = random_tokens(rng, [12, 7, 10], 12)
  tgt = random_tokens(rng, [10, 4, 7], 10)
  dec_in = np.zeros_like(tgt)
  dec_in[:, 1:] = tgt[:, :-1]
  labels = np.where(tgt > 0, tgt, -100).astype(np.int64)
  with torch.no_grad():
    out = model(input_ids=torch.tensor(enc, dtype=torch.long),
                attention_mask=torch.tensor(enc > 0, dtype=torch.long),
                decoder_input_ids=torch.tensor(dec_in, dtype=torch.long),
                labels=torch.tensor(labels))
  logits = out.logits.numpy().astype(np.float32)
  logp = torch.log_softmax(out.logits, -1).numpy()
  tok_logp = np.take_along_axis(logp, tgt[..., None].astype(np.int64), -1)[..., 0].astype(np.float32)
  state = {k: v.detach().numpy().astype(np.float32).copy() for k, v in model.state_dict().items()
           if not k.endswith("embed_tokens.weight") and not (tie and k == "lm_head.weight")}
  save_np(state, os.path.join(OUT, f"{name}_weights.safetensors"))
  save_np({"encoder_input_tokens": enc, "decoder_input_tokens": dec_in.astype(np.int32),
           "decoder_target_tokens": tgt, "logits": logits, "token_log_probs": tok_logp,
           "loss": np.array([out.loss.item()], np.float32)},
          os.path.join(OUT, f"{name}_io.safetensors"))
  with open(os.path.join(OUT, f"{name}_config.json"), "w") as f:
    f.write(cfg.to_json_string())


# ---------------------------------------------------------------- numpy decoder-only
def rms_norm(x, scale):
  return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-6) * scale


def gelu(x):
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def bucket(rel, bidirectional, nb=32, md=128):
  n = -rel
  ret = 0
  if bidirectional:
    nb //= 2
    ret += (n < 0) * nb
    n = np.abs(n)
  else:
    n = np.maximum(n, 0)
  me = nb // 2
  large = me + (np.log(n.astype(np.float32) / me + np.finfo(np.float32).eps) / np.log(md / me)
                * (nb - me)).astype(np.int32)
  large = np.minimum(large, nb - 1)
  return ret + np.where(n < me, n, large)


def decoder_only_forward(p, tokens, targets, causal_attention, layers, heads, head_dim):
  b, l = tokens.shape
  x = p["decoder/token_embedder/embedding"][tokens]
  pos = np.arange(l)
  bias = p["decoder/relpos_bias/rel_embedding"][:, bucket(pos[None, :] - pos[:, None], False)]  # [h, q, k]
  causal = pos[None, :] <= pos[:, None]
  inputs = (causal_attention[:, :, None] > 0) & (causal_attention[:, None, :] > 0)
  mask = (causal[None] | inputs) & (targets[:, :, None] > 0) & (targets[:, None, :] > 0)
  mbias = np.where(mask, 0.0, -1e10)[:, None]  # [b, 1, q, k]
  for i in range(layers):
    pre = f"decoder/layers_{i}"
    h = rms_norm(x, p[f"{pre}/pre_self_attention_layer_norm/scale"])
    q = (h @ p[f"{pre}/self_attention/query/kernel"]).reshape(b, l, heads, head_dim)
    k = (h @ p[f"{pre}/self_attention/key/kernel"]).reshape(b, l, heads, head_dim)
    v = (h @ p[f"{pre}/self_attention/value/kernel"]).reshape(b, l, heads, head_dim)
    s = np.einsum("bqhd,bkhd->bhqk", q, k) + bias[None] + mbias
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bkhd->bqhd", s, v).reshape(b, l, heads * head_dim)
    x = x + o @ p[f"{pre}/self_attention/out/kernel"]
    h = rms_norm(x, p[f"{pre}/pre_mlp_layer_norm/scale"])
    h = gelu(h @ p[f"{pre}/mlp/wi_0/kernel"]) * (h @ p[f"{pre}/mlp/wi_1/kernel"])
    x = x + h @ p[f"{pre}/mlp/wo/kernel"]
  x = rms_norm(x, p["decoder/decoder_norm/scale"])
  return x @ p["decoder/token_embedder/embedding"].T / math.sqrt(x.shape[-1])


def decoder_only_case(seed):
  rng = np.random.default_rng(seed)
  layers = 2
  p = {"decoder/token_embedder/embedding": rng.normal(size=(VOCAB, D_MODEL)),
       "decoder/relpos_bias/rel_embedding": 0.5 * rng.normal(size=(HEADS, 32)),
       "decoder/decoder_norm/scale": 1 + 0.2 * rng.normal(size=(D_MODEL,))}
  j = HEADS * D_KV
  for i in range(layers):
    pre = f"decoder/layers_{i}"
    p[f"{pre}/pre_self_attention_layer_norm/scale"] = 1 + 0.2 * rng.normal(size=(D_MODEL,))
    p[f"{pre}/pre_mlp_layer_norm/scale"] = 1 + 0.2 * rng.normal(size=(D_MODEL,))
    for n, shape in [("query", (D_MODEL, j)), ("key", (D_MODEL, j)), ("value", (D_MODEL, j)),
                     ("out", (j, D_MODEL))]:
      p[f"{pre}/self_attention/{n}/kernel"] = rng.normal(size=shape) / math.sqrt(shape[0])
    p[f"{pre}/mlp/wi_0/kernel"] = rng.normal(size=(D_MODEL, D_FF)) / math.sqrt(D_MODEL)
    p[f"{pre}/mlp/wi_1/kernel"] = rng.normal(size=(D_MODEL, D_FF)) / math.sqrt(D_MODEL)
    p[f"{pre}/mlp/wo/kernel"] = rng.normal(size=(D_FF, D_MODEL)) / math.sqrt(D_FF)
  p = {k: v.astype(np.float32) for k, v in p.items()}
  # Prefix LM rows: inputs (bidirectional) then targets, zero padded.
  lens, prefix = [12, 9, 6], [5, 3, 6]
  tgt = random_tokens(rng, lens, 12)
  dec_in = np.zeros_like(tgt)
  dec_in[:, 1:] = tgt[:, :-1]
  ca = np.zeros_like(tgt)
  for b, n in enumerate(prefix):
    ca[b, :n] = 1
  p64 = {k: v.astype(np.float64) for k, v in p.items()}
  logits = decoder_only_forward(p64, dec_in, tgt, ca, layers, HEADS, D_KV)
  lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
  tok = np.take_along_axis(logits, tgt[..., None], -1)[..., 0] - lse
  save_np(p, os.path.join(OUT, "decoder_only_weights.safetensors"))
  save_np({"decoder_input_tokens": dec_in.astype(np.int32), "decoder_target_tokens": tgt,
           "decoder_causal_attention": ca.astype(np.int32), "logits": logits.astype(np.float32),
           "token_log_probs": tok.astype(np.float32)},
          os.path.join(OUT, "decoder_only_io.safetensors"))


if __name__ == "__main__":
  os.makedirs(OUT, exist_ok=True)
  hf_case("t5_1_1", "gated-gelu", False, 1)
  hf_case("t5_1_0", "relu", True, 2)
  decoder_only_case(3)
  total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
  print(f"wrote {OUT} ({total} bytes)")
