#!/usr/bin/env python3
"""Writes a tiny train state as t5x saves it by default: Orbax, OCDBT.

Golden input for tests/t5x/checkpoints/golden_test.cpp (read with no Python
at test time, so also under the sanitizers). The state dict has t5x's shape,
{'target': params, 'state': {'step': ..., 'param_states': Adafactor slots}},
every leaf a jax.Array, a bfloat16 and an int32 leaf among them; it is saved
as t5x's OrbaxCheckpointManagerInterface saves it (checkpoints.py): an
orbax.checkpoint.CheckpointManager with step_prefix 'checkpoint' whose item
'state' is written by PyTreeCheckpointHandler(use_ocdbt=True).

Usage: python3 scripts/golden/ckpt_make_orbax.py [OUT_DIR]
(default tests/golden/checkpoints; needs the interop venv of
scripts/python_env.sh). Writes OUT_DIR/orbax_t5x/checkpoint_3/ and
OUT_DIR/orbax_t5x_expected.json: every leaf's dtype, shape and values (bf16
as the float32 it widens to).
"""
import importlib.metadata
import json
import os
import shutil
import sys

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import orbax.checkpoint as ocp


def main():
  out = sys.argv[1] if len(sys.argv) > 1 else 'tests/golden/checkpoints'
  model_dir = os.path.join(out, 'orbax_t5x')
  shutil.rmtree(model_dir, ignore_errors=True)
  leaves = {
      'target/encoder/layers_0/attention/query/kernel': (np.arange(12, dtype=np.float32) / 8 - 0.5).reshape(4, 3),
      'target/encoder/encoder_norm/scale': np.array([1.0, 0.5, -2.0, 3.25], dtype=np.float32),
      'target/token_embedder/embedding': (np.arange(10, dtype=np.float32) / 4).reshape(5, 2).astype(ml_dtypes.bfloat16),
      'state/step': np.array(3, dtype=np.int32),
      'state/param_states/encoder/layers_0/attention/query/kernel/v_row': np.array([0.25, 0.5, 1, 2], np.float32),
      'state/param_states/encoder/layers_0/attention/query/kernel/v_col': np.array([1, 2, 3], np.float32),
      'state/param_states/encoder/layers_0/attention/query/kernel/v': np.zeros((1,), np.float32),
      'state/param_states/encoder/layers_0/attention/query/kernel/m': np.zeros((1,), np.float32),
  }
  state = {}
  for path, value in leaves.items():
    node = state
    keys = path.split('/')
    for k in keys[:-1]:
      node = node.setdefault(k, {})
    node[keys[-1]] = jnp.asarray(value)
  options = ocp.CheckpointManagerOptions(step_prefix='checkpoint', cleanup_tmp_directories=True)
  manager = ocp.CheckpointManager(os.path.abspath(model_dir), options=options,
                                  item_handlers={'state': ocp.PyTreeCheckpointHandler(use_ocdbt=True)})
  manager.save(3, args=ocp.args.Composite(state=ocp.args.PyTreeSave(state)), force=True)
  manager.wait_until_finished()
  manager.close()
  # Orbax's commit_success.txt markers name this machine's absolute path; the
  # reader does not use them (a local save is complete once renamed into place).
  for root, _, files in os.walk(model_dir):
    if 'commit_success.txt' in files:
      os.remove(os.path.join(root, 'commit_success.txt'))
  expected = {
      'orbax-checkpoint': importlib.metadata.version('orbax-checkpoint'),
      'leaves': {p: {'dtype': str(v.dtype), 'shape': list(v.shape),
                     'values': np.asarray(v, dtype=np.float64).reshape(-1).tolist()} for p, v in leaves.items()},
  }
  with open(os.path.join(out, 'orbax_t5x_expected.json'), 'w') as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write('\n')
  print(f'wrote {model_dir}/checkpoint_3')


if __name__ == '__main__':
  main()
