#!/usr/bin/env python3
"""Golden outputs of seqio's feature converters on real text.

Runs the Python originals (PyPI: seqio==0.0.20, tensorflow) and writes
tests/golden/seqio/feature_converters/converters.json, which
tests/seqio/feature_converters/golden_test.cpp compares against exactly.

Text: lines of the GPL-3 licence text (Debian: /usr/share/common-licenses/GPL-3),
encoded with seqio.ByteVocabulary (id = UTF-8 byte + 3, EOS 1), so no model
file is needed. Each example: inputs = a line, targets = the next line, both
cut to fit the task lengths and ended with EOS (append_eos_after_trim).

Usage: python scripts/golden/seqio_converters_golden.py [GPL-3 path] [out dir]
"""
import json
import os
import sys

import numpy as np
import seqio
import tensorflow as tf

GPL = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/common-licenses/GPL-3"
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    os.path.dirname(__file__), "..", "..", "tests", "golden", "seqio", "feature_converters")
vocab = seqio.ByteVocabulary()


def lines(n, skip):
  with open(GPL, encoding="utf-8") as f:
    ls = [l.strip() for l in f if l.strip()]
  return ls[skip:skip + n]


def eos_trim(ids, length):
  return list(ids[:length - 1]) + [vocab.eos_id]


def make_examples(n, skip, in_len, tg_len, encoder_mask_id=None):
  ls = lines(n + 1, skip)
  exs = []
  for i in range(n):
    # Vary the lengths so that packing has something to do.
    a = vocab.encode(ls[i])[: 3 + (i * 7) % max(1, in_len - 3)]
    b = vocab.encode(ls[i + 1])[: 2 + (i * 5) % max(1, tg_len - 2)]
    if encoder_mask_id is not None:
      t = eos_trim(a, in_len)
      inp = [encoder_mask_id if (j % 5 == 2 and tok != 1) else tok for j, tok in enumerate(t)]
      exs.append({"inputs": inp, "targets": t})
    else:
      exs.append({"inputs": eos_trim(a, in_len), "targets": eos_trim(b, tg_len)})
  return exs


def run(converter, exs, lengths):
  keys = list(lengths.keys())
  ds = tf.data.Dataset.from_generator(
      lambda: ({k: np.array(e[k], np.int32) for k in keys} for e in exs),
      output_signature={k: tf.TensorSpec([None], tf.int32) for k in keys})
  out = converter(ds, lengths)
  return [{k: v.tolist() for k, v in ex.items()} for ex in out.as_numpy_iterator()]


cases = []


def add(name, kind, pack, bos, lengths, exs, converter, **extra):
  case = {"name": name, "converter": kind, "pack": pack, "bos_id": bos,
          "lengths": lengths, "examples": [{k: e[k] for k in lengths} for e in exs],
          "outputs": run(converter, exs, lengths)}
  case.update(extra)
  cases.append(case)


L = {"inputs": 48, "targets": 24}
exs = make_examples(14, 0, **{"in_len": 48, "tg_len": 24})
for pack in (False, True):
  add(f"enc_dec_{'packed' if pack else 'padded'}", "enc_dec", pack, 0, L, exs,
      seqio.EncDecFeatureConverter(pack=pack))
add("enc_dec_packed_bos7", "enc_dec", True, 7, L, exs,
    seqio.EncDecFeatureConverter(pack=True, bos_id=7))

lm_exs = [{"targets": e["targets"]} for e in make_examples(16, 20, 40, 40)]
for pack in (False, True):
  add(f"lm_{'packed' if pack else 'padded'}", "lm", pack, 0, {"targets": 40}, lm_exs,
      seqio.LMFeatureConverter(pack=pack))

plm_exs = make_examples(12, 40, 20, 16)
plm_exs[3]["targets"] = []   # seqio's empty-targets rule
plm_exs[5]["inputs"] = []    # the empty-inputs (-1 width) rule
for pack in (False, True):
  for lot in (True, False):
    add(f"prefix_lm_{'packed' if pack else 'padded'}_{'targets_only' if lot else 'all'}",
        "prefix_lm", pack, 0, {"inputs": 20, "targets": 16}, plm_exs,
        seqio.PrefixLMFeatureConverter(pack=pack, loss_on_targets_only=lot),
        loss_on_targets_only=lot)

MASK = 259  # first id past the 256 byte ids: a ByteVocabulary extra id
enc_exs = make_examples(12, 60, 32, 32, encoder_mask_id=MASK)
for pack in (False, True):
  add(f"encoder_{'packed' if pack else 'padded'}", "encoder", pack, 0,
      {"inputs": 32, "targets": 32}, enc_exs,
      seqio.EncoderFeatureConverter(mask_id=MASK, pack=pack), mask_id=MASK)

os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "converters.json"), "w") as f:
  json.dump({"generator": "scripts/golden/seqio_converters_golden.py",
             "seqio_version": seqio.__version__, "text": "GPL-3, ByteVocabulary ids",
             "cases": cases}, f, separators=(",", ":"))
  f.write("\n")
print("wrote", len(cases), "cases")
