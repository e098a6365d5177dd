"""JAX peer: a T5.1.1 encoder-decoder written here in plain JAX (the network
of t5x/examples/t5: pre-norm RMSNorm, relative position bias, gated-GELU
MLP, untied f32 logits, no runtime 1/sqrt(d)), jit-compiled on the CPU.
Flax is not needed: the jaxpr XLA compiles is the same as a linen module's.

Parameters are f32 and cast to the activation dtype at use (t5x's
ACTIVATION_DTYPE); RMSNorm and softmax statistics in f32.
train: sum of token cross entropies + z-loss 1e-4 (t5x loss_fn with
loss_normalizing_factor None), jax.value_and_grad, optax.adafactor (decay
0.8, clipping 1.0, parameter scaling, lr 0.01; or --optimizer adamw:
optax.chain(clip_by_global_norm(1.0), adamw(1e-4, weight_decay=0.01))); one jitted step with donated
state. decode: encoder + cross K/V once, then a lax.fori_loop of greedy steps
over a KV cache, all in one jitted function. Compile time is excluded
(warm-up calls). Prints one JSON line (bench/peers/common.py).
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402


def init_params(d, key):
    e, h, hd, f, v = d["emb_dim"], d["num_heads"], d["head_dim"], d["mlp_dim"], d["vocab"]
    keys = iter(jax.random.split(key, 1000))

    def normal(shape, std):
        return jax.random.normal(next(keys), shape, jnp.float32) * std

    def attn():
        return {"q": normal((e, h * hd), (1.0 / e) ** 0.5 / hd ** 0.5), "k": normal((e, h * hd), (1.0 / e) ** 0.5),
                "v": normal((e, h * hd), (1.0 / e) ** 0.5), "o": normal((h * hd, e), (1.0 / (h * hd)) ** 0.5)}

    def mlp():
        return {"wi_0": normal((e, f), (1.0 / e) ** 0.5), "wi_1": normal((e, f), (1.0 / e) ** 0.5),
                "wo": normal((f, e), (1.0 / f) ** 0.5)}

    ones = lambda: jnp.ones((e,), jnp.float32)  # noqa: E731
    enc = [{"ln1": ones(), "attn": attn(), "ln2": ones(), "mlp": mlp()} for _ in range(d["num_encoder_layers"])]
    dec = [{"ln1": ones(), "self": attn(), "ln2": ones(), "cross": attn(), "ln3": ones(), "mlp": mlp()}
           for _ in range(d["num_decoder_layers"])]
    return {"embedding": normal((v, e), 1.0), "enc_rel": normal((h, 32), 0.1), "dec_rel": normal((h, 32), 0.1),
            "encoder": enc, "enc_norm": ones(), "decoder": dec, "dec_norm": ones(),
            "logits": normal((e, v), (1.0 / e) ** 0.5)}


def rp_bucket(rel, bidirectional, nb=32, md=128):
    ret = 0
    n = -rel
    if bidirectional:
        nb //= 2
        ret += (n < 0).astype(jnp.int32) * nb
        n = jnp.abs(n)
    else:
        n = jnp.maximum(n, 0)
    max_exact = nb // 2
    small = n < max_exact
    large = max_exact + (jnp.log(n.astype(jnp.float32) / max_exact + np.finfo(np.float32).eps)
                         / math.log(md / max_exact) * (nb - max_exact)).astype(jnp.int32)
    return ret + jnp.where(small, n, jnp.minimum(large, nb - 1))


def rel_bias(table, q_pos, k_pos, bidirectional):
    b = rp_bucket(k_pos[None, :] - q_pos[:, None], bidirectional)  # [q, k]
    return table[:, b][None]  # [1, h, q, k]


def rms(x, scale, dt):
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + 1e-6)
    return y.astype(dt) * scale.astype(dt)


def attention(p, xq, xkv, bias, h, dt, kv=None):
    b, lq, _ = xq.shape
    q = (xq @ p["q"].astype(dt)).reshape(b, lq, h, -1)
    if kv is None:
        k = (xkv @ p["k"].astype(dt)).reshape(b, xkv.shape[1], h, -1)
        v = (xkv @ p["v"].astype(dt)).reshape(b, xkv.shape[1], h, -1)
    else:
        k, v = kv
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) + bias.astype(dt)
    w = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(dt)
    ctx = jnp.einsum("bhqk,bkhd->bqhd", w, v).reshape(b, lq, -1)
    return ctx @ p["o"].astype(dt)


def mlp(p, x, dt):
    h = jax.nn.gelu(x @ p["wi_0"].astype(dt), approximate=True) * (x @ p["wi_1"].astype(dt))
    return h @ p["wo"].astype(dt)


def encode(params, tokens, d, dt):
    h = d["num_heads"]
    x = params["embedding"][tokens].astype(dt)
    L = tokens.shape[1]
    pos = jnp.arange(L)
    bias = rel_bias(params["enc_rel"], pos, pos, True)
    for lp in params["encoder"]:
        y = rms(x, lp["ln1"], dt)
        x = x + attention(lp["attn"], y, y, bias, h, dt)
        x = x + mlp(lp["mlp"], rms(x, lp["ln2"], dt), dt)
    return rms(x, params["enc_norm"], dt)


def decode_logits(params, encoded, dec_in, d, dt):
    h = d["num_heads"]
    x = params["embedding"][dec_in].astype(dt)
    L = dec_in.shape[1]
    pos = jnp.arange(L)
    causal = jnp.where(pos[None, :] <= pos[:, None], 0.0, -1e10)[None, None]
    bias = rel_bias(params["dec_rel"], pos, pos, False) + causal
    zero = jnp.zeros((1, 1, 1, 1), dt)
    for lp in params["decoder"]:
        y = rms(x, lp["ln1"], dt)
        x = x + attention(lp["self"], y, y, bias, h, dt)
        x = x + attention(lp["cross"], rms(x, lp["ln2"], dt), encoded, zero, h, dt)
        x = x + mlp(lp["mlp"], rms(x, lp["ln3"], dt), dt)
    y = rms(x, params["dec_norm"], dt).astype(jnp.float32)
    return y @ params["logits"]


def loss_fn(params, enc, dec_in, tgt, d, dt):
    logits = decode_logits(params, encode(params, enc, d, dt), dec_in, d, dt)
    lse = jax.nn.logsumexp(logits, -1)
    tl = jnp.take_along_axis(logits, tgt[..., None], -1)[..., 0]
    return jnp.sum(lse - tl + 1e-4 * lse * lse)


def greedy(params, enc, steps, d, dt):
    h, hd = d["num_heads"], d["head_dim"]
    b = enc.shape[0]
    encoded = encode(params, enc, d, dt)
    cross = [((encoded @ lp["cross"]["k"].astype(dt)).reshape(b, -1, h, hd),
              (encoded @ lp["cross"]["v"].astype(dt)).reshape(b, -1, h, hd)) for lp in params["decoder"]]
    nl = len(params["decoder"])
    cache = jnp.zeros((nl, 2, b, steps, h, hd), dt)
    kpos = jnp.arange(steps)
    zero = jnp.zeros((1, 1, 1, 1), dt)

    def body(t, carry):
        cache, tok, out = carry
        x = params["embedding"][tok][:, None, :].astype(dt)
        bias = rel_bias(params["dec_rel"], t[None], kpos, False) + jnp.where(kpos <= t, 0.0, -1e10)[None, None, None]
        for i, lp in enumerate(params["decoder"]):
            y = rms(x, lp["ln1"], dt)
            k = (y @ lp["self"]["k"].astype(dt)).reshape(b, 1, h, hd)
            v = (y @ lp["self"]["v"].astype(dt)).reshape(b, 1, h, hd)
            cache = jax.lax.dynamic_update_slice(cache, jnp.stack([k, v])[None], (i, 0, 0, t, 0, 0))
            x = x + attention(lp["self"], y, None, bias, h, dt, kv=(cache[i, 0], cache[i, 1]))
            x = x + attention(lp["cross"], rms(x, lp["ln2"], dt), None, zero, h, dt, kv=cross[i])
            x = x + mlp(lp["mlp"], rms(x, lp["ln3"], dt), dt)
        logits = rms(x, params["dec_norm"], dt).astype(jnp.float32)[:, 0] @ params["logits"]
        nxt = jnp.argmax(logits, -1).astype(jnp.int32)
        return cache, nxt, out.at[:, t].set(nxt)

    out = jnp.zeros((b, steps), jnp.int32)
    _, _, out = jax.lax.fori_loop(0, steps, body, (cache, jnp.zeros((b,), jnp.int32), out))
    return out


def main():
    a = common.parse_args()
    d = common.size(a.model)
    dt = jnp.bfloat16 if a.dtype == "bfloat16" else jnp.float32
    params = init_params(d, jax.random.PRNGKey(0))
    rng = np.random.default_rng(1234)
    ms = []
    compile_s = 0.0
    if a.mode == "train":
        if a.optimizer == "adamw":
            opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(1e-4, weight_decay=0.01))
            opt_name = "optax.clip_by_global_norm+adamw"
        else:
            opt = optax.adafactor(learning_rate=0.01, decay_rate=0.8, clipping_threshold=1.0,
                                  multiply_by_parameter_scale=True, min_dim_size_to_factor=128)
            opt_name = "optax.adafactor"
        state = opt.init(params)

        def step(params, state, enc, dec_in, tgt):
            loss, g = jax.value_and_grad(loss_fn)(params, enc, dec_in, tgt, d, dt)
            upd, state = opt.update(g, state, params)
            return optax.apply_updates(params, upd), state, loss

        step = jax.jit(step, donate_argnums=(0, 1))
        for s in range(a.warmup + a.steps):
            enc = jnp.asarray(rng.integers(2, d["vocab"], (a.batch, a.inputs)), jnp.int32)
            tgt = rng.integers(2, d["vocab"], (a.batch, a.targets))
            dec_in = jnp.asarray(np.concatenate([np.zeros((a.batch, 1)), tgt[:, :-1]], 1), jnp.int32)
            tgt = jnp.asarray(tgt, jnp.int32)
            t0 = time.perf_counter()
            params, state, loss = step(params, state, enc, dec_in, tgt)
            loss.block_until_ready()
            dt_ms = (time.perf_counter() - t0) * 1e3
            if s == 0:
                compile_s = dt_ms / 1e3
            if s >= a.warmup:
                ms.append(dt_ms)
        flops, naive = common.train_flops(d, a.batch, a.inputs, a.targets)
        tokens = a.batch * (a.inputs + a.targets)
        extra = {"optimizer": opt_name, "loss": round(float(loss), 4)}
    else:
        fn = jax.jit(lambda p, e: greedy(p, e, a.targets, d, dt))
        for s in range(a.warmup + a.steps):
            enc = jnp.asarray(rng.integers(2, d["vocab"], (a.batch, a.inputs)), jnp.int32)
            t0 = time.perf_counter()
            fn(params, enc).block_until_ready()
            dt_ms = (time.perf_counter() - t0) * 1e3
            if s == 0:
                compile_s = dt_ms / 1e3
            if s >= a.warmup:
                ms.append(dt_ms)
        flops, naive = common.decode_flops(d, a.batch, a.inputs, a.targets), 0.0
        tokens = a.batch * a.targets
        extra = {}
    extra.update({"jax": jax.__version__, "first_call_s_incl_compile": round(compile_s, 1)})
    common.report("jax", a.mode, a.model, a.dtype, a.batch, a.inputs, a.targets, a.threads, ms, flops, naive, tokens,
                  extra)


if __name__ == "__main__":
    main()
