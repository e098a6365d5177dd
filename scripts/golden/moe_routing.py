#!/usr/bin/env python3
"""Golden values for src/nn/moe.h (routers, losses, metrics, the MoE layer).

A plain-JAX reference written from the semantics in the team's MoE notes
(flaxformer architectures/moe routing.py / moe_layers.py behaviour: masked
top-k with the k-major priority cumsum, stable BPR, padding handling,
experts-choose, E^2-scaled balance loss, z-loss over masked logits; capacity
round-half-even; pad to a multiple of E; groups). It is not flaxformer's code.

Writes tests/golden/nn/moe.json. Run with the oracle venv:
  python scripts/golden/moe_routing.py
"""
import json
import os

import jax

jax.config.update("jax_threefry_partitionable", False)
jax.config.update("jax_default_matmul_precision", "highest")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

F32 = jnp.float32


def arr(a):
    # float32 values, written in their shortest decimal form.
    a = np.asarray(a, dtype=np.float32)
    return {"shape": list(a.shape), "data": [float(np.format_float_positional(v, unique=True)) for v in a.reshape(-1)]}


# ---------------------------------------------------------------- routers
def router_front(x, w, ignore_padding, jitter_key=None, jitter_noise=0.0):
    x = x.astype(F32)
    mask = (jnp.sum(jnp.abs(x), -1) > 0).astype(F32) if ignore_padding else None
    if jitter_key is not None and jitter_noise > 0:
        x = x * jax.random.uniform(jitter_key, x.shape, F32, 1.0 - jitter_noise, 1.0 + jitter_noise)
    logits = jnp.einsum("gth,he->gte", x, w.astype(F32))
    probs = jax.nn.softmax(logits, axis=-1)
    if mask is not None:
        logits = logits * mask[..., None]
    g, s, _ = logits.shape
    z = jnp.sum(jax.nn.logsumexp(logits, axis=-1) ** 2) / (g * s)
    return probs, mask, z


def balance_loss(probs, idx):
    e = probs.shape[-1]
    chose = jnp.max(jax.nn.one_hot(idx, e), axis=-2)
    return jnp.mean(jnp.mean(chose, axis=1) * jnp.mean(probs, axis=1)) * e * e


def tokens_choose_masked(probs, mask, k, bpr, capacity):
    g, s, e = probs.shape
    gate, idx = jax.lax.top_k(probs, k)
    if mask is not None:
        gate = gate * mask[..., None]
        idx = jnp.where(mask[..., None] > 0, idx, -idx - 1)
        probs = probs * mask[..., None]
    aux = balance_loss(probs, idx)
    if bpr:
        perm = jnp.argsort(-gate[..., 0], axis=-1, stable=True)
        idx = jnp.take_along_axis(idx, perm[..., None], axis=1)
    flat = jnp.swapaxes(idx, 1, 2).reshape(g, k * s)
    oh = jax.nn.one_hot(flat, e, dtype=jnp.int32)
    pri = (jnp.cumsum(oh, axis=1) * oh - 1).reshape(g, k, s, e).max(axis=1)
    if bpr:
        inv = jnp.argsort(perm, axis=-1, stable=True)
        pri = jnp.take_along_axis(pri, inv[..., None], axis=1)
    dispatch = jax.nn.one_hot(pri, capacity, dtype=F32)
    combine = probs[..., None] * dispatch
    return dispatch, combine, aux


def tokens_choose_scatter(probs, mask, k, bpr, capacity):
    """Index form (expert, slot) per choice, then written out densely."""
    g, s, e = probs.shape
    if mask is not None:
        probs = probs * mask[..., None]
    gate, idx = jax.lax.top_k(probs, k)
    aux = balance_loss(probs, idx)
    order = idx
    if bpr:
        perm = jnp.argsort(-gate[..., 0], axis=-1, stable=True)
        order = jnp.take_along_axis(idx, perm[..., None], axis=1)
    flat = jnp.swapaxes(order, 1, 2).reshape(g, k * s)
    oh = jax.nn.one_hot(flat, e, dtype=jnp.int32)
    slot = (jnp.cumsum(oh, axis=1) * oh - 1).max(axis=-1).reshape(g, k, s)
    slot = jnp.swapaxes(slot, 1, 2)  # [g, s, k] in sorted order
    if bpr:
        inv = jnp.argsort(perm, axis=-1, stable=True)
        slot = jnp.take_along_axis(slot, inv[..., None], axis=1)
    weight = gate * (slot < capacity)
    gi = jnp.arange(g)[:, None, None]
    ti = jnp.arange(s)[None, :, None]
    ok = slot < capacity
    dispatch = jnp.zeros((g, s, e, capacity), F32).at[gi, ti, idx, jnp.where(ok, slot, capacity)].add(
        1.0, mode="drop")
    combine = jnp.zeros((g, s, e, capacity), F32).at[gi, ti, idx, jnp.where(ok, slot, capacity)].add(
        weight, mode="drop")
    return dispatch, combine, aux


def experts_choose(probs, mask, capacity):
    if mask is not None:
        probs = probs * mask[..., None]
    s = probs.shape[1]
    gate, tok = jax.lax.top_k(jnp.swapaxes(probs, 1, 2), capacity)  # [g, e, c]
    dispatch = jnp.moveaxis(jax.nn.one_hot(tok, s, dtype=F32), 3, 1)  # [g, s, e, c]
    combine = gate[:, None] * dispatch
    return dispatch, combine, jnp.float32(0.0)


def route(x, w, c, capacity, jitter_key=None):
    probs, mask, z = router_front(x, w, c.get("ignore_padding_tokens", False), jitter_key,
                                  c.get("jitter_noise", 0.0))
    kind = c["router"]
    if kind == "masked":
        d, cb, aux = tokens_choose_masked(probs, mask, c["k"], c.get("bpr", False), capacity)
    elif kind == "scatter":
        d, cb, aux = tokens_choose_scatter(probs, mask, c["k"], c.get("bpr", False), capacity)
    else:
        d, cb, aux = experts_choose(probs, mask, capacity)
    return d, cb, aux, z


# ---------------------------------------------------------------- layer
def py_capacity(s, e, cf, min_cap):
    return max(int(round(cf * s / e)), min_cap)


def py_num_groups(n, max_group, e, r):
    g = max(n // max_group, e * r)
    while g < n and not (n % g == 0 and g % (e * r) == 0):
        g += 1
    return g


def pad_amounts(b, l, er):
    if (b * l) % er == 0:
        return 0, 0
    pb = 1
    while (b * l + pb * l) % er:
        pb += 1
    pl = 1
    while (b * l + pl * b) % er:
        pl += 1
    return (0, pl) if pl * b <= pb * l else (pb, 0)


ACT = {"gelu": lambda h: jax.nn.gelu(h, approximate=True), "relu": jax.nn.relu, "linear": lambda h: h}


def moe_layer(params, x, c):
    b, l, h = x.shape
    e = c["num_experts"]
    pb, pl = pad_amounts(b, l, e)
    xp = jnp.pad(x, ((0, pb), (0, pl), (0, 0)))
    n = (b + pb) * (l + pl)
    g = py_num_groups(n, c["max_group_size"], e, 1)
    s = n // g
    cap = py_capacity(s, e, c["capacity_factor"], c["min_expert_capacity"])
    xg = xp.reshape(g, s, h)
    d, cb, aux, z = route(xg, params["router"], c, cap)
    ein = jnp.einsum("gth,gtec->gech", xg, d)
    acts = c["activations"]
    hid = None
    for i, a in enumerate(acts):
        name = "wi" if len(acts) == 1 else f"wi_{i}"
        hi = ACT[a](jnp.einsum("gech,ehf->gecf", ein, params[name]))
        hid = hi if hid is None else hid * hi
    eout = jnp.einsum("gecf,efh->gech", hid, params["wo"])
    y = jnp.einsum("gech,gtec->gth", eout, cb).reshape(b + pb, l + pl, h)[:b, :l]
    d = jax.lax.stop_gradient(d)
    somewhere = jnp.sum(jnp.max(d, axis=(2, 3)))
    if c.get("ignore_padding_tokens", False):
        tokens = jnp.sum(jnp.sum(jnp.abs(xg), -1) > 0).astype(F32)
        if c["router"] == "scatter":
            tokens = tokens * c["k"]
    else:
        tokens = float(g * s)
    dispatched = jnp.sum(d)
    metrics = {
        "auxiliary_loss": aux,
        "router_z_loss": z,
        "fraction_tokens_left_behind": 1.0 - somewhere / tokens,
        "router_confidence": jnp.sum(jax.lax.stop_gradient(cb)) / dispatched,
        "expert_usage": 1.0 if c["router"] == "experts_choose" else dispatched / (e * cap * g),
    }
    return y, metrics, {"groups": g, "group_size": s, "capacity": cap, "pad_batch": pb, "pad_length": pl}


def main():
    rng = np.random.default_rng(20261202)
    out = {"jax_version": jax.__version__, "routers": [], "layers": []}

    # Routers: G=2 groups of S=8 tokens, embed 6, E=4; a decisive router so
    # several tokens want the same expert and capacity drops some.
    x = rng.normal(size=(2, 8, 6)).astype(np.float32)
    w = (rng.normal(size=(6, 4)) * 0.8).astype(np.float32)
    x_pad = x.copy()
    x_pad[0, 2] = 0.0
    x_pad[0, 5] = 0.0
    x_pad[1, 7] = 0.0
    cot = rng.normal(size=(2, 8, 4, 3)).astype(np.float32)
    cases = [
        ("top1", dict(router="masked", k=1), 2, x, None),
        ("top1_bpr", dict(router="masked", k=1, bpr=True), 2, x, None),
        ("top2", dict(router="masked", k=2), 3, x, None),
        ("top2_bpr", dict(router="masked", k=2, bpr=True), 3, x, None),
        ("top2_padding", dict(router="masked", k=2, ignore_padding_tokens=True), 3, x_pad, None),
        ("top2_bpr_padding", dict(router="masked", k=2, bpr=True, ignore_padding_tokens=True), 3, x_pad, None),
        ("scatter_top2_padding", dict(router="scatter", k=2, ignore_padding_tokens=True), 3, x_pad, None),
        ("scatter_top2_bpr", dict(router="scatter", k=2, bpr=True), 3, x, None),
        ("experts_choose", dict(router="experts_choose"), 3, x, None),
        ("experts_choose_padding", dict(router="experts_choose", ignore_padding_tokens=True), 3, x_pad, None),
        ("top1_jitter", dict(router="masked", k=1, jitter_noise=0.1), 2, x, [0, 3]),
    ]
    for name, c, cap, xin, jk in cases:
        key = None if jk is None else jax.random.wrap_key_data(jnp.array(jk, dtype=jnp.uint32))
        d, cb, aux, z = route(jnp.asarray(xin), jnp.asarray(w), c, cap, key)
        dims_c = cot[..., :cap]

        def loss(xx, ww, c=c, cap=cap, key=key, dims_c=dims_c):
            _, cb2, aux2, z2 = route(xx, ww, c, cap, key)
            return jnp.sum(cb2 * dims_c) + 0.5 * aux2 + 0.25 * z2

        gx, gw = jax.grad(loss, argnums=(0, 1))(jnp.asarray(xin), jnp.asarray(w))
        dropped = int(np.sum(np.asarray(d)) < (2 * 8 * c.get("k", 1)))
        out["routers"].append({
            "name": name, "config": c, "capacity": cap, "jitter_key": jk, "inputs": arr(xin), "kernel": arr(w),
            "dispatch": arr(d), "combine": arr(cb), "auxiliary_loss": float(aux), "router_z_loss": float(z),
            "cotangent": arr(dims_c), "grad_inputs": arr(gx), "grad_kernel": arr(gw), "some_dropped": dropped,
        })

    # Layers: B=2, L=8 (and 7: the layer pads), embed 6, E=4, expert mlp 5.
    def make_params(acts):
        p = {"router": (rng.normal(size=(6, 4)) * 0.8).astype(np.float32),
             "wo": (rng.normal(size=(4, 5, 6)) / np.sqrt(5)).astype(np.float32)}
        for i in range(len(acts)):
            p["wi" if len(acts) == 1 else f"wi_{i}"] = (rng.normal(size=(4, 6, 5)) / np.sqrt(6)).astype(np.float32)
        return p

    layer_cases = [
        ("gated_gelu_top2", dict(router="masked", k=2, activations=["gelu", "linear"], num_experts=4,
                                 max_group_size=8, capacity_factor=1.0, min_expert_capacity=1), 8, False),
        ("gated_gelu_top2_bpr", dict(router="masked", k=2, bpr=True, activations=["gelu", "linear"], num_experts=4,
                                     max_group_size=4096, capacity_factor=1.0, min_expert_capacity=1), 8, False),
        ("relu_top1_padded_length", dict(router="masked", k=1, activations=["relu"], num_experts=4,
                                         max_group_size=4096, capacity_factor=1.25, min_expert_capacity=1), 7, False),
        ("gated_gelu_experts_choose", dict(router="experts_choose", activations=["gelu", "linear"], num_experts=4,
                                           max_group_size=4096, capacity_factor=1.0, min_expert_capacity=1), 8,
         False),
        ("gated_gelu_top2_ignore_padding", dict(router="masked", k=2, ignore_padding_tokens=True,
                                                activations=["gelu", "linear"], num_experts=4, max_group_size=4096,
                                                capacity_factor=1.0, min_expert_capacity=1), 8, True),
    ]
    for name, c, length, zero_rows in layer_cases:
        p = make_params(c["activations"])
        xl = rng.normal(size=(2, length, 6)).astype(np.float32)
        if zero_rows:
            xl[0, 6:] = 0.0
            xl[1, 7:] = 0.0
        ycot = rng.normal(size=(2, length, 6)).astype(np.float32)
        y, m, info = moe_layer({k: jnp.asarray(v) for k, v in p.items()}, jnp.asarray(xl), c)

        def lloss(pp, xx, c=c, ycot=ycot):
            yy, mm, _ = moe_layer(pp, xx, c)
            return jnp.sum(yy * ycot) + 0.5 * mm["auxiliary_loss"] + 0.25 * mm["router_z_loss"]

        gp, gx = jax.grad(lloss, argnums=(0, 1))({k: jnp.asarray(v) for k, v in p.items()}, jnp.asarray(xl))
        out["layers"].append({
            "name": name, "config": c, "info": info, "x": arr(xl), "params": {k: arr(v) for k, v in p.items()},
            "y": arr(y), "metrics": {k: float(v) for k, v in m.items()}, "y_cotangent": arr(ycot),
            "grad_x": arr(gx), "grad_params": {k: arr(v) for k, v in gp.items()},
        })

    path = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "golden", "nn", "moe.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    for r in out["routers"]:
        print(f"router {r['name']}: aux {r['auxiliary_loss']:.6f} z {r['router_z_loss']:.6f} "
              f"dispatched {sum(r['dispatch']['data']):.0f} some_dropped {r['some_dropped']}")
    for r in out["layers"]:
        print(f"layer {r['name']}: {r['info']} metrics {r['metrics']}")


if __name__ == "__main__":
    main()
