"""W9 — bundle adjustment: reprojection residuals and their sparse Jacobian (GradBench / ADBench "ba").

The residuals of ADBench section 4.2 (GradBench's ba eval): for observation
i of camera c_i (11 parameters: Rodrigues rotation r (3), centre C (3),
focal length f, principal point x₀ (2), radial distortion κ (2)) and point
X_j (3) with weight w_i and feature m_i (2):

    Y = R(r) (X − C)          (Rodrigues; the identity plus r × when ‖r‖ = 0)
    p = Y[:2] / Y[2];  p' = p (1 + κ₁ ‖p‖² + κ₂ ‖p‖⁴)
    e_i = w_i (f p' + x₀ − m_i)           (2 residuals)
    e'_i = 1 − w_i²                       (weight residual)

The Jacobian of all 3P residuals with respect to all 11N + 3M + P
parameters is sparse by construction: the two rows of e_i depend on one
camera's 11, one point's 3 and one weight; e'_i on w_i. symgraph computes the
(P, 2, 15) blocks with ``sg.vmap(sg.jacobian(residual))`` on the gathered
per-observation parameters, in one ``sg.compile``; every system's blocks are
assembled into the same ``scipy.sparse.csr_matrix`` (3P, 11N + 3M + P)
(rows 2i, 2i+1: e_i; row 2P + i: e'_i; the column pattern is built once).

Inputs follow ADBench's data files: one camera, one point, one weight and one
feature replicated N, M, P and P times, observations ``(i mod N, i mod M)``,
with (N, M, P) of the files ba1…ba5 (``BENCH_W9_FILES=ba1,ba3`` picks some). The files' one camera/point/feature
values are not available here: they are drawn from ``np.random.seed(31337)``
(rotation, distortion small; the point in front of the camera).

The reference is a complex-step Jacobian of the same NumPy residuals (15
complex evaluations, derivative exact to rounding; Squire & Trapp 1998),
which is also the "numpy" row. The check is ρ < 1e-8 on the residuals and on
every stored Jacobian entry.
"""

from __future__ import annotations

import os

import numpy as np

from .field import (autograd_system, cpp_system, jax_system, numpy_system, rho_compare, symgraph_system,
                    torch_system)
from .harness import Settings, WorkloadResult, merge_tables, run_case

TITLE = "Bundle adjustment: residuals and sparse Jacobian (float64, GradBench ba)"

SEED = 31337
#: (N cameras, M points, P observations) of ADBench's ba1 ... ba5 data files
FILES = {"ba1": (49, 7776, 31843), "ba2": (21, 11315, 36455), "ba3": (161, 48126, 182072),
         "ba4": (372, 47423, 204472), "ba5": (257, 65132, 225911)}
QUICK = {"tiny": (3, 10, 60)}


def one_of_each() -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """The single camera (11,), point (3,), weight and feature (2,) that a data file replicates."""
    state = np.random.get_state()
    try:
        np.random.seed(SEED)
        rot = np.random.uniform(-0.3, 0.3, 3)
        centre = np.random.uniform(-1, 1, 3)
        f = np.random.uniform(300, 500)
        x0 = np.random.uniform(-1, 1, 2)
        kappa = np.random.uniform(-1e-3, 1e-3, 2)
        X = np.random.uniform(-1, 1, 3) + np.array([0.0, 0.0, 8.0])
        w = np.random.uniform(0.5, 1.5)
        feat = np.random.uniform(-100, 100, 2)
    finally:
        np.random.set_state(state)
    cam = np.concatenate([rot, centre, [f], x0, kappa])
    return cam, X, w, feat


def make_input(n: int, m: int, p: int, distinct: bool = False, seed: int = 0):
    """``(cams (n, 11), X (m, 3), w (p,), feats (p, 2), obs (p, 2) int)`` as ADBench expands a file.

    With `distinct`, every camera, point, weight and feature is perturbed
    (seed `seed`) so that no two residuals are equal (the tests use it).
    """
    cam, X, w, feat = one_of_each()
    cams, Xs = np.tile(cam, (n, 1)), np.tile(X, (m, 1))
    ws, feats = np.full(p, w), np.tile(feat, (p, 1))
    if distinct:
        rng = np.random.default_rng(seed)
        cams = cams * (1 + 0.1 * rng.standard_normal(cams.shape))
        Xs = Xs + 0.3 * rng.standard_normal(Xs.shape)
        ws = ws + 0.1 * rng.standard_normal(p)
        feats = feats + 10 * rng.standard_normal(feats.shape)
    obs = np.stack([np.arange(p) % n, np.arange(p) % m], axis=1)
    return cams, Xs, ws, feats, obs


def residual(params, feat, xp=np):
    """The two reprojection residuals of one observation.

    Args:
        params: (15,) = camera (11), point (3), weight (1). feat: (2,).
        xp: numpy, jax.numpy (also on complex inputs for the complex step).

    Returns:
        (2,) array.
    """
    rot, centre, f, x0, kappa = params[0:3], params[3:6], params[6], params[7:9], params[9:11]
    X, w = params[11:14], params[14]
    Y = _rodrigues(rot, X - centre, xp)
    proj = Y[:2] / Y[2]
    rsq = xp.sum(proj * proj)
    distorted = proj * (1.0 + kappa[0] * rsq + kappa[1] * rsq * rsq)
    return w * (distorted * f + x0 - feat)


def _rodrigues(rot, X, xp):
    """Rotate X by the axis-angle vector rot (Rodrigues' formula; first order at ‖rot‖ = 0)."""
    sq = xp.sum(rot * rot)
    zero = sq == 0
    theta = xp.sqrt(xp.where(zero, 1.0, sq))
    w = rot / theta
    c, s = xp.cos(theta), xp.sin(theta)
    rotated = X * c + _cross(w, X, xp) * s + w * (xp.sum(w * X) * (1.0 - c))
    return xp.where(zero, X + _cross(rot, X, xp), rotated)


def _cross(a, b, xp):
    return xp.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def residuals_vectorized(P15, feats, xp=np):
    """`residual` for all observations at once: P15 (P, 15), feats (P, 2) -> (P, 2)."""
    rot, centre, f, x0, kappa = P15[:, 0:3], P15[:, 3:6], P15[:, 6:7], P15[:, 7:9], P15[:, 9:11]
    X, w = P15[:, 11:14], P15[:, 14:15]
    Xc = X - centre
    sq = xp.sum(rot * rot, axis=1, keepdims=True)
    zero = sq == 0
    theta = xp.sqrt(xp.where(zero, 1.0, sq))
    u = rot / theta
    c, s = xp.cos(theta), xp.sin(theta)
    rotated = Xc * c + _cross_rows(u, Xc, xp) * s + u * (xp.sum(u * Xc, axis=1, keepdims=True) * (1.0 - c))
    Y = xp.where(zero, Xc + _cross_rows(rot, Xc, xp), rotated)
    proj = Y[:, :2] / Y[:, 2:3]
    rsq = xp.sum(proj * proj, axis=1, keepdims=True)
    distorted = proj * (1.0 + kappa[:, :1] * rsq + kappa[:, 1:2] * rsq * rsq)
    return w * (distorted * f + x0 - feats)


def _cross_rows(a, b, xp):
    return xp.stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1], a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                     a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]], axis=1)


def gather(cams, X, w, obs, xp=np):
    """Per-observation parameters (P, 15): camera, point and weight of each observation."""
    return xp.concatenate([cams[obs[:, 0]], X[obs[:, 1]], w[:, None]], axis=1)


# --------------------------------------------------------------------------- sparse assembly

class Pattern:
    """The CSR structure of the (3P, 11N + 3M + P) Jacobian, built once per problem."""

    def __init__(self, n: int, m: int, p: int, obs: np.ndarray):
        i = np.arange(p)
        cols = np.concatenate([11 * obs[:, :1] + np.arange(11), 11 * n + 3 * obs[:, 1:2] + np.arange(3),
                               (11 * n + 3 * m + i)[:, None]], axis=1)            # (P, 15), ascending
        self.indices = np.concatenate([np.repeat(cols[:, None, :], 2, axis=1).ravel(),
                                       11 * n + 3 * m + i]).astype(np.int64)
        self.indptr = np.concatenate([np.arange(0, 30 * p + 1, 15), 30 * p + 1 + i]).astype(np.int64)
        self.shape = (3 * p, 11 * n + 3 * m + p)

    def csr(self, blocks: np.ndarray, dw: np.ndarray):
        """``scipy.sparse.csr_matrix`` from the (P, 2, 15) blocks and the weight derivatives (P,)."""
        import scipy.sparse
        data = np.concatenate([np.asarray(blocks).reshape(-1), np.asarray(dw)])
        return scipy.sparse.csr_matrix((data, self.indices, self.indptr), shape=self.shape)


def _finish(pattern, r, werr, blocks, dw):
    """A system's output: residuals (3P,) and the CSR Jacobian's data (structure shared)."""
    J = pattern.csr(blocks, dw)
    return np.concatenate([np.asarray(r).reshape(-1), np.asarray(werr)]), J.data


# --------------------------------------------------------------------------- systems

def numpy_complex_step(pattern):
    """Residuals and Jacobian blocks by the complex step: 15 complex evaluations of the vectorized residuals."""
    def run(cams, X, w, feats, obs):
        P15 = gather(cams, X, w, obs)
        r = residuals_vectorized(P15, feats)
        h = 1e-30
        blocks = np.empty((P15.shape[0], 2, 15))
        Z = P15.astype(np.complex128)
        for k in range(15):
            Z[:, k] += 1j * h
            blocks[:, :, k] = residuals_vectorized(Z, feats).imag / h
            Z[:, k] = P15[:, k]
        return _finish(pattern, r, 1.0 - w * w, blocks, -2.0 * w)
    return run


def _sg_make(pattern):
    def make(sg):
        jac = sg.vmap(sg.jacobian(residual))
        res = sg.vmap(residual)

        def blocks(cams, X, w, feats, obs):
            P15 = gather(cams, X, w, obs)
            return res(P15, feats), 1.0 - w * w, jac(P15, feats), -2.0 * w
        cf = sg.compile(blocks)
        return lambda *a: _finish(pattern, *cf(*a))
    return make


def _symgraph_system(pattern):
    from .field import System
    from .common import import_symgraph

    def prepare(*inputs):
        sg, _ = import_symgraph()

        def build():
            fn = _sg_make(pattern)(sg)
            return lambda: fn(*inputs)
        return build
    return System("symgraph", prepare, peer=False,
                  note="sg.compile of sg.vmap(sg.jacobian(residual)) on the gathered (P, 15) parameters")


def _jax_make(pattern):
    def make(jax, jnp):
        def blocks(cams, X, w, feats, obs):
            P15 = gather(cams, X, w, obs, jnp)
            f = lambda q, m: residual(q, m, jnp)  # noqa: E731
            return (jax.vmap(f)(P15, feats), 1.0 - w * w, jax.vmap(jax.jacfwd(f))(P15, feats), -2.0 * w)
        jb = jax.jit(blocks)

        def fn(*a):
            return _finish(pattern, *jax.block_until_ready(jb(*a)))
        return fn
    return make


def _jax_system(pattern):
    from .field import System
    from .common import import_jax

    def prepare(*inputs):
        jax, jnp = import_jax()
        ins = [jax.device_put(v) for v in inputs]

        def build():
            fn = _jax_make(pattern)(jax, jnp)
            return lambda: fn(*ins)
        return build
    return System("jax", prepare, note="jax.jit of jax.vmap(jax.jacfwd(residual)); block_until_ready")


def _torch_system(pattern):
    from .field import System
    from .common import import_torch

    def prepare(cams, X, w, feats, obs):
        torch = import_torch()
        t = [torch.from_numpy(np.ascontiguousarray(v)) for v in (cams, X, w, feats)]
        ob = torch.from_numpy(obs)

        def build():
            from torch.func import jacrev, vmap

            def cross(a, b):
                return torch.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])

            def res(q, m):
                rot, centre, f, x0, kappa = q[0:3], q[3:6], q[6], q[7:9], q[9:11]
                Xc = q[11:14] - centre
                sq = torch.sum(rot * rot)
                zero = sq == 0
                theta = torch.sqrt(torch.where(zero, torch.ones_like(sq), sq))
                u = rot / theta
                c, s = torch.cos(theta), torch.sin(theta)
                rotated = Xc * c + cross(u, Xc) * s + u * (torch.sum(u * Xc) * (1.0 - c))
                Y = torch.where(zero, Xc + cross(rot, Xc), rotated)
                proj = Y[:2] / Y[2]
                rsq = torch.sum(proj * proj)
                return q[14] * (proj * (1.0 + kappa[0] * rsq + kappa[1] * rsq * rsq) * f + x0 - m)
            jac, vres = vmap(jacrev(res)), vmap(res)

            def step():
                cams_, X_, w_, feats_ = t
                P15 = torch.cat([cams_[ob[:, 0]], X_[ob[:, 1]], w_[:, None]], dim=1)
                return _finish(pattern, vres(P15, feats_).numpy(), (1.0 - w_ * w_).numpy(),
                               jac(P15, feats_).numpy(), (-2.0 * w_).numpy())
            return step
        return build
    return System("torch", prepare, note="torch.func.vmap(torch.func.jacrev(residual)), eager")


def ba_cpp(lib):
    """The hand-written C++ residuals and Jacobian blocks (``bench/cpp/ba.cpp``) as a function of the inputs.

    Args:
        lib: the ``ctypes.CDLL`` of ``bench/cpp/ba.cpp`` (`bench.cpp.build.load`).

    Returns:
        ``fn(cams, X, w, feats, obs) -> (r (P, 2), 1 − w², blocks (P, 2, 15), −2w)``, the
        pieces `_finish` assembles; float64 (obs: integer, converted to int64).
    """
    import ctypes

    c = lib.ba_residuals_jacobian
    c.restype = None
    ptr = ctypes.c_void_p
    c.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int] + [ptr] * 9

    def fn(cams, X, w, feats, obs):
        n, m, p = cams.shape[0], X.shape[0], w.shape[0]
        arrs = [np.ascontiguousarray(v, dtype=np.float64) for v in (cams, X, w, feats)]
        ob = np.ascontiguousarray(obs, dtype=np.int64)
        want = [(n, 11), (m, 3), (p,), (p, 2)]
        if [a.shape for a in arrs] != want or ob.shape != (p, 2):
            raise ValueError(f"ba_cpp: shapes {[a.shape for a in arrs]} and obs {ob.shape}, expected {want}, {(p, 2)}")
        if p and (ob[:, 0].min() < 0 or ob[:, 0].max() >= n or ob[:, 1].min() < 0 or ob[:, 1].max() >= m):
            raise ValueError("ba_cpp: an observation's camera or point index is out of range")
        err, werr, blocks, dw = np.empty((p, 2)), np.empty(p), np.empty((p, 2, 15)), np.empty(p)
        c(n, m, p, *(a.ctypes.data for a in (*arrs, ob, err, werr, blocks, dw)))
        return err, werr, blocks, dw
    return fn


def _cpp_make(pattern):
    def make(lib):
        fn = ba_cpp(lib)
        return lambda *a: _finish(pattern, *fn(*a))
    return make


def _autograd_make(pattern):
    def make(ag, anp):
        def column(c):
            return ag.grad(lambda P15, feats: anp.sum(residuals_vectorized(P15, feats, anp)[:, c]))

        g0, g1 = column(0), column(1)

        def fn(cams, X, w, feats, obs):
            P15 = gather(cams, X, w, obs)
            blocks = np.stack([g0(P15, feats), g1(P15, feats)], axis=1)
            return _finish(pattern, residuals_vectorized(P15, feats), 1.0 - w * w, blocks, -2.0 * w)
        return fn
    return make


def systems(pattern) -> list:
    """W9's systems in table order."""
    return [
        _symgraph_system(pattern),
        numpy_system(numpy_complex_step(pattern), note="complex-step Jacobian of the vectorized residuals "
                                                      "(15 complex evaluations; the reference)"),
        _jax_system(pattern),
        autograd_system(_autograd_make(pattern),
                        note="no vmap: two reverse passes of the vectorized residuals (each residual "
                             "depends on its own observation's 15 parameters only)"),
        _torch_system(pattern),
        cpp_system("ba", _cpp_make(pattern),
                   note="bench/cpp/ba.cpp: hand-derived (chain rule) 2x15 blocks, g++ -O3 -march=native, one thread, "
                        "called through ctypes; then the same CSR assembly"),
    ]


def run(settings: Settings) -> WorkloadResult:
    """Run the files of the run (quick: one tiny problem; full: ba1 ... ba5)."""
    tables = []
    files = QUICK if settings.quick else FILES
    if not settings.quick and os.environ.get("BENCH_W9_FILES"):          # e.g. BENCH_W9_FILES=ba1,ba2,ba3
        files = {k: FILES[k] for k in os.environ["BENCH_W9_FILES"].split(",")}
    for name, (n, m, p) in files.items():
        inputs = make_input(n, m, p)
        pattern = Pattern(n, m, p, inputs[4])
        tables.append(run_case(settings, f"{name}: N={n} M={m} P={p}", inputs,
                               lambda inputs=inputs, pattern=pattern: numpy_complex_step(pattern)(*inputs),
                               systems(pattern), check=rho_compare,
                               extra=lambda row, step, name=name, p=p: {"file": name, "P": p}))
    t = merge_tables("residuals and CSR Jacobian (3P x (11N + 3M + P))", tables, key="file",
                     notes=["check: rho < 1e-8 against the complex-step Jacobian",
                            "every system's time includes the same scipy.sparse CSR assembly"])
    t.extra_columns = ["file", "P"]
    return WorkloadResult("W9", TITLE, [t])
