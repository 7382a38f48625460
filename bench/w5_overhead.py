"""W5 — compile time and call overhead.

(i) A 100-step scalar chain ``x = sin(x)*1.01 + 0.1`` (float64 scalar, start
0.5) with its derivative w.r.t. the start value: first-call (trace + compile)
time and per-call time. (ii) Per-call overhead of a trivial compiled function
``x + 1`` on a float64 scalar.

The "first call" column is build + first call (for PyTensor that includes
``pytensor.function``; PyTensor caches compiled C modules on disk across runs,
so its first call is shorter once the cache is warm).
"""

from __future__ import annotations

import math

import numpy as np

from .common import import_jax, import_symgraph, import_torch, jax_block
from .harness import Settings, System, WorkloadResult, run_case

TITLE = "compile time and call overhead (scalar chain with gradient; x + 1)"

STEPS = 100
X0 = 0.5


def chain(x, sin, steps: int = STEPS):
    """The chain ``x = sin(x)*1.01 + 0.1`` applied `steps` times."""
    for _ in range(steps):
        x = sin(x) * 1.01 + 0.1
    return x


def chain_reference(x0: float, steps: int = STEPS) -> tuple[float, float]:
    """(value, d value / d x0) by forward-mode chain rule in Python floats."""
    x, d = x0, 1.0
    for _ in range(steps):
        x, d = math.sin(x) * 1.01 + 0.1, math.cos(x) * 1.01 * d
    return x, d


# --------------------------------------------------------------------------- (i) chain

def chain_symgraph(backend):
    def prepare(x0):
        sg, snp = import_symgraph()
        x = np.float64(x0)

        def build():
            cf = sg.compile(sg.value_and_grad(lambda x: chain(x, snp.sin)), backend=backend)
            return lambda: cf(x)
        return build
    return prepare


def chain_numpy(x0):
    """Hand-written: NumPy scalar ops, forward-mode derivative alongside."""
    x0 = np.float64(x0)

    def step():
        x, d = x0, np.float64(1.0)
        for _ in range(STEPS):
            x, d = np.sin(x) * 1.01 + 0.1, np.cos(x) * 1.01 * d
        return x, d
    return lambda: step


def chain_numba(x0):
    import numba

    def build():
        @numba.njit(fastmath=True)
        def fn(x):
            d = 1.0
            for _ in range(STEPS):
                x, d = np.sin(x) * 1.01 + 0.1, np.cos(x) * 1.01 * d
            return x, d
        return lambda: fn(x0)
    return build


def chain_jax(x0):
    jax, jnp = import_jax()
    x = jnp.float64(x0)

    def build():
        fn = jax.jit(jax.value_and_grad(lambda x: chain(x, jnp.sin)))
        return lambda: jax_block(fn(x))
    return build


def chain_autograd(x0):
    import autograd
    import autograd.numpy as anp

    def build():
        fn = autograd.value_and_grad(lambda x: chain(x, anp.sin))
        return lambda: fn(x0)
    return build


def chain_pytensor(x0):
    import pytensor
    import pytensor.tensor as pt

    def build():
        x = pt.dscalar("x")
        y = chain(x, pt.sin)
        fn = pytensor.function([x], [y, pytensor.grad(y, x)])
        return lambda: fn(x0)
    return build


def chain_torch(x0):
    torch = import_torch()
    xt = torch.tensor(x0, dtype=torch.float64, requires_grad=True)

    def build():
        def step():
            y = chain(xt, torch.sin)
            (g,) = torch.autograd.grad(y, xt)
            return y.detach(), g
        return step
    return build


# --------------------------------------------------------------------------- (ii) x + 1

def plus_symgraph(backend):
    def prepare(x0):
        sg, _ = import_symgraph()
        x = np.float64(x0)

        def build():
            cf = sg.compile(lambda x: x + 1.0, backend=backend)
            return lambda: cf(x)
        return build
    return prepare


def plus_python(x0):
    x = np.float64(x0)

    def build():
        fn = lambda x: x + 1.0  # noqa: E731
        return lambda: fn(x)
    return build


def plus_numba(x0):
    import numba

    def build():
        fn = numba.njit(lambda x: x + 1.0)
        return lambda: fn(x0)
    return build


def plus_jax(x0):
    jax, jnp = import_jax()
    x = jnp.float64(x0)

    def build():
        fn = jax.jit(lambda x: x + 1.0)
        return lambda: jax_block(fn(x))
    return build


def plus_pytensor(x0):
    import pytensor
    import pytensor.tensor as pt

    def build():
        x = pt.dscalar("x")
        fn = pytensor.function([x], x + 1.0)
        return lambda: fn(x0)
    return build


def plus_pytensor_trusted(x0):
    import pytensor
    import pytensor.tensor as pt

    def build():
        x = pt.dscalar("x")
        fn = pytensor.function([x], x + 1.0)
        fn.trust_input = True
        xa = np.asarray(x0, dtype=np.float64)
        return lambda: fn(xa)
    return build


def plus_torch(x0):
    torch = import_torch()
    xt = torch.tensor(x0, dtype=torch.float64)

    def build():
        return lambda: xt + 1.0
    return build


def run(settings: Settings) -> WorkloadResult:
    """Run W5 (i) and (ii)."""
    v, d = chain_reference(X0)
    t1 = run_case(
        settings, f"(i) {STEPS}-step chain x = sin(x)*1.01 + 0.1, value and gradient", (X0,), (v, d),
        [System("symgraph", chain_symgraph("llvm"), peer=False),
         System("symgraph-numpy", chain_symgraph("numpy"), peer=False),
         System("numpy", chain_numpy, note="hand-written forward-mode loop on NumPy float64 scalars"),
         System("numba", chain_numba, note="hand-written forward-mode loop, njit(fastmath=True)"),
         System("jax", chain_jax, note="jax.jit(jax.value_and_grad(f))"),
         System("autograd", chain_autograd),
         System("pytensor", chain_pytensor, note="pytensor.function([x], [y, grad(y, x)])"),
         System("torch", chain_torch, note="eager, torch.autograd.grad")],
        rtol=1e-9, atol=1e-12)
    t2 = run_case(
        settings, "(ii) per-call overhead of x + 1 on a float64 scalar", (2.0,), np.float64(3.0),
        [System("symgraph", plus_symgraph("llvm"), peer=False),
         System("symgraph-numpy", plus_symgraph("numpy"), peer=False),
         System("numpy", plus_python, note="plain Python function on a NumPy float64 scalar (no compilation)"),
         System("numba", plus_numba),
         System("jax", plus_jax),
         System("pytensor", plus_pytensor),
         System("pytensor-trusted", plus_pytensor_trusted, note="fn.trust_input = True, 0-d array input"),
         System("torch", plus_torch, note="eager tensor op (no compilation)")],
        rtol=0, atol=0)
    from .w5_depth import table as depth_table
    return WorkloadResult("W5", TITLE, [t1, t2, depth_table(settings)])
