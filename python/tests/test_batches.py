"""t5xcpp.seqio's batches equal the C++ pipeline's, bit for bit.

The reference is the seqio CLI ($SEQIO_BIN): `seqio show` (the task's
preprocessed examples) piped into `seqio convert` (the feature converter),
grouped into batches of batch_size rows with the remainder dropped, as
seqio.get_dataset batches. Checked for packed and unpacked converters, a
mixture, 2 host shards, and resumption from get_state().
"""
import json
import os
import itertools
import subprocess
import tempfile
import threading
import unittest

import numpy as np

from t5xcpp import seqio

SEQIO = os.environ["SEQIO_BIN"]


def cli_rows(task, lengths, converter, pack, seed, shard="0/1", epochs=2, module=None):
    lens = ",".join(f"{k}={v}" for k, v in sorted(lengths.items()))
    show = subprocess.run([SEQIO] + (["--module", module] if module else []) + ["show", task, "--shuffle", "--seed", str(seed), "--shard", shard,
                           "--epochs", str(epochs), "--lengths", lens],
                          check=True, capture_output=True)
    conv = [SEQIO, "convert", "--converter", converter, "--lengths", lens] + (["--pack"] if pack else [])
    out = subprocess.run(conv, input=show.stdout, check=True, capture_output=True)
    return [json.loads(line) for line in out.stdout.decode().splitlines()]


def cli_batches(rows, batch_size):
    out = []
    for b in range(len(rows) // batch_size):
        chunk = rows[b * batch_size:(b + 1) * batch_size]
        out.append({k: np.array([r[k] for r in chunk], dtype=np.int32) for k in chunk[0]})
    return out


CONVERTERS = {
    "enc_dec": seqio.EncDecFeatureConverter,
    "lm": seqio.LMFeatureConverter,
    "prefix_lm": seqio.PrefixLMFeatureConverter,
}


class BatchesEqualCpp(unittest.TestCase):
    def assertBatchesEqual(self, got, want):
        self.assertEqual(len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want)):
            self.assertEqual(sorted(g), sorted(w), f"batch {i} features")
            for k in w:
                self.assertEqual(g[k].dtype, np.int32)
                np.testing.assert_array_equal(g[k], w[k], err_msg=f"batch {i} feature {k}")

    def module_dataset(self, task, lengths, converter, pack, seed, batch_size, shard=(0, 1), epochs=2, state=None):
        return seqio.get_dataset(task, lengths, dataset_split="train", shuffle=True, num_epochs=epochs,
                                 feature_converter=CONVERTERS[converter](pack=pack), shard_info=shard,
                                 seed=seed, batch_size=batch_size, state=state)

    def check(self, task, lengths, converter, pack, seed, batch_size, min_batches):
        want = cli_batches(cli_rows(task, lengths, converter, pack, seed), batch_size)
        self.assertGreaterEqual(len(want), min_batches)
        got = list(self.module_dataset(task, lengths, converter, pack, seed, batch_size))
        self.assertBatchesEqual(got, want)
        return got

    def test_enc_dec_packed(self):
        got = self.check("gpl3_prefix", {"inputs": 32, "targets": 32}, "enc_dec", True, 7, 8, 10)
        self.assertEqual(got[0]["encoder_input_tokens"].shape, (8, 32))
        self.assertIn("decoder_segment_ids", got[0])
        # The batches do not depend on the preprocessing threads.
        threads = seqio.get_dataset("gpl3_prefix", {"inputs": 32, "targets": 32}, num_epochs=2, seed=7,
                                    feature_converter=seqio.EncDecFeatureConverter(pack=True), batch_size=8,
                                    num_threads=2, block_size=50)
        blocks = seqio.get_dataset("gpl3_prefix", {"inputs": 32, "targets": 32}, num_epochs=2, seed=7,
                                   feature_converter=seqio.EncDecFeatureConverter(pack=True), batch_size=8,
                                   block_size=50)
        self.assertBatchesEqual(list(threads), list(blocks))

    def test_lm_unpacked(self):
        got = self.check("gpl3_lm", {"targets": 48}, "lm", False, 3, 4, 10)
        self.assertEqual(sorted(got[0]), ["decoder_input_tokens", "decoder_loss_weights", "decoder_target_tokens"])
        # Without batch_size: single rows, [length] each.
        want = cli_rows("gpl3_lm", {"targets": 48}, "lm", False, 3)
        rows = list(self.module_dataset("gpl3_lm", {"targets": 48}, "lm", False, 3, None))
        self.assertEqual(len(rows), len(want))
        for g, w in zip(rows, want):
            self.assertEqual(g["decoder_target_tokens"].shape, (48,))
            for k in w:
                np.testing.assert_array_equal(g[k], np.array(w[k], dtype=np.int32))

    def test_prefix_lm_packed(self):
        self.check("gpl3_lines_copy", {"inputs": 16, "targets": 16}, "prefix_lm", True, 11, 16, 10)

    def test_mixture(self):
        self.check("gpl3_mix", {"inputs": 24, "targets": 24}, "enc_dec", False, 5, 8, 10)

    def test_two_host_shards(self):
        lengths = {"inputs": 32, "targets": 32}
        for index in range(2):
            want = cli_batches(cli_rows("gpl3_lines_copy", lengths, "enc_dec", True, 9, shard=f"{index}/2"), 4)
            got = list(self.module_dataset("gpl3_lines_copy", lengths, "enc_dec", True, 9, 4, shard=(index, 2)))
            self.assertGreater(len(got), 5)
            self.assertBatchesEqual(got, want)
        # The shards hold different examples: their first batches differ.
        a = next(self.module_dataset("gpl3_lines_copy", lengths, "enc_dec", True, 9, 4, shard=(0, 2)))
        b = next(self.module_dataset("gpl3_lines_copy", lengths, "enc_dec", True, 9, 4, shard=(1, 2)))
        self.assertFalse(np.array_equal(a["encoder_input_tokens"], b["encoder_input_tokens"]))

    def test_resume_from_state(self):
        lengths = {"inputs": 32, "targets": 32}
        want = cli_batches(cli_rows("gpl3_prefix", lengths, "enc_dec", True, 7, shard="1/2"), 8)
        for k in (1, 5, len(want) - 1):
            ds = self.module_dataset("gpl3_prefix", lengths, "enc_dec", True, 7, 8, shard=(1, 2))
            head = [next(ds) for _ in range(k)]
            state = ds.get_state()
            self.assertEqual(json.loads(state)["position"]["batches"], k)
            resumed = self.module_dataset("gpl3_prefix", lengths, "enc_dec", True, 7, 8, shard=(1, 2), state=state)
            self.assertBatchesEqual(head + list(resumed), want)
            # set_state rewinds an iterator that has run on.
            list(ds)
            ds.set_state(state)
            self.assertBatchesEqual(list(ds), want[k:])
        # seed=None takes the state's seed.
        resumed = seqio.get_dataset("gpl3_prefix", lengths, shuffle=True, num_epochs=2, shard_info=seqio.ShardInfo(1, 2),
                                    feature_converter=seqio.EncDecFeatureConverter(pack=True), batch_size=8,
                                    state=state)
        self.assertEqual(resumed.seed, 7)
        self.assertBatchesEqual(list(resumed), want[len(want) - 1:])

    def test_seqio_signatures_and_defaults(self):
        # seqio.get_dataset(name, lengths, feature_converter, dataset_split, ...):
        # the converter third, shuffle False by default (the split's file
        # order), a Task object for the name, verbose accepted.
        lengths = {"inputs": 20, "targets": 20}
        conv = seqio.EncDecFeatureConverter()
        ordered = list(seqio.get_dataset("gpl3_prefix", lengths, conv, "validation"))
        self.assertBatchesEqual(ordered, list(seqio.get_dataset("gpl3_prefix", lengths, feature_converter=conv,
                                                                dataset_split="validation", shuffle=False)))
        task = seqio.get_mixture_or_task("gpl3_prefix")
        self.assertBatchesEqual(ordered, list(seqio.get_dataset(task, lengths, conv, "validation", verbose=False)))
        with self.assertRaisesRegex(TypeError, "must be a name or a Task / Mixture, got 3"):
            seqio.get_dataset(3, lengths, conv)
        # Mixture.get_dataset repeats by default (num_epochs=None), Task's reads once.
        mix = seqio.get_mixture_or_task("gpl3_mix")
        once = sum(len(list(t.get_dataset(lengths, split="validation"))) for t in mix.tasks)
        it = mix.get_dataset(lengths, split="validation", seed=0)
        self.assertEqual(len([next(it) for _ in range(3 * once)]), 3 * once)
        # seqio.get_subtasks and Mixture.output_features (the first task's).
        self.assertEqual([t.name for t in seqio.get_subtasks(mix)], ["gpl3_lines_copy", "gpl3_prefix"])
        self.assertEqual([t.name for t in seqio.get_subtasks("gpl3_prefix")], ["gpl3_prefix"])
        self.assertEqual(sorted(mix.output_features), ["inputs", "targets"])
        # passthrough_features as seqio's {name: FeatureSpec} dict too; the model
        # lengths list them with their task lengths, as seqio's.
        for passthrough in (["extra"], {"extra": object()}):
            c = seqio.EncDecFeatureConverter(pack=False, passthrough_features=passthrough)
            self.assertEqual(c.get_model_feature_lengths({"inputs": 6, "targets": 6, "extra": 4}),
                             {"encoder_input_tokens": 6, "decoder_target_tokens": 6, "decoder_input_tokens": 6,
                              "decoder_loss_weights": 6, "extra": 4})
        with self.assertRaisesRegex(TypeError, "a list of names or a dict, got the string 'extra'"):
            seqio.EncDecFeatureConverter(passthrough_features="extra")
        # The metrics take numbers, as t5.evaluation.metrics do.
        self.assertEqual(seqio.metrics.accuracy([1, 0, 1, 1], [1, 1, 1, 0]), {"accuracy": 50.0})
        self.assertAlmostEqual(seqio.metrics.pearson_corrcoef([1.0, 2.0, 3.5], [1.1, 2.2, 3.0])["pearson_corrcoef"],
                               97.88834658894731, places=9)

    def test_state_of_other_dataset_is_refused(self):
        lengths = {"inputs": 32, "targets": 32}
        ds = self.module_dataset("gpl3_prefix", lengths, "enc_dec", True, 7, 8)
        next(ds)
        with self.assertRaisesRegex(ValueError, r"state: saved with seed 7, but this dataset has seed 8"):
            self.module_dataset("gpl3_prefix", lengths, "enc_dec", True, 8, 8, state=ds.get_state())
        with self.assertRaisesRegex(ValueError, r"batch_size"):
            self.module_dataset("gpl3_prefix", lengths, "enc_dec", True, 7, 4, state=ds.get_state())
        with self.assertRaisesRegex(ValueError, "not a state of t5xcpp.seqio"):
            ds.set_state("{}")

    def test_examples_equal_show(self):
        task = seqio.get_mixture_or_task("gpl3_prefix")
        self.assertIsInstance(task, seqio.Task)
        ds = task.get_dataset({"inputs": 20, "targets": 20}, split="validation", shuffle=True, seed=4)
        got = list(ds)
        show = subprocess.run([SEQIO, "show", "gpl3_prefix", "--split", "validation", "--shuffle", "--seed", "4",
                               "--lengths", "inputs=20,targets=20"], check=True, capture_output=True)
        want = [json.loads(line) for line in show.stdout.decode().splitlines()]
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertEqual(sorted(g), sorted(w))
            for k, v in w.items():
                if isinstance(v, list):
                    np.testing.assert_array_equal(g[k], np.array(v, dtype=np.int32))
                elif isinstance(v, str):
                    self.assertEqual(g[k].decode(), v)
                else:
                    self.assertEqual(g[k], v)
        # Example-level resume: the tail after a saved position.
        ds = task.get_dataset({"inputs": 20, "targets": 20}, split="validation", shuffle=True, seed=4)
        next(ds), next(ds), next(ds)
        tail = list(task.get_dataset({"inputs": 20, "targets": 20}, split="validation", shuffle=True, seed=4,
                                     state=ds.get_state()))
        self.assertEqual([e["targets"].tolist() for e in tail], [w["targets"] for w in want[3:]])

    def test_errors(self):
        with self.assertRaisesRegex(ValueError, "No Task or Mixture found with name 'gpl3_prefx'.*gpl3_prefix"):
            seqio.get_mixture_or_task("gpl3_prefx")
        with self.assertRaisesRegex(ValueError, "feature_converter is required"):
            seqio.get_dataset("gpl3_prefix", {"inputs": 8, "targets": 8}, seed=0)
        with self.assertRaisesRegex(ValueError, r"shard_info: index 2 is not in \[0, 2\)"):
            seqio.get_dataset("gpl3_prefix", {"inputs": 8, "targets": 8}, seed=0, shard_info=(2, 2),
                              feature_converter=seqio.EncDecFeatureConverter())

    def test_argument_errors_name_the_argument(self):
        enc_dec = seqio.EncDecFeatureConverter()
        with self.assertRaisesRegex(KeyError, "task_feature_lengths has no 'targets'"):
            enc_dec.get_model_feature_lengths({"inputs": 4})
        with self.assertRaisesRegex(ValueError, "example 0, feature 'inputs': token ids must be integers, got dtype float64"):
            enc_dec([{"inputs": [1.5, 2.7], "targets": [1]}], {"inputs": 4, "targets": 4})
        with self.assertRaisesRegex(ValueError, "token id 4294967296 at position 1 is outside int32"):
            enc_dec([{"inputs": [1, 2**32], "targets": [1]}], {"inputs": 4, "targets": 4})
        # integer ids of any integer dtype, and an empty list, are token ids
        out = enc_dec([{"inputs": np.array([5, 6], dtype=np.int64), "targets": []}], {"inputs": 4, "targets": 4})
        np.testing.assert_array_equal(out[0]["encoder_input_tokens"], [5, 6, 0, 0])
        with self.assertRaisesRegex(TypeError, "feature_converter must be a FeatureConverter .*got str 'enc_dec'"):
            seqio.get_dataset("gpl3_prefix", {"inputs": 8, "targets": 8}, seed=0, feature_converter="enc_dec")
        mix = seqio.get_mixture_or_task("gpl3_mix")
        # seqio 0.0.20: a task outside the mixture has the rate 0.0.
        self.assertEqual(mix.get_rate(seqio.get_mixture_or_task("gpl3_lm")), 0.0)
        with self.assertRaisesRegex(ValueError, r"task_feature_lengths\['inputs'\] is -3; lengths are >= 0"):
            seqio.get_dataset("gpl3_prefix", {"inputs": -3, "targets": 8}, seed=0, feature_converter=enc_dec)

    def test_num_epochs_as_tf_data_repeat(self):
        # seqio repeats with tf.data: None and -1 forever; a count below 1 is refused here (0 would be empty there).
        task = seqio.get_mixture_or_task("gpl3_prefix")
        one = len(list(task.get_dataset({"inputs": 20, "targets": 20}, split="validation", shuffle=False)))
        for forever in (None, -1):
            ds = task.get_dataset({"inputs": 20, "targets": 20}, split="validation", shuffle=False, num_epochs=forever)
            self.assertEqual(len(list(itertools.islice(ds, 3 * one))), 3 * one)
        for bad in (0, -2):
            with self.assertRaisesRegex(ValueError, f"num_epochs must be >= 1, or None \\(or -1\\) to repeat forever; got {bad}"):
                task.get_dataset({"inputs": 20, "targets": 20}, split="validation", num_epochs=bad)
            with self.assertRaisesRegex(ValueError, "num_epochs must be >= 1"):
                seqio.get_dataset("gpl3_prefix", {"inputs": 8, "targets": 8}, seed=0, num_epochs=bad,
                                  feature_converter=seqio.EncDecFeatureConverter())

    def test_one_iterator_shared_by_two_threads(self):
        # Calls take turns (as on a tf.data iterator): every batch comes out once, as one thread would see them.
        def make():
            return seqio.get_dataset("gpl3_prefix", {"inputs": 64, "targets": 64}, seed=3, num_epochs=4,
                                     feature_converter=seqio.EncDecFeatureConverter(pack=True), batch_size=8)
        want = [b["encoder_input_tokens"].tobytes() for b in make()]
        self.assertGreater(len(want), 20)
        for _ in range(3):
            ds, got, states, errors = make(), [[], []], [], []

            def pull(i):
                try:
                    for b in ds:
                        got[i].append(b["encoder_input_tokens"].tobytes())
                        if len(got[i]) % 5 == 0:
                            states.append(ds.get_state())
                except Exception as e:  # noqa: BLE001 (reported below)
                    errors.append(e)

            threads = [threading.Thread(target=pull, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
            self.assertFalse(any(t.is_alive() for t in threads), "an iterator shared by two threads hung")
            self.assertEqual(errors, [])
            self.assertEqual(sorted(got[0] + got[1]), sorted(want))
            for st in states:  # each state taken between batches restores
                self.assertIn(json.loads(st)["position"]["batches"], range(len(want) + 1))

    def test_registry_and_plugin(self):
        self.assertIn("gpl3_lm", seqio.TaskRegistry.names())
        self.assertEqual(seqio.MixtureRegistry.names(), sorted(seqio.MixtureRegistry.names()))
        mix = seqio.get_mixture_or_task("gpl3_mix")
        self.assertEqual([t.name for t in mix.tasks], ["gpl3_lines_copy", "gpl3_prefix"])
        self.assertEqual(mix.get_rate(mix.tasks[1]), 2.0)
        seqio.load_module(os.environ["PLUGIN"])
        task = seqio.get_mixture_or_task("python_plugin_upper")
        first = next(task.get_dataset(split="validation", shuffle=False, seed=0))
        self.assertEqual(first["text"], first["text"].upper())
        self.assertGreater(len(first["text"]), 0)
        with self.assertRaises(RuntimeError):
            seqio.load_module("no/such/plugin.so")


    def test_task_file(self):
        # Tasks declared in a gin task file (no C++) through load_module, as
        # `seqio --module tasks.gin`; its paths are relative to the repository root.
        cwd = os.getcwd()
        os.chdir(seqio.data_root())
        try:
            seqio.load_module("examples/my_tsv/tasks.gin")
            self.assertIn("my_tsv_en_es", seqio.TaskRegistry.names())
            self.assertIn("my_tsv_both", seqio.MixtureRegistry.names())
            lengths = {"inputs": 32, "targets": 32}
            want = cli_batches(cli_rows("my_tsv_en_es", lengths, "enc_dec", False, 3,
                                        module="examples/my_tsv/tasks.gin"), 4)
            self.assertGreaterEqual(len(want), 10)
            got = list(self.module_dataset("my_tsv_en_es", lengths, "enc_dec", False, 3, 4))
            self.assertBatchesEqual(got, want)
            with self.assertRaisesRegex(Exception, "no_such.gin"):
                seqio.load_module("examples/my_tsv/no_such.gin")
        finally:
            os.chdir(cwd)

    def test_bible_tasks_need_their_data(self):
        with tempfile.TemporaryDirectory() as empty:
            os.environ["T5X_DATA_DIR"] = empty
            try:
                ok, why = seqio.register_bible_tasks()
            finally:
                del os.environ["T5X_DATA_DIR"]
        self.assertFalse(ok)
        self.assertIn(f"need prepared data in '{empty}' (run scripts/prepare_data.sh", why)


if __name__ == "__main__":
    unittest.main(verbosity=2)
