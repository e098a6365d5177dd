#!/usr/bin/env python3
"""Golden outputs of seqio / T5 preprocessors on real text.

Runs the Python originals (PyPI: seqio==0.0.20, t5==0.9.4 installed with
--no-deps plus gin-config, babel, sacrebleu, rouge-score, tensorflow) and
writes tests/golden/seqio/preprocessors/preprocessors.json, compared against
by tests/seqio/preprocessors/golden_test.cpp.

What is golden (exact): random_spans_helper lengths; the noise-token and
noise-span counts of T5's random_spans_noise_mask (the positions come from
TF's stateless Philox RNG, which the C++ side does not reproduce, so only
the counts and the span structure are compared); the token functions
(noise_span_to_unique_sentinel, ...) applied to T5's own masks; tokenize +
append_eos_after_trim with ByteVocabulary; reduce_concat_tokens +
split_tokens; translate formatting.

Text: lines of the GPL-3 licence (Debian /usr/share/common-licenses/GPL-3),
ByteVocabulary ids (UTF-8 byte + 3).

Usage: python scripts/golden/seqio_preproc_golden.py [GPL-3 path] [out dir]
"""
import json
import os
import sys

import numpy as np
import seqio
import tensorflow as tf
from t5.data import preprocessors as t5p

GPL = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/common-licenses/GPL-3"
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    os.path.dirname(__file__), "..", "..", "tests", "golden", "seqio", "preprocessors")
vocab = seqio.ByteVocabulary(extra_ids=100)  # vocab_size 359: sentinels 358, 357, ...
with open(GPL, encoding="utf-8") as f:
  LINES = [l.strip() for l in f if l.strip()]

out = {"generator": "scripts/golden/seqio_preproc_golden.py", "seqio_version": seqio.__version__,
       "text": "GPL-3, ByteVocabulary(extra_ids=100) ids", "vocab_size": vocab.vocab_size}

# 1. random_spans_helper.
helper = []
for inputs_length in (8, 16, 32, 64, 100, 114, 128, 256, 512, 568, 626, 1024, 2048):
  for density, mean in ((0.15, 3.0), (0.2, 2.0), (0.2, 1.0), (0.5, 3.0), (0.3, 5.0)):
    t, tg = t5p.random_spans_helper(inputs_length, density, mean, 1, 1)
    helper.append({"inputs_length": inputs_length, "noise_density": density,
                   "mean_noise_span_length": mean, "tokens_length": t, "targets_length": tg})
out["random_spans_helper"] = helper

# 2. random_spans_noise_mask counts (and T5's masks for step 3).
masks = []
for i, length in enumerate((1, 2, 3, 5, 10, 17, 31, 64, 100, 257, 568)):
  for density, mean in ((0.15, 3.0), (0.25, 2.0), (0.5, 1.0)):
    try:
      m = t5p.random_spans_noise_mask(length, density, seeds=[(i, 7), (i + 100, 9)],
                                      mean_noise_span_length=mean).numpy().astype(int).tolist()
    except tf.errors.InvalidArgumentError:
      # Fewer non-noise tokens than noise spans: TF fails to stack the span
      # lengths. The C++ side throws std::invalid_argument here.
      masks.append({"length": length, "noise_density": density,
                    "mean_noise_span_length": mean, "error": True})
      continue
    spans = sum(1 for j, x in enumerate(m) if x and (j == 0 or not m[j - 1]))
    masks.append({"length": length, "noise_density": density, "mean_noise_span_length": mean,
                  "num_noise_tokens": sum(m), "num_noise_spans": spans, "mask": m})
out["random_spans_noise_mask"] = masks

# 3. token functions on real tokens with T5's masks.
token_fns = []
for k, mrec in enumerate(x for x in masks if x["length"] >= 10 and "error" not in x):
  n = mrec["length"]
  text = " ".join(LINES[k * 3: k * 3 + 40])
  toks = vocab.encode(text)[:n]
  t = tf.constant(toks, tf.int32)
  mk = tf.constant(np.array(mrec["mask"], bool))
  rec = {"tokens": toks, "mask": mrec["mask"]}
  for fn in ("noise_span_to_unique_sentinel", "nonnoise_span_to_unique_sentinel",
             "noise_token_to_sentinel", "noise_span_to_sentinel", "nonnoise_span_to_sentinel",
             "drop_noise_tokens", "drop_nonnoise_tokens"):
    rec[fn] = getattr(t5p, fn)(t, mk, vocab, seeds=None).numpy().tolist()
  token_fns.append(rec)
out["token_fns"] = token_fns

# 4. tokenize + append_eos_after_trim with ByteVocabulary (inputs add_eos=False).
feats = {"inputs": seqio.Feature(vocab, add_eos=False), "targets": seqio.Feature(vocab)}
raw = [{"inputs": LINES[i], "targets": LINES[i + 1]} for i in range(100, 108)]
ds = tf.data.Dataset.from_generator(
    lambda: iter(raw), output_signature={"inputs": tf.TensorSpec([], tf.string),
                                         "targets": tf.TensorSpec([], tf.string)})
ds = seqio.preprocessors.tokenize(ds, feats)
lengths = {"inputs": 40, "targets": 24}
ds = seqio.preprocessors.append_eos_after_trim(ds, feats, sequence_length=lengths)
tok = []
for r, ex in zip(raw, ds.as_numpy_iterator()):
  tok.append({"inputs_text": r["inputs"], "targets_text": r["targets"],
              "inputs": ex["inputs"].tolist(), "targets": ex["targets"].tolist(),
              "inputs_pretokenized": ex["inputs_pretokenized"].decode(),
              "targets_pretokenized": ex["targets_pretokenized"].decode()})
out["tokenize_append_eos_after_trim"] = {"lengths": lengths, "examples": tok}

# 5. reduce_concat_tokens(batch 4) + split_tokens(max 50) on tokenized lines.
docs = [vocab.encode(LINES[i]) for i in range(200, 211)]
docs[2] = docs[2][:5] + [0, 0] + docs[2][5:]   # zeros are deleted by reduce_concat
ds = tf.data.Dataset.from_generator(lambda: ({"targets": np.array(d, np.int32)} for d in docs),
                                    output_signature={"targets": tf.TensorSpec([None], tf.int32)})
ds = t5p.reduce_concat_tokens(ds, feature_key="targets", batch_size=4)
concat = [x["targets"].tolist() for x in ds.as_numpy_iterator()]
ds = t5p.split_tokens(ds, max_tokens_per_segment=50, feature_key="targets")
split = [x["targets"].tolist() for x in ds.as_numpy_iterator()]
out["reduce_concat_split"] = {"docs": docs, "batch_size": 4, "concat": concat,
                              "max_tokens_per_segment": 50, "split": split}

# 6. translate formatting.
tr = []
for src, tgt in (("en", "de"), ("en", "fr"), ("en", "ro"), ("de", "en"), ("en", "es")):
  ds = tf.data.Dataset.from_tensors({src: LINES[300], tgt: LINES[301]})
  y = next(t5p.translate(ds, src, tgt).as_numpy_iterator())
  tr.append({"source_language": src, "target_language": tgt, "source": LINES[300],
             "target": LINES[301], "inputs": y["inputs"].decode(),
             "targets": y["targets"].decode(), "keys": sorted(y.keys())})
out["translate"] = tr

os.makedirs(OUT, exist_ok=True)
with open(os.path.join(OUT, "preprocessors.json"), "w") as f:
  json.dump(out, f, separators=(",", ":"))
  f.write("\n")
print("ok")
