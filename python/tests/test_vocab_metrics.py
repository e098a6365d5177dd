"""Vocabularies (encode/decode round trips, equal to `seqio vocab`) and metrics (known values)."""
import math
import os
import subprocess
import unittest

import numpy as np

from t5xcpp import seqio

SEQIO = os.environ["SEQIO_BIN"]
SPM = os.path.join(seqio.data_root(), "tests/golden/seqio/vocab/spm1000.model")
TEXT = ["This License applies to any program or other work.", "You may convey verbatim copies (section 4)."]


class Vocabularies(unittest.TestCase):
    def test_sentencepiece_round_trip_equals_cli(self):
        v = seqio.SentencePieceVocabulary(SPM, extra_ids=100)
        cli = subprocess.run([SEQIO, "vocab", "encode", "--vocab", f"sentencepiece:{SPM}:extra_ids=100"],
                             input="\n".join(TEXT).encode(), check=True, capture_output=True)
        want = [[int(x) for x in line.split()] for line in cli.stdout.decode().splitlines()]
        self.assertEqual([v.encode(t) for t in TEXT], want)
        for t in TEXT:
            self.assertEqual(v.decode(v.encode(t)), t)
            self.assertEqual(v.decode(np.array(v.encode(t) + [1, 0, 0], dtype=np.int32)), t)  # stops at EOS
        self.assertEqual((v.pad_id, v.eos_id, v.unk_id), (0, 1, 2))
        self.assertEqual(v.extra_ids, 100)
        self.assertEqual(v.encode("<extra_id_0>"), [v.vocab_size - 1])
        self.assertEqual(v.sentencepiece_model_file, SPM)
        self.assertEqual(v, seqio.make_vocabulary(f"sentencepiece:{SPM}:extra_ids=100"))

    def test_task_vocabulary(self):
        task = seqio.get_mixture_or_task("gpl3_lm")
        f = task.output_features["targets"]
        self.assertIsInstance(f.vocabulary, seqio.SentencePieceVocabulary)
        self.assertEqual(f.vocabulary, seqio.SentencePieceVocabulary(SPM, extra_ids=100))
        self.assertTrue(f.add_eos)
        self.assertEqual(f.dtype, "int32")

    def test_byte_vocabulary(self):
        v = seqio.ByteVocabulary()
        self.assertEqual(v.encode("hé"), [ord("h") + 3, 0xC3 + 3, 0xA9 + 3])
        self.assertEqual(v.decode([ord("h") + 3, 0xC3 + 3, 0xA9 + 3]), "hé")
        self.assertEqual(v.vocab_size, 259)

    def test_missing_model(self):
        with self.assertRaisesRegex(RuntimeError, "no/such.model"):
            seqio.SentencePieceVocabulary("no/such.model")


class Metrics(unittest.TestCase):
    def test_bleu_known_value(self):
        # All n-grams match; 6 prediction vs 7 reference tokens: 100 * exp(1 - 7/6) (sacrebleu 2.6.0).
        got = seqio.metrics.bleu(["the cat sat on the mat today"], ["the cat sat on the mat"])
        self.assertAlmostEqual(got["bleu"], 100.0 * math.exp(1.0 - 7.0 / 6.0), places=9)
        self.assertAlmostEqual(got["bleu"], 84.64817248906144, places=9)
        multi = seqio.metrics.compute("bleu", [["a b c d", "the work is free"]], ["the work is free"])
        self.assertAlmostEqual(multi["bleu"], 100.0, places=9)

    def test_other_metrics(self):
        self.assertEqual(seqio.metrics.sequence_accuracy(["a", "b", "c", "d"], ["a", "x", "c", "d"]),
                         {"sequence_accuracy": 75.0})
        self.assertIn("rougeLsum", seqio.metrics.rouge(["the cat sat"], ["the cat sat"]))
        self.assertIn("bleu", seqio.metrics.metric_names())

    def test_unknown_metric(self):
        with self.assertRaisesRegex(ValueError, "unknown metric 'bleuu'; did you mean 'bleu'"):
            seqio.metrics.compute("bleuu", ["a"], ["a"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
