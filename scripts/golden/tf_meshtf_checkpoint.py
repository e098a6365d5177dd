"""Writes a TensorFlow (Mesh-TF T5 named) checkpoint from a t5x.cpp checkpoint,
with TensorFlow's own writer, for tests/data/tf_mtf_tiny/.

usage: python tf_meshtf_checkpoint.py T5X_CHECKPOINT_DIR OUT_PREFIX

Needs tensorflow-cpu (2.21.0 was used), numpy and msgpack from PyPI, in a venv:
    /usr/bin/python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0 msgpack
Run once; the outputs are committed (tests never need TensorFlow).

What it writes (as Mesh-TF's sharded Saver would, tensor_bundle.cc): the
parameters as DT_BFLOAT16 under Mesh-TF T5.1.1 names (the t5x.cpp checkpoint
must be saved with SaveCheckpointConfig.dtype = 'bfloat16', so that the bits
are the original's), the Adafactor slots as DT_FLOAT `<name>_slot_v`, or
`<name>_slot_vr` / `<name>_slot_vc` for factored ones (t5x's v_row / v_col;
t5x's checkpoint_importer.py SLOT_MAP maps them back unchanged),
`global_step` DT_INT64, in two shards (tf.raw_ops.SaveV2 twice, then
MergeV2Checkpoints), with `shared/embedding` stored as two row slices, one per
shard (a partitioned variable). The encoder's norms use the `rms_norm`
spelling and the decoder's the legacy `layer_norm` / `final_layer_norm`, so
that both spellings are read. (1,) placeholder slots (m; v_row and v_col of
unfactored parameters; v of factored ones) are not written: t5x's importer recreates them.
tf.train.load_checkpoint then reads everything back and checks it bitwise.
"""
import gzip
import json
import os
import re
import sys
import zlib

import msgpack
import numpy as np
import tensorflow as tf


def decode_leaf(obj, ckpt_dir):
    if isinstance(obj, msgpack.ExtType):
        assert obj.code in (1, 3), obj.code
        shape, dtype, data = msgpack.unpackb(obj.data, raw=False)
        return raw_array(data, dtype, shape)
    if isinstance(obj, dict) and "driver" in obj:
        path = obj["kvstore"]["path"] if "kvstore" in obj else obj["path"]
        adir = os.path.join(ckpt_dir, path.rstrip("/"))
        with open(os.path.join(adir, ".zarray")) as f:
            meta = json.load(f)
        shape, chunks = meta["shape"], meta["chunks"]
        dtype = "bfloat16" if meta["dtype"] == "bfloat16" else np.dtype(meta["dtype"]).name
        out = np.zeros(shape, dtype=np.uint16 if dtype == "bfloat16" else dtype)
        grid = [range((s + c - 1) // c) for s, c in zip(shape, chunks)]
        for idx in np.ndindex(*[len(g) for g in grid]):
            name = ".".join(str(i) for i in idx) if idx else "0"
            with open(os.path.join(adir, name), "rb") as f:
                data = f.read()
            comp = (meta.get("compressor") or {}).get("id")
            if comp == "gzip":
                data = gzip.decompress(data)
            elif comp == "zlib":
                data = zlib.decompress(data)
            elif comp is not None:
                raise SystemExit(f"{adir}: compressor {comp} not handled here; save with gzip")
            block, _ = raw_array(data, dtype, chunks)
            sl = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))
            out[sl] = block[tuple(slice(0, x.stop - x.start) for x in sl)]
        return out, dtype
    return None


def raw_array(data, dtype, shape):
    if dtype == "bfloat16":
        return np.frombuffer(data, dtype="<u2").reshape(shape).copy(), "bfloat16"
    return np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape).copy(), dtype


def flatten(d, prefix=""):
    for k, v in d.items():
        p = f"{prefix}/{k}" if prefix else k
        if isinstance(v, dict) and "driver" not in v:
            yield from flatten(v, p)
        else:
            yield p, v


def meshtf_name(path):
    """t5x path (below target/) -> Mesh-TF T5.1.1 name (the inverse of t5x's importer)."""
    m = re.fullmatch(r"(encoder|decoder)/layers_(\d+)/(.*)", path)
    if path == "token_embedder/embedding":
        return "shared/embedding"
    if path == "encoder/relpos_bias/rel_embedding":
        return "encoder/block_000/layer_000/SelfAttention/relative_attention_bias"
    if path == "decoder/relpos_bias/rel_embedding":
        return "decoder/block_000/layer_000/SelfAttention/relative_attention_bias"
    if path == "encoder/encoder_norm/scale":
        return "encoder/rms_norm/scale"
    if path == "decoder/decoder_norm/scale":
        return "decoder/final_layer_norm/scale"
    if path == "decoder/logits_dense/kernel":
        return "decoder/logits/kernel"
    if not m:
        raise SystemExit(f"no Mesh-TF name for {path}")
    tower, n, rest = m.group(1), int(m.group(2)), m.group(3)
    block = f"{tower}/block_{n:03d}"
    qkvo = {"query": "q", "key": "k", "value": "v", "out": "o"}
    a = re.fullmatch(r"(attention|self_attention|encoder_decoder_attention)/(query|key|value|out)/kernel", rest)
    if a:
        layer = "layer_001/EncDecAttention" if a.group(1) == "encoder_decoder_attention" else "layer_000/SelfAttention"
        return f"{block}/{layer}/{qkvo[a.group(2)]}"
    mlp = re.fullmatch(r"mlp/(wi_0|wi_1|wi|wo)/kernel", rest)
    if mlp:
        return f"{block}/layer_{1 if tower == 'encoder' else 2:03d}/DenseReluDense/{mlp.group(1)}/kernel"
    norm_layer = {"pre_attention_layer_norm": 0, "pre_self_attention_layer_norm": 0,
                  "pre_cross_attention_layer_norm": 1,
                  "pre_mlp_layer_norm": 1 if tower == "encoder" else 2}
    nm = re.fullmatch(r"(\w+)/scale", rest)
    if nm and nm.group(1) in norm_layer:
        spelling = "rms_norm" if tower == "encoder" else "layer_norm"
        return f"{block}/layer_{norm_layer[nm.group(1)]:03d}/{spelling}/scale"
    raise SystemExit(f"no Mesh-TF name for {path}")


def to_tf(arr, dtype):
    if dtype == "bfloat16":
        return tf.bitcast(tf.constant(arr, dtype=tf.uint16), tf.bfloat16)
    return tf.constant(arr)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 64
    ckpt_dir, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(ckpt_dir, "checkpoint"), "rb") as f:
        root = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)
    flat = {}
    for p, leaf in flatten(root["optimizer"]):
        dec = decode_leaf(leaf, ckpt_dir)
        if dec is not None:
            flat[p] = dec
        elif p == "state/step":
            flat[p] = (np.array(leaf, dtype=np.int64), "int64")
    tensors = {}  # Mesh-TF name -> (array, dtype)
    for p, (arr, dtype) in sorted(flat.items()):
        if p == "state/step":
            tensors["global_step"] = (arr.astype(np.int64).reshape(()), "int64")
        elif p.startswith("target/"):
            if dtype != "bfloat16":
                raise SystemExit(f"{p} is {dtype}; save the t5x.cpp checkpoint with dtype 'bfloat16'")
            tensors[meshtf_name(p[len("target/"):])] = (arr, dtype)
        else:
            m = re.fullmatch(r"state/param_states/(.*)/(v|v_row|v_col|m)", p)
            if not m:
                raise SystemExit(f"unexpected leaf {p}")
            if arr.shape == (1,):
                continue  # t5x placeholder; the importer recreates it
            suffix = {"v": "_slot_v", "v_row": "_slot_vr", "v_col": "_slot_vc"}[m.group(2)]
            tensors[meshtf_name(m.group(1)) + suffix] = (arr, dtype)
    names = sorted(tensors)
    emb, _ = tensors["shared/embedding"]
    half = emb.shape[0] // 2
    full = f"{emb.shape[0]} {emb.shape[1]}"
    # Shard A: global_step, the first half of the embedding and the encoder;
    # shard B: the second half and the rest.
    parts = {"a": ([], [], []), "b": ([], [], [])}
    for n in names:
        arr, dtype = tensors[n]
        if n == "shared/embedding":
            for key, rows in (("a", slice(0, half)), ("b", slice(half, emb.shape[0]))):
                lo, hi = rows.start, rows.stop
                parts[key][0].append(n)
                parts[key][1].append(f"{full} {lo},{hi - lo}:-")
                parts[key][2].append(to_tf(arr[rows], dtype))
            continue
        key = "a" if n == "global_step" or n.startswith("encoder/") else "b"
        parts[key][0].append(n)
        parts[key][1].append("")
        parts[key][2].append(to_tf(arr, dtype))
    tmp = out + ".tmp"
    prefixes = []
    for key in ("a", "b"):
        n, s, t = parts[key]
        tf.raw_ops.SaveV2(prefix=f"{tmp}_{key}", tensor_names=n, shape_and_slices=s, tensors=t)
        prefixes.append(f"{tmp}_{key}")
    tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=prefixes, destination_prefix=out, delete_old_dirs=False)
    # Read back with TensorFlow and compare bitwise.
    r = tf.train.load_checkpoint(out)
    shapes = r.get_variable_to_shape_map()
    assert sorted(shapes) == names, (sorted(shapes), names)
    for n in names:
        arr, dtype = tensors[n]
        got = r.get_tensor(n)
        if dtype == "bfloat16":
            got = np.asarray(got).view(np.uint16)
        assert got.shape == arr.shape and np.array_equal(got, arr), n
        print(f"{n} {dtype} {tuple(arr.shape)}")
    print(f"wrote {out}.index and {out}.data-0000[01]-of-00002: {len(names)} tensors, "
          f"shared/embedding in two slices of {half} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
