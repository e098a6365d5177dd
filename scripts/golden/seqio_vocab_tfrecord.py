#!/usr/bin/env python3
"""Writes tests/data/seqio/tf_examples.tfrecord with TensorFlow (pip install
tensorflow; seqio pulls it in), so that the C++ TFRecord/tf.Example reader is
tested against a file TensorFlow produced. Run from the repository root."""
import tensorflow as tf

ROWS = [
    {"text": "This program is free software", "ids": [5, 6, 7], "label": 3, "weight": 1.5},
    {"text": "", "ids": [], "label": -2, "weight": -1.0},
    {"text": "café €", "ids": [1, 300000, 2], "label": 0, "weight": 0.25},
]

with tf.io.TFRecordWriter("tests/data/seqio/tf_examples.tfrecord") as w:
  for r in ROWS:
    f = {
        "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[r["text"].encode()])),
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=r["ids"])),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[r["label"]])),
        "weight": tf.train.Feature(float_list=tf.train.FloatList(value=[r["weight"]])),
    }
    w.write(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())
print("wrote", len(ROWS))
