"""W1 — fused elementwise forward + backward.

``f(x) = sum(tanh(x)*sin(x) + 0.5*exp(-x*x))``, value and gradient w.r.t. x
(float64, n = 1e6 and 1e7; quick: n = 1e5). The gradient is
``(1 - tanh(x)**2)*sin(x) + tanh(x)*cos(x) - x*exp(-x*x)``.

Effective bandwidth: 16 bytes per element (read x, write the gradient)
divided by the median time, as a fraction of the bandwidth of a NumPy copy
(``np.copyto``, also 16 bytes per element) measured in the same run.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from .common import import_jax, import_symgraph, import_torch, jax_block
from .harness import Row, Settings, System, WorkloadResult, run_case

TITLE = "fused elementwise forward + backward: sum(tanh(x)*sin(x) + 0.5*exp(-x*x)), float64"


def make_input(n: int, seed: int = 0) -> np.ndarray:
    """The input vector: float64, shape (n,), uniform in [-2, 2)."""
    return np.random.default_rng(seed).uniform(-2.0, 2.0, n)


def reference(x: np.ndarray) -> tuple[float, np.ndarray]:
    """Value (float64 scalar) and gradient (shape (n,)) in plain NumPy."""
    t, s, e = np.tanh(x), np.sin(x), np.exp(-x * x)
    value = np.sum(t * s + 0.5 * e)
    grad = (1.0 - t * t) * s + t * np.cos(x) - x * e
    return np.float64(value), grad


def f_np(x, xp=np):
    """The benchmark function written against a NumPy-like namespace `xp`."""
    return xp.sum(xp.tanh(x) * xp.sin(x) + 0.5 * xp.exp(-x * x))


# --------------------------------------------------------------------------- systems

def sys_symgraph(backend: str):
    """symgraph, public API only: ``sg.compile(sg.value_and_grad(f), backend=...)``."""
    def prepare(x):
        sg, snp = import_symgraph()

        def f(x):
            return snp.sum(snp.tanh(x) * snp.sin(x) + 0.5 * snp.exp(-x * x))

        def build():
            cf = sg.compile(sg.value_and_grad(f), backend=backend)
            return lambda: cf(x)
        return build
    return prepare


def prep_numpy(x):
    """Hand-written NumPy value + analytic gradient, reusing preallocated buffers."""
    n = x.shape[0]
    t, s, e, g = (np.empty(n) for _ in range(4))

    def step():
        np.tanh(x, out=t)
        np.sin(x, out=s)
        np.multiply(x, x, out=e)
        np.negative(e, out=e)
        np.exp(e, out=e)
        value = np.dot(t, s) + 0.5 * e.sum()
        # grad = (1 - t^2) s + t cos(x) - x e
        np.multiply(x, e, out=e)                  # e <- x*exp(-x^2)
        np.cos(x, out=g)
        np.multiply(g, t, out=g)                  # t cos x
        np.multiply(t, t, out=t)
        np.subtract(1.0, t, out=t)
        np.multiply(t, s, out=t)                  # (1-t^2) sin x
        np.add(g, t, out=g)
        np.subtract(g, e, out=g)
        return value, g
    return lambda: step


def _numba_kernel(parallel: bool):
    import numba

    @numba.njit(fastmath=True, parallel=parallel, cache=False)
    def kernel(x, g):
        acc = 0.0
        for i in numba.prange(x.shape[0]):
            xi = x[i]
            t = np.tanh(xi)
            s = np.sin(xi)
            e = np.exp(-xi * xi)
            acc += t * s + 0.5 * e
            g[i] = (1.0 - t * t) * s + t * np.cos(xi) - xi * e
        return acc
    return kernel


def sys_numba(parallel: bool):
    """Hand-written Numba fused loop, ``fastmath=True`` (and ``parallel=True``)."""
    def prepare(x):
        import numba  # noqa: F401
        g = np.empty_like(x)

        def build():
            k = _numba_kernel(parallel)
            return lambda: (k(x, g), g)
        return build
    return prepare


def prep_jax(x):
    """``jax.jit(jax.value_and_grad(f))``."""
    jax, jnp = import_jax()
    xj = jax.device_put(x)

    def build():
        fn = jax.jit(jax.value_and_grad(lambda x: f_np(x, jnp)))
        return lambda: jax_block(fn(xj))
    return build


def prep_autograd(x):
    """``autograd.value_and_grad(f)`` on autograd.numpy."""
    import autograd
    import autograd.numpy as anp

    def build():
        fn = autograd.value_and_grad(lambda x: f_np(x, anp))
        return lambda: fn(x)
    return build


def prep_pytensor(x):
    """``pytensor.function([x], [f, grad f])`` (default mode, C backend)."""
    import pytensor
    import pytensor.tensor as pt

    def build():
        xv = pt.dvector("x")
        y = pt.sum(pt.tanh(xv) * pt.sin(xv) + 0.5 * pt.exp(-xv * xv))
        fn = pytensor.function([xv], [y, pytensor.grad(y, xv)])
        return lambda: fn(x)
    return build


def _torch_f(torch, x):
    return torch.sum(torch.tanh(x) * torch.sin(x) + 0.5 * torch.exp(-x * x))


def prep_torch(x):
    """torch eager: forward, ``torch.autograd.grad``."""
    torch = import_torch()
    xt = torch.from_numpy(x).requires_grad_(True)

    def build():
        def step():
            y = _torch_f(torch, xt)
            (g,) = torch.autograd.grad(y, xt)
            return y.detach(), g
        return step
    return build


def prep_torch_compile(x):
    """``torch.compile`` of the forward; backward through AOTAutograd (``y.backward()``)."""
    torch = import_torch()
    xt = torch.from_numpy(x.copy()).requires_grad_(True)

    def build():
        cf = torch.compile(lambda x: _torch_f(torch, x))

        def step():
            xt.grad = None
            y = cf(xt)
            y.backward()
            return y.detach(), xt.grad
        return step
    return build


def systems(heavy: bool = True) -> list[System]:
    """All W1 systems (symgraph first)."""
    out = [
        System("symgraph", sys_symgraph("llvm"), peer=False),
        System("symgraph-numpy", sys_symgraph("numpy"), peer=False),
        System("numpy", prep_numpy),
        System("numba", sys_numba(False)),
        System("numba-parallel", sys_numba(True)),
        System("jax", prep_jax),
        System("autograd", prep_autograd),
        System("pytensor", prep_pytensor),
        System("torch", prep_torch),
    ]
    if heavy:
        out.append(System("torch.compile", prep_torch_compile))
    return out


def copy_seconds(x: np.ndarray, reps: int) -> float:
    """Median seconds of ``np.copyto(dst, x)`` (reads 8 and writes 8 bytes per element)."""
    dst = np.empty_like(x)
    np.copyto(dst, x)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        np.copyto(dst, x)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def run(settings: Settings) -> WorkloadResult:
    """Run W1 at n = 1e6 and 1e7 (quick: 1e5)."""
    sizes = [100_000] if settings.quick else [1_000_000, 10_000_000]
    tables = []
    for n in sizes:
        x = make_input(n)
        t_copy = copy_seconds(x, 21 if settings.quick else 51)
        copy_bw = 16 * n / t_copy

        def extra(row: Row, step, n=n, copy_bw=copy_bw):
            if row.median is None:
                return {}
            bw = 16 * n / row.median
            return {"GB/s": bw / 1e9, "frac copy": bw / copy_bw}

        tables.append(run_case(
            settings, f"n={n:,}", (x,), lambda x=x: reference(x), systems(heavy=not settings.quick),
            rtol=1e-9, atol=1e-9, extra=extra, extra_columns=["GB/s", "frac copy"],
            notes=[f"NumPy copy: {format(t_copy * 1e3, '.3f')} ms = {copy_bw / 1e9:.2f} GB/s "
                   f"(16 bytes/element); 'frac copy' = effective bandwidth / copy bandwidth"]))
    return WorkloadResult("W1", TITLE, tables)
