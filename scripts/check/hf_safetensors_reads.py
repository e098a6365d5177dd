#!/usr/bin/env python3
"""Checks a t5x.cpp Hugging Face export with the `safetensors` package (PyPI)
and, when installed, transformers' T5Config.

Usage: hf_safetensors_reads.py HF_DIR EXPECTED_JSON
EXPECTED_JSON: {"<hf tensor name>": {"shape": [...], "values": [...]}} with
values as exact floats (bfloat16 export). Exit status 1 on any mismatch.
"""
import json
import os
import sys

import ml_dtypes
import numpy as np
from safetensors import safe_open


def main():
  hf_dir, expected_path = sys.argv[1], sys.argv[2]
  expected = json.load(open(expected_path))
  errors = []
  path = os.path.join(hf_dir, 'model.safetensors')
  with safe_open(path, framework='numpy') as f:
    if f.metadata().get('format') != 'pt':
      errors.append(f'metadata {f.metadata()} lacks format=pt (transformers requires it)')
    names = set(f.keys())
  # safetensors' numpy loader has no bfloat16: parse the header and view bytes.
  raw = open(path, 'rb').read()
  n = int.from_bytes(raw[:8], 'little')
  header = json.loads(raw[8:8 + n])
  base = 8 + n
  for name, want in expected.items():
    if name not in names:
      errors.append(f'{name}: missing')
      continue
    h = header[name]
    if h['dtype'] != 'BF16':
      errors.append(f'{name}: dtype {h["dtype"]} != BF16')
    b, e = h['data_offsets']
    arr = np.frombuffer(raw[base + b:base + e], ml_dtypes.bfloat16).reshape(h['shape'])
    if list(arr.shape) != want['shape']:
      errors.append(f'{name}: shape {list(arr.shape)} != {want["shape"]}')
    elif not np.array_equal(arr.astype(np.float32).ravel(), np.asarray(want['values'], np.float32)):
      errors.append(f'{name}: values differ')
  extra = names - set(expected)
  if extra:
    errors.append(f'unexpected tensors: {sorted(extra)}')
  cfg = json.load(open(os.path.join(hf_dir, 'config.json')))
  try:
    from transformers import T5Config
    c = T5Config.from_pretrained(hf_dir)
    if c.is_gated_act != cfg['is_gated_act']:
      errors.append('transformers T5Config disagrees on is_gated_act')
  except ImportError:
    pass
  if errors:
    print('\n'.join(errors), file=sys.stderr)
    sys.exit(1)
  print(f'all {len(expected)} tensors match ({cfg["feed_forward_proj"]}, d_model {cfg["d_model"]})')


if __name__ == '__main__':
  main()
