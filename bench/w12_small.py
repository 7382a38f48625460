"""W12 — GradBench's small evals: lse, llsq, ode, kmeans (Newton direction), det, particle, saddle.

Each eval is a plain NumPy function written from GradBench's specification
(evals/<name>/README.md and the eval's Python module), with inputs from the
eval's generator (``np.random.seed(31337)`` then one ``np.random.rand`` per
case, in the eval's order). Each system computes the eval's "gradient"
function together with its primal value; the reference is a hand-written
NumPy derivative (checked against central differences in
tests/test_bench_field.py) and the check is ρ < 1e-8 (`bench.field`).

- **lse**: ``max x + log Σ exp(x − max x)`` and its gradient; n from
  GradBench's list (2,500 … 1,280,000).
- **llsq**: ``½ Σ_i (s_i − Σ_j x_j t_i^j)²`` with ``t_i = −1 + 2i/(n−1)``,
  ``s_i = sign t_i``, m = 128 coefficients; value and gradient.
- **ode**: s classical Runge–Kutta steps on [0, 2] of y₀' = x₀,
  y_i' = x_i y_{i−1}, y(0) = 0; the last element of y and its gradient
  with respect to x. symgraph traces the Python loop of s steps.
- **kmeans**: ``Σ_i min_j ‖p_i − c_j‖²`` (all-pairs distances through a
  matrix product, as GradBench's PyTorch tool) and the Newton direction
  ``∇f / (H·1)`` (the Hessian is diagonal, so a Hessian-vector product with
  ones gives its diagonal). The eval draws points without a seed; here the
  seed is 31337 and the centroids are the last k points, as in the eval.
``BENCH_W12_EVALS=det,particle`` runs only those evals.

- **particle** and **saddle** (full runs only): `bench.w12_particle`, nested derivatives.

- **det**: ``np.linalg.det(A)`` and its gradient ``det(A) A⁻ᵀ`` for
  ℓ × ℓ matrices, ℓ = 5 … 11 (GradBench's det eval; its tools expand by
  minors, here the plain NumPy call). symgraph compiles ``det`` and its
  gradient natively: ?getrf from NumPy's OpenBLAS for the LU, ?trsm for the
  solves of the derivative (codegen/cpu/lapack.py).
"""

from __future__ import annotations

import os

import numpy as np

from .field import autograd_system, jax_system, numpy_system, rho_compare, symgraph_system, torch_system
from .harness import Settings, System, WorkloadResult, merge_tables, run_case

TITLE = "GradBench small evals: lse, llsq, ode, kmeans Newton direction, det, particle, saddle (float64)"

SEED = 31337


# --------------------------------------------------------------------------- lse

LSE_N = (2500, 5000, 10000, 20000, 40000, 80000, 160000, 320000, 640000, 1280000)


def lse_inputs(ns) -> dict[int, np.ndarray]:
    """GradBench's lse inputs: after ``seed(31337)``, ``rand(n)`` for each n of the eval's list in order."""
    state = np.random.get_state()
    try:
        np.random.seed(SEED)
        out = {n: np.random.rand(n) for n in LSE_N}
    finally:
        np.random.set_state(state)
    return {n: out[n] for n in ns}


def lse(x, xp=np):
    """LogSumExp with the max shift, from its primitive elements (max, exp, sum, log)."""
    a = xp.max(x)
    return a + xp.log(xp.sum(xp.exp(x - a)))


def lse_numpy(x):
    """Hand-written ``(lse(x), softmax(x))``."""
    a = x.max()
    e = np.exp(x - a)
    s = e.sum()
    return a + np.log(s), e / s


def _lse_torch(torch):
    def vg(x):
        x = x.detach().requires_grad_(True)
        a = torch.max(x)
        y = a + torch.log(torch.sum(torch.exp(x - a)))
        (g,) = torch.autograd.grad(y, [x])
        return y.detach(), g
    return vg


# --------------------------------------------------------------------------- llsq

LLSQ_N = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8196, 16392)
LLSQ_M = 128


def llsq_inputs(ns) -> dict[int, np.ndarray]:
    """GradBench's llsq inputs: after ``seed(31337)``, ``rand(128)`` for each n in order of n·m."""
    state = np.random.get_state()
    try:
        np.random.seed(SEED)
        out = {n: np.random.rand(LLSQ_M) for n in sorted(LLSQ_N)}
    finally:
        np.random.set_state(state)
    return {n: out[n] for n in ns}


def llsq_data(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed design ``T[i, j] = t_i^j`` (n, m) and targets ``s_i = sign t_i``."""
    t = -1.0 + np.arange(n) * (2.0 / (n - 1))
    return t[:, None] ** np.arange(m)[None, :], np.sign(t)


def llsq(x, T, s, xp=np):
    """``½ ‖s − T x‖²`` (T and s from `llsq_data`)."""
    r = s - T @ x
    return 0.5 * xp.sum(r * r)


def llsq_numpy(x, T, s):
    """Hand-written ``(f, −Tᵀ r)``."""
    r = s - T @ x
    return 0.5 * (r @ r), -(T.T @ r)


def _llsq_torch(torch):
    def vg(x, T, s):
        x = x.detach().requires_grad_(True)
        r = s - T @ x
        y = 0.5 * torch.sum(r * r)
        (g,) = torch.autograd.grad(y, [x])
        return y.detach(), g
    return vg


# --------------------------------------------------------------------------- ode

ODE_N = (1000, 10000, 100000)
ODE_S = (1, 10, 100)


def ode_inputs(cases) -> dict[tuple[int, int], np.ndarray]:
    """GradBench's ode inputs: after ``seed(31337)``, ``rand(n)`` per (n, s) in order of n·s."""
    state = np.random.get_state()
    try:
        np.random.seed(SEED)
        out = {c: np.random.rand(c[0]) for c in sorted(((n, s) for n in ODE_N for s in ODE_S),
                                                      key=lambda c: c[0] * c[1])}
    finally:
        np.random.set_state(state)
    return {c: out[c] for c in cases}


def ode_fun(x, y, xp=np):
    """The right-hand side: ``z_0 = x_0``, ``z_i = x_i y_{i−1}``."""
    return xp.concatenate([x[:1], x[1:] * y[:-1]])


def ode_solve(x, s: int, xp=np):
    """s classical Runge–Kutta steps from y(0) = 0 to t = 2 (h = 2/s); returns y(2), shape (n,)."""
    h = 2.0 / s
    y = xp.zeros_like(x)
    for _ in range(s):
        k1 = ode_fun(x, y, xp)
        k2 = ode_fun(x, y + (h / 2) * k1, xp)
        k3 = ode_fun(x, y + (h / 2) * k2, xp)
        k4 = ode_fun(x, y + h * k3, xp)
        y = y + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def ode_last(x, s: int, xp=np):
    """The differentiated output: the last element of `ode_solve`."""
    return ode_solve(x, s, xp)[-1]


def _ode_fun_vjp(x, y, zb):
    """(x̄, ȳ) of ``z = ode_fun(x, y)`` for the cotangent z̄."""
    xb = np.empty_like(x)
    xb[0] = zb[0]
    xb[1:] = zb[1:] * y[:-1]
    yb = np.zeros_like(y)
    yb[:-1] = zb[1:] * x[1:]
    return xb, yb


def ode_numpy(x, s: int):
    """Hand-written ``(y_{n−1}(2), ∇_x y_{n−1}(2))``: RK4 forward storing each step's y, then its adjoint."""
    h = 2.0 / s
    y = np.zeros_like(x)
    ys = []
    for _ in range(s):
        ys.append(y)
        k1 = ode_fun(x, y)
        k2 = ode_fun(x, y + (h / 2) * k1)
        k3 = ode_fun(x, y + (h / 2) * k2)
        k4 = ode_fun(x, y + h * k3)
        y = y + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
    value = y[-1]
    xb = np.zeros_like(x)
    yb = np.zeros_like(x)
    yb[-1] = 1.0
    for y in reversed(ys):                      # adjoint of one step, y_next = y + h/6 (k1 + 2k2 + 2k3 + k4)
        k1 = ode_fun(x, y)
        y2 = y + (h / 2) * k1
        k2 = ode_fun(x, y2)
        y3 = y + (h / 2) * k2
        k3 = ode_fun(x, y3)
        y4 = y + h * k3
        k1b, k2b, k3b, k4b = (h / 6) * yb, (h / 3) * yb, (h / 3) * yb, (h / 6) * yb
        ybn = yb.copy()
        a, b = _ode_fun_vjp(x, y4, k4b)
        xb += a
        ybn += b
        k3b = k3b + h * b
        a, b = _ode_fun_vjp(x, y3, k3b)
        xb += a
        ybn += b
        k2b = k2b + (h / 2) * b
        a, b = _ode_fun_vjp(x, y2, k2b)
        xb += a
        ybn += b
        k1b = k1b + (h / 2) * b
        a, b = _ode_fun_vjp(x, y, k1b)
        xb += a
        ybn += b
        yb = ybn
    return value, xb


def _ode_torch(s):
    def make(torch):
        def fun(x, y):
            return torch.cat([x[:1], x[1:] * y[:-1]])

        def vg(x):
            x = x.detach().requires_grad_(True)
            h = 2.0 / s
            y = torch.zeros_like(x)
            for _ in range(s):
                k1 = fun(x, y)
                k2 = fun(x, y + (h / 2) * k1)
                k3 = fun(x, y + (h / 2) * k2)
                k4 = fun(x, y + h * k3)
                y = y + (h / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
            (g,) = torch.autograd.grad(y[-1], [x])
            return y[-1].detach(), g
        return vg
    return make


# --------------------------------------------------------------------------- kmeans

KMEANS_CASES = ((10, 1000, 8), (10, 10000, 16), (100, 10000, 8), (100, 10000, 16), (1000, 10000, 8))


def kmeans_input(k: int, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``(centroids (k, d), points (n, d))``: points ``rand(n, d)`` after ``seed(31337)``, centroids the last k."""
    state = np.random.get_state()
    try:
        np.random.seed(SEED)
        points = np.random.rand(n, d)
    finally:
        np.random.set_state(state)
    return points[-k:].copy(), points


def kmeans_cost(c, p, xp=np):
    """``Σ_i min_j ‖p_i − c_j‖²`` through ``‖p‖² + ‖c‖² − 2 c pᵀ`` (k, n)."""
    a2 = xp.sum(p * p, axis=1)[None, :]
    b2 = xp.sum(c * c, axis=1)[:, None]
    return xp.sum(xp.min(a2 + b2 - 2 * (c @ p.T), axis=0))


def kmeans_numpy(c, p):
    """Hand-written ``(cost, ∇f / diag H)``: ∇_c_j = 2 Σ_{i→j} (c_j − p_i), H_jj = 2 |{i→j}|."""
    D = np.sum(p * p, axis=1)[None, :] + np.sum(c * c, axis=1)[:, None] - 2 * (c @ p.T)
    a = np.argmin(D, axis=0)
    cnt = np.bincount(a, minlength=c.shape[0]).astype(np.float64)
    sums = np.zeros_like(c)
    np.add.at(sums, a, p)
    g = 2 * (cnt[:, None] * c - sums)
    h = 2 * cnt[:, None] * np.ones_like(c)
    return D[a, np.arange(p.shape[0])].sum(), g / h


def _kmeans_symgraph(sg):
    def direction(c, p):
        f, g = sg.value_and_grad(kmeans_cost)(c, p)
        hd = sg.hvp(lambda c: kmeans_cost(c, p), (c,), (np.ones_like(c),))
        return f, g / hd
    return direction


def _kmeans_jax(jax, jnp):
    def direction(c, p):
        f, g = jax.value_and_grad(lambda c: kmeans_cost(c, p, jnp))(c)
        _, hd = jax.jvp(jax.grad(lambda c: kmeans_cost(c, p, jnp)), (c,), (jnp.ones_like(c),))
        return f, g / hd
    return direction


def _kmeans_autograd(ag, anp):
    vg = ag.value_and_grad(lambda c, p: kmeans_cost(c, p, anp))
    hvp = ag.hessian_vector_product(lambda c, p: kmeans_cost(c, p, anp))

    def direction(c, p):
        f, g = vg(c, p)
        return f, g / hvp(c, p, np.ones_like(c))
    return direction


def _kmeans_torch(torch):
    from torch.autograd.functional import vhp

    def cost(c, p):
        a2 = (p * p).sum(1)[None, :]
        b2 = (c * c).sum(1)[:, None]
        return torch.min(a2 + b2 - 2 * (c @ p.T), dim=0).values.sum()

    def direction(c, p):
        c = c.detach().requires_grad_(True)
        f = cost(c, p)
        (g,) = torch.autograd.grad(f, [c])
        _, hd = vhp(lambda c: cost(c, p), c, torch.ones_like(c))
        return f.detach(), g / hd
    return direction


# --------------------------------------------------------------------------- det

DET_L = (5, 6, 7, 8, 9, 10, 11)


def det_inputs(ls) -> dict[int, np.ndarray]:
    """GradBench's det inputs: after ``seed(31337)``, ``rand(ℓ²)`` reshaped (ℓ, ℓ) for each ℓ in order."""
    state = np.random.get_state()
    try:
        np.random.seed(SEED)
        out = {ell: np.random.rand(ell * ell).reshape(ell, ell) for ell in DET_L}
    finally:
        np.random.set_state(state)
    return {ell: out[ell] for ell in ls}


def det(A, xp=np):
    """The determinant (``xp.linalg.det``)."""
    return xp.linalg.det(A)


def det_numpy(A):
    """Hand-written ``(det A, det(A) A⁻ᵀ)`` (Jacobi's formula)."""
    d = np.linalg.det(A)
    return d, d * np.linalg.inv(A).T


def _det_torch(torch):
    def vg(A):
        A = A.detach().requires_grad_(True)
        d = torch.linalg.det(A)
        (g,) = torch.autograd.grad(d, [A])
        return d.detach(), g
    return vg


# --------------------------------------------------------------------------- systems and cases

def _vg_systems(fn, nargs_diff: int, numpy_fn, torch_make, note_sg: str = "") -> list[System]:
    """symgraph / numpy / jax / autograd / torch systems for ``value_and_grad(fn)`` w.r.t. argument 0."""
    return [
        symgraph_system(lambda sg: sg.value_and_grad(fn), note=note_sg),
        numpy_system(numpy_fn),
        jax_system(lambda jax, jnp: jax.value_and_grad(lambda *a: fn(*a, xp=jnp))),
        autograd_system(lambda ag, anp: ag.value_and_grad(lambda *a: fn(*a, xp=anp))),
        torch_system(torch_make),
    ]


#: ode cases whose LLVM compile is not attempted (seconds grow superlinearly with s; see the docs)
ODE_LLVM_MAX_S = 10


def _ode_systems(s: int) -> list[System]:
    f = (lambda x, xp=np: ode_last(x, s, xp))
    systems = _vg_systems(f, 1, lambda x: ode_numpy(x, s), _ode_torch(s))
    systems.insert(1, symgraph_system(lambda sg: sg.value_and_grad(f), name="symgraph-numpy", backend="numpy",
                                      note="the same graph run by the NumPy evaluator"))
    if s > ODE_LLVM_MAX_S:
        def refuse(*inputs):
            raise RuntimeError(f"not attempted: the LLVM compile of s={s} unrolled RK4 steps takes minutes "
                               f"(it grows superlinearly in s; see docs/benchmarks.md)")
        systems[0] = System("symgraph", refuse, peer=False)
    return systems


def _table(settings, name, key, parts):
    if not parts:
        return None
    return merge_tables(name, parts, key=key, notes=["check: rho < 1e-8 against the hand-written derivative"])


def run(settings: Settings) -> WorkloadResult:
    """Run lse, llsq, ode and kmeans at the sizes of the run (quick: the smallest)."""
    q = settings.quick
    tables = []
    evals = set(os.environ.get("BENCH_W12_EVALS", "lse,llsq,ode,kmeans,det,particle,saddle").split(","))

    parts = []
    for n, x in {} if "lse" not in evals else lse_inputs((2500, 40000) if q else (2500, 20000, 160000, 1280000)).items():
        parts.append(run_case(settings, f"lse n={n}", (x,), lambda x=x: lse_numpy(x),
                              _vg_systems(lse, 1, lse_numpy, _lse_torch), check=rho_compare,
                              extra=lambda row, step, n=n: {"n": n}))
    tables.append(_table(settings, "lse: value and gradient", "n", parts))

    parts = []
    for n, x in {} if "llsq" not in evals else llsq_inputs((16, 1024) if q else (16, 128, 1024, 16392)).items():
        T, s = llsq_data(n, LLSQ_M)
        parts.append(run_case(settings, f"llsq n={n}", (x, T, s), lambda x=x, T=T, s=s: llsq_numpy(x, T, s),
                              _vg_systems(llsq, 1, llsq_numpy, _llsq_torch), check=rho_compare,
                              extra=lambda row, step, n=n: {"n": n}))
    tables.append(_table(settings, f"llsq (m={LLSQ_M}): value and gradient", "n", parts))

    parts = []
    ode_cases = ((1000, 1),) if q else ((1000, 1), (1000, 10), (10000, 10), (100000, 1),
                                                   (1000, 100), (100000, 100))
    for (n, s), x in ode_inputs(ode_cases if "ode" in evals else ()).items():
        parts.append(run_case(settings, f"ode n={n} s={s}", (x,), lambda x=x, s=s: ode_numpy(x, s),
                              _ode_systems(s), check=rho_compare,
                              extra=lambda row, step, n=n, s=s: {"n": n, "s": s}))
    t = _table(settings, "ode: last element and its gradient", "n", parts)
    if t is not None:
        t.extra_columns = ["n", "s"]
    tables.append(t)

    parts = []
    for k, n, d in () if "kmeans" not in evals else (((10, 1000, 8),) if q else KMEANS_CASES):
        c, p = kmeans_input(k, n, d)
        parts.append(run_case(
            settings, f"kmeans k={k} n={n} d={d}", (c, p), lambda c=c, p=p: kmeans_numpy(c, p),
            [symgraph_system(_kmeans_symgraph, note="sg.value_and_grad and sg.hvp with ones, one sg.compile"),
             numpy_system(kmeans_numpy, note="hand-written: assignment counts"),
             jax_system(_kmeans_jax, note="jit of value_and_grad and jvp of grad"),
             autograd_system(_kmeans_autograd, note="value_and_grad and hessian_vector_product"),
             torch_system(_kmeans_torch, note="eager autograd.grad and autograd.functional.vhp")],
            check=rho_compare, extra=lambda row, step, k=k, n=n, d=d: {"k": k, "n": n, "d": d}))
    t = _table(settings, "kmeans: cost and Newton direction grad / (H 1)", "k", parts)
    if t is not None:
        t.extra_columns = ["k", "n", "d"]
    tables.append(t)
    parts = []
    for ell, A in {} if "det" not in evals else det_inputs((5, 8) if q else DET_L).items():
        systems = _vg_systems(det, 1, det_numpy, _det_torch, note_sg="LU (?getrf) and ?trsm, compiled natively")
        parts.append(run_case(settings, f"det l={ell}", (A,), lambda A=A: det_numpy(A), systems,
                              check=rho_compare, extra=lambda row, step, ell=ell: {"l": ell}))
    tables.append(_table(settings, "det: value and gradient", "l", parts))

    if not q and "particle" in evals:           # whole optimizations: seconds per call (quick: skipped)
        from .w12_particle import tables as particle_tables
        tables.extend(particle_tables(settings))
    if not q and "saddle" in evals:             # nested optimizations (quick: skipped; tests/test_bench_field.py)
        from .w12_particle import saddle_tables
        tables.extend(saddle_tables(settings))
    return WorkloadResult("W12", TITLE, [t for t in tables if t is not None])
