#!/usr/bin/env python3
"""Writes Orbax checkpoints and OCDBT stores with the real packages, for the
C++ reader's tests (tests/t5x/checkpoints/orbax_test.cpp).

Usage:
  orbax_write.py t5x-state LEGACY_CHECKPOINT MODEL_DIR
      Reads a checkpoint in t5x's legacy format (the msgpack and TensorStore,
      as t5x reads it) and saves the same train state into
      MODEL_DIR/checkpoint_<step> as t5x's OrbaxCheckpointManagerInterface
      does (checkpoints.py): an orbax.checkpoint.CheckpointManager with
      step_prefix 'checkpoint' whose 'state' item is the state dict
      {'target': ..., 'state': {'step': ..., 'param_states': ...}} saved by
      PyTreeCheckpointHandler(use_ocdbt=True), every leaf a jax.Array.
  orbax_write.py stores OUT_DIR
      Writes OCDBT stores with TensorStore under OUT_DIR/<name>/ in shapes a
      checkpoint rarely takes: zstd-compressed nodes small enough to need
      interior B+tree nodes, inline and out-of-line values, several commits
      (keys overwritten and deleted), a version tree, the numbered manifest
      kind. OUT_DIR/<name>.json holds what each must read back:
      {key: value as hex}.
"""
import json
import os
import sys

import numpy as np


def t5x_state(legacy, model_dir):
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from ckpt_scalable_layout import read_checkpoint  # the msgpack + TensorStore reader
  import jax.numpy as jnp
  import orbax.checkpoint as ocp

  flat = read_checkpoint(legacy)
  state = {}
  for path, value in flat.items():
    node = state
    keys = path.split('/')
    for k in keys[:-1]:
      node = node.setdefault(k, {})
    node[keys[-1]] = jnp.asarray(value)
  step = int(np.asarray(flat['state/step']))
  # t5x's OrbaxCheckpointManagerInterface: item 'state' by a
  # PyTreeCheckpointHandler(use_ocdbt=True), checkpoints named by step_prefix.
  options = ocp.CheckpointManagerOptions(step_prefix='checkpoint', cleanup_tmp_directories=True)
  manager = ocp.CheckpointManager(model_dir, options=options,
                                  item_handlers={'state': ocp.PyTreeCheckpointHandler(use_ocdbt=True)})
  save_args = {'state': ocp.args.PyTreeSave(state)}
  manager.save(step, args=ocp.args.Composite(**save_args), force=True)
  manager.wait_until_finished()
  manager.close()
  print(f'saved step {step}: {len(flat)} leaves in {model_dir}/checkpoint_{step}')


def stores(out):
  import tensorstore as ts
  rng = np.random.default_rng(7)

  def key_names(n):
    # Checkpoint-like keys: long shared prefixes, '.' and '/' separators.
    names = []
    for i in range(n):
      layer = f'layers_{i % 13}'
      leaf = ['attention.query.kernel', 'attention.out.kernel', 'mlp.wi_0.kernel', 'pre_mlp_layer_norm.scale'][i % 4]
      names.append(f'target.{"encoder" if i % 2 else "decoder"}.{layer}.{leaf}.{i}/{"0.0" if i % 3 else ".zarray"}')
    return names

  def write(name, config, commits):
    path = os.path.join(out, name)
    kv = ts.KvStore.open({'driver': 'ocdbt', 'base': f'file://{path}/', 'config': config}).result()
    expect = {}
    for commit in commits:
      with ts.Transaction() as txn:
        for k, v in commit.items():
          if v is None:
            kv.with_transaction(txn).delete_range(ts.KvStore.KeyRange(k, k + "\x00")).result()
            expect.pop(k, None)
          else:
            kv.with_transaction(txn).write(k, v).result()
            expect[k] = v
    # Read back with TensorStore itself: what the C++ reader must give.
    back = {k.decode(): bytes(kv.read(k).result().value) for k in kv.list().result()}
    assert back == expect, f'{name}: TensorStore reads back something else'
    with open(os.path.join(out, name + '.json'), 'w') as f:
      json.dump({k: v.hex() for k, v in sorted(expect.items())}, f, indent=0)
    print(f'{name}: {len(expect)} keys after {len(commits)} commit(s)')

  def value(n):
    return rng.integers(0, 256, size=n, dtype=np.uint8).tobytes()

  keys = key_names(300)
  first = {k: value(int(rng.integers(0, 300))) for k in keys}
  second = {k: value(int(rng.integers(0, 40))) for k in keys[::7]}
  second.update({k: None for k in keys[3::11]})
  second['a_key_before_the_rest'] = b''
  third = {k: value(5000) for k in keys[::50]}
  # Small zstd nodes: interior nodes, inline (<= 16 bytes) and indirect values.
  write('zstd_small_nodes', {'compression': {'id': 'zstd', 'level': 3}, 'max_decoded_node_bytes': 512,
                             'max_inline_value_bytes': 16}, [first, second, third])
  # Uncompressed, one commit per key group: a version tree of arity 2.
  groups = [{k: first[k] for k in keys[i:i + 30]} for i in range(0, 300, 30)]
  write('version_tree', {'compression': None, 'version_tree_arity_log2': 1}, groups)
  # The numbered manifest kind.
  write('numbered_manifest', {'manifest_kind': 'numbered'}, [first, second])


def main():
  if len(sys.argv) == 4 and sys.argv[1] == 't5x-state':
    t5x_state(sys.argv[2], sys.argv[3])
  elif len(sys.argv) == 3 and sys.argv[1] == 'stores':
    stores(sys.argv[2])
  else:
    sys.exit(__doc__)


if __name__ == '__main__':
  main()
