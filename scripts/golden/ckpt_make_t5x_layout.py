#!/usr/bin/env python3
"""Writes a tiny checkpoint laid out exactly like t5x's legacy native format.

Golden input for tests/t5x/checkpoints/golden_test.cpp. It reproduces what
t5x.checkpoints.Checkpointer.save does (t5x.md section 3.2), using the same
libraries underneath (PyPI: tensorstore, msgpack, numpy, ml_dtypes):
  * partitioned leaves are written with TensorStore's zarr driver, through the
    `cast` driver for target leaves saved as bfloat16, and the msgpack holds
    ts.Spec(spec).to_json() with the path relative to the checkpoint dir;
  * unpartitioned leaves (step, Adafactor v_row / v_col, (1,) placeholders)
    are inline flax ndarray ext types (ext 1 = msgpack of (shape, dtype name,
    C-order bytes));
  * root {"version": 3, "optimizer": {"target": ..., "state": ...}},
    packed as flax.serialization.msgpack_serialize does (strict_types,
    use_bin_type);
  * the step directory is written as checkpoint_<step>.tmp-<timestamp> and
    renamed into place after the msgpack.

Usage: python3 scripts/golden/ckpt_make_t5x_layout.py [OUT_DIR]
(default tests/golden/checkpoints). Writes OUT_DIR/t5x_layout/checkpoint_7/ and
OUT_DIR/t5x_layout_expected.json (values of every leaf after restore).
"""
import importlib.metadata
import json
import os
import shutil
import sys

import ml_dtypes
import msgpack
import numpy as np
import tensorstore as ts

STEP = 7
TIMESTAMP = 1700000000


def ndarray_ext(arr):
  arr = np.asarray(arr)
  payload = msgpack.packb((arr.shape, arr.dtype.name, arr.tobytes('C')), use_bin_type=True)
  return msgpack.ExtType(1, payload)


def ext_default(x):
  if isinstance(x, np.ndarray):
    return ndarray_ext(x)
  if isinstance(x, np.generic):
    return msgpack.ExtType(3, ndarray_ext(np.asarray(x)).data)
  return x


def write_ts(ckpt_dir, name, arr, chunks, compressor, save_dtype=None):
  """t5x _write_array: relative spec in msgpack, absolute path for writing."""
  rel = name.replace('/', '.')
  spec = {
      'driver': 'zarr',
      'dtype': save_dtype or arr.dtype.name,
      'kvstore': {'driver': 'file', 'path': rel},
      'metadata': {'compressor': compressor, 'shape': list(arr.shape), 'chunks': list(chunks)},
  }
  written = ts.Spec(spec).to_json()
  absolute = json.loads(json.dumps(written))
  absolute['kvstore']['path'] = os.path.join(ckpt_dir, rel)
  if save_dtype and save_dtype != arr.dtype.name:
    absolute = {'base': absolute, 'driver': 'cast', 'dtype': arr.dtype.name}
  t = ts.open(absolute, create=True, open=True).result()
  # Write shard by shard, as each host writes its own slice.
  grid = [range(0, s, c) for s, c in zip(arr.shape, chunks)]
  import itertools
  for starts in itertools.product(*grid):
    sl = tuple(slice(s, min(s + c, n)) for s, c, n in zip(starts, chunks, arr.shape))
    t[sl].write(arr[sl]).result()
  return written


def main():
  out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
      os.path.dirname(__file__), '..', '..', 'tests', 'golden', 'checkpoints')
  out = os.path.abspath(out)
  model_dir = os.path.join(out, 't5x_layout')
  shutil.rmtree(model_dir, ignore_errors=True)
  os.makedirs(model_dir)
  final_dir = os.path.join(model_dir, f'checkpoint_{STEP}')
  tmp_dir = final_dir + f'.tmp-{TIMESTAMP}'
  os.makedirs(tmp_dir)

  f32 = np.float32
  emb = (np.arange(16 * 8, dtype=f32).reshape(16, 8) * 0.125 - 5).astype(f32)
  query = (np.sin(np.arange(8 * 12, dtype=f32)) * 0.5).astype(f32).reshape(8, 12)
  logits = (np.cos(np.arange(8 * 16, dtype=f32)) * 3).astype(f32).reshape(8, 16)
  norm = (1 + np.arange(8, dtype=f32) / 8).astype(f32)
  emb_v = (np.arange(16 * 8, dtype=f32).reshape(16, 8) * 1e-3).astype(f32)
  v_row = np.linspace(0.5, 4, 8, dtype=f32)
  v_col = np.linspace(-1, 1, 12, dtype=f32)

  target = {
      'token_embedder': {'embedding': write_ts(tmp_dir, 'target/token_embedder/embedding', emb,
                                               (16, 8), {'id': 'gzip'})},
      'encoder': {
          'layers_0': {'attention': {'query': {'kernel': write_ts(
              tmp_dir, 'target/encoder/layers_0/attention/query/kernel', query, (8, 6), {'id': 'zstd'})}}},
          'encoder_norm': {'scale': write_ts(tmp_dir, 'target/encoder/encoder_norm/scale', norm, (8,),
                                             {'id': 'gzip'})},
      },
      'decoder': {'logits_dense': {'kernel': write_ts(
          tmp_dir, 'target/decoder/logits_dense/kernel', logits, (4, 16), {'id': 'gzip'},
          save_dtype='bfloat16')}},
  }
  state = {
      'step': np.array(STEP, dtype=np.int32),
      'param_states': {
          'token_embedder': {'embedding': {
              'v': write_ts(tmp_dir, 'state/param_states/token_embedder/embedding/v', emb_v, (8, 8),
                            {'id': 'gzip'}),
              'v_row': np.zeros((1,), f32), 'v_col': np.zeros((1,), f32), 'm': np.zeros((1,), f32)}},
          'encoder': {'layers_0': {'attention': {'query': {'kernel': {
              'v_row': v_row, 'v_col': v_col, 'v': np.zeros((1,), f32), 'm': np.zeros((1,), f32)}}}}},
      },
  }
  blob = msgpack.packb({'version': 3, 'optimizer': {'target': target, 'state': state}},
                       default=ext_default, strict_types=True, use_bin_type=True)
  with open(os.path.join(tmp_dir, 'checkpoint'), 'wb') as f:
    f.write(blob)
  os.rename(tmp_dir, final_dir)

  def entry(a, dtype=None):
    a = np.asarray(a)
    stored = a.astype(ml_dtypes.bfloat16) if dtype == 'bfloat16' else a
    return {'dtype': dtype or a.dtype.name, 'shape': list(a.shape),
            'values': [float(x) if a.dtype.kind == 'f' else int(x)
                       for x in np.asarray(stored, dtype=np.float64 if a.dtype.kind == 'f' else np.int64).ravel()]}

  expected = {
      'step': STEP,
      'leaves': {
          'target/token_embedder/embedding': entry(emb),
          'target/encoder/layers_0/attention/query/kernel': entry(query),
          'target/encoder/encoder_norm/scale': entry(norm),
          'target/decoder/logits_dense/kernel': entry(logits, 'bfloat16'),
          'state/step': entry(np.array(STEP, np.int32)),
          'state/param_states/token_embedder/embedding/v': entry(emb_v),
          'state/param_states/token_embedder/embedding/v_row': entry(np.zeros((1,), f32)),
          'state/param_states/encoder/layers_0/attention/query/kernel/v_row': entry(v_row),
          'state/param_states/encoder/layers_0/attention/query/kernel/v_col': entry(v_col),
      },
      'tensorstore_leaves': [
          'target/token_embedder/embedding', 'target/encoder/layers_0/attention/query/kernel',
          'target/encoder/encoder_norm/scale', 'target/decoder/logits_dense/kernel',
          'state/param_states/token_embedder/embedding/v'],
      'generated_by': 'scripts/golden/ckpt_make_t5x_layout.py with tensorstore ' +
                      importlib.metadata.version('tensorstore') + ', msgpack ' +
                      importlib.metadata.version('msgpack'),
  }
  with open(os.path.join(out, 't5x_layout_expected.json'), 'w') as f:
    json.dump(expected, f, indent=1)
    f.write('\n')


if __name__ == '__main__':
  main()
