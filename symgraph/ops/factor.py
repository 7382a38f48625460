"""Dense factorizations and triangular solves: the primitives of `np.linalg.solve`/`inv`/`det`/`cholesky`.

Five primitives, batched over leading dimensions (equal batch dimensions; broadcasting is
explicit at trace time), float32 and float64:

- ``cholesky(a)``: the lower factor L of a = L Lᵀ, reading only the lower triangle of a
  (NumPy's convention; LAPACK ``potrf``).
- ``triangular_solve(a, b; lower, trans, unit_diagonal)``: x with op(a) x = b, op(a) = a or aᵀ,
  reading only one triangle of a (its diagonal taken as ones when `unit_diagonal`); BLAS ``trsm``.
- ``lu(a)``: LU with partial (row) pivoting, P a = L U (LAPACK ``getrf``). A node has one
  output, so the result packs both: rows ``[:n]`` hold L (unit diagonal, not stored) and U as
  `scipy.linalg.lu_factor` returns them, row ``n`` LAPACK's 0-based pivot indices as floats
  (exact below 2**24 rows, checked).
- ``cholesky_vjp(l, lbar)``: cholesky's reverse rule as a primitive (Murray 2016 eq. 10, reading
  the lower triangles of the factor and of its cotangent), so that compiled code runs Murray's
  blocked algorithm (section 4; BLAS gemm, trsm, trmm: 2n³/3 flops instead of the formula's 4n³).
- ``pivots_to_permutation(ipiv)``: the row permutation the pivot swaps make (perm[i] is the row
  of a that is row i of P a); integers, no derivative.

Compiled code (the LLVM backend) calls LAPACK for each (``extra={"lowering": "lapack"}``:
?potrf, ?trsm, ?getrf (and ?gemm/?trsm/?trmm for cholesky_vjp) from NumPy's bundled OpenBLAS, batched in native loops; see
codegen/cpu/lapack.py), with the same errors raised after the call.

Everything else (solve, inv, det, slogdet, cho_solve, lu_solve) is composed of these at trace
time, so derivatives are graphs of the same primitives and differentiate again. Failures on
values raise `symgraph.errors.LinAlgError`: cholesky of a matrix that is not positive definite
(or holds NaN), a triangular solve with a zero (or NaN) on the diagonal read. `lu` itself never
fails: an exactly singular matrix has a zero on U's diagonal, which `det` reads as 0 and which
a solve with U reports.

References:
    M. B. Giles, "Collected matrix derivative results for forward and reverse mode algorithmic
    differentiation", 2008 (the triangular solve and LU rules, sections 2.2-2.3 and 3.1).
    I. Murray, "Differentiation of the Cholesky decomposition", arXiv:1602.07527, 2016
    (the Cholesky rules: eq. 8 forward, eq. 10 reverse, with Φ = lower triangle, diagonal halved).
    F. de Hoog, R. Anderssen, M. Lukas, "Differentiation of matrix functionals using triangular
    factorization", Math. Comp. 80, 2011 (the LU rules).
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import lax as L
from ..errors import DTypeError, LinAlgError, ShapeError
from .batch import bcast, move_to0, rebind
from .core import Op, register

__all__ = ["conj", "mH", "tril", "triu", "phi", "take_rows", "untake_rows", "lu_parts", "diagonal", "lu_solve", "pivot_sign"]


def _square(s: tuple, op: str) -> int:
    if len(s) < 2 or s[-1] != s[-2]:
        raise ShapeError(f"{op}: needs a (stack of) square matrices (..., n, n), got shape {s}")
    return s[-1]


def _float(d, *rest, op: str, complex_ok: bool = True):
    d = np.dtype(d)
    if d not in ((np.float32, np.float64, np.complex64, np.complex128) if complex_ok else (np.float32, np.float64)):
        raise DTypeError(f"{op}: needs float32, float64{', complex64 or complex128' if complex_ok else ' '} "
                         f"matrices, got {d}")
    for i, e in enumerate(rest, 1):
        if np.dtype(e) != d:
            raise DTypeError(f"{op}: operand {i} has dtype {e}, operand 0 has {d}")
    return d


#: The lowering fact of every op here: compiled code runs it as LAPACK calls, matrix after matrix
#: (?potrf, ?trsm, ?getrf; pivots_to_permutation as native swaps): codegen/cpu/lapack.py, codegen/llvm/lapack.py.
_LAPACK = {"lowering": "lapack"}


def _batch_size(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))


# ----- graph helpers (the rules below, and the composites in symgraph.numpy / symgraph.scipy) -----


def _mask(x, lower: bool, strict: bool, diag: float | None = None):
    n = x.shape[-1]
    m = np.tril(np.ones((n, n)), -1 if strict else 0) if lower else np.triu(np.ones((n, n)), 1 if strict else 0)
    if diag is not None:
        m[np.diag_indices(n)] = diag
    return L.mul(x, m.astype(x.dtype))  # (an array: these helpers also run on arrays, eagerly)


def tril(x, k: int = 0):
    """The lower triangle of the last two axes of x (k = 0: with the diagonal; k = -1: strictly below)."""
    return _mask(x, True, k == -1)


def triu(x, k: int = 0):
    """The upper triangle of the last two axes of x (k = 0: with the diagonal; k = 1: strictly above)."""
    return _mask(x, False, k == 1)


def phi(x):
    """Murray's Φ: the lower triangle of x with the diagonal halved."""
    return _mask(x, True, False, 0.5)


def _eye_like(x):
    return np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape)


def _flat_rows(perm):
    """Indices into the rows of x reshaped to (batch * n, k): perm[..., i] + n * (batch index)."""
    n = perm.shape[-1]
    nb = _batch_size(perm.shape[:-1])
    off = (np.arange(nb, dtype=perm.dtype) * n).reshape(perm.shape[:-1] + (1,))
    idx = L.add(perm, off) if nb > 1 else perm
    return L.reshape(idx, (nb * n,)), nb


def take_rows(x, perm):
    """x[..., perm[..., i], :] for every i: a per-matrix row permutation (one gather)."""
    idx, nb = _flat_rows(perm)
    n, k = x.shape[-2:]
    g = L.bind("gather", L.reshape(x, (nb * n, k)), idx, axis=0)
    return L.reshape(g, x.shape)


def untake_rows(z, perm):
    """The inverse row permutation: out[..., perm[..., i], :] = z[..., i, :] (one scatter, the transpose of take_rows)."""
    idx, nb = _flat_rows(perm)
    n, k = z.shape[-2:]
    s = L.bind("scatter_add", L.reshape(z, (nb * n, k)), idx, shape=(nb * n, k), axis=0)
    return L.reshape(s, z.shape)


def _rows(x, lo: int, hi: int):
    nd = x.ndim
    return L.bind("slice", x, starts=(0,) * (nd - 2) + (lo, 0), stops=x.shape[:-2] + (hi, x.shape[-1]),
                  steps=(1,) * nd)


def lu_parts(packed):
    """(LU, ipiv, perm) of an `lu` node: the packed factors (..., n, n), LAPACK's 0-based pivot
    indices (int64, (..., n)) and the row permutation they make (int64, (..., n))."""
    n = packed.shape[-1]
    lu = _rows(packed, 0, n)
    piv = _rows(packed, n, n + 1)
    if piv.dtype.kind == "c":  # a complex LU packs the pivots as complex numbers with a zero imaginary part
        piv = L.bind("real", piv)
    ipiv = L.cast(L.reshape(piv, packed.shape[:-2] + (n,)), np.int64)
    perm = L.bind("pivots_to_permutation", ipiv)
    return lu, ipiv, perm


def _solve(a, b, lower: bool, trans: bool = False, unit: bool = False):
    return L.bind("triangular_solve", a, b, lower=lower, trans=trans, unit_diagonal=unit)


def _mm(a, b):
    return L.bind("matmul", a, b)


def conj(x):
    """The complex conjugate of a complex x; a real x itself (no node)."""
    return L.bind("conj", x) if x.dtype.kind == "c" else x


def mH(x):
    """The conjugate transpose of the last two axes (the transpose of a real x)."""
    return conj(L.swap_last(x))


# ----- cholesky -----


def _cholesky_shape(s):
    _square(s, "cholesky")
    return tuple(s)


def _cholesky_impl(a):
    try:
        out = np.linalg.cholesky(a)
        if not np.isnan(np.diagonal(out, axis1=-2, axis2=-1)).any():
            return out
    except np.linalg.LinAlgError:
        pass
    where = ""
    if a.ndim > 2:
        for idx in np.ndindex(a.shape[:-2]):
            try:
                if np.isnan(np.diagonal(np.linalg.cholesky(a[idx]))).any():
                    raise np.linalg.LinAlgError
            except np.linalg.LinAlgError:
                where = f" (the matrix at batch index {idx})"
                break
    raise LinAlgError(f"cholesky: the matrix is not positive definite{where}, or holds NaN")


def _cholesky_vjp(ct, node):
    # Murray 2016 eq. 10 as its own primitive (cholesky_vjp below): Φ(S + Sᵀ), S = L^-T Φ(Lᵀ L̄) L^-1
    if node.dtype.kind != "c":
        return (L.bind("cholesky_vjp", node, ct),)
    # complex (a = L Lᴴ): with JAX's cotangents (L̄ pairs as Re Σ L̄ ∘ dL), the conjugate of Murray's rule for the
    # gradient conj(L̄) with conjugate transposes, Φ(S + Sᴴ) with S = L^-ᴴ Φ(Lᴴ conj(L̄)) L^-1, is
    # Φ(S' + S'ᴴ), S' = L^-T Φ(Lᵀ L̄) conj(L)^-1 (graph ops: triangular solves, products; cholesky_vjp is real only)
    lm = node
    y = _solve(lm, phi(_mm(L.swap_last(lm), tril(ct))), True, trans=True)    # L^-T Φ(Lᵀ L̄)
    s = L.swap_last(_solve(conj(lm), L.swap_last(y), True, trans=True))      # ... conj(L)^-1
    return (phi(L.add(s, mH(s))),)


def _cholesky_jvp(t, node):
    # Murray 2016 eq. 8: dL = L Φ(L^-1 dA L^-T), dA the symmetric matrix of the lower triangle read;
    # complex: dL = L Φ(L^-1 dA L^-H), dA = Φ(t) + Φ(t)ᴴ the Hermitian matrix read (the diagonal's real part)
    (ta,) = t
    if ta is None:
        return None
    lm = node
    if lm.dtype.kind == "c":
        ds = L.add(phi(ta), mH(phi(ta)))
        z = _solve(lm, ds, True)
        w = L.swap_last(_solve(conj(lm), L.swap_last(z), True))            # z L^-H = (conj(L)^-1 zᵀ)ᵀ
        return _mm(lm, phi(w))
    ds = L.add(tril(ta), L.swap_last(tril(ta, -1)))
    z = _solve(lm, ds, True)
    w = L.swap_last(_solve(lm, L.swap_last(z), True))
    return _mm(lm, phi(w))


register(Op("cholesky", 1, "opaque", _cholesky_shape, lambda d: _float(d, op="cholesky"), _cholesky_impl,
            _cholesky_vjp, _cholesky_jvp,
            doc="lower Cholesky factor of each matrix (..., n, n), reading its lower triangle (LAPACK potrf); "
                "complex: a = L Lᴴ, the Hermitian matrix of the lower triangle (the diagonal's real part)",
            flops=lambda node: _batch_size(node.shape[:-2]) * node.shape[-1] ** 3 // 3,
            batch=lambda node, bargs, size: rebind(node, [bargs[0]]), extra=_LAPACK))


# ----- cholesky_vjp -----
# The reverse rule of cholesky as one primitive, so that compiled code runs Murray's blocked
# algorithm (about 2n³/3 flops, twice the factorization) instead of the formula's product and two
# triangular solves with n right-hand sides (4n³). Its own rules are the formula's derivatives.


def _left_inv_t(lm, m):
    return _solve(lm, m, True, trans=True)                              # L^-T M


def _right_inv(lm, m):
    return L.swap_last(_solve(lm, L.swap_last(m), True, trans=True))    # M L^-1


def _right_inv_t(lm, m):
    return L.swap_last(_solve(lm, L.swap_last(m), True))                # M L^-T


def _chol_s(lm, lbar):
    """S = L^-T Φ(Lᵀ L̄) L^-1 (Murray 2016 eq. 10) for lower lm."""
    return _right_inv(lm, _left_inv_t(lm, phi(_mm(L.swap_last(lm), lbar))))


def _cvjp_shape(a, b):
    _square(a, "cholesky_vjp")
    if tuple(b) != tuple(a):
        raise ShapeError(f"cholesky_vjp: the cotangent has shape {b}, the factor {a}")
    return tuple(a)


def _cvjp_impl(lm, lbar):
    _check_diagonal(lm, "cholesky_vjp")
    lm, lbar = np.tril(lm), np.tril(lbar)
    p = np.tril(np.matmul(np.swapaxes(lm, -1, -2), lbar))
    p -= 0.5 * (np.eye(lm.shape[-1], dtype=lm.dtype) * p)
    kw = dict(lower=True, trans=True, unit_diagonal=False)
    y = _trisolve_impl(lm, p, **kw)
    s = np.swapaxes(_trisolve_impl(lm, np.swapaxes(y, -1, -2), **kw), -1, -2)
    out = np.tril(s + np.swapaxes(s, -1, -2))
    out -= 0.5 * (np.eye(lm.shape[-1], dtype=lm.dtype) * out)
    return out.astype(lm.dtype, copy=False)


def _cvjp_jvp(t, node):
    # dĀ = Φsym(L^-T Φ(dLᵀ L̄ + Lᵀ dL̄) L^-1 − L^-T dLᵀ S − S dL L^-1), Φsym(Z) = Φ(Z + Zᵀ)
    tl, tb = t
    if tl is None and tb is None:
        return None
    lm, lbar = (tril(x) for x in node.inputs)
    q = None
    if tb is not None:
        q = _mm(L.swap_last(lm), tril(tb))
    if tl is not None:
        dl = tril(tl)
        q2 = _mm(L.swap_last(dl), lbar)
        q = q2 if q is None else L.add(q, q2)
    z = _right_inv(lm, _left_inv_t(lm, phi(q)))
    if tl is not None:
        s = _chol_s(lm, lbar)
        z = L.sub(z, L.add(_left_inv_t(lm, _mm(L.swap_last(dl), s)), _right_inv(lm, _mm(s, dl))))
    return phi(L.add(z, L.swap_last(z)))


def _cvjp_vjp(ct, node):
    # with H = Φ(G) + Φ(G)ᵀ, M = L^-1 H L^-T: dL̄ gets tril(L Φ(M)), dL tril(L̄ Φ(M)ᵀ − (S + Sᵀ) H L^-T)
    lm, lbar = (tril(x) for x in node.inputs)
    pg = phi(ct)
    h = L.add(pg, L.swap_last(pg))
    pm = phi(_right_inv_t(lm, _solve(lm, h, True)))
    s = _chol_s(lm, lbar)
    ct_l = L.sub(_mm(lbar, L.swap_last(pm)), _right_inv_t(lm, _mm(L.add(s, L.swap_last(s)), h)))
    return (tril(ct_l), tril(_mm(lm, pm)))


def _cvjp_batch(node, bargs, size):
    return rebind(node, [b if b is not None else bcast(x, size) for x, b in zip(node.inputs, bargs)])


register(Op("cholesky_vjp", 2, "opaque", _cvjp_shape, lambda a, b: _float(a, b, op="cholesky_vjp", complex_ok=False),
            _cvjp_impl,
            _cvjp_vjp, _cvjp_jvp,
            doc="the cotangent Φ(S + Sᵀ), S = L^-T Φ(Lᵀ L̄) L^-1, of cholesky's input from the factor L and the "
                "factor's cotangent L̄ (..., n, n), reading their lower triangles (Murray 2016 eq. 10); compiled: "
                "Murray's blocked algorithm (BLAS gemm, trsm, trmm)",
            flops=lambda node: 2 * _batch_size(node.shape[:-2]) * node.shape[-1] ** 3 // 3,
            batch=_cvjp_batch, extra=_LAPACK))


# ----- triangular_solve -----


def _trisolve_shape(a, b, *, lower, trans, unit_diagonal):
    n = _square(a, "triangular_solve")
    if len(b) != len(a) or b[:-2] != a[:-2] or b[-2] != n:
        raise ShapeError(f"triangular_solve: right-hand side of shape {b} does not fit matrices of shape {a} "
                         f"(needs {a[:-2] + (n, 'k')})")
    return tuple(b)


def _trisolve_dtype(a, b, **_):
    return _float(a, b, op="triangular_solve")


def _check_diagonal(a, op: str):
    d = np.diagonal(a, axis1=-2, axis2=-1)
    bad = (d == 0) | np.isnan(d)
    if bad.any():
        idx = np.argwhere(bad)[0]
        what = "NaN" if np.isnan(d[tuple(idx)]) else "zero"
        at = f" of the matrix at batch index {tuple(int(i) for i in idx[:-1])}" if a.ndim > 2 else ""
        raise LinAlgError(f"{op}: singular matrix: a {what} on the diagonal (position {int(idx[-1])}){at}")


def _trisolve_impl(a, b, *, lower, trans, unit_diagonal):
    if not unit_diagonal:
        _check_diagonal(a, "triangular_solve")
    try:
        from scipy.linalg import solve_triangular
    except ImportError:  # pragma: no cover - scipy is an extra; the same solve through LU
        m = np.tril(a) if lower else np.triu(a)
        if unit_diagonal:
            n = a.shape[-1]
            m = m.copy()
            m[..., np.arange(n), np.arange(n)] = 1
        if trans:
            m = np.swapaxes(m, -1, -2)
        return np.linalg.solve(m, b)
    if b.size == 0:
        return np.zeros(b.shape, b.dtype)
    return solve_triangular(a, b, lower=lower, trans=1 if trans else 0, unit_diagonal=unit_diagonal,
                            check_finite=False).astype(b.dtype, copy=False)


def _trisolve_vjp(ct, node):
    # Giles 2008 §2.3.1: x = op(A)^-1 b gives b̄ = op(A)^-T x̄ and op(A)‾ = -b̄ xᵀ, kept on the triangle read
    a, _ = node.inputs
    lower, trans, unit = node.attr("lower"), node.attr("trans"), node.attr("unit_diagonal")
    bbar = _solve(a, ct, lower, not trans, unit)
    abar = L.neg(_mm(bbar, L.swap_last(node)))
    if trans:
        abar = L.swap_last(abar)
    return (_mask(abar, lower, unit), bbar)


def _trisolve_jvp(t, node):
    # dx = op(A)^-1 (db - op(dA) x)
    ta, tb = t
    if ta is None and tb is None:
        return None
    a, _ = node.inputs
    lower, trans, unit = node.attr("lower"), node.attr("trans"), node.attr("unit_diagonal")
    rhs = tb
    if ta is not None:
        da = _mask(ta, lower, unit)
        if trans:
            da = L.swap_last(da)
        prod = _mm(da, node)
        rhs = L.neg(prod) if rhs is None else L.sub(rhs, prod)
    return _solve(a, rhs, lower, trans, unit)


def _trisolve_batch(node, bargs, size):
    a, b = node.inputs
    ba, bb = bargs
    if ba is not None and bb is not None:
        return rebind(node, [ba, bb])
    if ba is not None:
        return rebind(node, [ba, bcast(b, size)])
    # only b batched: (B, ..., n, k) -> (..., n, B*k), one solve with B*k right-hand sides
    nb = b.ndim - 2
    n, k = b.shape[-2:]
    x = L.transpose(bb, tuple(range(1, nb + 1)) + (nb + 1, 0, nb + 2))
    x = L.reshape(x, b.shape[:-2] + (n, size * k))
    out = rebind(node, [a, x])
    out = L.reshape(out, b.shape[:-2] + (n, size, k))
    return move_to0(out, nb + 1)


register(Op("triangular_solve", 2, "opaque", _trisolve_shape, _trisolve_dtype, _trisolve_impl,
            _trisolve_vjp, _trisolve_jvp,
            doc="x with op(a) x = b for triangular a (..., n, n) and b (..., n, k); attrs lower, trans, "
                "unit_diagonal (BLAS trsm); a zero or NaN on the diagonal read raises LinAlgError",
            flops=lambda node: _batch_size(node.shape[:-2]) * node.shape[-2] ** 2 * node.shape[-1],
            batch=_trisolve_batch, extra=_LAPACK))


# ----- lu -----


def _lu_shape(s):
    n = _square(s, "lu")
    return tuple(s[:-2]) + (n + 1, n)


def _lu_dtype(d):
    return _float(d, op="lu")


def _lu_numpy(a):  # pragma: no cover - used without scipy only
    a = np.array(a, copy=True)
    n = a.shape[-1]
    ipiv = np.zeros(a.shape[:-1], np.int64)
    for j in range(n):
        p = j + np.argmax(np.abs(a[..., j:, j]), axis=-1)
        ipiv[..., j] = p
        rj = np.take_along_axis(a, np.broadcast_to(np.full(p.shape, j)[..., None, None], a.shape[:-2] + (1, n)), -2)
        rp = np.take_along_axis(a, np.broadcast_to(p[..., None, None], a.shape[:-2] + (1, n)), -2)
        np.put_along_axis(a, np.broadcast_to(p[..., None, None], a.shape[:-2] + (1, n)), rj, -2)
        a[..., j:j + 1, :] = rp
        piv = a[..., j, j]
        with np.errstate(all="ignore"):
            f = np.where(piv[..., None] != 0, a[..., j + 1:, j] / piv[..., None], 0.0)
        a[..., j + 1:, j] = f
        a[..., j + 1:, j + 1:] -= f[..., :, None] * a[..., j:j + 1, j + 1:]
    return a, ipiv


def _lu_impl(a):
    n = a.shape[-1]
    if a.dtype == np.float32 and n >= 1 << 24:
        raise ShapeError(f"lu: float32 matrices of {n} rows are too large for the packed pivot row")
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n + 1, n), a.dtype)
    try:
        from scipy.linalg import lu_factor
    except ImportError:  # pragma: no cover
        lu, piv = _lu_numpy(a)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a singular matrix is a zero on U's diagonal, not an error here
            lu, piv = lu_factor(a, check_finite=False)
    return np.concatenate([lu.astype(a.dtype, copy=False), piv[..., None, :].astype(a.dtype)], axis=-2)


def _lu_factors(node):
    lu, _, perm = lu_parts(node)
    eye = _eye_like(lu)
    lo = L.add(tril(lu, -1), eye)
    up = triu(lu)
    return lu, lo, up, perm


def _lu_vjp(ct, node):
    # P A = L U (de Hoog et al. 2011; Giles 2008 §3.1 transposed):
    # Ā = Pᵀ L^-T (tril₋₁(Lᵀ L̄) + triu(Ū Uᵀ)) U^-T; the pivot row has no derivative
    n = node.shape[-1]
    c = _rows(ct, 0, n)
    lu, lo, up, perm = _lu_factors(node)
    m = L.add(tril(_mm(L.swap_last(lo), tril(c, -1)), -1), triu(_mm(triu(c), L.swap_last(up))))
    y = _solve(lu, m, True, trans=True, unit=True)                   # L^-T M
    z = L.swap_last(_solve(lu, L.swap_last(y), False))                # Y U^-T
    return (untake_rows(z, perm),)


def _lu_jvp(t, node):
    # F = L^-1 P dA U^-1: dL = L tril₋₁(F), dU = triu(F) U
    (ta,) = t
    if ta is None:
        return None
    lu, lo, up, perm = _lu_factors(node)
    g = _solve(lu, take_rows(ta, perm), True, unit=True)
    f = L.swap_last(_solve(lu, L.swap_last(g), False, trans=True))
    d = L.add(_mm(lo, tril(f, -1)), _mm(triu(f), up))
    zero = L.zeros_like(_rows(node, 0, 1))
    return L.bind("concatenate", d, zero, axis=node.ndim - 2)


register(Op("lu", 1, "opaque", _lu_shape, _lu_dtype, _lu_impl, _lu_vjp, _lu_jvp,
            doc="LU with partial pivoting of each matrix (..., n, n) -> (..., n + 1, n): rows [:n] the packed "
                "factors (scipy's lu_factor), row n LAPACK's 0-based pivot indices as floats (LAPACK getrf)",
            flops=lambda node: 2 * _batch_size(node.shape[:-2]) * node.shape[-1] ** 3 // 3,
            batch=lambda node, bargs, size: rebind(node, [bargs[0]]), extra=_LAPACK))


# ----- pivots_to_permutation -----


def _p2p_shape(s):
    if len(s) < 1:
        raise ShapeError(f"pivots_to_permutation: needs pivot indices (..., n), got shape {s}")
    return tuple(s)


def _p2p_dtype(d):
    d = np.dtype(d)
    if d.kind not in "iu":
        raise DTypeError(f"pivots_to_permutation: pivot indices must be integers, got {d}")
    return d


def _p2p_impl(ipiv):
    n = ipiv.shape[-1]
    perm = np.broadcast_to(np.arange(n, dtype=ipiv.dtype), ipiv.shape).copy()
    flat = perm.reshape(-1, n)
    piv = np.clip(ipiv.reshape(-1, n), 0, max(n - 1, 0))
    rows = np.arange(flat.shape[0])
    for i in range(n):
        j = piv[:, i]
        a, b = flat[rows, i].copy(), flat[rows, j].copy()
        flat[rows, i], flat[rows, j] = b, a
    return perm


register(Op("pivots_to_permutation", 1, "opaque", _p2p_shape, _p2p_dtype, _p2p_impl, differentiable=False,
            doc="the row permutation of LAPACK's 0-based pivot swaps (..., n): perm[i] is the row that ends at i "
                "(out-of-range pivots clamp)",
            flops=lambda node: node.size,
            batch=lambda node, bargs, size: rebind(node, [bargs[0]]), extra=_LAPACK))


# ----- compositions shared by symgraph.numpy.linalg and symgraph.scipy.linalg -----


def diagonal(x):
    """The diagonals of the last two axes of x (..., n, n) -> (..., n) (one gather)."""
    n = x.shape[-1]
    flat = L.reshape(x, x.shape[:-2] + (n * n,))
    return L.bind("gather", flat, np.arange(n, dtype=np.int64) * (n + 1), axis=x.ndim - 2)


def lu_solve(packed, b, trans: bool = False):
    """x with a x = b (trans: aᵀ x = b) from a's `lu` node; b (..., n, k) with a's batch dimensions.

    Raises (when evaluated):
        LinAlgError: a is singular (a zero on U's diagonal).
    """
    lu, _, perm = lu_parts(packed)
    if not trans:  # x = U^-1 L^-1 P b
        return _solve(lu, _solve(lu, take_rows(b, perm), True, unit=True), False)
    # aᵀ = Uᵀ Lᵀ P: x = Pᵀ L^-T U^-T b
    return untake_rows(_solve(lu, _solve(lu, b, False, trans=True), True, trans=True, unit=True), perm)


def pivot_sign(ipiv):
    """(-1) ** (number of real row swaps) of LAPACK's pivot indices (..., n), in dtype float64."""
    n = ipiv.shape[-1]
    swapped = L.binary("ne", ipiv, np.arange(n, dtype=ipiv.dtype))
    return L.reduce("prod", L.where(swapped, -1.0, 1.0), axis=-1)
