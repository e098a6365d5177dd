#!/usr/bin/env python3
"""Opens a checkpoint written by t5x.cpp with Python's msgpack, tensorstore and
zarr packages (PyPI) and compares every leaf with an expected JSON.

Usage: ckpt_python_reads.py CHECKPOINT_DIR EXPECTED_JSON
EXPECTED_JSON: {"step": N, "leaves": {"<state/path>": {"dtype", "shape", "values"}}}
(values flattened in C order; bfloat16 values as exact floats).

Reading follows t5x.checkpoints: msgpack root {"version": 3, "optimizer": ...};
inline leaves are flax ext type 1 (msgpack of (shape, dtype name, bytes));
partitioned leaves are TensorStore specs whose kvstore path is relative to the
checkpoint directory. Each such array is read twice: with tensorstore and with
zarr (v2 API; bfloat16 through ml_dtypes). Exit status 1 on any mismatch.
"""
import json
import os
import sys

import ml_dtypes  # registers the 'bfloat16' numpy dtype name
import msgpack
import numpy as np
import tensorstore as ts
import zarr


def ext_hook(code, data):
  if code in (1, 3):
    shape, dtype_name, buf = msgpack.unpackb(data, raw=True)
    name = dtype_name.decode() if isinstance(dtype_name, bytes) else dtype_name
    return np.frombuffer(buf, dtype=np.dtype(name)).reshape(shape)
  return msgpack.ExtType(code, data)


def flatten(d, prefix=''):
  out = {}
  for k, v in d.items():
    path = f'{prefix}/{k}' if prefix else k
    if isinstance(v, dict) and not ('driver' in v and ('kvstore' in v or 'path' in v)):
      out.update(flatten(v, path))
    else:
      out[path] = v
  return out


def read_zarr(path):
  meta = json.load(open(os.path.join(path, '.zarray')))
  if meta['dtype'] == 'bfloat16':
    # zarr-python does not know TensorStore's "bfloat16" string: read the
    # chunks with numcodecs and assemble them by hand.
    import numcodecs
    codec = numcodecs.get_codec(meta['compressor']) if meta['compressor'] else None
    shape, chunks = meta['shape'], meta['chunks']
    out = np.zeros(shape, ml_dtypes.bfloat16)
    grid = [range((s + c - 1) // c) for s, c in zip(shape, chunks)]
    import itertools
    for idx in itertools.product(*grid):
      key = '.'.join(map(str, idx)) if idx else '0'
      raw = open(os.path.join(path, key), 'rb').read()
      if codec:
        raw = codec.decode(raw)
      block = np.frombuffer(bytes(raw), ml_dtypes.bfloat16).reshape(chunks)
      sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))
      out[sl] = block[tuple(slice(0, x.stop - x.start) for x in sl)]
    return out
  return zarr.open_array(path, mode='r')[...]


def main():
  ckpt_dir, expected_path = sys.argv[1], sys.argv[2]
  expected = json.load(open(expected_path))
  raw = open(os.path.join(ckpt_dir, 'checkpoint'), 'rb').read()
  root = msgpack.unpackb(raw, ext_hook=ext_hook, raw=False)
  errors = []
  if root.get('version') != 3:
    errors.append(f'version {root.get("version")} != 3')
  leaves = flatten(root['optimizer'])
  for path, want in expected['leaves'].items():
    if path not in leaves:
      errors.append(f'{path}: missing from msgpack')
      continue
    leaf = leaves[path]
    arrays = []
    if isinstance(leaf, dict):
      spec = json.loads(json.dumps(leaf))
      rel = spec['kvstore']['path']
      spec['kvstore']['path'] = os.path.join(os.path.abspath(ckpt_dir), rel)
      # t5x deletes chunks/compressor before opening so any chunking is read.
      spec['metadata'].pop('chunks', None)
      spec['metadata'].pop('compressor', None)
      t = ts.open(spec, open=True).result()
      arrays.append(('tensorstore', np.asarray(t.read().result())))
      arrays.append(('zarr', np.asarray(read_zarr(os.path.join(ckpt_dir, rel.rstrip('/'))))))
    else:
      arrays.append(('msgpack', np.asarray(leaf)))
    for how, arr in arrays:
      where = f'{path} ({how})'
      if arr.dtype.name != want['dtype']:
        errors.append(f'{where}: dtype {arr.dtype.name} != {want["dtype"]}')
      if list(arr.shape) != want['shape']:
        errors.append(f'{where}: shape {list(arr.shape)} != {want["shape"]}')
        continue
      got = arr.astype(np.float64).ravel()
      exp = np.asarray(want['values'], np.float64)
      if not np.array_equal(got, exp):
        bad = int(np.argmax(got != exp))
        errors.append(f'{where}: value[{bad}] {got[bad]} != {exp[bad]}')
      else:
        print(f'ok {where}: {arr.dtype.name}{list(arr.shape)}')
  if errors:
    print('\n'.join(errors), file=sys.stderr)
    sys.exit(1)
  print(f'all {len(expected["leaves"])} leaves match')


if __name__ == '__main__':
  main()
