"""W8 — Gaussian mixture model: log-posterior with a Wishart prior, objective and gradient (GradBench "gmm").

The function (GradBench's gmm eval, ADBench section 4.1 with the corrected
sign of the prior, ADBench pull request 211), float64. Parameters: weights
``alphas`` (K,), means ``means`` (K, d), inverse-covariance factors ``icf``
(K, d + d(d−1)/2): the first d entries of a row are the logarithms of the
diagonal of the lower-triangular precision factor Q_k, the rest its strictly
lower part, column by column. Data x (n, d); Wishart parameters γ = 1, m = 0.

    f = −n d/2 log 2π + Σ_i logsumexp_k(α_k + Σ_j q_kj − ½‖Q_k (x_i − μ_k)‖²)
        − n logsumexp(α)
        − Σ_k [½ γ² (‖exp q_k‖² + ‖l_k‖²) − m Σ_j q_kj]
        + K (ñ d log(γ/√2) − log Γ_d(ñ/2)),      ñ = d + m + 1.

Inputs come from GradBench's generator: ``np.random.seed(31337)``, then
``K_max·d`` uniforms (means) and ``K_max(1 + d + d(d−1)/2) + N_max·d``
standard normals (alphas, icf, x, in that order), K_max = 200, N_max = 10,000.
Sizes: d ∈ {2, 10, 20, 64} × K ∈ {5, 25, 100, 200} × n ∈ {1,000, 10,000}
(``BENCH_W8_N=1000``, ``BENCH_W8_D=2,10``, ``BENCH_W8_K=...`` limit a run; ``--quick``: two small cases).

Each system returns ``(f, (∂f/∂α, ∂f/∂μ, ∂f/∂icf))``; the reference is the
hand-written NumPy objective and gradient (`gmm_numpy`), itself checked
against central differences in tests/test_bench_field.py. The check is
ρ < 1e-8 on every entry (`bench.field.rho_compare`).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .field import (autograd_system, cpp_system, jax_system, numpy_system, rho_compare, symgraph_system,
                    torch_system)
from .harness import Settings, WorkloadResult, merge_tables, run_case

TITLE = "GMM log-posterior with Wishart prior, objective + gradient (float64, GradBench gmm)"

GAMMA = 1.0
M = 0
K_MAX, N_MAX = 200, 10_000
SEED = 31337
FULL_D = (2, 10, 20, 64)
FULL_K = (5, 25, 100, 200)
FULL_N = (1_000, 10_000)
QUICK = ((2, 5, 1_000), (10, 5, 1_000))


def make_input(d: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """GradBench's gmm input for (d, k, n): ``(alphas (k,), means (k, d), icf (k, d(d+1)/2), x (n, d))``."""
    state = np.random.get_state()
    try:
        np.random.seed(SEED)
        uniform = np.random.uniform(0.0, 1.0, K_MAX * d)
        normal = np.random.normal(0.0, 1.0, K_MAX * (1 + d + d * (d - 1) // 2) + N_MAX * d)
    finally:
        np.random.set_state(state)
    p = d + d * (d - 1) // 2
    alphas = normal[:k].copy()
    means = uniform[: k * d].reshape(k, d).copy()
    icf = normal[k: k + k * p].reshape(k, p).copy()
    x = normal[k + k * p: k + k * p + n * d].reshape(n, d).copy()
    return alphas, means, icf, x


def tril_index(d: int) -> np.ndarray:
    """Integer (d, d) map from Q's entries into a row ``[exp q (d) | l (d(d−1)/2) | 0]``.

    Diagonal (i, i) -> i; strictly lower (i, j), i > j -> d + column-major
    position; upper -> the trailing zero.
    """
    p = d + d * (d - 1) // 2
    idx = np.full((d, d), p, dtype=np.intp)
    c = d
    for j in range(d):
        idx[j, j] = j
        for i in range(j + 1, d):
            idx[i, j] = c
            c += 1
    return idx


def tril_rows_cols(d: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of Q's strictly lower entries in the order ``l`` stores them (column-major)."""
    rows = [i for j in range(d) for i in range(j + 1, d)]
    cols = [j for j in range(d) for i in range(j + 1, d)]
    return np.array(rows, dtype=np.intp), np.array(cols, dtype=np.intp)


def constants(d: int, k: int, n: int) -> float:
    """The objective's parameter-free terms: −n d/2 log 2π + K (ñ d log(γ/√2) − log Γ_d(ñ/2))."""
    nn = d + M + 1
    multigammaln = 0.25 * d * (d - 1) * math.log(math.pi) + sum(math.lgamma(0.5 * nn + 0.5 * (1 - j))
                                                               for j in range(1, d + 1))
    return -n * d * 0.5 * math.log(2 * math.pi) + k * (nn * d * math.log(GAMMA / math.sqrt(2)) - multigammaln)


def gmm_objective(alphas, means, icf, x, xp=np):
    """The GMM log-posterior as plain array code on namespace `xp` (numpy, jax.numpy, autograd.numpy).

    Args:
        alphas: (K,) float64. means: (K, d). icf: (K, d(d+1)/2). x: (n, d).
        xp: the array namespace.

    Returns:
        float64 scalar (see the module docstring).
    """
    k, d = means.shape
    n = x.shape[0]
    q = icf[:, :d]
    qdiag = xp.exp(q)
    sum_qs = xp.sum(q, axis=1)
    src = xp.concatenate([qdiag, icf[:, d:], xp.zeros((k, 1))], axis=1)
    Q = src[:, tril_index(d)]                                   # (K, d, d), lower triangular
    z = xp.matmul(x, xp.swapaxes(Q, 1, 2)) - xp.sum(Q * means[:, None, :], axis=2)[:, None, :]  # (K, n, d)
    inner = (alphas + sum_qs)[:, None] - 0.5 * xp.sum(z * z, axis=2)                        # (K, n)
    mx = xp.max(inner, axis=0)
    slse = xp.sum(xp.log(xp.sum(xp.exp(inner - mx), axis=0)) + mx)
    am = xp.max(alphas)
    lse_alpha = xp.log(xp.sum(xp.exp(alphas - am))) + am
    prior = -xp.sum(0.5 * GAMMA * GAMMA * (xp.sum(qdiag * qdiag, axis=1) + xp.sum(icf[:, d:] ** 2, axis=1))
                    - M * sum_qs)
    return constants(d, k, n) + slse - n * lse_alpha + prior


def gmm_numpy(alphas, means, icf, x):
    """Hand-written objective and gradient ``(f, (∂f/∂α, ∂f/∂μ, ∂f/∂icf))``.

    With z_ki = Q_k (x_i − μ_k), responsibilities r_ki = softmax_k(inner_ki)
    and w_ki = r_ki z_ki: ∂f/∂α_k = Σ_i r_ki − n softmax(α)_k;
    ∂f/∂μ_k = Q_kᵀ Σ_i w_ki; ∂f/∂Q_k = −Σ_i w_ki (x_i − μ_k)ᵀ, whose diagonal
    times exp q_k, plus Σ_i r_ki − γ² exp 2q_k + m, gives ∂f/∂q_k and whose
    strictly lower part, minus γ² l_k, gives ∂f/∂l_k.
    """
    k, d = means.shape
    n = x.shape[0]
    q, l = icf[:, :d], icf[:, d:]
    qdiag = np.exp(q)
    idx = tril_index(d)
    Q = np.concatenate([qdiag, l, np.zeros((k, 1))], axis=1)[:, idx]
    xc = x[None, :, :] - means[:, None, :]                      # (K, n, d)
    z = np.matmul(xc, Q.transpose(0, 2, 1))
    inner = (alphas + q.sum(axis=1))[:, None] - 0.5 * np.einsum("kni,kni->kn", z, z)
    mx = inner.max(axis=0)
    e = np.exp(inner - mx)
    se = e.sum(axis=0)
    r = e / se
    am = alphas.max()
    ea = np.exp(alphas - am)
    sa = ea.sum()
    prior = -np.sum(0.5 * GAMMA ** 2 * ((qdiag ** 2).sum(axis=1) + (l ** 2).sum(axis=1)) - M * q.sum(axis=1))
    f = constants(d, k, n) + np.sum(np.log(se) + mx) - n * (np.log(sa) + am) + prior
    rk = r.sum(axis=1)
    g_alpha = rk - n * ea / sa
    w = r[:, :, None] * z
    g_means = np.einsum("kij,ki->kj", Q, w.sum(axis=1))
    dQ = -np.matmul(w.transpose(0, 2, 1), xc)                   # (K, d, d)
    g_q = np.diagonal(dQ, axis1=1, axis2=2) * qdiag + rk[:, None] - GAMMA ** 2 * qdiag ** 2 + M
    rows, cols = tril_rows_cols(d)
    g_l = dQ[:, rows, cols] - GAMMA ** 2 * l
    return f, (g_alpha, g_means, np.concatenate([g_q, g_l], axis=1))


def gmm_torch(torch, alphas, means, icf, x):
    """`gmm_objective` in PyTorch (same formula, max-shifted log-sum-exp)."""
    k, d = means.shape
    n = x.shape[0]
    q = icf[:, :d]
    qdiag = torch.exp(q)
    sum_qs = q.sum(dim=1)
    src = torch.cat([qdiag, icf[:, d:], torch.zeros((k, 1), dtype=icf.dtype)], dim=1)
    Q = src[:, torch.from_numpy(tril_index(d))]
    z = torch.matmul(x, Q.transpose(1, 2)) - (Q * means[:, None, :]).sum(dim=2)[:, None, :]
    inner = (alphas + sum_qs)[:, None] - 0.5 * (z * z).sum(dim=2)
    mx = inner.max(dim=0).values
    slse = (torch.log(torch.exp(inner - mx).sum(dim=0)) + mx).sum()
    am = alphas.max()
    lse_alpha = torch.log(torch.exp(alphas - am).sum()) + am
    prior = -(0.5 * GAMMA * GAMMA * ((qdiag * qdiag).sum(dim=1) + (icf[:, d:] ** 2).sum(dim=1)) - M * sum_qs).sum()
    return constants(d, k, n) + slse - n * lse_alpha + prior


def gmm_cpp(lib):
    """The hand-written C++ objective and gradient (``bench/cpp/gmm.cpp``) as a function of the inputs.

    Args:
        lib: the ``ctypes.CDLL`` of ``bench/cpp/gmm.cpp`` (`bench.cpp.build.load`).

    Returns:
        ``fn(alphas, means, icf, x) -> (f, (∂f/∂α, ∂f/∂μ, ∂f/∂icf))`` on float64
        arrays of the shapes of `gmm_numpy`; outputs are fresh arrays.
    """
    import ctypes

    c = lib.gmm_objective_grad
    c.restype = ctypes.c_double
    ptr = ctypes.c_void_p              # raw data pointers: ndpointer's checks cost ~30 us a call here
    c.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ptr, ptr, ptr, ptr, ctypes.c_double, ctypes.c_int,
                  ptr, ptr, ptr]

    def fn(alphas, means, icf, x):
        k, d = means.shape
        n = x.shape[0]
        arrs = [np.ascontiguousarray(v, dtype=np.float64) for v in (alphas, means, icf, x)]
        want = [(k,), (k, d), (k, d + d * (d - 1) // 2), (n, d)]
        if [a.shape for a in arrs] != want:
            raise ValueError(f"gmm_cpp: shapes {[a.shape for a in arrs]}, expected {want}")
        ga, gm, gi = np.empty(k), np.empty((k, d)), np.empty((k, want[2][1]))
        f = c(d, k, n, *(a.ctypes.data for a in arrs), GAMMA, M, ga.ctypes.data, gm.ctypes.data,
              gi.ctypes.data)
        return f, (ga, gm, gi)
    return fn


# --------------------------------------------------------------------------- systems

def _torch_vg(torch):
    def vg(alphas, means, icf, x):
        ps = [t.detach().requires_grad_(True) for t in (alphas, means, icf)]
        f = gmm_torch(torch, *ps, x)
        return f.detach(), tuple(torch.autograd.grad(f, ps))
    return vg


def systems() -> list:
    """W8's systems in table order."""
    return [
        symgraph_system(lambda sg: sg.value_and_grad(gmm_objective, argnums=(0, 1, 2)),
                        note="sg.compile(sg.value_and_grad(gmm_objective, argnums=(0, 1, 2)))"),
        numpy_system(gmm_numpy, note="hand-written objective and gradient (the reference)"),
        jax_system(lambda jax, jnp: jax.value_and_grad(lambda a, m, i, x: gmm_objective(a, m, i, x, jnp),
                                                       argnums=(0, 1, 2)),
                   note="jax.jit(jax.value_and_grad); block_until_ready"),
        autograd_system(_autograd_vg, note="autograd.value_and_grad of a tuple (alphas, means, icf)"),
        torch_system(_torch_vg),
        cpp_system("gmm", gmm_cpp, note="bench/cpp/gmm.cpp: hand-derived reverse mode, g++ -O3 -march=native, "
                                        "one thread, called through ctypes"),
    ]


def _autograd_vg(ag, anp):
    """autograd differentiates one argument: pack (alphas, means, icf) into a tuple."""
    vg = ag.value_and_grad(lambda p, x: gmm_objective(p[0], p[1], p[2], x, anp))

    def fn(a, m, i, x):
        v, g = vg((a, m, i), x)
        return v, tuple(g)
    return fn


def cases(quick: bool) -> list[tuple[int, int, int]]:
    """(d, k, n) of the run; ``BENCH_W8_N``, ``BENCH_W8_D``, ``BENCH_W8_K`` (comma-separated) limit a full run."""
    if quick:
        return list(QUICK)

    def pick(var, full):
        return tuple(int(v) for v in os.environ[var].split(",")) if os.environ.get(var) else full
    return [(d, k, n) for n in pick("BENCH_W8_N", FULL_N) for d in pick("BENCH_W8_D", FULL_D)
            for k in pick("BENCH_W8_K", FULL_K)]


def run(settings: Settings) -> WorkloadResult:
    """Run every (d, k, n) case; one merged table per n."""
    by_n: dict[int, list] = {}
    for d, k, n in cases(settings.quick):
        inputs = make_input(d, k, n)
        t = run_case(settings, f"d={d} K={k} n={n}", inputs, lambda inputs=inputs: gmm_numpy(*inputs),
                     systems(), check=rho_compare,
                     extra=lambda row, step, d=d, k=k: {"d": d, "K": k})
        by_n.setdefault(n, []).append(t)
    tables = [merge_tables(f"n={n}", ts, key="d", notes=["check: rho < 1e-8 against the hand-written gradient"])
              for n, ts in by_n.items()]
    for t in tables:
        t.extra_columns = ["d", "K"]
    return WorkloadResult("W8", TITLE, tables)
