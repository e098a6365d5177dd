#!/usr/bin/env python3
"""Reads t5x.cpp TensorBoard event files with the tensorboard package (PyPI)
and compares the scalars (and text) with an expected JSON.

Usage: read_tb_events.py MODEL_DIR EXPECTED_JSON
EXPECTED_JSON: {"<run dir relative to MODEL_DIR>": {"<tag>": [[step, value], ...]},
                "text": {"<run>": {"<tag>": "<text>"}}}
Exit status 1 on any mismatch.
"""
import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator


def main():
  model_dir, expected_path = sys.argv[1], sys.argv[2]
  expected = json.load(open(expected_path))
  texts = expected.pop('text', {})
  errors = []
  for run, tags in expected.items():
    acc = event_accumulator.EventAccumulator(os.path.join(model_dir, run),
                                             size_guidance={event_accumulator.SCALARS: 0,
                                                            event_accumulator.TENSORS: 0})
    acc.Reload()
    for tag, points in tags.items():
      if tag not in acc.Tags()['scalars']:
        errors.append(f'{run}: scalar tag {tag} missing (have {acc.Tags()["scalars"]})')
        continue
      got = [(e.step, e.value) for e in acc.Scalars(tag)]
      want = [(s, v) for s, v in points]
      if got != want:
        errors.append(f'{run}/{tag}: {got} != {want}')
      else:
        print(f'ok {run}/{tag}: {len(got)} points')
  for run, tags in texts.items():
    acc = event_accumulator.EventAccumulator(os.path.join(model_dir, run),
                                             size_guidance={event_accumulator.TENSORS: 0})
    acc.Reload()
    for tag, text in tags.items():
      events = acc.Tensors(tag) if tag in acc.Tags()['tensors'] else []
      got = [e.tensor_proto.string_val[0].decode() for e in events]
      if got != [text]:
        errors.append(f'{run}/{tag}: text {got} != {[text]}')
      else:
        print(f'ok {run}/{tag}: text')
  if errors:
    print('\n'.join(errors), file=sys.stderr)
    sys.exit(1)


if __name__ == '__main__':
  main()
