"""np.linalg's solve/factor family on traced values: solve, inv, det, slogdet, cholesky, tensorinv, tensorsolve.

Each is composed at trace time of the primitives of `symgraph.ops.factor` (cholesky,
triangular_solve, lu, pivots_to_permutation) and batched over leading dimensions as NumPy
is. Integer and bool matrices compute in float64, as NumPy's; float32, float64, complex64 and
complex128 stay what they are; float16 is refused. See docs/linalg.md for the derivative rules
and conventions (complex: JAX's, docs/complex.md).
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import api_call, DTypeError, LinAlgError, ShapeError
from ..ir import Node
from ..ops import factor as F
from .base import _shape

__all__ = ["cholesky", "det", "inv", "slogdet", "solve", "tensorinv", "tensorsolve"]


def _any_node(*xs: Any) -> bool:
    return any(isinstance(x, Node) for x in xs)


def float_matrix(a: Any, op: str, pos: int = 0, dtype: Any = None, complex_ok: bool = False) -> Any:
    """a as a float (or, with complex_ok, complex) node or array: ints and bools as float64 (NumPy's rule),
    float32/64 and complex64/128 kept.

    Raises:
        DTypeError: float16, non-numeric a, or complex a without complex_ok.
    """
    if not isinstance(a, Node):
        a = _np.asarray(a)
    d = _np.dtype(a.dtype)
    if d.kind in "biu":
        d = _np.dtype(_np.float64)
    elif d.kind == "c":
        if not complex_ok or d not in (_np.complex64, _np.complex128):
            raise DTypeError(f"{op}: argument {pos} is complex ({d}); this function takes real float32/float64 "
                             f"matrices (docs/linalg.md lists the complex ones)")
    elif d not in (_np.float32, _np.float64):
        raise DTypeError(f"{op}: argument {pos} has dtype {d}; linear algebra needs float32 or float64 "
                         f"(as NumPy's, which refuses float16)")
    if dtype is not None:
        d = _np.result_type(d, dtype)
    return L.cast(a, d) if a.dtype != d else a


def square(a: Any, op: str) -> int:
    """The n of a (..., n, n).

    Raises:
        LinAlgError: a has fewer than two dimensions or its last two differ (NumPy's error).
    """
    s = _shape(a)
    if len(s) < 2:
        raise LinAlgError(f"{op}: {len(s)}-dimensional array given; the array must be at least two-dimensional")
    if s[-1] != s[-2]:
        raise LinAlgError(f"{op}: the last 2 dimensions of the array must be square, got shape {s}")
    return s[-1]


def solve_general(a: Any, b: Any, op: str, factor: Any = None) -> Any:
    """x with a x = b through LU (`factor`: a function of the broadcast a giving x from b, or None).

    b is a stack of vectors only when it is 1-d (NumPy 2's rule), else (..., n, k); batch
    dimensions broadcast. A single matrix a solves every right-hand side of a batched b at once.
    """
    n = square(a, op)
    sb = _shape(b)
    if len(sb) == 0:
        raise ShapeError(f"{op}: right-hand side is 0-d; needs (n,) or (..., n, k)")
    vec = len(sb) == 1
    b2 = L.reshape(b, (sb[0], 1)) if vec else b
    s2 = _shape(b2)
    if s2[-2] != n:
        raise ShapeError(f"{op}: right-hand side of shape {sb} does not fit matrices of shape {_shape(a)} "
                         f"(needs {n} rows)")
    sa = _shape(a)
    if len(sa) == 2 and len(s2) > 2:
        # one factorization for every right-hand side: (..., n, k) -> (n, batch * k)
        nb = len(s2) - 2
        cols = L.reshape(L.transpose(b2, (nb,) + tuple(range(nb)) + (nb + 1,)), (n, -1))
        x = F.lu_solve(L.bind("lu", a), cols)
        x = L.transpose(L.reshape(x, (n,) + s2[:-2] + (s2[-1],)), tuple(range(1, nb + 1)) + (0, nb + 1))
    else:
        batch = tuple(_np.broadcast_shapes(sa[:-2], s2[:-2]))
        a_ = L.broadcast_to(a, batch + (n, n))
        b_ = L.broadcast_to(b2, batch + s2[-2:])
        x = F.lu_solve(L.bind("lu", a_), b_)
    if vec:
        x = L.reshape(x, _shape(x)[:-1])
    return x


@api_call("np.linalg.solve")
def solve(a: Any, b: Any) -> Any:
    """np.linalg.solve: x with a @ x = b, through LU with partial pivoting (getrf, then two trsm).

    Args:
        a: (..., n, n) float32/float64/complex64/complex128 (ints and bools as float64).
        b: (n,) or (..., n, k) (NumPy 2's rule: b is a vector only when 1-d); batch dims broadcast.

    Returns:
        x of b's shape (with the broadcast batch), in the promoted dtype.

    Raises:
        LinAlgError: a is not square, or is singular (when evaluated: a zero pivot).
        ShapeError: b does not fit a. DTypeError: float16 operands.

    The VJP is that of the composition (Giles 2008 §2.3.1 for each triangular solve, de Hoog
    et al. 2011 for the LU factors), so the gradient with respect to a costs O(n³). Complex
    matrices: solve is holomorphic, and the same rules with plain transposes (no conjugation) are
    its derivatives under JAX's convention (docs/complex.md).
    """
    if not _any_node(a, b):
        return _np.linalg.solve(a, b)
    a = float_matrix(a, "solve", 0, complex_ok=True)
    b = float_matrix(b, "solve", 1, a.dtype, complex_ok=True)
    a = float_matrix(a, "solve", 0, b.dtype, complex_ok=True)
    return solve_general(a, b, "solve")


@api_call("np.linalg.inv")
def inv(a: Any) -> Any:
    """np.linalg.inv: the inverse of each matrix (..., n, n), as the solve a x = I (LU).

    Real or complex (holomorphic: the rules of `solve`, no conjugation; docs/complex.md).

    Raises:
        LinAlgError: a is not square, or is singular (when evaluated).
        DTypeError: float16 a.
    """
    if not _any_node(a):
        return _np.linalg.inv(a)
    a = float_matrix(a, "inv", complex_ok=True)
    n = square(a, "inv")
    eye = _np.broadcast_to(_np.eye(n, dtype=a.dtype), a.shape)
    return F.lu_solve(L.bind("lu", a), eye)


def lu_diagonal(a: Any, op: str) -> tuple:
    """(U's diagonal (..., n), the sign of the row swaps (...)) of a's LU factorization."""
    a = float_matrix(a, op, complex_ok=True)
    square(a, op)
    lu, ipiv, _ = F.lu_parts(L.bind("lu", a))
    return F.diagonal(lu), L.cast(F.pivot_sign(ipiv), a.dtype)


@api_call("np.linalg.det")
def det(a: Any) -> Any:
    """np.linalg.det: the product of U's diagonal from LU, times the sign of the row swaps.

    The determinant of an exactly singular matrix is 0 (as NumPy's). Its derivative there (the
    adjugate) is not computed: the reverse and forward rules solve with U, so differentiating
    det at an exactly singular matrix raises LinAlgError when evaluated (docs/linalg.md).
    Complex a: det is holomorphic, d det / dA = det(A) A^-T (no conjugation, JAX's convention).

    Raises:
        LinAlgError: a is not square. DTypeError: float16 a.
    """
    if not _any_node(a):
        return _np.linalg.det(a)
    d, sign = lu_diagonal(a, "det")
    return L.mul(sign, L.reduce("prod", d, axis=-1))


@api_call("np.linalg.slogdet")
def slogdet(a: Any) -> Any:
    """np.linalg.slogdet: (sign, log|det|) from LU's diagonal, as NumPy's SlogdetResult.

    sign is 0 and logabsdet -inf for an exactly singular matrix (NumPy's values). The
    derivative of logabsdet is a^-T (Giles 2008 §2.2.3), computed through the LU rules.
    Complex a: sign = det/|det| (complex, modulus 1) and logabsdet = log|det| (real), as NumPy;
    neither is holomorphic; logabsdet is the real part of log det, so under JAX's convention its
    gradient is log det's complex derivative, a^-T.

    Raises:
        LinAlgError: a is not square. DTypeError: float16 a.
    """
    if not _any_node(a):
        return _np.linalg.slogdet(a)
    d, sign = lu_diagonal(a, "slogdet")
    if d.dtype.kind == "c":
        # sign = det / |det| = (row swaps' sign) · Π d_i / |d_i| (0 for a singular matrix, as NumPy), a complex
        # number of modulus 1 with its own derivative; logabsdet = Σ log |d_i| is real
        r = L.bind("complex_abs", d)
        zero = L.binary("eq", r, 0.0)
        unit = L.where(zero, 0.0, L.div(d, L.cast(L.where(zero, 1.0, r), d.dtype)))
        s = L.mul(sign, L.reduce("prod", unit, axis=-1))
        logabs = L.reduce("sum", L.unary("log", r), axis=-1)
        return _np.linalg._linalg.SlogdetResult(s, logabs)
    s = L.mul(sign, L.reduce("prod", L.unary("sign", d, float_op=False), axis=-1))
    logabs = L.reduce("sum", L.unary("log", L.unary("abs", d, float_op=False)), axis=-1)
    return _np.linalg._linalg.SlogdetResult(s, logabs)


@api_call("np.linalg.cholesky")
def cholesky(a: Any, /, *, upper: bool = False) -> Any:
    """np.linalg.cholesky: L with a = L Lᵀ, reading a's lower triangle (upper=True: U = Lᵀ with
    a = Uᵀ U, reading the upper triangle), as NumPy's.

    The derivative is that of the function NumPy computes, which reads one triangle only (Murray
    2016): for a symmetric input and symmetric perturbations it agrees with the symmetrized
    convention of JAX and autograd.

    Complex a: a = L Lᴴ for the Hermitian matrix of the lower triangle (the diagonal's real part), as
    NumPy's (LAPACK ?potrf); the rules are Murray's with conjugate transposes, under JAX's convention
    (docs/complex.md): not holomorphic, so `sg.grad` of a real function of L, or `sg.vjp`/`sg.jvp`.

    Raises:
        LinAlgError: a is not square, or (when evaluated) not positive definite or holds NaN.
        DTypeError: float16 a.
    """
    if not _any_node(a):
        return _np.linalg.cholesky(a, upper=upper)
    a = float_matrix(a, "cholesky", complex_ok=True)
    square(a, "cholesky")
    if upper:  # U = Lᴴ for the lower factor of aᴴ (whose lower triangle is a's upper one)
        return F.mH(L.bind("cholesky", F.mH(a)))
    return L.bind("cholesky", a)


@api_call("np.linalg.tensorinv")
def tensorinv(a: Any, ind: int = 2) -> Any:
    """np.linalg.tensorinv: the inverse of a (a.shape[:ind] x a.shape[ind:]) tensor as a matrix, reshaped to
    a.shape[ind:] + a.shape[:ind] (so that tensordot(tensorinv(a), a, ind) is the identity), as NumPy's:
    reshape to (prod(a.shape[:ind]), -1), `inv`, reshape. Real or complex; derivatives are inv's.

    Raises:
        ShapeError: ind <= 0 (NumPy's ValueError "Invalid ind argument."), or a size that does not reshape.
        LinAlgError: the matrix is not square, or is singular (when evaluated).
    """
    if not _any_node(a):
        return _np.linalg.tensorinv(a, ind)
    if ind <= 0:
        raise ShapeError("np.linalg.tensorinv: Invalid ind argument (ind must be positive).")
    old = _shape(a)
    rows = int(_np.prod(old[ind:], dtype=_np.int64))
    size = int(_np.prod(old, dtype=_np.int64))
    if rows == 0 or size % rows:
        raise ShapeError(f"np.linalg.tensorinv: cannot reshape a of shape {old} into ({rows}, -1)")
    return L.reshape(inv(L.reshape(a, (rows, size // rows))), old[ind:] + old[:ind])  # inv: LinAlgError if not square


@api_call("np.linalg.tensorsolve")
def tensorsolve(a: Any, b: Any, axes: Any = None) -> Any:
    """np.linalg.tensorsolve: x with tensordot(a, x, x.ndim) = b, as NumPy's: a's `axes` moved to the end,
    then the solve of a (prod(b.shape), prod(x.shape)) matrix against b flattened; x has shape
    a.shape[b.ndim:] (after the move). Real or complex; derivatives are solve's.

    Raises:
        LinAlgError: prod(a.shape[b.ndim:]) != prod(a.shape[:b.ndim]) (NumPy's message), or a singular
            matrix (when evaluated).
        ShapeError: axes out of range.
    """
    if not _any_node(a, b):
        return _np.linalg.tensorsolve(a, b, axes)
    sa, sb = _shape(a), _shape(b)
    an = len(sa)
    if axes is not None:
        order = list(range(an))
        for k in axes:
            if not -an <= k < an:
                raise ShapeError(f"np.linalg.tensorsolve: axis {k} is out of range for a of shape {sa}")
            order.remove(k % an)
            order.insert(an, k % an)
        a = L.transpose(a, tuple(order))
        sa = _shape(a)
    old = sa[-(an - len(sb)):]  # NumPy's expression (the whole shape when b.ndim == a.ndim)
    prod = int(_np.prod(old, dtype=_np.int64))
    if int(_np.prod(sa, dtype=_np.int64)) != prod ** 2:
        raise LinAlgError("np.linalg.tensorsolve: Input arrays must satisfy the requirement "
                          f"prod(a.shape[b.ndim:]) == prod(a.shape[:b.ndim]) (a {sa}, b {sb})")
    x = solve(L.reshape(a, (prod, prod)), L.reshape(b, (-1,)) if isinstance(b, Node) else _np.ravel(b))
    return L.reshape(x, old)


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.linalg.solve: solve, _np.linalg.inv: inv, _np.linalg.det: det, _np.linalg.slogdet: slogdet,
    _np.linalg.cholesky: cholesky, _np.linalg.tensorinv: tensorinv, _np.linalg.tensorsolve: tensorsolve,
}
