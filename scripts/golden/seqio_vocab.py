#!/usr/bin/env python3
"""Golden encode/decode outputs of seqio's vocabularies, for tests/seqio.

Needs: pip install seqio sentencepiece (seqio 0.0.20 was used), and the
Debian `sentencepiece` package for spm_train. Run from the repository root:

    python scripts/golden/seqio_vocab.py [--retrain]

Writes tests/golden/seqio/vocab/{spm1000.model,golden.jsonl}. The
SentencePiece model is trained on the GPL-3 text that Debian ships in
/usr/share/common-licenses (T5 conventions: pad 0, eos 1, unk 2, no bos).
The test strings are real lines of that licence plus non-ASCII lines of
Debian copyright files; they are stored in golden.jsonl, so tests need no
file outside the repository.
"""
import argparse
import glob
import json
import os
import subprocess

import seqio

OUT = "tests/golden/seqio/vocab"
MODEL = os.path.join(OUT, "spm1000.model")
GPL = "/usr/share/common-licenses/GPL-3"


def train():
  prefix = os.path.join(OUT, "spm1000")
  subprocess.run([
      "spm_train", f"--input={GPL}", f"--model_prefix={prefix}", "--vocab_size=1000",
      "--model_type=unigram", "--character_coverage=1.0", "--pad_id=0", "--eos_id=1",
      "--unk_id=2", "--bos_id=-1", "--num_threads=1", "--minloglevel=2"], check=True)
  os.remove(prefix + ".vocab")


def test_lines():
  with open(GPL, encoding="utf-8") as f:
    lines = [l.strip() for l in f if l.strip()]
  picked = lines[::17][:40]
  nonascii = set()
  for path in sorted(glob.glob("/usr/share/doc/*/copyright")):
    try:
      with open(path, encoding="utf-8") as f:
        for l in f:
          l = l.strip()
          if any(ord(c) > 127 for c in l) and len(l) < 100:
            nonascii.add(l)
    except (UnicodeDecodeError, OSError):
      continue
  picked += sorted(nonascii)[:20]
  # Edge cases: sentinels typed as text, repeated spaces, empty string.
  picked += ["<extra_id_0> Foo <extra_id_1> bar <extra_id_99>", "a a  a   a", "", "  leading",
             "tab\tseparated", "THE PROGRAM IS PROVIDED \"AS IS\"", "日本語のテキスト"]
  return picked


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--retrain", action="store_true")
  args = ap.parse_args()
  os.makedirs(OUT, exist_ok=True)
  if args.retrain or not os.path.exists(MODEL):
    train()
  vocabs = {
      "sp0": (f"sentencepiece:{MODEL}", seqio.SentencePieceVocabulary(MODEL)),
      "sp100": (f"sentencepiece:{MODEL}:extra_ids=100", seqio.SentencePieceVocabulary(MODEL, extra_ids=100)),
      "byte0": ("byte", seqio.ByteVocabulary()),
      "byte10": ("byte:extra_ids=10", seqio.ByteVocabulary(extra_ids=10)),
      "pass": ("passthrough:128:eos_id=1", seqio.PassThroughVocabulary(128, eos_id=1)),
  }
  rows = []
  lines = test_lines()
  for key in ["sp0", "sp100", "byte0", "byte10"]:
    spec, v = vocabs[key]
    rows.append({"vocab": spec, "op": "size", "vocab_size": int(v.vocab_size),
                 "eos_id": v.eos_id, "unk_id": v.unk_id})
    for text in lines:
      ids = [int(i) for i in v.encode(text)]
      rows.append({"vocab": spec, "op": "encode", "text": text, "ids": ids})
      rows.append({"vocab": spec, "op": "decode", "ids": ids, "text": v.decode(ids)})
    # Decoding rules: EOS cut, out-of-range ids, extra ids, UNK, PAD.
    n = int(v.vocab_size)
    base = v.encode(lines[0])[:6]
    cases = [
        base + [1] + base,               # cut after first EOS
        [1] + base,                      # EOS first
        base + [n, n + 7] + base,        # beyond vocab_size
        base + [n - 1, n - 2, n - 10],   # top ids (extra ids when present)
        base + [2, 0, 0] + base,         # UNK and PAD inside
        [0, 0] + base + [0],
        [],
    ]
    if key.startswith("byte"):
      cases += [[0xE2 + 3, 0x82 + 3, 0x41 + 3],          # truncated sequence then 'A'
                [0xED + 3, 0xA0 + 3, 0x80 + 3, 0x42 + 3],  # surrogate
                [0xC0 + 3, 0x80 + 3, 0x43 + 3],           # overlong
                [0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3, 0x44 + 3, 0xFF + 3]]
    for ids in cases:
      rows.append({"vocab": spec, "op": "decode", "ids": [int(i) for i in ids], "text": v.decode(ids)})
  spec, v = vocabs["pass"]
  for ids in [[2, 3, 4, 1, 5, 6, 7, 8, 9], [5, 6, 7], [1], []]:
    rows.append({"vocab": spec, "op": "decode_ids", "ids": ids,
                 "out": [int(i) for i in v.decode(ids)]})
  # Piece names of the extra ids: <extra_id_0> is the top id.
  spec, v = vocabs["sp100"]
  for k in [0, 1, 99]:
    rows.append({"vocab": spec, "op": "piece", "id": int(v.vocab_size) - 1 - k,
                 "piece": v.tokenizer.id_to_piece(int(v.vocab_size) - 1 - k)})
  with open(os.path.join(OUT, "golden.jsonl"), "w", encoding="utf-8") as f:
    for r in rows:
      f.write(json.dumps(r, ensure_ascii=False) + "\n")
  print(f"wrote {len(rows)} rows")


if __name__ == "__main__":
  main()
