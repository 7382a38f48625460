"""W13 — Gaussian-process negative log marginal likelihood, value and gradient (float64).

An RBF (squared-exponential) kernel with hyperparameters θ = (log ℓ, log s, log σ) on
inputs X (n, d) with targets y (n,):

    K = s² exp(−‖x_i − x_j‖² / (2ℓ²)) + σ² I,       L Lᵀ = K (Cholesky),
    NLML = ½ yᵀ K⁻¹ y + Σ_i log L_ii + (n/2) log 2π,

and its gradient with respect to θ and to the inputs X. Every automatic system runs
the same plain NumPy function (`nlml`: `np.linalg.cholesky`, then one triangular
solve α̃ = L⁻¹ y, so ½ yᵀK⁻¹y = ½ ‖α̃‖²); symgraph traces it with
`symgraph.scipy.linalg.solve_triangular`, JAX with `jax.scipy.linalg`, autograd with
`autograd.scipy.linalg`, torch with `torch.linalg`. The reference is hand-written
NumPy/SciPy (`nlml_numpy`): `scipy.linalg.cho_factor` / `cho_solve`, K⁻¹ from the
factor, and the analytic gradient ∂NLML/∂θ = −½ tr((α αᵀ − K⁻¹) ∂K/∂θ) with
α = K⁻¹ y, and for the inputs ∂NLML/∂x_i = −(2/ℓ²) Σ_j M_ij (x_i − x_j) with
M = G ∘ (K − σ² I), G = −½ (α αᵀ − K⁻¹).

Inputs (`make_input`): seed 13, X uniform in [0, 1]^d, d = 3, y = sin(4 x₀) + x₁ x₂ plus
noise of standard deviation 0.1; θ = (log 0.6, log 1.2, log 0.1).
Sizes: n = 500 and 2,000 (``BENCH_W13_N=500`` limits a run; ``--quick``: n = 64).
W13's second part, a spectral loss of a 2^20-point signal and the bare rfft, is `bench.w13_spectral`
(``BENCH_W13_PART=gp`` or ``spectral`` runs one part).
The check: every leaf within 1e-8 of the reference, relative to the leaf's largest entry
(`check`).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .field import autograd_system, jax_system, numpy_system, symgraph_system, torch_system
from .harness import Settings, System, WorkloadResult, compare, merge_tables, run_case

TITLE = "Gaussian-process negative log marginal likelihood (RBF), value + gradient w.r.t. θ and X (float64)"

SEED = 13
D = 3
FULL_N = (500, 2000)
QUICK_N = (64,)
THETA = (math.log(0.6), math.log(1.2), math.log(0.1))
RTOL = 1e-8


def make_input(n: int, d: int = D) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(theta (3,), X (n, d), y (n,))`` for a run of size n (seeded, see the module docstring)."""
    rng = np.random.default_rng(SEED)
    x = rng.uniform(0.0, 1.0, (n, d))
    y = np.sin(4.0 * x[:, 0]) + x[:, 1] * x[:, 2] + 0.1 * rng.standard_normal(n)
    return np.array(THETA), x, y


def nlml(theta, x, y, xp=np, solve_triangular=None):
    """The negative log marginal likelihood as plain array code on namespace `xp`.

    Args:
        theta: (3,) float64, (log ℓ, log s, log σ). x: (n, d) inputs. y: (n,) targets.
        xp: the array namespace (numpy under symgraph, jax.numpy, autograd.numpy).
        solve_triangular: the namespace's ``scipy.linalg.solve_triangular``
            (default `symgraph.scipy.linalg.solve_triangular`).

    Returns:
        float64 scalar.
    """
    if solve_triangular is None:
        from symgraph.scipy.linalg import solve_triangular
    n = x.shape[0]
    ell2, s2, sig2 = xp.exp(2.0 * theta[0]), xp.exp(2.0 * theta[1]), xp.exp(2.0 * theta[2])
    diff = x[:, None, :] - x[None, :, :]
    k = s2 * xp.exp(-0.5 * xp.sum(diff * diff, axis=-1) / ell2) + sig2 * xp.eye(n)
    c = xp.linalg.cholesky(k)
    a = solve_triangular(c, y, lower=True)
    r = np.arange(n)                       # the diagonal as a gather (autograd cannot differentiate np.diagonal)
    return 0.5 * xp.sum(a * a) + xp.sum(xp.log(c[r, r])) + 0.5 * n * math.log(2 * math.pi)


def nlml_numpy(theta, x, y):
    """Hand-written value and analytic gradient ``(NLML, (∂/∂θ (3,), ∂/∂X (n, d)))``.

    With E = exp(−D/(2ℓ²)) (D the squared distances), K = s²E + σ²I, α = K⁻¹y and
    W = α αᵀ − K⁻¹: ∂/∂log ℓ = −½ Σ W ∘ s²E ∘ D/ℓ², ∂/∂log s = −Σ W ∘ s²E,
    ∂/∂log σ = −σ² tr W; for the inputs, with M = −½ W ∘ s²E (symmetric),
    ∂/∂X = −(2/ℓ²)(diag(M 1) X − M X).
    """
    import scipy.linalg as sla

    n = x.shape[0]
    ell2, s2, sig2 = np.exp(2.0 * theta)
    diff = x[:, None, :] - x[None, :, :]
    dist = np.einsum("ijk,ijk->ij", diff, diff)
    ke = s2 * np.exp(-0.5 / ell2 * dist)
    k = ke.copy()
    k[np.diag_indices(n)] += sig2
    cf = sla.cho_factor(k, lower=True)
    alpha = sla.cho_solve(cf, y)
    value = 0.5 * (y @ alpha) + np.sum(np.log(np.diag(cf[0]))) + 0.5 * n * math.log(2 * math.pi)
    kinv = sla.cho_solve(cf, np.eye(n))
    w = np.outer(alpha, alpha) - kinv
    wke = w * ke
    g_theta = np.array([-0.5 / ell2 * np.sum(wke * dist), -np.sum(wke), -sig2 * np.trace(w)])
    m = -0.5 * wke
    g_x = -(2.0 / ell2) * (m.sum(axis=1)[:, None] * x - m @ x)
    return value, (g_theta, g_x)


# --------------------------------------------------------------------------- peers

def _jax(jax, jnp):
    import jax.scipy.linalg as jsl
    return jax.value_and_grad(lambda t, x, y: nlml(t, x, y, jnp, jsl.solve_triangular), argnums=(0, 1))


def _autograd(ag, anp):
    import autograd.scipy.linalg as asl
    vg = ag.value_and_grad(lambda p, y: nlml(p[0], p[1], y, anp, asl.solve_triangular))

    def fn(t, x, y):
        v, g = vg((t, x), y)
        return v, tuple(g)
    return fn


def nlml_torch(torch, theta, x, y):
    """`nlml` in PyTorch (``torch.linalg.cholesky``, ``torch.linalg.solve_triangular``)."""
    n = x.shape[0]
    ell2, s2, sig2 = torch.exp(2.0 * theta[0]), torch.exp(2.0 * theta[1]), torch.exp(2.0 * theta[2])
    diff = x[:, None, :] - x[None, :, :]
    k = s2 * torch.exp(-0.5 * (diff * diff).sum(-1) / ell2) + sig2 * torch.eye(n, dtype=x.dtype)
    c = torch.linalg.cholesky(k)
    a = torch.linalg.solve_triangular(c, y[:, None], upper=False)
    return 0.5 * (a * a).sum() + torch.log(torch.diagonal(c)).sum() + 0.5 * n * math.log(2 * math.pi)


def _torch(torch):
    def vg(theta, x, y):
        ps = [t.detach().requires_grad_(True) for t in (theta, x)]
        f = nlml_torch(torch, *ps, y)
        return f.detach(), tuple(torch.autograd.grad(f, ps))
    return vg


def _torch_compile(torch):
    def loss(theta, x, y):
        return nlml_torch(torch, theta, x, y)

    step = torch.compile(lambda t, x, y: torch.func.grad_and_value(loss, argnums=(0, 1))(t, x, y))

    def vg(theta, x, y):
        g, v = step(theta, x, y)
        return v, tuple(g)
    return vg


def systems(quick: bool = False) -> list[System]:
    """W13's systems in table order (quick: without torch.compile, whose first call takes half a minute)."""
    out = [
        symgraph_system(lambda sg: sg.value_and_grad(nlml, argnums=(0, 1)),
                        note="sg.compile(sg.value_and_grad(nlml, argnums=(0, 1))): ?potrf, ?trsm, blocked cholesky_vjp native"),
        numpy_system(nlml_numpy, note="hand-written: scipy.linalg.cho_factor/cho_solve, K^-1, analytic gradient "
                                      "(the reference)"),
        jax_system(_jax, note="jax.jit(jax.value_and_grad) with jax.scipy.linalg.solve_triangular"),
        autograd_system(_autograd, note="autograd.value_and_grad with autograd.scipy.linalg.solve_triangular"),
        torch_system(_torch, note="eager, torch.linalg.cholesky / solve_triangular, torch.autograd.grad"),
        torch_system(_torch_compile, name="torch.compile",
                     note="torch.compile(torch.func.grad_and_value)"),
    ]
    return out[:-1] if quick else out


def check(out, ref) -> tuple[bool, str, float, float]:
    """Every leaf within `RTOL` of the reference, relative to the leaf's largest entry."""
    ok, msg, ea, er = True, [], 0.0, 0.0
    from .harness import flatten, to_numpy
    outs, refs = flatten(to_numpy(out)), flatten(ref)
    if len(outs) != len(refs):
        return False, f"{len(outs)} output leaves, expected {len(refs)}", math.inf, math.inf
    for i, (o, r) in enumerate(zip(outs, refs)):
        scale = max(float(np.max(np.abs(r))), 1e-300)
        good, m, a, e = compare(o, r, RTOL, RTOL * scale)
        ok, ea, er = ok and good, max(ea, a), max(er, a / scale)
        if not good:
            msg.append(f"leaf {i}: {m}")
    return ok, "; ".join(msg), ea, er


def cases(quick: bool) -> tuple[int, ...]:
    """The n of the run; ``BENCH_W13_N`` (comma-separated) replaces the full list."""
    if quick:
        return QUICK_N
    if os.environ.get("BENCH_W13_N"):
        return tuple(int(v) for v in os.environ["BENCH_W13_N"].split(","))
    return FULL_N


def run(settings: Settings) -> WorkloadResult:
    """Run every n (one merged table), then the spectral loss and the bare rfft (`bench.w13_spectral`);
    ``BENCH_W13_PART=gp`` or ``spectral`` runs one of the two."""
    from . import w13_spectral

    part = os.environ.get("BENCH_W13_PART", "")
    spectral = w13_spectral.tables(settings) if part in ("", "spectral") else []
    if part == "spectral":
        return WorkloadResult("W13", TITLE, spectral)
    parts = []
    for n in cases(settings.quick):
        inputs = make_input(n)
        parts.append(run_case(settings, f"n={n}", inputs, lambda inputs=inputs: nlml_numpy(*inputs), systems(settings.quick),
                              check=check, extra=lambda row, step, n=n: {"n": n}))
    table = merge_tables(f"NLML and gradient (d={D})", parts, key="n",
                         notes=[f"check: |out - ref| <= {RTOL:g} (|ref| + max |ref|) per leaf against the "
                                f"hand-written gradient"])
    return WorkloadResult("W13", TITLE, [table] + spectral)
