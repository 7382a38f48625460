"""W13 (spectral) — a weighted spectral loss of a 2^20-point float64 signal, value and gradient.

    X = rfft(x),    loss(x) = Σ_k w_k |X_k|²,    w_k = 1 / (1 + (k / 64)²),

written as plain array code (`loss`: ``xp.fft.rfft``, the squared magnitude as
``X.real² + X.imag²``); every automatic system differentiates the same function. The
reference is hand-written NumPy (`loss_numpy`): with α_k = 2 for the terms that stand for
two (0 < k < n/2), 1 for DC and Nyquist, the gradient is
∂loss/∂x = 2 n · irfft(w ∘ X / α, n), one forward and one inverse numpy.fft call.

Inputs (`make_input`): seed 131, x standard normal. Sizes: n = 2^20 (``--quick``: 2^10).
The check: the value and every gradient entry within 1e-9 of the reference, relative to
the leaf's largest entry. `bare_rfft` also times the compiled rfft alone against
numpy.fft.rfft at 2^10, 2^16 and 2^20 (the native FFT's own speed).
"""

from __future__ import annotations

import math

import numpy as np

from .field import autograd_system, jax_system, numpy_system, symgraph_system, torch_system
from .harness import Settings, Table, compare, merge_tables, run_case

SEED = 131
FULL_N = (1 << 20,)
QUICK_N = (1 << 10,)
BARE_N = (1 << 10, 1 << 16, 1 << 20)
RTOL = 1e-9


def make_input(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(x (n,), w (n//2 + 1,))`` for a run of size n."""
    rng = np.random.default_rng(SEED)
    k = np.arange(n // 2 + 1, dtype=np.float64)
    return rng.standard_normal(n), 1.0 / (1.0 + (k / 64.0) ** 2)


def loss(x, w, xp=np):
    """Σ w |rfft(x)|² on namespace `xp` (numpy under symgraph and autograd, jax.numpy)."""
    f = xp.fft.rfft(x)
    re, im = xp.real(f), xp.imag(f)  # functions, not attributes: autograd's boxes have no .real
    return xp.sum((re * re + im * im) * w)


def loss_numpy(x, w):
    """Hand-written value and analytic gradient ``(loss, ∂loss/∂x)``."""
    n = x.shape[-1]
    f = np.fft.rfft(x)
    value = np.sum((f.real ** 2 + f.imag ** 2) * w)
    a = np.full(n // 2 + 1, 2.0)
    a[0] = 1.0
    if n % 2 == 0:
        a[-1] = 1.0
    return value, 2.0 * n * np.fft.irfft(w * f / a, n)


def _jax(jax, jnp):
    return jax.value_and_grad(lambda x, w: loss(x, w, jnp))


def _autograd(ag, anp):
    return ag.value_and_grad(lambda x, w: loss(x, w, anp))


def _torch(torch):
    def vg(x, w):
        xx = x.detach().requires_grad_(True)
        f = torch.fft.rfft(xx)
        v = ((f.real * f.real + f.imag * f.imag) * w).sum()
        return v.detach(), torch.autograd.grad(v, xx)[0]
    return vg


def systems() -> list:
    return [
        symgraph_system(lambda sg: sg.value_and_grad(loss),
                        note="sg.compile(sg.value_and_grad(loss)): rfft and its adjoint by the native FFT "
                             "(codegen/llvm/fft.py)"),
        numpy_system(loss_numpy, note="hand-written: numpy.fft.rfft, analytic gradient 2n irfft(w X / α) "
                                      "(the reference)"),
        jax_system(_jax, note="jax.jit(jax.value_and_grad) with jnp.fft.rfft"),
        autograd_system(_autograd, note="autograd.value_and_grad with autograd.numpy.fft.rfft"),
        torch_system(_torch, note="eager, torch.fft.rfft, torch.autograd.grad"),
    ]


def _check(out, ref):
    from .harness import flatten, to_numpy
    outs, refs = flatten(to_numpy(out)), flatten(ref)
    if len(outs) != len(refs):
        return False, f"{len(outs)} output leaves, expected {len(refs)}", math.inf, math.inf
    ok, msg, ea, er = True, [], 0.0, 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        scale = max(float(np.max(np.abs(r))), 1e-300)
        good, m, a, _ = compare(o, r, RTOL, RTOL * scale)
        ok, ea, er = ok and good, max(ea, a), max(er, a / scale)
        if not good:
            msg.append(f"leaf {i}: {m}")
    return ok, "; ".join(msg), ea, er


def _bare_systems() -> list:
    def sym(sg):
        return lambda x: np.fft.rfft(x)
    from .harness import System

    def numpy_prepare(x):
        return lambda: (lambda: np.fft.rfft(x))
    return [symgraph_system(sym, note="sg.compile(np.fft.rfft): the native FFT alone (split parts assembled "
                                      "into a complex128 result)"),
            System("numpy", numpy_prepare, note="numpy.fft.rfft (pocketfft)")]


def tables(settings: Settings) -> list[Table]:
    """The spectral loss table and the bare rfft table."""
    parts = []
    for n in (QUICK_N if settings.quick else FULL_N):
        inputs = make_input(n)
        parts.append(run_case(settings, f"n={n}", inputs, lambda inputs=inputs: loss_numpy(*inputs), systems(),
                              check=_check, extra=lambda row, step, n=n: {"n": n}))
    out = [merge_tables("spectral loss Σ w |rfft(x)|² and gradient (float64)", parts, key="n",
                        notes=[f"check: |out - ref| <= {RTOL:g} (|ref| + max |ref|) per leaf against the hand-written "
                               "gradient"])]
    bare = []
    for n in (QUICK_N if settings.quick else BARE_N):
        x = make_input(n)[0]
        bare.append(run_case(settings, f"n={n}", (x,), lambda x=x: np.fft.rfft(x), _bare_systems(), rtol=1e-12,
                             atol=1e-9 * math.sqrt(n), extra=lambda row, step, n=n: {"n": n}))
    out.append(merge_tables("bare rfft: compiled native FFT vs numpy.fft.rfft (float64)", bare, key="n"))
    return out
