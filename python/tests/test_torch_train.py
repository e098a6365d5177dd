"""A short PyTorch training loop fed by t5xcpp.seqio: a bigram language model
(embedding + linear) on gpl3_lm's packed LM batches; the loss falls."""
import json
import unittest

import numpy as np
import torch

from t5xcpp import seqio


class TorchTraining(unittest.TestCase):
    def test_loss_falls(self):
        torch.manual_seed(0)
        task = seqio.get_mixture_or_task("gpl3_lm")
        vocab_size = task.output_features["targets"].vocabulary.vocab_size
        ds = seqio.get_dataset("gpl3_lm", {"targets": 64}, num_epochs=None, seed=0, batch_size=16,
                               feature_converter=seqio.LMFeatureConverter(pack=True))
        model = torch.nn.Sequential(torch.nn.Embedding(vocab_size, 32), torch.nn.Linear(32, vocab_size))
        opt = torch.optim.Adam(model.parameters(), lr=3e-2)
        losses = []
        for step in range(40):
            b = {k: torch.from_numpy(v).long() for k, v in next(ds).items()}
            self.assertEqual(tuple(b["decoder_input_tokens"].shape), (16, 64))
            logits = model(b["decoder_input_tokens"])
            nll = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab_size),
                                                    b["decoder_target_tokens"].reshape(-1), reduction="none")
            w = b["decoder_loss_weights"].reshape(-1).float()
            loss = (nll * w).sum() / w.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            if step == 19:
                state = ds.get_state()
        print("losses:", " ".join(f"{x:.3f}" for x in losses))
        self.assertGreater(losses[0], 0.9 * np.log(vocab_size))  # starts near uniform
        self.assertLess(np.mean(losses[-5:]), losses[0] - 1.5)
        self.assertEqual(json.loads(state)["position"]["batches"], 20)


if __name__ == "__main__":
    unittest.main(verbosity=2)
