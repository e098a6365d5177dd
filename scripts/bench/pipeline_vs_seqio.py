#!/usr/bin/env python3
"""Throughput of converted batches: t5xcpp.seqio (the C++ pipeline) or seqio 0.0.20 (TensorFlow).

The same task on both sides: gpl3_lines_copy (TextLine source, 2 files of GPL-3 lines;
inputs = targets = the line; tokenize with tests/golden/seqio/vocab/spm1000.model,
extra_ids=100; append_eos_after_trim), unshuffled, EPOCHS epochs, then
EncDecFeatureConverter(pack=True) and batches of 32 rows of length 64/64.
Prints one JSON line: examples/s (input examples, from get_dataset to the last batch),
tokens/s (non-padding tokens of
encoder_input_tokens + decoder_target_tokens), the token total and a hash of all
batches, equal on both sides when they made the same batches, and the tokens/s after
the first batch (steady state).

Usage: pipeline_vs_seqio.py t5xcpp|seqio ROOT [EPOCHS] [THREADS]
(ROOT: the repository; t5xcpp needs build/python on PYTHONPATH.)
"""
import glob
import hashlib
import json
import os
import sys
import time

impl, root = sys.argv[1], sys.argv[2]
epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 20
threads = int(sys.argv[4]) if len(sys.argv) > 4 else 1
LENGTHS = {"inputs": 64, "targets": 64}
BATCH = 32
train_files = sorted(glob.glob(os.path.join(root, "tests/data/seqio/gpl3_lines.train-*.txt")))
n_lines = sum(1 for f in train_files for _ in open(f, encoding="utf-8"))


def t5xcpp_batches():
    return seqio.get_dataset("gpl3_lines_copy", LENGTHS, shuffle=False, num_epochs=epochs, seed=0,
                             feature_converter=seqio.EncDecFeatureConverter(pack=True), batch_size=BATCH,
                             num_threads=threads)


def seqio_batches():
    vocab = seqio.SentencePieceVocabulary(os.path.join(root, "tests/golden/seqio/vocab/spm1000.model"),
                                          extra_ids=100)
    features = {k: seqio.Feature(vocab, add_eos=True) for k in LENGTHS}

    def copy_line(ds):  # TextLineDataSource yields the lines as scalar strings
        return ds.map(lambda line: {"inputs": line, "targets": line}, num_parallel_calls=tf.data.AUTOTUNE)

    seqio.TaskRegistry.add(
        "gpl3_lines_copy",
        # The files one after the other, as the C++ TextLine source reads them unshuffled
        # (seqio's TextLineDataSource interleaves them in blocks of 16 lines).
        source=seqio.FunctionDataSource(lambda split, shuffle_files, seed=None: tf.data.TextLineDataset(train_files),
                                        splits=["train"]),
        preprocessors=[copy_line, seqio.preprocessors.tokenize,
                       seqio.preprocessors.append_eos_after_trim],
        output_features=features)
    ds = seqio.get_dataset("gpl3_lines_copy", LENGTHS, dataset_split="train", shuffle=False, num_epochs=epochs,
                           feature_converter=seqio.EncDecFeatureConverter(pack=True), batch_size=BATCH, seed=0)
    return ds.as_numpy_iterator()


# Imports are not timed; the clock starts at get_dataset (pipeline set-up included).
if impl == "t5xcpp":
    from t5xcpp import seqio
else:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import seqio
    import tensorflow as tf
t0 = time.perf_counter()
it = t5xcpp_batches() if impl == "t5xcpp" else seqio_batches()
batches = tokens = 0
first = None
digest = hashlib.sha256()
for b in it:
    if first is None:
        first = time.perf_counter()
    for k in sorted(b):
        digest.update(k.encode() + b[k].astype("<i4").tobytes())
    batches += 1
    tokens += int((b["encoder_input_tokens"] != 0).sum() + (b["decoder_target_tokens"] != 0).sum())
    if batches == 1:
        first_tokens = tokens
t1 = time.perf_counter()
examples = n_lines * epochs
print(json.dumps({"impl": impl, "threads": threads if impl == "t5xcpp" else "tf.data AUTOTUNE",
                  "epochs": epochs, "examples": examples, "batches": batches, "tokens": tokens, "sha256": digest.hexdigest()[:16],
                  "seconds": round(t1 - t0, 3), "first_batch_s": round(first - t0, 3),
                  "examples_per_s": round(examples / (t1 - t0), 1), "tokens_per_s": round(tokens / (t1 - t0), 1),
                  # After the first batch (tf.data's graph building excluded).
                  "steady_tokens_per_s": round((tokens - first_tokens) / (t1 - first), 1)}))
