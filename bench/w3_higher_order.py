"""W3 — higher-order derivatives.

(i) The n-th derivative of ``tanh`` at 0.3 (float64 scalar), n = 1..8, by
nesting ``grad``. Reported per system: node count of the final graph
(symgraph: raw ``len(sg.trace(g, 0.3))``, ``len(sg.simplify(...))`` and its
ops, i.e. nodes other than inputs and constants; JAX: equations of
``jax.make_jaxpr(g)(0.3)``, sub-jaxprs counted by their equations; PyTensor:
apply nodes of the compiled function after rewrites, and in brackets the
scalar ops inside its fused ``Composite`` nodes), compile (first-call) time,
time per call, and the error against the closed form
``d^n tanh / dx^n = P_n(tanh x)`` with ``P_0(t) = t``,
``P_{k+1}(t) = P_k'(t) (1 - t^2)`` (exact integer coefficients).

(ii) Hessian of the extended Rosenbrock function (Moré, Garbow & Hillstrom)
``f(x) = sum_i 100 (x[2i+1] - x[2i]^2)^2 + (1 - x[2i])^2`` (float64) for
n = 100 and 1000 (dense n x n result; symgraph graph sizes reported, the
same for every n), and a Hessian-vector product for n = 1e6. The NumPy rows
are the analytic (block-diagonal) Hessian / product.
"""

from __future__ import annotations

import numpy as np

from .common import (import_jax, import_symgraph, import_torch, jax_block, jaxpr_eqn_count,
                     pytensor_node_counts)
from .harness import Row, Settings, System, WorkloadResult, merge_tables, run_case

TITLE = "higher-order derivatives: n-th derivative of tanh; Rosenbrock Hessian and HVP"

X0 = 0.3


def tanh_poly(n: int) -> list[int]:
    """Integer coefficients (lowest degree first) of P_n with d^n tanh(x)/dx^n = P_n(tanh x)."""
    p = [0, 1]                                          # P_0(t) = t
    for _ in range(n):
        dp = [k * p[k] for k in range(1, len(p))] or [0]   # P'
        q = [0] * (len(dp) + 2)
        for k, c in enumerate(dp):                      # P' * (1 - t^2)
            q[k] += c
            q[k + 2] -= c
        while len(q) > 1 and q[-1] == 0:
            q.pop()
        p = q
    return p


def tanh_derivative(n: int, x: float) -> float:
    """Closed form of the n-th derivative of tanh at x (float64)."""
    t = np.tanh(x)
    acc = 0.0
    for c in reversed(tanh_poly(n)):
        acc = acc * t + c
    return float(acc)


# --------------------------------------------------------------------------- (i) systems

def nth_symgraph(n, backend):
    def prepare(x):
        sg, snp = import_symgraph()
        g = snp.tanh
        for _ in range(n):
            g = sg.grad(g)

        def build():
            cf = sg.compile(g, backend=backend)
            return lambda: cf(x)
        return build
    return prepare


def graph_ops(g) -> int:
    """Operations of a graph: nodes other than inputs, constants and broadcast constants (PyTensor's count)."""
    return sum(1 for x in g.toposort() if x.op.kind != "source"
               and not (x.op.name == "broadcast_to" and x.inputs[0].op.name == "constant"))


def sizes_symgraph(f, *args) -> dict:
    """Graph sizes of f traced at args: raw nodes, and nodes and ops after sg.simplify."""
    sg, _ = import_symgraph()
    raw = sg.trace(f, *args)
    g = sg.simplify(raw)
    return {"raw": len(raw), "nodes": len(g), "ops": graph_ops(g)}


def nodes_symgraph(n):
    sg, snp = import_symgraph()
    g = snp.tanh
    for _ in range(n):
        g = sg.grad(g)
    return sizes_symgraph(g, X0)


def nth_numpy(n):
    coeffs = np.array(tanh_poly(n)[::-1], dtype=np.float64)

    def prepare(x):
        return lambda: (lambda: np.polyval(coeffs, np.tanh(x)))
    return prepare


def nth_jax(n):
    def prepare(x):
        jax, jnp = import_jax()
        g = jnp.tanh
        for _ in range(n):
            g = jax.grad(g)
        xj = jnp.float64(x)

        def build():
            fn = jax.jit(g)
            return lambda: jax_block(fn(xj))
        return build
    return prepare


def nodes_jax(n):
    jax, jnp = import_jax()
    g = jnp.tanh
    for _ in range(n):
        g = jax.grad(g)
    return jaxpr_eqn_count(jax.make_jaxpr(g)(X0))


def _pytensor_fn(n):
    import pytensor
    import pytensor.tensor as pt
    x = pt.dscalar("x")
    y = pt.tanh(x)
    for _ in range(n):
        y = pytensor.grad(y, x)
    return pytensor.function([x], y)


def nth_pytensor(n):
    def prepare(x):
        import pytensor  # noqa: F401

        def build():
            fn = _pytensor_fn(n)
            step = lambda: fn(x)  # noqa: E731
            step.fn = fn
            return step
        return build
    return prepare


def nth_autograd(n):
    def prepare(x):
        import autograd
        import autograd.numpy as anp

        def build():
            g = anp.tanh
            for _ in range(n):
                g = autograd.grad(g)
            return lambda: g(x)
        return build
    return prepare


def nth_torch(n):
    def prepare(x):
        torch = import_torch()
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)

        def build():
            def step():
                y = torch.tanh(xt)
                for k in range(n):
                    (y,) = torch.autograd.grad(y, xt, create_graph=k < n - 1)
                return y.detach()
            return step
        return build
    return prepare


def _nth_tables(settings: Settings) -> list:
    orders = [1, 2, 4, 8] if settings.quick else list(range(1, 9))
    tables = []
    for n in orders:
        exact = tanh_derivative(n, X0)

        def extra(row: Row, step, n=n, exact=exact):
            d = {"n": n, "exact": exact}
            counter = {"symgraph": nodes_symgraph, "symgraph-numpy": None, "jax": nodes_jax}.get(row.system)
            if row.system == "pytensor" and step is not None:
                a, s = pytensor_node_counts(step.fn)
                d["nodes"] = f"{a} ({s})"
            elif counter is not None:
                try:
                    c = counter(n)
                    if isinstance(c, dict):
                        d.update(c)
                    else:
                        d["nodes"] = c
                except Exception as e:                           # noqa: BLE001
                    d["nodes"] = f"error: {type(e).__name__}"
            if row.max_abs_err is not None and row.status in ("ok", "WRONG"):
                d["rel err"] = row.max_rel_err
            return d

        tables.append(run_case(
            settings, f"n={n}", (X0,), np.float64(exact),
            [System("symgraph", nth_symgraph(n, "llvm"), peer=False),
             System("symgraph-numpy", nth_symgraph(n, "numpy"), peer=False),
             System("numpy", nth_numpy(n), note="closed form P_n(tanh x) by np.polyval"),
             System("jax", nth_jax(n)),
             System("pytensor", nth_pytensor(n)),
             System("autograd", nth_autograd(n)),
             System("torch", nth_torch(n), note="nested torch.autograd.grad(create_graph=True), eager")],
            rtol=1e-8, atol=1e-10, extra=extra, extra_columns=["raw", "nodes", "ops", "rel err"]))
    return [merge_tables(
        "(i) n-th derivative of tanh at 0.3 by nested grad", tables, key="n",
        notes=[("symgraph: raw = len(sg.trace(g, 0.3)), nodes = len(sg.simplify(...)), ops = nodes other than "
                "inputs and constants; jax: make_jaxpr equations; "
                "pytensor: apply nodes after rewrites (scalar ops inside fused Composite nodes)"),
               "first call = build + trace + compile + first call; rel err vs the closed form"])]


# --------------------------------------------------------------------------- (ii) Rosenbrock

def rosen(x, xp=np):
    """Extended Rosenbrock function on a NumPy-like namespace (n even)."""
    a, b = x[0::2], x[1::2]
    return xp.sum(100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2)


def rosen_hessian(x: np.ndarray) -> np.ndarray:
    """Analytic dense Hessian, shape (n, n), float64."""
    n = x.shape[0]
    a, b = x[0::2], x[1::2]
    h = np.zeros((n, n))
    i = np.arange(0, n, 2)
    h[i, i] = 1200.0 * a * a - 400.0 * b + 2.0
    h[i, i + 1] = h[i + 1, i] = -400.0 * a
    h[i + 1, i + 1] = 200.0
    return h


def rosen_hvp(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Analytic Hessian-vector product, shape (n,), float64."""
    a, b = x[0::2], x[1::2]
    va, vb = v[0::2], v[1::2]
    out = np.empty_like(x)
    out[0::2] = (1200.0 * a * a - 400.0 * b + 2.0) * va - 400.0 * a * vb
    out[1::2] = -400.0 * a * va + 200.0 * vb
    return out


def hess_symgraph(backend):
    def prepare(x):
        sg, snp = import_symgraph()

        def build():
            cf = sg.compile(sg.hessian(lambda x: rosen(x, snp)), backend=backend)
            return lambda: cf(x)
        return build
    return prepare


def hess_numpy(x):
    return lambda: (lambda: rosen_hessian(x))


def hess_jax(x):
    jax, jnp = import_jax()
    xj = jax.device_put(x)

    def build():
        fn = jax.jit(jax.hessian(lambda x: rosen(x, jnp)))
        return lambda: jax_block(fn(xj))
    return build


def hess_autograd(x):
    import autograd
    import autograd.numpy as anp

    def build():
        fn = autograd.hessian(lambda x: rosen(x, anp))
        return lambda: fn(x)
    return build


def hess_pytensor(x):
    import pytensor
    import pytensor.tensor as pt

    def build():
        xv = pt.dvector("x")
        fn = pytensor.function([xv], pytensor.gradient.hessian(rosen(xv, pt), xv))
        return lambda: fn(x)
    return build


def hess_torch(x):
    torch = import_torch()
    xt = torch.from_numpy(x)

    def build():
        fn = torch.func.hessian(lambda x: rosen(x, torch))
        return lambda: fn(xt)
    return build


def hvp_symgraph(backend):
    def prepare(x, v):
        sg, snp = import_symgraph()

        def build():
            cf = sg.compile(lambda x, v: sg.hvp(lambda x: rosen(x, snp), (x,), (v,)), backend=backend)
            return lambda: cf(x, v)
        return build
    return prepare


def hvp_numpy(x, v):
    return lambda: (lambda: rosen_hvp(x, v))


def hvp_jax(x, v):
    jax, jnp = import_jax()
    xj, vj = jax.device_put(x), jax.device_put(v)

    def build():
        fn = jax.jit(lambda x, v: jax.jvp(jax.grad(lambda x: rosen(x, jnp)), (x,), (v,))[1])
        return lambda: jax_block(fn(xj, vj))
    return build


def hvp_autograd(x, v):
    import autograd
    import autograd.numpy as anp

    def build():
        fn = autograd.hessian_vector_product(lambda x: rosen(x, anp))
        return lambda: fn(x, v)
    return build


def hvp_pytensor(x, v):
    import pytensor
    import pytensor.tensor as pt

    def build():
        xv, vv = pt.dvector("x"), pt.dvector("v")
        g = pytensor.grad(rosen(xv, pt), xv)
        fn = pytensor.function([xv, vv], pytensor.grad(pt.sum(g * vv), xv))
        return lambda: fn(x, v)
    return build


def hvp_torch(x, v):
    torch = import_torch()
    xt, vt = torch.from_numpy(x).requires_grad_(True), torch.from_numpy(v)

    def build():
        def step():
            (g,) = torch.autograd.grad(rosen(xt, torch), xt, create_graph=True)
            (hv,) = torch.autograd.grad(g, xt, grad_outputs=vt)
            return hv
        return step
    return build


def _rosen_sizes(row: Row, step, x) -> dict:
    """Graph sizes of the symgraph Hessian (the same for every n: the identity basis stays structural)."""
    if row.system != "symgraph":
        return {}
    sg, snp = import_symgraph()
    return sizes_symgraph(sg.hessian(lambda x: rosen(x, snp)), x)


def _rosen_tables(settings: Settings) -> list:
    rng = np.random.default_rng(3)
    tables = []
    for n in ([100] if settings.quick else [100, 1000]):
        x = rng.uniform(-2.0, 2.0, n)
        tables.append(run_case(
            settings, f"(ii) Hessian of extended Rosenbrock, n={n} (dense {n}x{n})", (x,),
            lambda x=x: rosen_hessian(x),
            [System("symgraph", hess_symgraph("llvm"), peer=False),
             System("symgraph-numpy", hess_symgraph("numpy"), peer=False),
             System("numpy", hess_numpy, note="analytic block-diagonal Hessian"),
             System("jax", hess_jax, note="jax.jit(jax.hessian(f))"),
             System("autograd", hess_autograd, note="autograd.hessian"),
             System("pytensor", hess_pytensor, note="pytensor.gradient.hessian (scan over rows)"),
             System("torch", hess_torch, note="torch.func.hessian, eager")],
            rtol=1e-9, atol=1e-9, extra=lambda row, step, x=x: _rosen_sizes(row, step, x),
            extra_columns=["raw", "nodes", "ops"],
            notes=["symgraph graph sizes: raw = len(sg.trace(sg.hessian(f), x)), nodes and ops after sg.simplify"]))
    n = 20_000 if settings.quick else 1_000_000
    x, v = rng.uniform(-2.0, 2.0, n), rng.standard_normal(n)
    tables.append(run_case(
        settings, f"(ii) Hessian-vector product of extended Rosenbrock, n={n:,}", (x, v),
        lambda: rosen_hvp(x, v),
        [System("symgraph", hvp_symgraph("llvm"), peer=False),
         System("symgraph-numpy", hvp_symgraph("numpy"), peer=False),
         System("numpy", hvp_numpy, note="analytic product"),
         System("jax", hvp_jax, note="jax.jit(jvp of grad)"),
         System("autograd", hvp_autograd, note="autograd.hessian_vector_product"),
         System("pytensor", hvp_pytensor, note="grad(sum(grad(f) * v))"),
         System("torch", hvp_torch, note="double backward, eager")],
        rtol=1e-9, atol=1e-9))
    return tables


def run(settings: Settings) -> WorkloadResult:
    """Run W3 (i) and (ii)."""
    return WorkloadResult("W3", TITLE, _nth_tables(settings) + _rosen_tables(settings))
