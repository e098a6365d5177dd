#!/usr/bin/env python3
"""Checks a checkpoint t5x.cpp wrote in t5x's scalable_t5 layout with
scan_layers against the same train state written one parameter per layer.

Usage: ckpt_scalable_layout.py SCANNED_CHECKPOINT PER_LAYER_CHECKPOINT [HF_A HF_B]

Both are read as t5x reads them: the msgpack, and TensorStore for the
partitioned leaves. The scanned one must hold
- every layer parameter stacked at axis 1 under <stack>/<stack>/, with layer
  i where transformers' convert_umt5_checkpoint_to_pytorch.py reads it:
  kernel[:, i], reshaped to [embed, heads * kv] (query, key, value) or
  [heads * kv, embed] (out);
- Adafactor's slots of each stacked parameter in the shapes t5x's
  adafactor.py init_param_state gives it under standard_logical_factor_rules
  (computed here from those rules, as _parse_rule does: v_row drops the
  COLUMN dims, v_col the ROW ones, 'layers' is BATCH and stays; a parameter
  whose rule has no ROW or no COLUMN dim keeps v), each layer's values those
  of the per-layer slot of the same name (taken at the 'layers' position);
- every other leaf as in the per-layer checkpoint.
HF_A and HF_B, Hugging Face exports of the two, must hold the same tensors
(safetensors' numpy reader). Exit status 1 on any mismatch.
"""
import json
import os
import re
import sys

import ml_dtypes  # noqa: F401  (registers 'bfloat16')
import msgpack
import numpy as np
import tensorstore as ts

# t5x adafactor.standard_logical_factor_rules(), the axes this model has.
RULES = {'embed': 'ROW', 'mlp': 'COLUMN', 'heads': 'COLUMN', 'kv': 'COLUMN', 'vocab': 'COLUMN',
         'joined_kv': 'COLUMN', 'relpos_buckets': 'NONE', 'layers': 'BATCH'}


def ext_hook(code, data):
  if code in (1, 3):
    shape, dtype_name, buf = msgpack.unpackb(data, raw=True)
    name = dtype_name.decode() if isinstance(dtype_name, bytes) else dtype_name
    return np.frombuffer(buf, dtype=np.dtype(name)).reshape(shape)
  return msgpack.ExtType(code, data)


def read_checkpoint(ckpt_dir):
  root = msgpack.unpackb(open(os.path.join(ckpt_dir, 'checkpoint'), 'rb').read(), ext_hook=ext_hook, raw=False)
  out = {}

  def walk(d, prefix):
    for k, v in d.items():
      path = f'{prefix}/{k}' if prefix else k
      if isinstance(v, dict) and not ('driver' in v and 'kvstore' in v):
        walk(v, path)
      elif isinstance(v, dict):
        spec = json.loads(json.dumps(v))
        spec['kvstore']['path'] = os.path.join(os.path.abspath(ckpt_dir), spec['kvstore']['path'])
        spec['metadata'].pop('chunks', None)
        spec['metadata'].pop('compressor', None)
        out[path] = np.asarray(ts.open(spec, open=True).result().read().result())
      else:
        out[path] = np.asarray(v)

  walk(root['optimizer'], '')
  return out


def stacked_axes(rest, rank):
  """Logical axes of the stacked parameter <stack>/<stack>/<rest> (layers.py's
  kernel_axes with 'layers' inserted at param_scan_axis 1)."""
  if re.search(r'/(query|key|value)/kernel$', rest):
    axes = ['embed', 'heads', 'kv']
  elif rest.endswith('/out/kernel'):
    axes = ['heads', 'kv', 'embed']
  elif rest.endswith('/wo/kernel'):
    axes = ['mlp', 'embed']
  elif re.search(r'/wi(_\d)?/kernel$', rest):
    axes = ['embed', 'mlp']
  elif rest.endswith('/scale'):
    axes = ['embed']
  elif rest.endswith('/rel_embedding'):
    axes = ['heads', 'relpos_buckets']
  else:
    raise ValueError(rest)
  axes.insert(1, 'layers')
  assert len(axes) == rank, (rest, axes, rank)
  return axes


def slot_dims(axes):
  """{slot: kept dims or None (a (1,) placeholder)}, t5x's _parse_rule and
  init_param_state for a parameter with a BATCH dim (no heuristic fallback)."""
  rule = [RULES[a] for a in axes]
  if 'ROW' not in rule or 'COLUMN' not in rule:
    rule = ['NONE' if r in ('ROW', 'COLUMN') else r for r in rule]
  rows = [i for i, r in enumerate(rule) if r == 'ROW']
  cols = [i for i, r in enumerate(rule) if r == 'COLUMN']
  every = list(range(len(axes)))
  if rows and cols:
    return {'v_row': [i for i in every if i not in cols], 'v_col': [i for i in every if i not in rows],
            'v': None, 'm': every}
  return {'v_row': None, 'v_col': None, 'v': every, 'm': every}


def main():
  scanned, per_layer = read_checkpoint(sys.argv[1]), read_checkpoint(sys.argv[2])
  errors, checked = [], 0
  layer_re = re.compile(r'^(target|state/param_states)/(encoder|decoder)/layers_(\d+)/(.+)$')
  stacked = {}
  for path, arr in per_layer.items():
    m = layer_re.match(path)
    if not m:
      if path not in scanned:
        errors.append(f'{path}: missing from the scanned checkpoint')
      elif not np.array_equal(scanned[path], arr):
        errors.append(f'{path}: differs from the per-layer checkpoint')
      checked += 1
      continue
    kind, stack, i, rest = m.group(1), m.group(2), int(m.group(3)), m.group(4)
    slot = None
    if kind == 'state/param_states':
      rest, slot = rest.rsplit('/', 1)
    param = f'target/{stack}/{stack}/{rest}'
    if param not in scanned:
      errors.append(f'{param}: missing (the stack of {path})')
      continue
    axes = stacked_axes(rest, scanned[param].ndim)
    if slot is None:
      got = np.ascontiguousarray(scanned[param][:, i])  # transformers' converter: [:, i, ...]
    else:
      dims = slot_dims(axes)[slot]
      leaf = f'state/param_states/{stack}/{stack}/{rest}/{slot}'
      if leaf not in scanned:
        errors.append(f'{leaf}: missing')
        continue
      want_shape = [1] if dims is None else [scanned[param].shape[d] for d in dims]
      if list(scanned[leaf].shape) != want_shape:
        errors.append(f'{leaf}: shape {list(scanned[leaf].shape)}, t5x gives {want_shape}')
        continue
      got = scanned[leaf] if dims is None else np.take(scanned[leaf], i, axis=dims.index(1))
    if got.size != arr.size or not np.array_equal(got.reshape(arr.shape), arr):
      errors.append(f'{path}: layer {i} of the stacked leaf differs')
    stacked.setdefault(param, set()).add(i)
    checked += 1
  for path in scanned:
    if layer_re.match(path) is None and path not in per_layer and not re.match(
        r'^(target|state/param_states)/(encoder/encoder|decoder/decoder)/', path):
      errors.append(f'{path}: in the scanned checkpoint only')
  if len(stacked) != 25:  # the encoder layer's 10 parameters, the decoder layer's 15
    errors.append(f'{len(stacked)} stacked parameters compared, not 25')
  if len(sys.argv) == 5:
    from safetensors.numpy import load_file
    a, b = (load_file(os.path.join(d, 'model.safetensors')) for d in sys.argv[3:5])
    if sorted(a) != sorted(b):
      errors.append(f'the exports name different tensors: {sorted(set(a) ^ set(b))[:5]}')
    for k in a:
      if k in b and not np.array_equal(a[k], b[k]):
        errors.append(f'export: {k} differs')
    if not any('relative_attention_bias' in k and '.block.1.' in k for k in a):
      errors.append('the export has no per-layer relative_attention_bias (umT5)')
    print(f'the Hugging Face exports hold the same {len(a)} tensors')
  if errors:
    print('\n'.join(errors), file=sys.stderr)
    sys.exit(1)
  print(f'{checked} per-layer leaves match the scanned checkpoint ({len(stacked)} stacked parameters)')


if __name__ == '__main__':
  main()
