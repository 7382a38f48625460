"""Op-table rows for the factorization primitives (symgraph/ops/factor.py): cholesky, cholesky_vjp, triangular_solve,
lu, pivots_to_permutation. References are NumPy's (and SciPy's lu_factor for the packed LU). The "complex" rows run
cholesky, triangular_solve and lu on complex64/complex128 matrices (JAX's derivative convention, docs/complex.md)."""

from __future__ import annotations

import numpy as np

from opcase import OpCase, _complex_of
from symgraph import lax as L


def _spd(rng, shape, dtype):
    n = shape[-1]
    a = rng.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def _well(rng, shape, dtype):
    """Both triangles filled, a dominant diagonal (a triangular solve reads one triangle)."""
    return (rng.standard_normal(shape) + 3.0 * np.eye(shape[-1])).astype(dtype)


def _real(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _c(rng, shape, dtype):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(_complex_of(dtype))


def _hpd(rng, shape, dtype):
    """Hermitian positive definite, complex."""
    a = _c(rng, shape, np.float64)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(_complex_of(dtype))


def _cwell(rng, shape, dtype):
    return (_c(rng, shape, np.float64) + 3.0 * np.eye(shape[-1])).astype(_complex_of(dtype))


def _creal(rng, shape, dtype):
    return _c(rng, shape, dtype)


def _pivots(rng, shape, dtype):
    n = shape[-1]
    return (np.arange(n) + rng.integers(0, n - np.arange(n), shape)).astype(np.int64)  # LAPACK's: ipiv[i] >= i


def _chol_ref(a):
    # the symmetric (Hermitian) matrix of the lower triangle (the diagonal's real part)
    s = np.tril(a, -1) + np.conj(np.swapaxes(np.tril(a, -1), -1, -2)) + np.real(np.diagonal(a, 0, -2, -1))[..., None] * np.eye(a.shape[-1])
    return np.linalg.cholesky(s.astype(a.dtype))


def _tri_ref(a, b, lower, trans, unit_diagonal):
    m = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        m = m - np.diagonal(m, axis1=-2, axis2=-1)[..., None] * np.eye(a.shape[-1]) + np.eye(a.shape[-1])
    if trans:
        m = np.swapaxes(m, -1, -2)  # a plain transpose, also for complex matrices
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    return np.linalg.solve(m.astype(wide), b.astype(wide)).astype(a.dtype)


def _lu_ref(a):
    import scipy.linalg as sl

    lu, piv = sl.lu_factor(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64))
    return np.concatenate([lu, piv[..., None, :].astype(lu.dtype)], axis=-2).astype(a.dtype)


def _p2p_ref(ipiv):
    perm = np.broadcast_to(np.arange(ipiv.shape[-1]), ipiv.shape).copy()
    for idx in np.ndindex(ipiv.shape[:-1]):
        p = perm[idx]
        for i, j in enumerate(ipiv[idx]):
            p[i], p[j] = p[j], p[i]
    return perm


def _cvjp_ref(lm, lbar):
    import scipy.linalg as sl

    out = np.empty(lm.shape, np.float64)
    for idx in np.ndindex(lm.shape[:-2]):
        l64, b64 = np.tril(lm[idx]).astype(np.float64), np.tril(lbar[idx]).astype(np.float64)
        p = np.tril(l64.T @ b64)
        p[np.diag_indices_from(p)] *= 0.5
        li = sl.inv(l64)
        s = li.T @ p @ li
        o = np.tril(s + s.T)
        o[np.diag_indices_from(o)] *= 0.5
        out[idx] = o
    return out.astype(lm.dtype)


def _tri(a, b, lower, trans, unit_diagonal):
    return L.bind("triangular_solve", a, b, lower=lower, trans=trans, unit_diagonal=unit_diagonal)


_TRI_VARIANTS = [
    (((3, 3), (3, 2)), {"lower": True, "trans": False, "unit_diagonal": False}),
    (((2, 3, 3), (2, 3, 1)), {"lower": False, "trans": True, "unit_diagonal": True}),
    (((4, 4), (4, 3)), {"lower": True, "trans": True, "unit_diagonal": False}),
    (((2, 2), (2, 1)), {"lower": False, "trans": False, "unit_diagonal": False}),
]

CASES = [
    OpCase("cholesky", lambda a: L.bind("cholesky", a), _chol_ref, [(((3, 3),), {}), (((2, 4, 4),), {})], (_spd,),
           ip_rtol=1e-8),
    OpCase("cholesky_vjp", lambda lm, lbar: L.bind("cholesky_vjp", lm, lbar), _cvjp_ref,
           [(((3, 3), (3, 3)), {}), (((2, 4, 4), (2, 4, 4)), {})], (_well, _real), ip_rtol=1e-8),
    OpCase("triangular_solve", _tri, _tri_ref, _TRI_VARIANTS, (_well, _real), ip_rtol=1e-8),
    OpCase("lu", lambda a: L.bind("lu", a), _lu_ref, [(((3, 3),), {}), (((2, 4, 4),), {})], (_real,), ip_rtol=1e-8),
    OpCase("cholesky", lambda a: L.bind("cholesky", a), _chol_ref, [(((3, 3),), {}), (((2, 4, 4),), {})], (_hpd,),
           ip_rtol=1e-8, name="complex"),
    OpCase("triangular_solve", _tri, _tri_ref, _TRI_VARIANTS[:3], (_cwell, _creal), ip_rtol=1e-8, name="complex"),
    OpCase("lu", lambda a: L.bind("lu", a), _lu_ref, [(((3, 3),), {}), (((2, 4, 4),), {})], (_creal,), ip_rtol=1e-8,
           name="complex"),
    OpCase("pivots_to_permutation", lambda p: L.bind("pivots_to_permutation", p), _p2p_ref,
           [(((4,),), {}), (((2, 3, 5),), {})], (_pivots,), order=0, dtypes=(np.float64,)),
]
