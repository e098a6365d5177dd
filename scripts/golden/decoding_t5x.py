#!/usr/bin/env python3
"""Golden values for src/t5x/models/decoding.h from t5x's own t5x/decoding.py.

Runs t5x's `temperature_sample` and `beam_search` over a deterministic
step function and writes the inputs and t5x's outputs (sequences, scores) to
tests/golden/models/decoding_t5x.json; tests/t5x/models/decoding_test.cpp
(Decoding.T5xGolden*) runs our decoder over the same step function and
compares.

t5x's code is not vendored: pass the folder that holds t5x's decoding.py and
binary_search.py (the `t5x/` folder of a google-research/t5x checkout, or
copies of those two files). flax is not needed: the few flax pieces that
decoding.py touches (flax.struct.dataclass, flax.core.FrozenDict/freeze/
unfreeze, traverse_util.flatten_dict/unflatten_dict) are stubbed below.

Run (CPU jax):
  git -C <t5x mirror> show HEAD:t5x/decoding.py > /tmp/t5x_src/decoding.py
  git -C <t5x mirror> show HEAD:t5x/binary_search.py > /tmp/t5x_src/binary_search.py
  JAX_PLATFORMS=cpu $(scripts/python_env.sh) scripts/golden/decoding_t5x.py \
      /tmp/t5x_src [--t5x-commit SHA]

The step function (the C++ test implements the same, in float32):
  row r of the decode holds example ex[r] (carried in the decoding "cache", so
  t5x's cache expansion / beam gathering moves it as our gather_rows does);
  at loop index i (clamped to length - 1), with decoder inputs seq[r, :]
  (seq[r, 0] = BOS = 0, seq[r, j] = target j - 1),
    logits[r, :] = T1[i, seq[r, i], :] + T2[(sum_{j <= i} seq[r, j] + ex[r]) % H, :]
  T1 [P, V, V], T2 [H, V] are fixed float32 tables (seeded numpy). Token 1 is
  EOS; some (position, token) rows make EOS likely so that decodes end early;
  token V - 1 is never likely (an "EOS" that never comes, for beam search's
  live-beam fallback).

Coordinates. t5x's `inputs` are decoder inputs (inputs[:, 0] is BOS, a
non-zero inputs[:, j] forces output j - 1); ours are target-side prompts
(a non-zero inputs[b, j] forces target j). The JSON holds both: `t5x_inputs`
and `inputs` = t5x_inputs[:, 1:] + [0].

Sampling cases are the ones whose result does not depend on the PRNG
(greedy, topk = 1, or top-p where the most likely token alone reaches topp at
every generated step, which this script checks), so JAX's PRNG need not be
matched.
"""
import argparse
import dataclasses
import importlib.util
import json
import os
import sys
import types

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden", "models",
                   "decoding_t5x.json")

V = 12  # vocabulary
P = 10  # positions in T1 (>= every decode length)
H = 5  # prefix-hash buckets in T2
EOS = 1
NEVER = V - 1  # a token that is never likely


def install_flax_stub():
    """The pieces of flax that t5x/decoding.py uses, enough for CPU jax."""
    import jax

    flax = types.ModuleType("flax")
    struct = types.ModuleType("flax.struct")
    core = types.ModuleType("flax.core")
    traverse_util = types.ModuleType("flax.traverse_util")

    def dataclass(cls):
        cls = dataclasses.dataclass(frozen=True)(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        jax.tree_util.register_pytree_node(cls, lambda x: ([getattr(x, n) for n in names], None),
                                           lambda _, c: cls(*c))
        cls.replace = dataclasses.replace
        return cls

    class FrozenDict(dict):
        pass

    def flatten_dict(d, prefix=()):
        out = {}
        for k, v in d.items():
            if isinstance(v, dict) and v:
                out.update(flatten_dict(v, prefix + (k,)))
            else:
                out[prefix + (k,)] = v
        return out

    def unflatten_dict(flat):
        out = {}
        for path, v in flat.items():
            cur = out
            for k in path[:-1]:
                cur = cur.setdefault(k, {})
            cur[path[-1]] = v
        return out

    struct.dataclass = dataclass
    core.FrozenDict = FrozenDict
    core.freeze = FrozenDict
    core.unfreeze = dict
    traverse_util.flatten_dict = flatten_dict
    traverse_util.unflatten_dict = unflatten_dict
    flax.struct, flax.core, flax.traverse_util = struct, core, traverse_util
    sys.modules.update({"flax": flax, "flax.struct": struct, "flax.core": core, "flax.traverse_util": traverse_util})


def load_t5x_decoding(src):
    install_flax_stub()
    pkg = types.ModuleType("t5x")
    pkg.__path__ = [src]
    sys.modules["t5x"] = pkg

    def load(name):
        spec = importlib.util.spec_from_file_location("t5x." + name, os.path.join(src, name + ".py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["t5x." + name] = mod
        setattr(pkg, name, mod)
        spec.loader.exec_module(mod)
        return mod

    load("binary_search")
    return load("decoding")


def make_tables():
    rng = np.random.default_rng(20261206)
    t1 = rng.normal(0.0, 1.5, size=(P, V, V))
    t1[:, :, EOS] -= 2.0  # EOS is rare ...
    hot = rng.random(size=(P, V)) < 0.18
    hot[:2] = False  # ... except after some (position, token) pairs, never at the first two steps
    t1[:, :, EOS] += np.where(hot, 7.0, 0.0)
    t1[:, :, NEVER] -= 40.0
    t2 = rng.normal(0.0, 1.0, size=(H, V))
    return t1.astype(np.float32), t2.astype(np.float32)


def make_step_fn(t1, t2):
    import jax.numpy as jnp

    T1, T2 = jnp.asarray(t1), jnp.asarray(t2)

    def tokens_to_logits(state):
        seq = state.sequences  # [rows, length]: decoder inputs
        rows, length = seq.shape
        ex = state.cache["ex"]  # [rows]
        i = jnp.minimum(jnp.broadcast_to(state.cur_index, (rows,)), length - 1)
        last = jnp.take_along_axis(seq, i[:, None], axis=1)[:, 0]
        upto = jnp.arange(length)[None, :] <= i[:, None]
        h = (jnp.sum(jnp.where(upto, seq, 0), axis=1) + ex) % H
        return T1[i, last] + T2[h], state.cache

    return tokens_to_logits


def f32_list(a):
    return [float(v) for v in np.asarray(a, np.float32).reshape(-1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("t5x_src", help="folder with t5x's decoding.py and binary_search.py")
    ap.add_argument("--t5x-commit", default="", help="recorded in the JSON as provenance")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp

    dec = load_t5x_decoding(os.path.abspath(args.t5x_src))
    t1, t2 = make_tables()
    step = make_step_fn(t1, t2)

    def softmax(x):
        e = np.exp(x - x.max())
        return e / e.sum()

    def logits_np(seq_row, i, ex):
        i = min(i, len(seq_row) - 1)
        h = (int(np.sum(seq_row[: i + 1])) + ex) % H
        return t1[i, seq_row[i]] + t2[h]

    def t5x_inputs_of(prompts, length):
        x = np.zeros((len(prompts), length), np.int32)
        for b, p in enumerate(prompts):
            x[b, 1:1 + len(p)] = p
        return x

    sampling = []

    def sample_case(name, t5x_in, initial_index=None, **kw):
        t5x_in = np.asarray(t5x_in, np.int32)
        B, L = t5x_in.shape
        cache = {"ex": jnp.arange(B, dtype=jnp.int32)}
        outs = []
        for seed in (0, 1, 2):  # the result must not depend on the PRNG
            s, sc = dec.temperature_sample(jnp.asarray(t5x_in), cache, step, eos_id=kw.get("eos_id", EOS),
                                           decode_rng=jax.random.PRNGKey(seed),
                                           initial_index=None if initial_index is None else jnp.asarray(
                                               initial_index, jnp.int32),
                                           **{k: v for k, v in kw.items() if k != "eos_id"})
            outs.append((np.asarray(s), np.asarray(sc)))
        for s, sc in outs[1:]:
            assert (s == outs[0][0]).all() and np.allclose(sc, outs[0][1]), name + ": depends on the PRNG"
        seqs, scores = outs[0]
        topp = kw.get("topp", 0.0)
        if topp:
            # Every generated token was the only one top-p kept (so ours, whatever its PRNG, picks it).
            temp = max(float(kw.get("temperature", 1.0)), 1e-4)
            for b in range(B):
                for d in range(seqs.shape[1]):
                    dec_in = np.concatenate([[0], seqs[b, d]])
                    for j in range(L):
                        if j + 1 < L and t5x_in[b, j + 1] != 0:
                            continue
                        p = softmax(logits_np(dec_in, j, b).astype(np.float64) / temp)
                        assert p.max() >= topp, f"{name}: top-p keeps several tokens at b={b} j={j}"
                        if seqs[b, d, j] == kw.get("eos_id", EOS):
                            break
        ours_in = np.zeros_like(t5x_in)
        ours_in[:, :-1] = t5x_in[:, 1:]
        c = {"name": name, "t5x_inputs": t5x_in.tolist(), "inputs": ours_in.tolist(),
             "initial_index": None if initial_index is None else list(initial_index),
             "eos_id": kw.get("eos_id", EOS), "temperature": float(kw.get("temperature", 1.0)),
             "topk": int(kw.get("topk", 1)), "topp": float(topp), "num_decodes": int(kw.get("num_decodes", 1)),
             "rescale_log_probs": bool(kw.get("rescale_log_probs", True)),
             "max_decode_steps": kw.get("max_decode_steps"), "sequences": seqs.tolist(),
             "scores": f32_list(scores)}
        sampling.append(c)
        print(f"sampling {name}: {seqs.tolist()} {np.round(scores, 4).tolist()}")

    z3_8 = np.zeros((3, 8), np.int32)
    z2_6 = np.zeros((2, 6), np.int32)
    for rescale in (False, True):
        r = "rescaled" if rescale else "raw"
        sample_case(f"greedy_t0_{r}", z3_8, temperature=0.0, rescale_log_probs=rescale)
        sample_case(f"topk1_t1_{r}", z3_8, temperature=1.0, topk=1, rescale_log_probs=rescale)
        sample_case(f"topk1_t0.5_{r}", z2_6, temperature=0.5, topk=1, rescale_log_probs=rescale)
        sample_case(f"topp_small_{r}", z3_8, temperature=1.0, topk=0, topp=1e-3, rescale_log_probs=rescale)
        sample_case(f"topk1_3decodes_{r}", z2_6, temperature=1.0, topk=1, num_decodes=3, rescale_log_probs=rescale)
    # top-p where the best token alone reaches topp at every step (checked above).
    sample_case("topp_0.3_t0.25_raw", z2_6, temperature=0.25, topk=0, topp=0.3, rescale_log_probs=False)
    sample_case("greedy_no_eos", z2_6, temperature=0.0, eos_id=-1, rescale_log_probs=False)
    sample_case("greedy_len1", np.zeros((2, 1), np.int32), temperature=0.0, rescale_log_probs=False)
    sample_case("greedy_max_steps3", z3_8, temperature=0.0, max_decode_steps=3, eos_id=-1, rescale_log_probs=False)
    # t5x's loop body runs at least once: max_decode_steps = 0 still decodes one token.
    sample_case("greedy_max_steps0", z2_6, temperature=0.0, max_decode_steps=0, eos_id=-1, rescale_log_probs=False)
    sample_case("greedy_max_steps1", z2_6, temperature=0.0, max_decode_steps=1, eos_id=-1, rescale_log_probs=False)
    # A prompt holding EOS: a forced EOS does not end the decode.
    sample_case("greedy_prompt_with_eos", t5x_inputs_of([[4, 1], [1, 7, 9]], 7), temperature=0.0,
                rescale_log_probs=False)
    # Teacher-forced prompts (encoder-decoder style: no initial_index).
    prompts = [[4, 5], [7], [3, 8, 2]]
    sample_case("greedy_prompt", t5x_inputs_of(prompts, 8), temperature=0.0, rescale_log_probs=False)
    sample_case("topk1_prompt_2decodes", t5x_inputs_of(prompts, 8), temperature=1.0, topk=1, num_decodes=2,
                rescale_log_probs=False)
    sample_case("greedy_prompt_max_steps2", t5x_inputs_of(prompts, 8), temperature=0.0, max_decode_steps=2,
                eos_id=-1, rescale_log_probs=False)
    # Prefilled prompts (decoder-only style): initial_index = prompt lengths.
    lens = [len(p) for p in prompts]
    sample_case("greedy_initial_index", t5x_inputs_of(prompts, 8), initial_index=lens, temperature=0.0,
                rescale_log_probs=False)
    sample_case("topk1_initial_index_2decodes", t5x_inputs_of(prompts, 8), initial_index=lens, temperature=1.0,
                topk=1, num_decodes=2, rescale_log_probs=False)
    sample_case("greedy_initial_index_no_eos", t5x_inputs_of(prompts, 8), initial_index=lens, temperature=0.0,
                eos_id=-1, rescale_log_probs=False)
    sample_case("greedy_initial_index_max_steps2", t5x_inputs_of(prompts, 8), initial_index=lens, temperature=0.0,
                max_decode_steps=2, eos_id=-1, rescale_log_probs=False)

    beam = []
    for L in (5, 8, 10):
        for K in (1, 2, 3, 4, 6):
            for alpha in (0.0, 0.6):
                for eos in (EOS, NEVER):
                    if eos == NEVER and (L != 8 or K not in (1, 3)):
                        continue
                    B = 2
                    cache = {"ex": jnp.arange(B, dtype=jnp.int32)}
                    s, sc = dec.beam_search(jnp.zeros((B, L), jnp.int32), cache, step, eos_id=eos, num_decodes=K,
                                            alpha=alpha)
                    s, sc = np.asarray(s), np.asarray(sc)
                    name = f"beam_L{L}_K{K}_a{alpha}" + ("_never_eos" if eos == NEVER else "")
                    beam.append({"name": name, "batch": B, "length": L, "num_decodes": K, "alpha": alpha,
                                 "eos_id": eos, "sequences": s.tolist(), "scores": f32_list(sc)})
                    print(f"beam {name}: {s[0].tolist()} {np.round(sc, 4).tolist()}")

    out = {
        "source": "t5x/decoding.py temperature_sample / beam_search (google-research/t5x" +
                  (f" @ {args.t5x_commit}" if args.t5x_commit else "") + "), run by scripts/golden/decoding_t5x.py",
        "vocab": V, "positions": P, "hash_buckets": H,
        "t1": f32_list(t1), "t2": f32_list(t2),
        "sampling": sampling, "beam": beam,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
