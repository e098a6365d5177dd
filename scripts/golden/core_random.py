#!/usr/bin/env python3
"""Golden values for src/core/random.h and src/ops/random.h.

Writes tests/golden/core/random.json from jax.random (CPU), legacy
(non-partitionable) threefry mode. Run: python3 scripts/golden/core_random.py
"""
import json
import os

import jax

jax.config.update("jax_threefry_partitionable", False)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def words(k):
    return [int(x) for x in np.asarray(jax.random.key_data(k)).reshape(-1)]


def main():
    out = {"jax_version": jax.__version__, "keys": [], "split": [], "fold_in": [],
           "bits": [], "uniform": [], "normal": [], "truncated_normal": [],
           "bernoulli": [], "categorical": []}
    for seed in [0, 1, 42, -1, 2**31 - 1, 123456789]:
        out["keys"].append({"seed": seed, "key": words(jax.random.PRNGKey(seed))})
    k = jax.random.PRNGKey(0)
    for n in [1, 2, 3, 5]:
        ks = jax.random.split(jax.random.PRNGKey(7), n)
        out["split"].append({"key": words(jax.random.PRNGKey(7)), "n": n,
                             "keys": [words(x) for x in ks]})
    for d in [0, 1, 17, 2**31 + 5]:
        out["fold_in"].append({"key": words(k), "data": d, "key_out": words(jax.random.fold_in(k, d))})
    for n in [1, 4, 7, 10]:
        b = jax.random.bits(jax.random.PRNGKey(3), (n,), jnp.uint32)
        out["bits"].append({"key": words(jax.random.PRNGKey(3)), "n": n, "bits": [int(x) for x in np.asarray(b)]})
    shape = (3, 5)
    u = jax.random.uniform(jax.random.PRNGKey(11), shape, jnp.float32, -2.0, 3.0)
    out["uniform"].append({"key": words(jax.random.PRNGKey(11)), "shape": shape, "minval": -2.0, "maxval": 3.0,
                           "values": np.asarray(u).reshape(-1).tolist()})
    nrm = jax.random.normal(jax.random.PRNGKey(12), (4, 7), jnp.float32)
    out["normal"].append({"key": words(jax.random.PRNGKey(12)), "shape": (4, 7),
                          "values": np.asarray(nrm).reshape(-1).tolist()})
    tn = jax.random.truncated_normal(jax.random.PRNGKey(13), -2.0, 2.0, (5, 3), jnp.float32)
    out["truncated_normal"].append({"key": words(jax.random.PRNGKey(13)), "shape": (5, 3), "lower": -2.0,
                                    "upper": 2.0, "values": np.asarray(tn).reshape(-1).tolist()})
    bern = jax.random.bernoulli(jax.random.PRNGKey(14), 0.3, (2, 9))
    out["bernoulli"].append({"key": words(jax.random.PRNGKey(14)), "p": 0.3, "shape": (2, 9),
                             "values": [int(x) for x in np.asarray(bern).reshape(-1)]})
    logits = np.linspace(-1.0, 1.5, 3 * 6, dtype=np.float32).reshape(3, 6)
    cat = jax.random.categorical(jax.random.PRNGKey(15), jnp.asarray(logits), axis=-1)
    out["categorical"].append({"key": words(jax.random.PRNGKey(15)), "logits": logits.reshape(-1).tolist(),
                               "shape": (3, 6), "values": [int(x) for x in np.asarray(cat)]})
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    path = os.path.join(root, "tests", "golden", "core", "random.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", path)


if __name__ == "__main__":
    main()
