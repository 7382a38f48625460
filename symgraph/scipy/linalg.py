"""`symgraph.scipy.linalg`: SciPy's triangular, Cholesky and LU solvers on traced values (as `jax.scipy.linalg`).

SciPy's functions convert their arguments with `np.asarray` before any protocol sees a
tracer, so traced code calls these instead (real or complex matrices): `solve_triangular`, `cho_factor`/`cho_solve`,
`lu_factor`/`lu_solve`, `cholesky(lower=...)`, `det`, `inv`, `solve(assume_a=...)`, `solve_banded`,
`solve_sylvester`, and `expm`
(symgraph/scipy/matfuncs.py). Each is
composed of the primitives of `symgraph.ops.factor` (differentiable to any order, batched over
leading dimensions, compiled natively through LAPACK) and follows SciPy's definitions and
argument conventions; on plain arrays they compute eagerly through the same primitives.
Arguments that only tune SciPy's memory use (`overwrite_a`, `overwrite_b`, `check_finite`)
are accepted and ignored. See docs/linalg.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import lax as L
from ..errors import api_call, LinAlgError, ShapeError, UnsupportedOpError
from ..ops import factor as F
from ..numpy import factorizations as _fz
from .matfuncs import expm  # noqa: F401  (scipy.linalg.expm: symgraph/scipy/matfuncs.py)

__all__ = ["solve_triangular", "cho_factor", "cho_solve", "lu_factor", "lu_solve", "cholesky", "det", "inv", "solve",
           "solve_banded", "solve_sylvester", "expm", "LinAlgError"]


def _shape(x: Any) -> tuple:
    return tuple(x.shape) if L.is_node(x) else np.shape(x)


def _trans(trans: Any) -> tuple[bool, bool]:
    """(transpose, conjugate) of SciPy's trans: 0/'N' a, 1/'T' aᵀ, 2/'C' aᴴ (for real a, aᵀ)."""
    if trans in (0, "N", "n"):
        return False, False
    if trans in (1, "T", "t"):
        return True, False
    if trans in (2, "C", "c"):
        return True, True
    raise ShapeError(f"trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")


def _tri(a: Any, b: Any, lower: bool, trans: bool, unit: bool, conjugate: bool = False) -> Any:
    """x with op(a) x = b, op(a) = a, aᵀ or (conjugate) aᴴ: aᴴ x = b is aᵀ conj(x) = conj(b)."""
    if conjugate and trans and a.dtype.kind == "c":
        return F.conj(_tri(a, F.conj(b), lower, True, unit))
    return L.bind("triangular_solve", a, b, lower=lower, trans=trans, unit_diagonal=unit)


def _rhs(b: Any, n: int, op: str) -> tuple[Any, bool]:
    """b as (..., n, k) and whether it was a vector (SciPy's rule: 1-d b is one vector)."""
    sb = _shape(b)
    if len(sb) == 0:
        raise ShapeError(f"{op}: right-hand side is 0-d; needs (n,) or (..., n, k)")
    vec = len(sb) == 1
    b2 = L.reshape(b, (sb[0], 1)) if vec else b
    if _shape(b2)[-2] != n:
        raise ShapeError(f"{op}: right-hand side of shape {sb} does not fit {n} x {n} matrices")
    return b2, vec


def _batched(a: Any, b: Any, n: int) -> tuple[Any, Any]:
    sa, sb = _shape(a), _shape(b)
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    return L.broadcast_to(a, batch + (n, n)), L.broadcast_to(b, batch + sb[-2:])


def _out(x: Any, vec: bool) -> Any:
    return L.reshape(x, _shape(x)[:-1]) if vec else x


def _floats(a: Any, b: Any, op: str) -> tuple[Any, Any]:
    a = _fz.float_matrix(a, op, 0, complex_ok=True)
    b = _fz.float_matrix(b, op, 1, a.dtype, complex_ok=True)
    return _fz.float_matrix(a, op, 0, b.dtype, complex_ok=True), b


@api_call("scipy.linalg.solve_triangular")
def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """x with op(a) x = b for triangular a, reading only its `lower` (or upper) triangle (BLAS trsm).

    Args:
        a: (..., n, n) float32/float64/complex64/complex128. b: (n,) or (..., n, k); batch dims
            broadcast; a real and a complex operand compute in the complex dtype.
        trans: 0/'N': a x = b; 1/'T': aᵀ x = b; 2/'C': aᴴ x = b (for real a, aᵀ x = b).
        lower: read the lower triangle (default: the upper, as SciPy).
        unit_diagonal: take a's diagonal as ones (it is not read).

    Raises:
        LinAlgError: a is not square, or (when evaluated) a zero or NaN on the diagonal read.
        ShapeError: b does not fit a.

    References: Giles 2008 §2.3.1 (the VJP: b̄ = op(a)^-T x̄, op(a)‾ = -b̄ xᵀ on the triangle read;
    complex: the same, holomorphic, under JAX's convention, docs/complex.md).
    """
    a, b = _floats(a, b, "solve_triangular")
    n = _fz.square(a, "solve_triangular")
    b2, vec = _rhs(b, n, "solve_triangular")
    a_, b_ = _batched(a, b2, n)
    t, c = _trans(trans)
    return _out(_tri(a_, b_, bool(lower), t, bool(unit_diagonal), c), vec)


@api_call("scipy.linalg.cholesky")
def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The Cholesky factor of a: upper U with a = Uᴴ U (default, reading a's upper triangle) or lower
    L with a = L Lᴴ (lower=True, reading the lower triangle), as SciPy's (LAPACK potrf); for real a,
    ᴴ is ᵀ. Complex a is Hermitian positive definite (the diagonal's imaginary part is not read).

    Raises:
        LinAlgError: a is not square, or (when evaluated) not positive definite or holds NaN.

    References: Murray 2016 (the derivative rules, docs/linalg.md; complex: docs/complex.md).
    """
    a = _fz.float_matrix(a, "cholesky", complex_ok=True)
    _fz.square(a, "cholesky")
    if lower:
        return L.bind("cholesky", a)
    # SciPy's U (a = Uᴴ U, read from a's upper triangle) is Lᴴ for the L of aᴴ's lower triangle
    return F.mH(L.bind("cholesky", F.mH(a)))


@api_call("scipy.linalg.cho_factor")
def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """(c, lower) for `cho_solve`: c is `cholesky(a, lower)`.

    Unlike SciPy's, the triangle of c that is not the factor holds zeros, not a's entries.
    """
    return cholesky(a, lower=lower), bool(lower)


@api_call("scipy.linalg.cho_solve")
def cho_solve(c_and_lower: tuple, b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """x with a x = b from a's `cho_factor` (c, lower): two triangular solves with c.

    Raises:
        ShapeError: b does not fit c.
    """
    c, lower = c_and_lower
    c, b = _floats(c, b, "cho_solve")
    n = _fz.square(c, "cho_solve")
    b2, vec = _rhs(b, n, "cho_solve")
    c_, b_ = _batched(c, b2, n)
    lower = bool(lower)
    # a = L Lᴴ: x = L^-H (L^-1 b); a = Uᴴ U: x = U^-1 (U^-H b)  (ᴴ is ᵀ for real c)
    y = _tri(c_, b_, lower, not lower, False, conjugate=True)
    x = _tri(c_, y, lower, lower, False, conjugate=True)
    return _out(x, vec)


@api_call("scipy.linalg.lu_factor")
def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple:
    """(lu, piv) as SciPy's: lu holds L (unit diagonal, not stored) below the diagonal and U on and
    above it, piv LAPACK's 0-based row swaps (int32), for P a = L U with partial pivoting (getrf).

    An exactly singular a factors without error (a zero on U's diagonal; SciPy warns).

    References: de Hoog, Anderssen & Lukas 2011 (the derivative rules of the factors).
    """
    a = _fz.float_matrix(a, "lu_factor", complex_ok=True)
    _fz.square(a, "lu_factor")
    lu, ipiv, _ = F.lu_parts(L.bind("lu", a))
    return lu, L.cast(ipiv, np.int32)


@api_call("scipy.linalg.lu_solve")
def lu_solve(lu_and_piv: tuple, b: Any, trans: Any = 0, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """x with a x = b (trans 1/'T': aᵀ x = b, 2/'C': aᴴ x = b) from a's `lu_factor` (lu, piv).

    Raises:
        LinAlgError: (when evaluated) a zero on U's diagonal (a singular a).
        ShapeError: b or piv does not fit lu.
    """
    lu, piv = lu_and_piv
    lu, b = _floats(lu, b, "lu_solve")
    n = _fz.square(lu, "lu_solve")
    if _shape(piv) != _shape(lu)[:-1]:
        raise ShapeError(f"lu_solve: pivots of shape {_shape(piv)} do not fit factors of shape {_shape(lu)}")
    b2, vec = _rhs(b, n, "lu_solve")
    sl, sb = _shape(lu), _shape(b2)
    batch = tuple(np.broadcast_shapes(sl[:-2], sb[:-2]))
    lu_ = L.broadcast_to(lu, batch + (n, n))
    piv = L.cast(piv, np.int64) if L.is_node(piv) else np.asarray(piv, np.int64)
    piv_ = L.broadcast_to(piv, batch + (n,))
    b_ = L.broadcast_to(b2, batch + sb[-2:])
    perm = L.bind("pivots_to_permutation", piv_)
    t, c = _trans(trans)
    if c and lu_.dtype.kind == "c":  # aᴴ x = b: aᵀ conj(x) = conj(b)
        return F.conj(lu_solve((lu, piv), F.conj(b), trans=1))
    if not t:
        x = L.bind("triangular_solve", lu_, F.take_rows(b_, perm), lower=True, trans=False, unit_diagonal=True)
        x = L.bind("triangular_solve", lu_, x, lower=False, trans=False, unit_diagonal=False)
    else:
        x = L.bind("triangular_solve", lu_, b_, lower=False, trans=True, unit_diagonal=False)
        x = L.bind("triangular_solve", lu_, x, lower=True, trans=True, unit_diagonal=True)
        x = F.untake_rows(x, perm)
    return _out(x, vec)


@api_call("scipy.linalg.det")
def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The determinant (`symgraph.numpy.linalg.det`: LU; 0 for an exactly singular a)."""
    if not L.is_node(a):
        a = np.asarray(a)
    d, sign = _fz.lu_diagonal(a, "det")
    return L.mul(sign, L.reduce("prod", d, axis=-1))


@api_call("scipy.linalg.inv")
def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The inverse (`symgraph.numpy.linalg.inv`: LU, then a solve with the identity).

    Raises:
        LinAlgError: a is not square, or (when evaluated) singular.
    """
    a = _fz.float_matrix(a, "inv", complex_ok=True)
    n = _fz.square(a, "inv")
    return F.lu_solve(L.bind("lu", a), np.broadcast_to(np.eye(n, dtype=a.dtype), _shape(a)))


@api_call("scipy.linalg.solve")
def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, assume_a: str | None = None, transposed: bool = False) -> Any:
    """x with a x = b (transposed: aᵀ x = b), as SciPy's.

    Args:
        assume_a: None, 'gen' or 'general' (LU with partial pivoting), or 'pos' / 'positive
            definite' (Cholesky, reading the `lower` or upper triangle; complex a: Hermitian).
            Other structures ('sym', 'her', 'diagonal', 'banded', ...) are refused.
        transposed: solve aᵀ x = b; refused for complex a, as SciPy's (NotImplementedError there).

    Raises:
        LinAlgError: a is not square, or (when evaluated) singular / not positive definite.
        UnsupportedOpError: another assume_a, or transposed=True with complex a.
    """
    a, b = _floats(a, b, "solve")
    if transposed and a.dtype.kind == "c":
        raise UnsupportedOpError("solve: transposed=True is not supported for complex a (as in SciPy); use "
                                 "solve(a.T, b) or lu_solve(lu_factor(a), b, trans=1)")
    kind = assume_a or "gen"
    if kind in ("pos", "positive definite"):
        return cho_solve(cho_factor(a, lower=lower), b)  # a symmetric: transposed changes nothing
    if kind not in ("gen", "general"):
        raise UnsupportedOpError(f"solve: assume_a={assume_a!r} is not supported (use 'gen' or 'pos')")
    if transposed:
        a = L.swap_last(a) if L.is_node(a) else np.swapaxes(a, -1, -2)
    return _fz.solve_general(a, b, "solve")


@api_call("scipy.linalg.solve_banded")
def solve_banded(l_and_u: tuple, ab: Any, b: Any, overwrite_ab: bool = False, overwrite_b: bool = False,
                 check_finite: bool = True) -> Any:
    """x with a x = b for a banded a given in SciPy's diagonal-ordered form `ab`.

    Args:
        l_and_u: (l, u), the numbers of nonzero lower and upper diagonals.
        ab: shape (l + u + 1, n): a[i, j] = ab[u + i - j, j] (SciPy's layout; entries outside the
            band are ignored).
        b: shape (n,) or (n, k).

    Returns:
        x of b's shape, the promoted float (or complex) dtype.

    Raises:
        ShapeError: ab is not (l + u + 1, n) or b's first axis is not n.
        LinAlgError: (when evaluated) a is singular.

    The band is scattered into the dense n x n matrix (a gather of ab with trace-time indices) and solved
    by LU with partial pivoting (`solve`): O(n**3), not LAPACK's O(n (l + u)**2) gbsv, so for moderate n.
    Differentiable in ab and b (the derivative reaches only the entries inside the band).
    """
    lo, up = (int(v) for v in l_and_u)
    sa = _shape(ab)
    if lo < 0 or up < 0 or len(sa) != 2 or sa[0] != lo + up + 1:
        raise ShapeError(f"solve_banded: ab has shape {sa}; expected (l + u + 1, n) = ({lo + up + 1}, n) for "
                         f"(l, u) = ({lo}, {up})")
    n = sa[1]
    if not _shape(b) or _shape(b)[0] != n:
        raise ShapeError(f"solve_banded: b has shape {_shape(b)}; its first axis must be n = {n}")
    from .. import numpy as snp

    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    row = up + i - j
    inside = (row >= 0) & (row <= lo + up)
    flat = np.where(inside, row * n + j, 0)
    dense = snp.where(inside, snp.ravel(ab)[flat], 0.0)
    return solve(dense, b)


@api_call("scipy.linalg.solve_sylvester")
def solve_sylvester(a: Any, b: Any, q: Any) -> Any:
    """x with a x + x b = q (the Sylvester equation), as SciPy's.

    Args:
        a: shape (m, m); b: shape (n, n); q: shape (m, n). Real or complex.

    Returns:
        x, shape (m, n).

    Raises:
        ShapeError: shapes that do not fit.
        LinAlgError: (when evaluated) a and -b share an eigenvalue (the Kronecker system is singular).

    Solved in Kronecker form, (a ⊗ I_n + I_m ⊗ bᵀ) vec(x) = vec(q) with row-major vec, by one LU solve
    of size m n: O((m n)**3), for small matrices (SciPy's Bartels-Stewart algorithm needs a Schur
    decomposition, which symgraph does not have). Differentiable in a, b and q to any order.
    """
    from .. import numpy as snp

    sa, sb, sq = _shape(a), _shape(b), _shape(q)
    if len(sa) != 2 or sa[0] != sa[1] or len(sb) != 2 or sb[0] != sb[1] or sq != (sa[0], sb[0]):
        raise ShapeError(f"solve_sylvester: a {sa}, b {sb}, q {sq}; expected (m, m), (n, n) and (m, n)")
    m, n = sa[0], sb[0]
    k = snp.kron(a, np.eye(n)) + snp.kron(np.eye(m), snp.transpose(b))
    return snp.reshape(solve(k, snp.reshape(q, (m * n,))), (m, n))
