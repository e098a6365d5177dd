#!/usr/bin/env python3
"""Golden values for src/t5x/optim (Adafactor, AdamW, SGD, schedules, clipping).

Writes tests/golden/optim/optim.json (manifest + schedule values) and
tests/golden/optim/optim.bin (float32 little-endian arrays the manifest points
into). Run: pip install jax optax; python3 scripts/golden/optim_jax.py

Sources of truth:
- AdamW, SGD, Lion and gradient clipping: optax from PyPI (optax.adamw, optax.sgd,
  optax.lion, optax.chain, optax.clip_by_global_norm, optax.clip, optax.warmup_cosine_decay_schedule,
  optax.linear_schedule), run on CPU jax.
- Adafactor: t5x's own rule (t5x/adafactor.py), which is not installable from
  PyPI (the `t5x` name there is an empty placeholder) and needs the removed
  flax.optim. It is re-implemented below in jax.numpy, float32, step by step
  as t5x computes it: decay 1-(t+1)^-0.8, grad^2+eps1, factored row/col EMAs
  with the row-mean normalisation, update clipping by RMS, parameter scale
  max(eps2, RMS(param)), optional momentum and weight decay, optional global
  norm clipping before the statistics, factor rules from logical axis names
  (standard_logical_factor_rules + set_param_axes semantics).
- create_learning_rate_scheduler: t5x/utils.py's factor-string schedule,
  re-implemented likewise in jax.numpy (int32 step, float32 result).

Parameters and gradients are not stored: both sides generate them from the
integer hash in `det_values` (exact in float64, then rounded to float32).
Parameters are stored after every step; optimizer states after the steps in
STATE_STEPS. Arrays larger than BIG elements are stored with a stride (every
STRIDE-th flat element; STRIDE is prime to every dim size, so all rows and
columns are sampled); the C++ test compares exactly those elements.
"""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden", "optim")
BIG = 1024
STRIDE = 7
STATE_STEPS = (0, 2, 4)  # steps whose full optimizer state is stored
STEPS = 5

# (path, dims, param_scale, grad_scale). Dim names are logical axis names.
LEAVES = [
    ("decoder/logits_dense/kernel", [("embed", 128), ("vocab", 136)], 0.05, 0.01),
    ("encoder/layers_0/pre_mlp_layer_norm/scale", [("embed", 64)], 1.0, 0.1),
    ("encoder/layers_0/mlp/wi/kernel", [("embed", 4), ("mlp", 300)], 0.3, 1.0),
    ("encoder/layers/attention/query/kernel", [("layers", 3), ("embed", 20), ("joined_kv", 12)], 0.2, 0.5),
    ("encoder/layers/pre_attention_layer_norm/scale", [("layers", 2), ("embed", 8)], 1.0, 0.2),
    ("decoder/layers_0/self_attention/key/kernel", [("embed", 16), ("heads", 4), ("kv", 6)], 0.25, 2.0),
    ("encoder/relpos_bias/rel_embedding", [("heads", 4), ("relpos_buckets", 32)], 0.1, 0.05),
]


def det_values(n, leaf_id, step, scale):
    """Deterministic values in [-scale, scale): integer hash, exact in float64."""
    i = np.arange(n, dtype=np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    h = (i * np.uint64(2654435761) + np.uint64(leaf_id * 40503 + step * 97 + 12345)) & m32
    h = (h ^ (h >> np.uint64(13))) * np.uint64(0x5BD1E995) & m32
    h = h ^ (h >> np.uint64(15))
    u = h.astype(np.float64) / 4294967296.0
    return ((2.0 * u - 1.0) * scale).astype(np.float32)


def make_params():
    out = {}
    for k, (path, dims, ps, _) in enumerate(LEAVES):
        shape = tuple(s for _, s in dims)
        out[path] = jnp.asarray(det_values(int(np.prod(shape)), k, 0, ps).reshape(shape))
    return out


def make_grads(step, grad_mult=1.0):
    out = {}
    for k, (path, dims, _, gs) in enumerate(LEAVES):
        shape = tuple(s for _, s in dims)
        out[path] = jnp.asarray(det_values(int(np.prod(shape)), k, step + 1, gs * grad_mult).reshape(shape))
    return out


AXES = {path: [n for n, _ in dims] for path, dims, _, _ in LEAVES}

# --------------------------------------------------------------------------
# t5x Adafactor rule (see module docstring).
ROW, COL, BATCH, NONE = "row", "col", "batch", "none"
STANDARD_FACTOR_RULES = {
    "vocab": COL, "embed": ROW, "mlp": COL, "heads": COL, "kv": COL, "joined_kv": COL,
    "relpos_buckets": NONE, "layers": BATCH, "stack": BATCH, "q_wi_fused": COL, "o_wo_fused": COL,
    "multiquery_heads": COL, "kv_fused": COL, "layer_norm_scale": NONE,
}


def rule_from_axes(axes):
    r = [STANDARD_FACTOR_RULES[a] for a in axes]
    if ROW in r and COL in r and NONE in r:
        raise ValueError("incomplete adafactor spec")
    if not (ROW in r and COL in r):
        r = [NONE if x in (ROW, COL) else x for x in r]
    return r


def parse_rule(rule, shape):
    """-> (averaging dims, factor dims ((row dims), (col dims)) | 'heuristic' | None)."""
    nd = len(shape)
    if rule is None:
        return tuple(range(nd)), "heuristic"
    rows = tuple(i for i, d in enumerate(rule) if d == ROW)
    cols = tuple(i for i, d in enumerate(rule) if d == COL)
    batch = tuple(i for i, d in enumerate(rule) if d == BATCH)
    avg = tuple(i for i in range(nd) if i not in batch)
    if nd <= 2 and not batch:
        return tuple(range(nd)), "heuristic"
    return avg, ((rows, cols) if (rows or cols) else None)


def heuristic_dims(shape, min_dim):
    if len(shape) < 2:
        return None
    order = np.argsort(shape, kind="stable")
    if shape[order[-2]] < min_dim:
        return None
    return (int(order[-2]),), (int(order[-1]),)


class T5xAdafactor:
    def __init__(self, beta1=None, decay_rate=0.8, step_offset=0, clipping_threshold=1.0,
                 weight_decay_rate=None, min_dim_size_to_factor=128, epsilon1=1e-30, epsilon2=1e-3,
                 use_logical_rules=True, global_norm_clip_threshold=None, max_parameter_scale=None,
                 no_param_scale_regex=None):
        self.__dict__.update(locals())
        del self.__dict__["self"]

    def dims_for(self, path, shape):
        rule = rule_from_axes(AXES[path]) if self.use_logical_rules else None
        avg, fd = parse_rule(rule, shape)
        if fd == "heuristic":
            fd = heuristic_dims(shape, self.min_dim_size_to_factor)
        return avg, fd

    def init(self, params):
        st = {"step": 0}
        for path, p in params.items():
            avg, fd = self.dims_for(path, p.shape)
            s = {k: jnp.zeros((1,), jnp.float32) for k in ("v_row", "v_col", "v", "m")}
            if fd is not None:
                rows, cols = fd
                s["v_row"] = jnp.zeros(np.delete(p.shape, cols), jnp.float32)
                s["v_col"] = jnp.zeros(np.delete(p.shape, rows), jnp.float32)
            else:
                s["v"] = jnp.zeros(p.shape, jnp.float32)
            if self.beta1 is not None:
                s["m"] = jnp.zeros(p.shape, jnp.float32)
            st[path] = s
        return st

    def apply(self, params, state, grads, lr):
        import re
        step = state["step"]
        if self.global_norm_clip_threshold:
            gn = jnp.sqrt(jnp.sum(jnp.array([jnp.sum(jnp.square(g)) for g in grads.values()])))
            t = self.global_norm_clip_threshold
            scale = t * jnp.minimum(1.0 / t, 1.0 / gn)
            grads = {k: g * scale for k, g in grads.items()}
        new_params, new_state = {}, {"step": step + 1}
        lr = jnp.float32(lr)
        for path, p in params.items():
            g = grads[path].astype(jnp.float32)
            s = state[path]
            avg, fd = self.dims_for(path, p.shape)
            t = jnp.array(step - self.step_offset, jnp.float32) + 1.0
            decay = 1.0 - t ** (-self.decay_rate)
            mixing = 1.0 - decay
            upd = lr
            use_scale = not (self.no_param_scale_regex and re.search(self.no_param_scale_regex, path))
            if use_scale:
                ps = jnp.sqrt(jnp.mean(p * p, axis=avg, keepdims=True))
                ps = jnp.maximum(ps, self.epsilon2)
                if self.max_parameter_scale is not None:
                    ps = jnp.minimum(ps, self.max_parameter_scale)
                upd = upd * ps
            g2 = g * g + self.epsilon1
            ns = {k: jnp.zeros((1,), jnp.float32) for k in ("v_row", "v_col", "v", "m")}
            if fd is not None:
                rows, cols = fd
                vr = decay * s["v_row"] + mixing * jnp.mean(g2, axis=cols)
                vc = decay * s["v_col"] + mixing * jnp.mean(g2, axis=rows)
                ns["v_row"], ns["v_col"] = vr, vc
                rows_in_vr = tuple(d - sum(1 for e in cols if e < d) for d in rows)
                rc_mean = jnp.mean(vr, axis=rows_in_vr, keepdims=True)
                rf = (vr / rc_mean) ** -0.5
                cf = vc ** -0.5
                y = g * jnp.expand_dims(rf, cols) * jnp.expand_dims(cf, rows)
            else:
                v = decay * s["v"] + mixing * g2
                ns["v"] = v
                y = g * v ** -0.5
            if self.clipping_threshold is not None:
                den = jnp.maximum(1.0, jnp.sqrt(jnp.mean(y * y, axis=avg, keepdims=True)) / self.clipping_threshold)
                y = y / den
            sub = upd * y
            if self.beta1 is not None:
                m = self.beta1 * s["m"] + (1.0 - self.beta1) * sub
                sub = m
                ns["m"] = m
            if self.weight_decay_rate is not None:
                np_ = (1.0 - self.weight_decay_rate) * p - sub
            else:
                np_ = p - sub
            new_params[path] = np_.astype(p.dtype)
            new_state[path] = ns
        return new_params, new_state


# --------------------------------------------------------------------------
def t5x_lr_schedule(factors="constant * linear_warmup * rsqrt_decay", base_learning_rate=0.5, warmup_steps=1000,
                    decay_factor=0.5, steps_per_decay=20000, steps_per_cycle=100000, step_offset=0,
                    min_learning_rate=1e-8):
    names = [n.strip() for n in factors.split("*")]

    def fn(step):
        step = jnp.maximum(0, jnp.asarray(step, jnp.int32) - step_offset)
        ret = 1.0
        for n in names:
            if n == "constant":
                ret *= base_learning_rate
            elif n == "linear_warmup":
                ret *= jnp.minimum(1.0, step / warmup_steps)
            elif n == "linear_decay":
                ret *= base_learning_rate * jnp.minimum(step / warmup_steps,
                                                        1.0 + decay_factor * (warmup_steps - step))
            elif n == "rsqrt_decay":
                ret /= jnp.sqrt(jnp.maximum(step, warmup_steps))
            elif n == "rsqrt_normalized_decay":
                ret *= jnp.sqrt(warmup_steps)
                ret /= jnp.sqrt(jnp.maximum(step, warmup_steps))
            elif n == "decay_every":
                ret *= decay_factor ** (step // steps_per_decay)
            elif n == "cosine_decay":
                progress = jnp.maximum(0.0, (step - warmup_steps) / float(steps_per_cycle))
                ret *= jnp.maximum(0.0, 0.5 * (1.0 + jnp.cos(jnp.pi * (progress % 1.0))))
            else:
                raise ValueError(n)
        ret = jnp.maximum(ret, min_learning_rate)
        return jnp.asarray(ret, jnp.float32)

    return fn


# --------------------------------------------------------------------------
class Blob:
    def __init__(self):
        self.parts, self.n = [], 0

    def add(self, arr):
        a = np.asarray(arr, np.float32).reshape(-1)
        stride = STRIDE if a.size > BIG else 1
        a = a[::stride]
        e = {"offset": self.n, "count": int(a.size), "stride": stride, "shape": list(np.shape(arr))}
        self.parts.append(a)
        self.n += a.size
        return e


def run_adafactor(blob, opt, lr_fn, grad_mult=1.0, init_step=0):
    params = make_params()
    state = opt.init(params)
    state["step"] = init_step
    steps = []
    for t in range(STEPS):
        lr = float(lr_fn(t))
        params, state = opt.apply(params, state, make_grads(t, grad_mult), lr)
        rec = {"lr": lr, "params": {k: blob.add(v) for k, v in params.items()}, "state": {}}
        for path in params:
            for slot, v in state[path].items():
                if t in STATE_STEPS:
                    rec["state"][f"{path}/{slot}"] = blob.add(v)
        rec["step"] = int(state["step"])
        steps.append(rec)
    return steps


def flat_state(tree, prefix):
    out = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.update(flat_state(v, f"{prefix}/{k}" if prefix else k))
    elif hasattr(tree, "_fields"):
        for k in tree._fields:
            out.update(flat_state(getattr(tree, k), f"{prefix}/{k}" if prefix else k))
    elif isinstance(tree, tuple):
        for i, v in enumerate(tree):
            out.update(flat_state(v, f"{prefix}/{i}" if prefix else str(i)))
    else:
        out[prefix] = tree
    return out


def run_optax(blob, tx, grad_mult=1.0):
    params = make_params()
    st = tx.init(params)
    steps = []
    for t in range(STEPS):
        updates, st = tx.update(make_grads(t, grad_mult), st, params)
        params = optax.apply_updates(params, updates)
        rec = {"params": {k: blob.add(v) for k, v in params.items()}, "state": {}}
        for k, v in flat_state(st, "").items():
            if np.ndim(v) == 0:
                rec["state"][k] = {"int": int(v)}
            elif t in STATE_STEPS:
                rec["state"][k] = blob.add(v)
        steps.append(rec)
    return steps


def main():
    blob = Blob()
    leaves = [{"path": p, "dims": [[n, s] for n, s in d], "param_scale": ps, "grad_scale": gs}
              for p, d, ps, gs in LEAVES]
    runs = {}
    af_lr = t5x_lr_schedule("constant * rsqrt_decay", base_learning_rate=0.1, warmup_steps=2)
    runs["adafactor_default"] = {
        "config": {"logical_factor_rules": "standard", "lr": "constant * rsqrt_decay, base 0.1, warmup 2"},
        "grad_mult": 1.0,
        "steps": run_adafactor(blob, T5xAdafactor(), af_lr)}
    runs["adafactor_options"] = {
        "config": {"logical_factor_rules": "standard", "beta1": 0.9, "weight_decay_rate": 1e-3,
                   "global_norm_clip_threshold": 1.0, "step_offset": 10, "initial_step": 10, "max_parameter_scale": 0.3,
                   "multiply_by_parameter_scale": "false for paths matching 'scale$'", "decay_rate": 0.7,
                   "clipping_threshold": 1.5},
        "grad_mult": 3.0,
        "steps": run_adafactor(blob, T5xAdafactor(beta1=0.9, weight_decay_rate=1e-3, global_norm_clip_threshold=1.0,
                                                  step_offset=10, max_parameter_scale=0.3, decay_rate=0.7,
                                                  clipping_threshold=1.5, no_param_scale_regex="scale$"),
                               af_lr, grad_mult=3.0, init_step=10)}
    runs["adafactor_no_rules"] = {
        "config": {"logical_factor_rules": "none (heuristic, 2-D and lower only)", "min_dim_size_to_factor": 32},
        "grad_mult": 1.0,
        "leaves": [0, 1, 2, 4, 6],
        "steps": None}
    # Heuristic-only run over the rank <= 2 leaves with a smaller factoring threshold.
    keep = {LEAVES[i][0] for i in runs["adafactor_no_rules"]["leaves"]}
    opt = T5xAdafactor(use_logical_rules=False, min_dim_size_to_factor=32)
    params = {k: v for k, v in make_params().items() if k in keep}
    state = opt.init(params)
    steps = []
    for t in range(STEPS):
        lr = float(af_lr(t))
        g = {k: v for k, v in make_grads(t).items() if k in keep}
        params, state = opt.apply(params, state, g, lr)
        rec = {"lr": lr, "params": {k: blob.add(v) for k, v in params.items()}, "state": {}, "step": int(state["step"])}
        for path in params:
            for slot, v in state[path].items():
                if t in STATE_STEPS:
                    rec["state"][f"{path}/{slot}"] = blob.add(v)
        steps.append(rec)
    runs["adafactor_no_rules"]["steps"] = steps

    runs["adamw_default"] = {"config": {"optax": "adamw(1e-3)"}, "grad_mult": 1.0,
                             "steps": run_optax(blob, optax.adamw(1e-3))}
    sched = optax.warmup_cosine_decay_schedule(0.0, 1e-2, 2, 10)
    runs["adamw_clip_schedule"] = {
        "config": {"optax": "chain(clip_by_global_norm(1.0), adamw(warmup_cosine_decay_schedule(0, 1e-2, 2, 10), "
                            "b1=0.8, b2=0.95, eps=1e-6, weight_decay=1e-2))"},
        "grad_mult": 1.0,
        "lr": [float(sched(t)) for t in range(STEPS)],
        "steps": run_optax(blob, optax.chain(optax.clip_by_global_norm(1.0),
                                             optax.adamw(sched, b1=0.8, b2=0.95, eps=1e-6, weight_decay=1e-2)))}

    # Schedules.
    schedules = []
    steps = [0, 1, 2, 5, 99, 100, 101, 999, 1000, 1001, 5000, 10000, 19999, 20000, 20001, 60000, 100000, 123456]
    for args in [
        dict(factors="constant * rsqrt_decay", base_learning_rate=1.0, warmup_steps=10000),
        dict(factors="constant * linear_warmup * rsqrt_decay"),
        dict(factors="constant"),
        dict(factors="constant", base_learning_rate=0.001),
        dict(factors="constant * linear_warmup * rsqrt_normalized_decay", base_learning_rate=0.3, warmup_steps=100),
        dict(factors="constant * decay_every", base_learning_rate=2.0, decay_factor=0.5, steps_per_decay=1000),
        dict(factors="constant * linear_warmup * cosine_decay", base_learning_rate=0.1, warmup_steps=1000,
             steps_per_cycle=20000),
        dict(factors="linear_decay", base_learning_rate=0.01, warmup_steps=1000, decay_factor=1e-4),
        dict(factors="constant * rsqrt_decay", base_learning_rate=1.0, warmup_steps=100, step_offset=1000),
    ]:
        fn = t5x_lr_schedule(**args)
        schedules.append({"kind": "t5x", "args": args, "steps": steps, "values": [float(fn(s)) for s in steps]})
    osteps = [0, 1, 2, 3, 50, 99, 100, 101, 500, 1000, 1500, 10000, 20000]
    for kind, args, fn in [
        ("linear", dict(init_value=1e-3, end_value=1e-5, transition_steps=1000, transition_begin=100),
         optax.linear_schedule(1e-3, 1e-5, 1000, 100)),
        ("cosine_decay", dict(init_value=0.5, decay_steps=1000, alpha=0.1),
         optax.cosine_decay_schedule(0.5, 1000, 0.1)),
        ("warmup_cosine_decay", dict(init_value=0.0, peak_value=1e-4, warmup_steps=100, decay_steps=10000,
                                     end_value=1e-6), optax.warmup_cosine_decay_schedule(0.0, 1e-4, 100, 10000, 1e-6)),
    ]:
        schedules.append({"kind": kind, "args": args, "steps": osteps, "values": [float(fn(s)) for s in osteps]})

    # optax.clip_by_global_norm on its own.
    clip = []
    for mult, max_norm in [(1.0, 1.0), (1e-3, 1.0), (1.0, 1e3)]:
        g = make_grads(0, mult)
        out, _ = optax.clip_by_global_norm(max_norm).update(g, optax.EmptyState())
        clip.append({"grad_mult": mult, "max_norm": max_norm, "global_norm": float(optax.global_norm(g)),
                     "grads": {k: blob.add(v) for k, v in out.items()}})

    # optax.sgd (t5x optimizers.sgd), after everything above so that the
    # existing runs keep their offsets in optim.bin. The state keys are the
    # flattened optax state: "0/trace/<path>" with momentum, "1/count" with a
    # schedule (EmptyStates leave no key).
    runs["sgd_plain"] = {"config": {"optax": "sgd(0.1)"}, "grad_mult": 1.0,
                         "steps": run_optax(blob, optax.sgd(0.1))}
    runs["sgd_momentum"] = {"config": {"optax": "sgd(0.05, momentum=0.9)"}, "grad_mult": 1.0,
                            "steps": run_optax(blob, optax.sgd(0.05, momentum=0.9))}
    runs["sgd_nesterov"] = {"config": {"optax": "sgd(0.05, momentum=0.9, nesterov=True)"}, "grad_mult": 1.0,
                            "steps": run_optax(blob, optax.sgd(0.05, momentum=0.9, nesterov=True))}
    sgd_sched = optax.linear_schedule(0.1, 0.01, 4, 1)
    runs["sgd_schedule"] = {
        "config": {"optax": "sgd(linear_schedule(0.1, 0.01, 4, 1), momentum=0.5)"}, "grad_mult": 1.0,
        "lr": [float(sgd_sched(t)) for t in range(STEPS)],
        "steps": run_optax(blob, optax.sgd(sgd_sched, momentum=0.5))}
    # t5x optimizers.chain([clip_by_global_norm, sgd]), appended last for the
    # same reason. The grads' global norms are 30.7-31.5 over the steps, so
    # 31.2 clips steps 0 and 2 and leaves the others alone. Keys: "1/0/trace/
    # <path>", "1/1/count" (the clip's state is empty).
    runs["sgd_clip_schedule"] = {
        "config": {"optax": "chain(clip_by_global_norm(31.2), sgd(linear_schedule(0.1, 0.01, 4, 1), momentum=0.9))"},
        "grad_mult": 1.0,
        "lr": [float(sgd_sched(t)) for t in range(STEPS)],
        "global_norm": [float(optax.global_norm(make_grads(t))) for t in range(STEPS)],
        "steps": run_optax(blob, optax.chain(optax.clip_by_global_norm(31.2), optax.sgd(sgd_sched, momentum=0.9)))}

    # optax.lion (t5x optimizers.lion) alone and behind t5x's chain of clips,
    # appended last for the same reason. base_wmt_from_scratch_lion.gin runs
    # chain([clip(1.0), lion(warmup_cosine_decay_schedule(...))]); the grads
    # here reach 2.0 (the key kernel's grad_scale), so clip(0.7) clamps some
    # values and leaves the rest. Keys: "0/count", "0/mu/<path>", "2/count";
    # under "1/" after one clip, "2/" after two.
    runs["lion_default"] = {"config": {"optax": "lion(1e-3)"}, "grad_mult": 1.0,
                            "steps": run_optax(blob, optax.lion(1e-3))}
    lion_sched = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 2, 10)
    runs["lion_clip_schedule"] = {
        "config": {"optax": "chain(clip(0.7), lion(warmup_cosine_decay_schedule(0, 1e-3, 2, 10), b1=0.8, b2=0.95, "
                            "weight_decay=0.0))"},
        "grad_mult": 1.0,
        "lr": [float(lion_sched(t)) for t in range(STEPS)],
        "steps": run_optax(blob, optax.chain(optax.clip(0.7),
                                             optax.lion(lion_sched, b1=0.8, b2=0.95, weight_decay=0.0)))}
    # Two clips before adamw: clip_by_global_norm(20) (norms 30.7-31.5: every
    # step clips) then clip(0.05) (clamps most values after it); and the other
    # order, which t5x.cpp runs as a clipped copy then the fused norm.
    runs["adamw_two_clips"] = {
        "config": {"optax": "chain(clip_by_global_norm(20.0), clip(0.05), adamw(1e-3))"}, "grad_mult": 1.0,
        "steps": run_optax(blob, optax.chain(optax.clip_by_global_norm(20.0), optax.clip(0.05), optax.adamw(1e-3)))}
    runs["sgd_clip_then_norm"] = {
        "config": {"optax": "chain(clip(0.5), clip_by_global_norm(5.0), sgd(0.1, momentum=0.9))"}, "grad_mult": 1.0,
        "steps": run_optax(blob, optax.chain(optax.clip(0.5), optax.clip_by_global_norm(5.0),
                                             optax.sgd(0.1, momentum=0.9)))}

    os.makedirs(OUT_DIR, exist_ok=True)
    data = np.concatenate(blob.parts).astype("<f4")
    with open(os.path.join(OUT_DIR, "optim.bin"), "wb") as f:
        f.write(data.tobytes())
    man = {"generator": "scripts/golden/optim_jax.py", "jax_version": jax.__version__,
           "optax_version": optax.__version__, "numpy_version": np.__version__, "steps": STEPS,
           "big": BIG, "stride": STRIDE, "leaves": leaves, "runs": runs, "schedules": schedules,
           "clip_by_global_norm": clip, "bin_floats": int(data.size)}
    with open(os.path.join(OUT_DIR, "optim.json"), "w") as f:
        json.dump(man, f, indent=1)
    print("wrote", data.size * 4, "bytes of floats")


if __name__ == "__main__":
    main()
