"""W6 — training step of a small decoder-only transformer.

2 layers, 4 heads, width 128, MLP width 512, context 64, character vocabulary
(the docstrings of a few standard-library modules), batch 16, float32,
pre-layer-norm blocks with causal softmax attention, GELU (tanh form),
dropout (p = 0.1) on both residual branches, a final layer norm, untied output
projection, mean token cross-entropy, AdamW (lr 1e-3, betas 0.9/0.999,
eps 1e-8, weight decay 0.01). Quick: width 32, context 16, batch 4.

To make every system compute the same numbers, token inputs and targets are
one-hot float32 arrays (the embedding is a matmul) and the dropout masks are
Bernoulli(0.9) / 0.9 arrays drawn once by NumPy and passed in as inputs.
The check compares the first step's loss and gradients with a float64
hand-written NumPy reference.

Variants: no checkpointing; "+ckpt", every block checkpointed
(`sg.checkpoint` / `jax.checkpoint` / `torch.utils.checkpoint`); and for
symgraph "+sqrt", the whole training step compiled with
`sg.compile(step, checkpoint="sqrt")` (no annotation in the model).

Two tables: time per step in one process (systems interleaved), and time +
memory with fresh processes per variant (as in W4). The memory column to
compare across systems is "step peak", measured the same way for every
system in a second fresh process per variant started with
MALLOC_MMAP_THRESHOLD_=131072 (glibc then maps every allocation of 128 KiB
or more and unmaps it when it is freed, so resident memory follows the live
buffers instead of what the allocator keeps). After the first (checked)
step, the system gives back what it caches between steps (symgraph: its
arena; see `_release`), then ``gc.collect()`` and ``malloc_trim(0)``; what
stays resident is parameters, optimizer state, inputs, code and runtime.
"step peak" is the peak RSS during the next steps minus that. For
symgraph it counts the arena (allocated again by the first of those steps)
and the fresh outputs (gradients, loss); for every system it counts the
gradients, all temporaries and allocator overhead: measured, not planned.
Times come from a first fresh process with the default allocator.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
from typing import Any

import numpy as np

from .harness import Row, Settings, System, Table, WorkloadResult, compare, fmt_bytes, log, run_case

TITLE = "transformer training step (2 layers, 4 heads, width 128, context 64, batch 16, float32, AdamW)"

FULL = {"layers": 2, "heads": 4, "d": 128, "T": 64, "B": 16, "p_drop": 0.1, "reps": 10}
QUICK = {"layers": 2, "heads": 4, "d": 32, "T": 16, "B": 4, "p_drop": 0.1, "reps": 3, "quick": True}
LR, BETA1, BETA2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 0.01
LN_EPS = 1e-5
GELU_C = math.sqrt(2.0 / math.pi)


def corpus() -> str:
    """Training text: docstrings of a few standard-library modules (no imports with side effects)."""
    import collections
    import json
    import re
    import string
    return "\n".join(m.__doc__ or "" for m in (re, json, collections, string))


def make_data(cfg: dict, seed: int = 0) -> dict:
    """Parameters, one batch and dropout masks, all float32 NumPy.

    Returns:
        dict with ``params`` (flat dict name -> array), ``x`` and ``y``
        (one-hot inputs and next-character targets, (B, T, V)), ``masks``
        (list per layer of two (B, T, d) dropout masks) and ``V``.
    """
    text = corpus()
    chars = sorted(set(text))
    V = len(chars)
    ids = np.array([chars.index(c) for c in text], dtype=np.int64)
    rng = np.random.default_rng(seed)
    B, T, d, nl = cfg["B"], cfg["T"], cfg["d"], cfg["layers"]
    F = 4 * d
    starts = rng.integers(0, len(ids) - T - 1, B)
    eye = np.eye(V, dtype=np.float32)
    x = eye[np.stack([ids[s:s + T] for s in starts])]
    y = eye[np.stack([ids[s + 1:s + T + 1] for s in starts])]
    w = lambda *shape: (0.02 * rng.standard_normal(shape)).astype(np.float32)  # noqa: E731
    p = {"tok": w(V, d), "pos": w(T, d)}
    for l in range(nl):
        p.update({f"l{l}.ln1_g": np.ones(d, np.float32), f"l{l}.ln1_b": np.zeros(d, np.float32),
                  f"l{l}.Wqkv": w(d, 3 * d), f"l{l}.bqkv": np.zeros(3 * d, np.float32),
                  f"l{l}.Wo": w(d, d), f"l{l}.bo": np.zeros(d, np.float32),
                  f"l{l}.ln2_g": np.ones(d, np.float32), f"l{l}.ln2_b": np.zeros(d, np.float32),
                  f"l{l}.W1": w(d, F), f"l{l}.b1": np.zeros(F, np.float32),
                  f"l{l}.W2": w(F, d), f"l{l}.b2": np.zeros(d, np.float32)})
    p.update({"lnf_g": np.ones(d, np.float32), "lnf_b": np.zeros(d, np.float32),
              "Wout": w(d, V), "bout": np.zeros(V, np.float32)})
    keep = 1.0 - cfg["p_drop"]
    masks = [[((rng.random((B, T, d)) < keep) / keep).astype(np.float32) for _ in range(2)] for _ in range(nl)]
    return {"params": p, "x": x, "y": y, "masks": masks, "V": V}


def causal_mask(T: int) -> np.ndarray:
    """Additive mask (T, T), float32: 0 on and below the diagonal, -1e9 above."""
    return np.triu(np.full((T, T), -1e9, dtype=np.float32), k=1)


# --------------------------------------------------------------------------- model on a NumPy-like namespace

class TorchOps:
    """The few NumPy-style functions the model uses, for torch tensors."""

    def __init__(self, torch):
        self.t = torch

    def tanh(self, x): return self.t.tanh(x)                                         # noqa: E704
    def exp(self, x): return self.t.exp(x)                                           # noqa: E704
    def log(self, x): return self.t.log(x)                                           # noqa: E704
    def sqrt(self, x): return self.t.sqrt(x)                                         # noqa: E704
    def sum(self, x, axis=None, keepdims=False):                                     # noqa: E301
        return self.t.sum(x) if axis is None else self.t.sum(x, dim=axis, keepdim=keepdims)
    def mean(self, x, axis, keepdims=False): return self.t.mean(x, dim=axis, keepdim=keepdims)  # noqa: E301,E704
    def max(self, x, axis, keepdims=False): return self.t.amax(x, dim=axis, keepdim=keepdims)  # noqa: E301,E704
    def transpose(self, x, axes): return x.permute(*axes)                            # noqa: E301,E704


def _ln(xp, x, g, b):
    mu = xp.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = xp.mean(xc * xc, axis=-1, keepdims=True)
    return xc / xp.sqrt(var + np.float32(LN_EPS)) * g + b


def _gelu(xp, u):
    return np.float32(0.5) * u * (np.float32(1.0) + xp.tanh(np.float32(GELU_C) * (u + np.float32(0.044715) * u * u * u)))


def block(xp, x, lp, m1, m2, cfg, mask):
    """One pre-LN transformer block; `lp` holds the layer's parameters without the "lN." prefix."""
    B, T, d, H = cfg["B"], cfg["T"], cfg["d"], cfg["heads"]
    dh = d // H
    h = _ln(xp, x, lp["ln1_g"], lp["ln1_b"])
    qkv = h @ lp["Wqkv"] + lp["bqkv"]
    q = xp.transpose(qkv[:, :, 0:d].reshape(B, T, H, dh), (0, 2, 1, 3))
    k = xp.transpose(qkv[:, :, d:2 * d].reshape(B, T, H, dh), (0, 2, 3, 1))
    v = xp.transpose(qkv[:, :, 2 * d:3 * d].reshape(B, T, H, dh), (0, 2, 1, 3))
    s = (q @ k) * np.float32(1.0 / math.sqrt(dh)) + mask
    s = s - xp.max(s, axis=-1, keepdims=True)
    e = xp.exp(s)
    a = e / xp.sum(e, axis=-1, keepdims=True)
    o = xp.transpose(a @ v, (0, 2, 1, 3)).reshape(B, T, d)
    x = x + (o @ lp["Wo"] + lp["bo"]) * m1
    h = _ln(xp, x, lp["ln2_g"], lp["ln2_b"])
    return x + (_gelu(xp, h @ lp["W1"] + lp["b1"]) @ lp["W2"] + lp["b2"]) * m2


def layer_params(p: dict, l: int) -> dict:
    """The parameters of layer `l` with the prefix removed."""
    pre = f"l{l}."
    return {k[len(pre):]: v for k, v in p.items() if k.startswith(pre)}


def loss_fn(xp, p, x, y, masks, cfg, mask, wrap=None):
    """Mean token cross-entropy. ``wrap(block_fn) -> block_fn`` adds checkpointing."""
    blk = (lambda *a: block(xp, *a, cfg, mask))
    if wrap is not None:
        blk = wrap(blk)
    h = x @ p["tok"] + p["pos"]
    for l in range(cfg["layers"]):
        h = blk(h, layer_params(p, l), masks[l][0], masks[l][1])
    h = _ln(xp, h, p["lnf_g"], p["lnf_b"])
    z = h @ p["Wout"] + p["bout"]
    zs = z - xp.max(z, axis=-1, keepdims=True)
    lse = xp.log(xp.sum(xp.exp(zs), axis=-1, keepdims=True))
    return -xp.sum(y * (zs - lse)) * np.float32(1.0 / (cfg["B"] * cfg["T"]))


# --------------------------------------------------------------------------- hand-written NumPy backward

def _ln_fwd(x, g, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + LN_EPS)
    xh = xc * rstd
    return xh * g + b, (xh, rstd, g)


def _ln_bwd(dy, cache):
    xh, rstd, g = cache
    dg = (dy * xh).sum((0, 1))
    db = dy.sum((0, 1))
    dxh = dy * g
    dx = rstd * (dxh - dxh.mean(-1, keepdims=True) - xh * (dxh * xh).mean(-1, keepdims=True))
    return dx, dg, db


def numpy_loss_grad(p, x, y, masks, cfg, mask):
    """Loss and gradients (dict like `p`), hand-written; dtype follows the inputs."""
    B, T, d, H = cfg["B"], cfg["T"], cfg["d"], cfg["heads"]
    dh = d // H
    sc = 1.0 / math.sqrt(dh)
    g = {}
    h = x @ p["tok"] + p["pos"]
    caches = []
    for l in range(cfg["layers"]):
        lp = layer_params(p, l)
        m1, m2 = masks[l]
        hn, c1 = _ln_fwd(h, lp["ln1_g"], lp["ln1_b"])
        qkv = hn @ lp["Wqkv"] + lp["bqkv"]
        q, k, v = (qkv[:, :, i * d:(i + 1) * d].reshape(B, T, H, dh).transpose(0, 2, 1, 3) for i in range(3))
        s = q @ k.transpose(0, 1, 3, 2) * sc + mask
        e = np.exp(s - s.max(-1, keepdims=True))
        a = e / e.sum(-1, keepdims=True)
        o = (a @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
        h = h + (o @ lp["Wo"] + lp["bo"]) * m1
        hn2, c2 = _ln_fwd(h, lp["ln2_g"], lp["ln2_b"])
        u = hn2 @ lp["W1"] + lp["b1"]
        t = np.tanh(GELU_C * (u + 0.044715 * u ** 3))
        gl = 0.5 * u * (1 + t)
        h = h + (gl @ lp["W2"] + lp["b2"]) * m2
        caches.append((lp, m1, m2, hn, c1, q, k, v, a, o, hn2, c2, u, t, gl))
    hf, cf = _ln_fwd(h, p["lnf_g"], p["lnf_b"])
    z = hf @ p["Wout"] + p["bout"]
    zs = z - z.max(-1, keepdims=True)
    ez = np.exp(zs)
    se = ez.sum(-1, keepdims=True)
    n = B * T
    loss = -np.sum(y * (zs - np.log(se))) / n
    dz = (ez / se - y) / n
    g["Wout"] = hf.reshape(n, d).T @ dz.reshape(n, -1)
    g["bout"] = dz.sum((0, 1))
    dh_, g["lnf_g"], g["lnf_b"] = _ln_bwd(dz @ p["Wout"].T, cf)
    for l in range(cfg["layers"] - 1, -1, -1):
        lp, m1, m2, hn, c1, q, k, v, a, o, hn2, c2, u, t, gl = caches[l]
        pre = f"l{l}."
        dm = dh_ * m2
        g[pre + "W2"] = gl.reshape(n, -1).T @ dm.reshape(n, d)
        g[pre + "b2"] = dm.sum((0, 1))
        dgl = dm @ lp["W2"].T
        du = dgl * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * u * u))
        g[pre + "W1"] = hn2.reshape(n, d).T @ du.reshape(n, -1)
        g[pre + "b1"] = du.sum((0, 1))
        dx2, g[pre + "ln2_g"], g[pre + "ln2_b"] = _ln_bwd(du @ lp["W1"].T, c2)
        dh_ = dh_ + dx2
        da_ = dh_ * m1
        g[pre + "Wo"] = o.reshape(n, d).T @ da_.reshape(n, d)
        g[pre + "bo"] = da_.sum((0, 1))
        do = (da_ @ lp["Wo"].T).reshape(B, T, H, dh).transpose(0, 2, 1, 3)
        dA = do @ v.transpose(0, 1, 3, 2)
        dv = a.transpose(0, 1, 3, 2) @ do
        ds = a * (dA - (dA * a).sum(-1, keepdims=True)) * sc
        dq = ds @ k
        dk = ds.transpose(0, 1, 3, 2) @ q
        dqkv = np.concatenate([t_.transpose(0, 2, 1, 3).reshape(B, T, d) for t_ in (dq, dk, dv)], axis=-1)
        g[pre + "Wqkv"] = hn.reshape(n, d).T @ dqkv.reshape(n, -1)
        g[pre + "bqkv"] = dqkv.sum((0, 1))
        dx1, g[pre + "ln1_g"], g[pre + "ln1_b"] = _ln_bwd(dqkv @ lp["Wqkv"].T, c1)
        dh_ = dh_ + dx1
    g["tok"] = x.reshape(n, -1).T @ dh_.reshape(n, d)
    g["pos"] = dh_.sum(0)
    return loss, g


class NumpyAdamW:
    """AdamW on a flat dict of NumPy arrays, updated in place."""

    def __init__(self, params: dict):
        self.p = params
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def update(self, grads: dict) -> None:
        """One AdamW step with gradients `grads` (same keys and shapes)."""
        self.t += 1
        c1, c2 = 1 - BETA1 ** self.t, 1 - BETA2 ** self.t
        for k, p in self.p.items():
            g, m, v = grads[k], self.m[k], self.v[k]
            m *= BETA1
            m += (1 - BETA1) * g
            v *= BETA2
            v += (1 - BETA2) * g * g
            p *= 1 - LR * WD
            p -= (LR / c1) * m / (np.sqrt(v / c2) + EPS)


# --------------------------------------------------------------------------- systems (used in-process and in children)

def _malloc_trim() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim(0)``; a no-op elsewhere)."""
    import ctypes
    import ctypes.util
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _release(system: str, cache: Any = None) -> None:
    """Before the timed steps: drop what the system caches between steps, collect, trim the heap.

    symgraph's compiled step allocates its arena (all intermediates) on its
    first call and keeps it for the next calls; it is dropped here so that
    the first timed step allocates it again and the step peak counts it.
    The other systems keep nothing between steps (their parameters and
    optimizer state stay held). Then ``gc.collect()`` and ``malloc_trim(0)``
    for every system, so freed memory left in the heap by the first step is
    not counted as held.
    """
    import gc
    if system == "symgraph" and cache is not None:
        cache.release_arena()  # sg.compile's CompiledFunction: drops every signature's pooled arena
    gc.collect()
    _malloc_trim()


def adamw_update(xp, p: dict, m: dict, v: dict, t: Any, g: dict) -> tuple:
    """One AdamW step on dicts of float32 arrays (Loshchilov & Hutter 2019, decoupled weight decay):
    (p, m, v, t) after gradient g, with this module's LR, BETA1, BETA2, EPS and WD; t is a float32 step count."""
    t = t + np.float32(1)
    m = {k: BETA1 * m[k] + (1 - BETA1) * g[k] for k in p}
    v = {k: BETA2 * v[k] + (1 - BETA2) * g[k] * g[k] for k in p}
    c1, c2 = 1 - BETA1 ** t, 1 - BETA2 ** t
    p = {k: p[k] * np.float32(1 - LR * WD) - (LR / c1) * m[k] / (xp.sqrt(v[k] / c2) + EPS) for k in p}
    return p, m, v, t


def setup(system: str, ckpt: bool | str, cfg: dict, data: dict | None = None) -> dict:
    """Build one system's training step.

    Args:
        system: "numpy", "symgraph", "autograd", "jax" or "torch".
        ckpt: False (none), True (every block checkpointed) or "sqrt"
            (symgraph only: ``sg.compile(step, checkpoint="sqrt")``).
        cfg: sizes (FULL or QUICK).
        data: `make_data(cfg)` (made when None).

    Returns:
        dict with ``step`` (zero-argument callable: one step with AdamW
        update; returns ``(loss, grads)`` of that step), ``hold`` (the
        parameters and inputs), ``check`` (output -> dict of arrays) and
        ``before_steps`` (called once before the timed steps, see `_release`).
    """
    if ckpt == "sqrt" and system != "symgraph":
        raise ValueError(f"checkpoint='sqrt' is a symgraph variant, not one of {system}")
    data = data or make_data(cfg)
    p = {k: v.copy() for k, v in data["params"].items()}
    x, y, masks = data["x"], data["y"], data["masks"]
    mask = causal_mask(cfg["T"])
    check = lambda out: {"loss": np.asarray(out[0]), **{k: np.asarray(v) for k, v in out[1].items()}}  # noqa: E731
    if system == "numpy":
        if ckpt:
            raise ValueError("no checkpointing variant of the hand-written NumPy step")
        opt = NumpyAdamW(p)

        def step():
            loss, g = numpy_loss_grad(p, x, y, masks, cfg, mask)
            opt.update(g)
            return loss, g
        return {"step": step, "hold": (p, x, y, masks), "check": check, "before_steps": lambda: _release(system)}
    if system == "symgraph":
        # the whole step (loss, gradients, AdamW) is one compiled graph; parameters and moments are donated
        import symgraph as sg
        import symgraph.numpy as snp
        wrap = sg.checkpoint if ckpt is True else None
        vg = sg.value_and_grad(lambda p, x, y, masks: loss_fn(snp, p, x, y, masks, cfg, mask, wrap))

        def sstep(p, m, v, t, x, y, masks):
            loss, g = vg(p, x, y, masks)
            p, m, v, t = adamw_update(snp, p, m, v, t, g)
            return p, m, v, t, loss, g  # outputs pair with donated leaves in order: p, m, v update in place
        cf = sg.compile(sstep, donate_argnums=(0, 1, 2), checkpoint="sqrt" if ckpt == "sqrt" else None)
        st = {"p": p, "m": {k: np.zeros_like(a) for k, a in p.items()},
              "v": {k: np.zeros_like(a) for k, a in p.items()}, "t": np.zeros((), np.float32)}

        def step():
            st["p"], st["m"], st["v"], st["t"], loss, g = cf(st["p"], st["m"], st["v"], st["t"], x, y, masks)
            return loss, g

        def planned():
            # the backend's plan: peak of live intermediates and outputs; a call holds the arena
            # plus its fresh output arrays (allocated before the call; donated outputs excluded)
            from symgraph.passes.checkpoint import checkpoint_stats
            exe = cf._current().exe
            fresh = sum(int(np.prod(sh)) * np.dtype(dt).itemsize for sh, dt in exe.out_buffers)
            return {"peak": cf.stats.get("peak_bytes"), "arena+outputs": cf.stats.get("arena_bytes", 0) + fresh,
                    "plan": checkpoint_stats(cf.graph).get("checkpoint", "none")}

        return {"step": step, "hold": (st, x, y, masks), "check": check, "planned_peak": planned,
                "before_steps": lambda: _release(system, cf)}
    if system == "autograd":
        import autograd
        import autograd.numpy as anp
        opt = NumpyAdamW(p)
        vg = autograd.value_and_grad(lambda p: loss_fn(anp, p, x, y, masks, cfg, mask))

        def step():
            loss, g = vg(p)
            opt.update(g)
            return loss, g
        return {"step": step, "hold": (p, x, y, masks), "check": check, "before_steps": lambda: _release(system)}
    if system == "jax":
        from .common import import_jax
        jax, jnp = import_jax()
        tm = jax.tree_util.tree_map
        wrap = jax.checkpoint if ckpt else None
        vg = jax.value_and_grad(lambda p, x, y, masks: loss_fn(jnp, p, x, y, masks, cfg, mask, wrap))

        # parameters and moments donated, as for symgraph: updated in place, no new buffers per step
        @functools.partial(jax.jit, donate_argnums=(0, 1, 2))
        def jstep(p, m, v, t, x, y, masks):
            loss, g = vg(p, x, y, masks)
            t = t + 1
            m = tm(lambda m, g: BETA1 * m + (1 - BETA1) * g, m, g)
            v = tm(lambda v, g: BETA2 * v + (1 - BETA2) * g * g, v, g)
            c1, c2 = 1 - BETA1 ** t, 1 - BETA2 ** t
            p = tm(lambda p, m, v: p * (1 - LR * WD) - (LR / c1) * m / (jnp.sqrt(v / c2) + EPS), p, m, v)
            return loss, g, p, m, v, t
        st = {"p": {k: jax.device_put(v) for k, v in p.items()},
              "m": {k: jnp.zeros_like(v) for k, v in p.items()},
              "v": {k: jnp.zeros_like(v) for k, v in p.items()}, "t": jnp.float32(0)}
        xj, yj = jax.device_put(x), jax.device_put(y)
        mj = [[jax.device_put(a) for a in ms] for ms in masks]

        def step():
            loss, g, st["p"], st["m"], st["v"], st["t"] = jax.block_until_ready(
                jstep(st["p"], st["m"], st["v"], st["t"], xj, yj, mj))
            return loss, g
        return {"step": step, "hold": (st, xj, yj, mj), "check": check, "before_steps": lambda: _release(system)}
    if system == "torch":
        import torch
        from torch.utils.checkpoint import checkpoint
        ops = TorchOps(torch)
        pt_ = {k: torch.from_numpy(v).requires_grad_(True) for k, v in p.items()}
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        mt = [[torch.from_numpy(a) for a in ms] for ms in masks]
        maskt = torch.from_numpy(mask)
        opt = torch.optim.AdamW(list(pt_.values()), lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WD)
        wrap = (lambda f: (lambda *a: checkpoint(f, *a, use_reentrant=False))) if ckpt else None

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(ops, pt_, xt, yt, mt, cfg, maskt, wrap)
            loss.backward()
            g = {k: v.grad for k, v in pt_.items()}  # AdamW does not modify them; freed by the next zero_grad
            opt.step()
            return loss.detach(), g
        return {"step": step, "hold": (pt_, xt, yt, mt), "before_steps": lambda: _release(system),
                "check": lambda out: check((out[0].numpy(), {k: v.numpy() for k, v in out[1].items()}))}
    raise ValueError(f"unknown system {system!r}")


def child_setup(system: str, variant: str, cfg: dict) -> dict:
    """Subprocess entry (see `bench.subproc`): variant "baseline", "none", "ckpt" or "sqrt"."""
    if variant == "baseline":
        data = make_data(cfg)
        if system == "symgraph":
            import symgraph  # noqa: F401
        elif system == "jax":
            from .common import import_jax
            jax, _ = import_jax()
            data = jax.device_put(data["params"]), data
        elif system == "torch":
            import torch
            data = {k: torch.from_numpy(v) for k, v in data["params"].items()}, data
        elif system == "autograd":
            import autograd  # noqa: F401
        _release(system)  # as before the timed steps of a variant (gc, malloc_trim)
        return {"step": None, "hold": data}
    out = setup(system, _CKPT[variant], cfg)
    out["reps"] = cfg["reps"]
    return out


def _reference(cfg: dict, data: dict):
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    p = {k: f64(v) for k, v in data["params"].items()}
    masks = [[f64(a) for a in ms] for ms in data["masks"]]
    loss, g = numpy_loss_grad(p, f64(data["x"]), f64(data["y"]), masks, cfg, f64(causal_mask(cfg["T"])))
    return {"loss": np.asarray(loss), **g}


#: glibc mmap threshold (bytes) of the memory-measuring child processes (see `run`).
MMAP_THRESHOLD = 131072
#: timed steps of the memory-measuring child processes.
MEMORY_REPS = 3


@contextlib.contextmanager
def _environ(**kv: str):
    """Set environment variables for the child processes started inside the block."""
    old = {k: os.environ.get(k) for k in kv}
    os.environ.update(kv)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: variant -> the `setup` argument: none, every block checkpointed, sg.compile(checkpoint="sqrt")
_CKPT = {"none": False, "ckpt": True, "sqrt": "sqrt"}
VARIANTS = [("symgraph", "none"), ("symgraph", "ckpt"), ("symgraph", "sqrt"), ("numpy", "none"),
            ("jax", "none"), ("jax", "ckpt"), ("autograd", "none"), ("torch", "none"), ("torch", "ckpt")]


def _name(system: str, variant: str) -> str:
    return system + ("" if variant == "none" else "+" + variant)


def run(settings: Settings) -> WorkloadResult:
    """Time per step in-process (interleaved), then time and memory per variant in fresh processes."""
    cfg = dict(QUICK if settings.quick else FULL)
    data = make_data(cfg)
    ref = _reference(cfg, data)
    scale = max(float(np.abs(v).max()) for v in ref.values())
    rtol, atol = 2e-3, 2e-5 * scale

    def sys_of(system, variant):
        def prepare():
            if system in ("jax", "torch", "autograd"):
                __import__(system)                      # ImportError -> "missing"
            return lambda: setup(system, _CKPT[variant], cfg, data)["step"]
        return System(_name(system, variant), prepare, peer=system != "symgraph")

    ref_out = (ref["loss"], {k: v for k, v in ref.items() if k != "loss"})
    t1 = run_case(settings, "time per step, one process (interleaved)", (), ref_out,
                  [sys_of(s, c) for s, c in VARIANTS], rtol=rtol, atol=atol,
                  notes=[("+ckpt: every block checkpointed (sg.checkpoint / jax.checkpoint / "
                          "torch.utils.checkpoint.checkpoint(use_reentrant=False)); +sqrt: the whole step "
                          "compiled with sg.compile(step, checkpoint=\"sqrt\"), no annotation"),
                         "check: first step's loss and all gradients vs float64 hand-written NumPy"])
    from .subproc import baseline_ok, run_variant

    def check(arrays):
        ok, msg, _, _ = compare(arrays, ref, rtol=rtol, atol=atol)
        return ok, msg

    timeout = 120.0 if settings.quick else 900.0
    baselines, rows, none_med = {}, [], {}
    for system, variant in VARIANTS:
        row = Row(_name(system, variant))
        rows.append(row)
        if settings.systems is not None and row.system not in settings.systems and system not in settings.systems:
            row.status, row.message = "skipped", "not selected (--systems)"
            continue
        if not baseline_ok(__name__, system, cfg, timeout, baselines, row):
            continue
        base = baselines[system]
        rep = run_variant(__name__, system, variant, cfg, check, timeout)
        log(f"  [W6] {row.system}: {rep['status']} {rep.get('message', '')}", settings)
        if rep["status"] == "ok":
            # the memory figure: a second fresh process in which glibc mmaps every allocation of
            # 128 KiB or more and unmaps it when freed, so resident memory follows live buffers
            with _environ(MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD)):
                mem = run_variant(__name__, system, variant, dict(cfg, reps=MEMORY_REPS), check, timeout)
            log(f"  [W6] {row.system} (memory): {mem['status']} {mem.get('message', '')}", settings)
            if mem["status"] != "ok":
                rep = mem
        row.first_call = rep.get("first_call")
        if rep["status"] != "ok":
            row.status = "error" if rep["status"] == "missing" and system == "symgraph" else rep["status"]
            row.message = rep.get("message", "")
            continue
        ts = rep["times"]
        row.median, row.min, row.max, row.reps, row.number = rep["median"], min(ts), max(ts), len(ts), 1
        plan = rep.get("planned_peak") or {}
        row.extras["plan"] = plan.get("plan", "-")
        row.extras["planned peak"] = fmt_bytes(plan["peak"]) if plan.get("peak") else "-"
        row.extras["arena+outputs"] = fmt_bytes(plan["arena+outputs"]) if plan.get("arena+outputs") else "-"
        if mem.get("step_peak") is not None and mem.get("rss_before_steps") is not None:
            row.extras["step peak"] = fmt_bytes(mem["step_peak"] - mem["rss_before_steps"])
            row.extras["step_peak_bytes"] = mem["step_peak"] - mem["rss_before_steps"]
        if rep.get("step_peak") is not None and rep.get("rss_before_steps") is not None:
            # the same difference in the timing process (default malloc): freed memory the allocator
            # keeps and fragmentation move it either way; in the JSON only
            row.extras["step_peak_default_malloc_bytes"] = rep["step_peak"] - rep["rss_before_steps"]
        row.extras["peak RSS - base"] = fmt_bytes(rep["peak_rss"] - base["peak_rss"])
        row.extras["peak_rss_bytes"] = rep["peak_rss"] - base["peak_rss"]
        if variant == "none":
            none_med[system] = row.median
    for row in rows:
        if row.median is None:
            continue
        if none_med.get("symgraph"):
            row.ratio = row.median / none_med["symgraph"]
        sysname, _, var = row.system.partition("+")
        if var and sysname in none_med:
            row.extras["recompute"] = f"{100 * (row.median / none_med[sysname] - 1):+.0f}%"
    t2 = Table("time per step and memory, one fresh process per variant", rows,
               extra_columns=["step peak", "planned peak", "arena+outputs", "peak RSS - base", "recompute"],
               notes=["times: one fresh process per variant, default allocator",
                      ("step peak (the memory figure to compare): a second fresh process per variant with "
                       f"MALLOC_MMAP_THRESHOLD_={MMAP_THRESHOLD} (glibc maps every allocation of 128 KiB or "
                       "more and unmaps it on free, so RSS follows live buffers); after the checked first step "
                       "the system gives back what it caches between steps (symgraph: its arena), then "
                       "gc.collect() and malloc_trim(0); step peak = peak RSS during "
                       f"{MEMORY_REPS} steps minus RSS just before them (which holds parameters, optimizer "
                       "state, inputs, code); it counts gradients, temporaries, symgraph's arena and outputs"),
                      ("planned peak / arena+outputs: symgraph's plan (live intermediates and outputs / the "
                       "arena plus the fresh output arrays a call allocates)"),
                      ("peak RSS - base: lifetime peak of the timing process (imports, compilation) minus that "
                       "of a process holding only the system, parameters and inputs"),
                      "baselines: " + ", ".join(f"{k} {fmt_bytes(v.get('peak_rss'))}" if v["status"] == "ok"
                                                else f"{k} {v['status']}" for k, v in baselines.items())])
    return WorkloadResult("W6", TITLE, [t1, t2],
                          notes=[f"config: {cfg}, vocabulary {data['V']} characters"])
