"""Spectral linear algebra on traced values: np.linalg's eigh, eigvalsh, svd, svdvals, qr and what is built on them.

Three primitives (`symgraph.ops.spectral`: eigh, svd, qr, with their values-only
forms eigvalsh and svdvals) carry the LAPACK calls and the derivative rules;
everything else is composed here at trace time: pinv, lstsq, matrix_rank,
cond, the matrix 2-norm, -2-norm and nuclear norm (`matrix_norm_sv`),
matrix_power and multi_dot; eig and eigvals (`symgraph.ops.eig`). Every function takes (..., m, n) arrays
batched over the leading dimensions as NumPy does, float32, float64, complex64 or complex128 (integers and
bools are cast to float64, as NumPy does); with no traced argument it calls NumPy. Conventions and
limits: docs/linalg.md (complex matrices: its "Complex matrices" section).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any, Sequence

import numpy as _np

from .. import lax as L
from ..custom import custom_jvp
from ..errors import api_call, DTypeError, ShapeError, UnsupportedOpError
from ..ir import Node
from ..ops import eig as E
from ..ops import spectral as S
from ..ops.factor import conj, mH
from .base import _ndim, _shape

__all__ = ["eig", "eigvals", "eigh", "eigvalsh", "svd", "svdvals", "qr", "pinv", "lstsq", "matrix_rank", "matrix_power", "multi_dot",
           "cond", "matrix_norm_sv"]

# NumPy's own result classes (NumPy 2), so that a result, or a cotangent built as NumPy builds it
# (np.linalg.qr(r) passed to a VJP), has the pytree structure of what NumPy returns
_results = getattr(_np.linalg, "_linalg", None)
EighResult = getattr(_results, "EighResult", None) or namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = getattr(_results, "SVDResult", None) or namedtuple("SVDResult", ["U", "S", "Vh"])
QRResult = getattr(_results, "QRResult", None) or namedtuple("QRResult", ["Q", "R"])


def _traced(*xs: Any) -> bool:
    return any(isinstance(x, Node) for x in xs)


def _matrix(a: Any, fn: str, square: bool = False, complex_ok: bool = False) -> Node:
    """a as a float (with complex_ok: or complex) node of rank >= 2 (integers and bools cast to float64).

    Raises:
        DTypeError: float16 or a non-numeric dtype (NumPy's linalg refuses them too), complex without complex_ok.
        ShapeError: rank < 2, or a non-square matrix where one is needed.
    """
    a = L.asnode(a)
    if a.dtype.kind in "biu":
        a = L.cast(a, _np.float64)
    ok = (_np.float32, _np.float64) + ((_np.complex64, _np.complex128) if complex_ok else ())
    if a.dtype not in tuple(_np.dtype(d) for d in ok):
        raise DTypeError(f"np.linalg.{fn}: dtype {a.dtype} is not supported "
                         f"({'float32, float64, complex64 or complex128' if complex_ok else 'float32 or float64'})")
    if a.ndim < 2:
        raise ShapeError(f"np.linalg.{fn}: {a.ndim}-dimensional array given; it needs at least two dimensions")
    if square and a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"np.linalg.{fn}: last 2 dimensions of the array must be square, got shape {a.shape}")
    return a


def _symmetric_from(a: Node, uplo: str, fn: str) -> Node:
    """The symmetric (complex: Hermitian) matrix that the triangle `uplo` of a describes (NumPy reads only that
    triangle; of a complex diagonal, the eigh primitive reads the real part)."""
    if uplo not in ("L", "U"):
        raise ShapeError(f"np.linalg.{fn}: UPLO must be 'L' or 'U', got {uplo!r}")
    lower = uplo == "L"
    tri = S.tri_mask(a, 0, lower=lower)
    strict = S.tri_mask(a, -1 if lower else 1, lower=lower)
    return L.add(tri, mH(strict))


@api_call("np.linalg.eigh")
def eigh(a: Any, UPLO: str = "L") -> Any:  # noqa: N803  (NumPy's name)
    """np.linalg.eigh: eigenvalues (ascending) and eigenvectors of symmetric (complex: Hermitian) matrices (..., n, n).

    Only the triangle UPLO is read, as in NumPy: the derivative with respect to the other
    triangle is 0. Returns EighResult(eigenvalues (..., n), eigenvectors (..., n, n)), the
    eigenvectors with LAPACK's signs (?syevd / ?heevd, as NumPy). For a complex matrix the
    eigenvalues are real (float32 for complex64) and each eigenvector has a free phase: only
    functions invariant to it (|v|, v vᴴ) have a well-defined derivative (docs/linalg.md).

    Derivatives: Giles (2008) sec. 3.1; eigenvalue gaps below n·eps·max|w| count as 0 (docs/linalg.md);
    complex: the same with conjugate transposes, under JAX's convention (docs/complex.md).

    Raises:
        ShapeError: not square, or rank < 2. DTypeError: not a float/integer dtype.
        LinAlgError: NaN or infinity in the triangle read, or LAPACK's info != 0 (when the program runs).
    """
    if not _traced(a):
        return _np.linalg.eigh(a, UPLO)
    a = _matrix(a, "eigh", square=True, complex_ok=True)
    p = L.bind("eigh", _symmetric_from(a, UPLO, "eigh"), uplo=UPLO)
    w, v = S.eigh_parts(p)
    return EighResult(w, v)


@api_call("np.linalg.eigvalsh")
def eigvalsh(a: Any, UPLO: str = "L") -> Any:  # noqa: N803
    """np.linalg.eigvalsh: eigenvalues (..., n), ascending, of symmetric matrices (the triangle UPLO).

    The derivative is diag(V^T dA V) (V the eigenvectors): it binds eigh only when differentiated.

    Raises:
        As `eigh`.
    """
    if not _traced(a):
        return _np.linalg.eigvalsh(a, UPLO)
    a = _matrix(a, "eigvalsh", square=True, complex_ok=True)
    return L.bind("eigvalsh", _symmetric_from(a, UPLO, "eigvalsh"), uplo=UPLO)


@api_call("np.linalg.eig")
def eig(a: Any) -> Any:
    """np.linalg.eig: eigenvalues and right eigenvectors of general square matrices (..., n, n), real or complex.

    Returns EigResult(eigenvalues (..., n), eigenvectors (..., n, n)), A v_j = w_j v_j, both complex
    (complex64 for float32/complex64 input) with NumPy's values (LAPACK ?geev: each eigenvector of unit
    norm with its largest component real). NumPy returns real arrays for a real matrix whose eigenvalues
    all happen to be real; a traced program cannot pick a dtype on values, so these are always complex (as
    JAX's). Eigenvectors of real eigenvalues of a real matrix are real up to that dtype.

    Derivatives (Giles 2008 sec. 3.1; the unit-norm and real-largest-component normalization kept, so V
    itself differentiates as NumPy's output does), under JAX's convention (docs/complex.md): not
    holomorphic in general; use functions of w, |v|, v vᴴ / vᴴ v, or sg.vjp / sg.jvp. Near-equal eigenvalues
    count as equal in the 1/(w_j - w_i) terms (docs/linalg.md).

    Raises:
        ShapeError: not square, or rank < 2. DTypeError: not a float/complex/integer dtype.
        LinAlgError: NaN or infinity, or no convergence (when the program runs); a defective matrix (singular
            eigenvectors) when differentiated.
    """
    if not _traced(a):
        return _np.linalg.eig(a)
    a = _matrix(a, "eig", square=True, complex_ok=True)
    w, v = E.eig_parts(L.bind("eig", a))
    return _np.linalg._linalg.EigResult(w, v)


@api_call("np.linalg.eigvals")
def eigvals(a: Any) -> Any:
    """np.linalg.eigvals: the eigenvalues (..., n) of general square matrices, complex (as `eig`'s, values only:
    ?geev with jobvr 'N', as NumPy). The derivative binds eig: dw = diag(V^-1 dA V).

    Raises:
        As `eig`.
    """
    if not _traced(a):
        return _np.linalg.eigvals(a)
    return L.bind("eigvals", _matrix(a, "eigvals", square=True, complex_ok=True))


@api_call("np.linalg.svd")
def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    """np.linalg.svd: a = U diag(S) Vh for (..., m, n) matrices, S descending (LAPACK ?gesdd, as NumPy).

    Returns SVDResult(U, S, Vh): U (..., m, m) and Vh (..., n, n) with full_matrices, else
    (..., m, k) and (..., k, n), k = min(m, n); with compute_uv=False, S alone (as `svdvals`).

    Derivatives: Townsend (2016) for the reduced SVD. With full_matrices the extra columns of U (or
    Vh's extra rows) are any orthonormal basis of a complement: as in PyTorch their cotangent is
    ignored and their tangent is zero; U[..., :k], S and Vh[..., :k, :] differentiate as reduced.

    Complex a = U diag(S) Vh: S is real (float32 for complex64); each pair (u_i, v_i) has a common free
    phase, so only functions invariant to it (|U|, U diag(S) Vh, U Uᴴ) have a well-defined derivative.
    The rules are Townsend's with conjugate transposes and the phase term of the diagonal of Uᴴ dA V
    (docs/linalg.md), under JAX's convention (docs/complex.md).

    hermitian=True takes NumPy's route through eigh (the lower triangle): s = |w| descending, signs
    moved into Vh.

    Raises:
        ShapeError: rank < 2 (or non-square with hermitian=True). LinAlgError: NaN or infinity, or no
        convergence (when the program runs).
    """
    if not _traced(a):
        return _np.linalg.svd(a, full_matrices, compute_uv, hermitian)
    a = _matrix(a, "svd", complex_ok=True)
    if hermitian:
        return _hermitian_svd(a, compute_uv)
    if not compute_uv:
        return L.bind("svdvals", a)
    m, n = a.shape[-2:]
    full = bool(full_matrices) and m != n
    p = L.bind("svd", a, full=full)
    if not full:
        u, s, v = S.svd_parts(p)
        return SVDResult(u, s, mH(v))
    k = min(m, n)
    u = S.cols(S.rows(p, 0, m), 0, m)
    s = S.cols(S.as_row(S.row(p, m)), 0, k)
    s = S.real_values(L.reshape(s, s.shape[:-2] + (k,)))
    v = S.cols(S.rows(p, m + 1, m + 1 + n), 0, n)
    return SVDResult(u, s, mH(v))


def _hermitian_svd(a: Node, compute_uv: bool) -> Any:
    """NumPy's svd(hermitian=True): from eigh (the lower triangle), s = |w| sorted descending, U the
    eigenvectors in that order, Vh = (U * sign(w))^T."""
    if a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"np.linalg.svd(hermitian=True): needs square matrices, got shape {a.shape}")
    from .along_axis import take_along_axis
    from .sorting import argsort

    if not compute_uv:
        w = L.unary("abs", eigvalsh(a))
        idx = _reverse_last(argsort(L.bind("stop_gradient", w), axis=-1))
        return take_along_axis(w, idx, axis=-1)
    w, u = eigh(a)
    idx = _reverse_last(argsort(L.bind("stop_gradient", L.unary("abs", w)), axis=-1))
    sgn = take_along_axis(L.unary("sign", w), idx, axis=-1)
    s = take_along_axis(L.unary("abs", w), idx, axis=-1)
    u = take_along_axis(u, L.reshape(idx, idx.shape[:-1] + (1, idx.shape[-1])), axis=-1)
    return SVDResult(u, s, mH(L.mul(u, S.as_row(sgn))))


def _reverse_last(x: Node) -> Node:
    n = x.shape[-1]
    nd = x.ndim
    return L.bind("slice", x, starts=(0,) * (nd - 1) + (n - 1,), stops=x.shape[:-1] + (-1,), steps=(1,) * (nd - 1) + (-1,))


@api_call("np.linalg.svdvals")
def svdvals(x: Any, /) -> Any:
    """np.linalg.svdvals (NumPy 2): the singular values (..., min(m, n)), descending.

    The derivative is U^T dA V's diagonal (it binds svd only when differentiated).

    Raises:
        As `svd`.
    """
    if not _traced(x):
        return _np.linalg.svd(x, compute_uv=False)
    return L.bind("svdvals", _matrix(x, "svdvals", complex_ok=True))


@api_call("np.linalg.qr")
def qr(a: Any, mode: str = "reduced") -> Any:
    """np.linalg.qr: a = Q R for (..., m, n) matrices (LAPACK ?geqrf and ?orgqr, as NumPy).

    mode 'reduced' gives QRResult(Q (..., m, k), R (..., k, n)), k = min(m, n); 'complete' Q
    (..., m, m), R (..., m, n); 'r' R alone (..., k, n). Derivatives: Walter & Lehmann (2018) for
    m >= n; wide matrices (m < n) split as [X | Y] with X square (Roberts & Roberts 2020). The
    complete Q's extra columns of a tall matrix (any basis of a complement) have their cotangent
    ignored and a zero tangent, as the full SVD's. Complex a: R's diagonal is real (LAPACK's), which fixes
    the phases, and the rules are the same with conjugate transposes (Q^H dQ skew-Hermitian with
    diagonal i Im(C_ii)), under JAX's convention (docs/complex.md).

    Raises:
        ShapeError: rank < 2 or an unknown mode. UnsupportedOpError: mode 'raw'. LinAlgError: NaN or
        infinity (when the program runs).
    """
    if not _traced(a):
        return _np.linalg.qr(a, mode)
    if mode == "raw":
        raise UnsupportedOpError("np.linalg.qr(mode='raw') (LAPACK's Householder form) does not trace; use "
                                 "'reduced', 'complete' or 'r'")
    if mode not in ("reduced", "complete", "r"):
        raise ShapeError(f"np.linalg.qr: unrecognized mode {mode!r}")
    a = _matrix(a, "qr", complex_ok=True)
    m, n = a.shape[-2:]
    complete = mode == "complete" and m > n
    q, r = S.qr_parts(L.bind("qr", a, complete=complete))
    return r if mode == "r" else QRResult(q, r)


# ----- composites -----


def _default_rcond(a: Node) -> float:
    return max(a.shape[-2:]) * float(_np.finfo(a.dtype).eps)


def _pinv_value(a: Node, rcond: Any) -> Node:
    u, s, vt = svd(a, full_matrices=False)
    rc = L.asnode(rcond)
    if rc.ndim:
        rc = L.reshape(rc, rc.shape + (1,))
    cutoff = L.mul(rc, L.reduce("max", s, axis=-1, keepdims=True))
    large = L.binary("gt", s, cutoff)
    sinv = L.where(large, L.div(1.0, L.where(large, s, 1.0)), 0.0)
    return S.mm(mH(vt), L.mul(S.as_col(sinv), mH(u)))


@custom_jvp
def _pinv(a: Any, rcond: Any) -> Any:
    return _pinv_value(a, rcond)


@_pinv.defjvp
def _pinv_jvp(primals: tuple, tangents: tuple) -> tuple:
    # Golub & Pereyra, "The differentiation of pseudo-inverses and nonlinear least squares problems whose
    # variables separate" (1973), eq. 4.12: exact where the rank is locally constant (also at repeated
    # singular values, where the SVD's own rules would need their degeneracy convention); complex: with
    # conjugate transposes
    a, rcond = primals
    da, _ = tangents
    p = _pinv(a, rcond)
    pt, dat = mH(p), mH(da)
    m, n = a.shape[-2:]
    eye_m = _np.eye(m, dtype=a.dtype)
    eye_n = _np.eye(n, dtype=a.dtype)
    t1 = L.neg(S.mm(p, S.mm(da, p)))
    t2 = S.mm(S.mm(p, pt), S.mm(dat, L.sub(eye_m, S.mm(a, p))))
    t3 = S.mm(L.sub(eye_n, S.mm(p, a)), S.mm(dat, S.mm(pt, p)))
    return p, L.add(L.add(t1, t2), t3)


@api_call("np.linalg.pinv")
def pinv(a: Any, rcond: Any = None, hermitian: bool = False, *, rtol: Any = _np._NoValue) -> Any:
    """np.linalg.pinv: the Moore-Penrose pseudo-inverse (..., n, m) of (..., m, n), by the SVD, singular values
    at most rcond·max(s) dropped (NumPy's default rcond 1e-15; rtol=None: max(m, n)·eps).

    The derivative is Golub & Pereyra's (1973), exact where the rank is locally constant; at a
    change of rank the pseudo-inverse is not continuous and the value of the formula is one-sided.
    Complex a: the same with conjugate transposes (pinv is not holomorphic; JAX's convention).

    hermitian=True computes the same value (the SVD is then NumPy's through eigh only in NumPy; here the
    general SVD, equal up to rounding).

    Raises:
        ShapeError: rank < 2, or both rcond and rtol given.
    """
    if not _traced(a, rcond):
        kw = {} if rtol is _np._NoValue else {"rtol": rtol}
        return _np.linalg.pinv(a, rcond, hermitian, **kw)
    a = _matrix(a, "pinv", complex_ok=True)
    if rcond is None:
        rcond = 1e-15 if rtol is _np._NoValue else (_default_rcond(a) if rtol is None else rtol)
    elif rtol is not _np._NoValue:
        raise ShapeError("np.linalg.pinv: rtol and rcond cannot both be set")
    if isinstance(rcond, Node):
        raise UnsupportedOpError("np.linalg.pinv: a traced rcond does not trace; pass a number or an array")
    rcond = _np.asarray(rcond, dtype=_np.finfo(a.dtype).dtype)  # real, also for a complex a
    if 0 in a.shape[-2:]:
        return L.broadcast_to(L.constant(_np.zeros((), a.dtype)), a.shape[:-2] + (a.shape[-1], a.shape[-2]))
    return _pinv(a, rcond)


@api_call("np.linalg.lstsq")
def lstsq(a: Any, b: Any, rcond: Any = None) -> Any:
    """np.linalg.lstsq: the least-squares solution x (n,) or (n, k) of a (m, n) x = b (m,) or (m, k).

    Returns (x, residuals, rank, s) as NumPy: residuals the squared 2-norms of the columns of
    b - a x, shape (k,) (or (1,) for a vector b) when m > n and a has full rank, else shape (0,);
    rank the number of singular values above rcond·max(s) (int, derivative-free); s the singular
    values. x = pinv(a, rcond) @ b (NumPy calls ?gelsd, the same minimum-norm solution up to
    rounding). The full-rank test of the residuals is a trace-time question, so residuals are those of
    a full-rank a whenever m > n: traced code cannot change an output's shape on a value. Real or complex
    (residuals and s real, as NumPy's).

    Raises:
        ShapeError: a not 2-d, b of another number of rows, or b not 1-d or 2-d.
    """
    if not _traced(a, b):
        return _np.linalg.lstsq(a, b, rcond)
    a = _matrix(a, "lstsq", complex_ok=True)
    if a.ndim != 2:
        raise ShapeError(f"np.linalg.lstsq: a must be 2-dimensional, got shape {a.shape}")
    b = L.asnode(b)
    if b.dtype != a.dtype:
        dt = _np.result_type(a.dtype, b.dtype if b.dtype.kind in "fc" else _np.float64)
        a, b = L.cast(a, dt), L.cast(b, dt)
    vec = b.ndim == 1
    if b.ndim not in (1, 2) or b.shape[0] != a.shape[0]:
        raise ShapeError(f"np.linalg.lstsq: incompatible dimensions: a {a.shape}, b {b.shape}")
    m, n = a.shape
    if rcond is None:
        rcond = _default_rcond(a)
    rcond = _np.asarray(rcond, dtype=_np.finfo(a.dtype).dtype)  # real, also for a complex a
    b2 = L.reshape(b, (m, 1)) if vec else b
    x = S.mm(pinv(a, rcond), b2) if m and n else L.broadcast_to(L.constant(_np.zeros((), a.dtype)), (n, b2.shape[1]))
    s = svdvals(a)
    if min(m, n):
        cutoff = L.mul(L.reduce("max", s), rcond)
        rank = L.reduce("sum", L.cast(L.binary("gt", s, cutoff), _np.int32))
    else:
        rank = L.constant(_np.zeros((), _np.int32))
    if m > n:
        r = L.sub(b2, S.mm(a, x))
        resid = L.reduce("sum", S.real_values(L.mul(r, conj(r))), axis=0)  # |r|², real as NumPy's
    else:
        resid = L.broadcast_to(L.constant(_np.zeros((), _np.finfo(a.dtype).dtype)), (0,))
    if vec:
        x = L.reshape(x, (n,))
    return x, resid, rank, s


@api_call("np.linalg.matrix_rank")
def matrix_rank(A: Any, tol: Any = None, hermitian: bool = False, *, rtol: Any = None) -> Any:  # noqa: N803
    """np.linalg.matrix_rank: the number of singular values above the tolerance (int64, derivative-free).

    tol: an absolute threshold; rtol: relative to max(s) (default max(m, n)·eps, NumPy's). Vectors and
    scalars: 1 unless all zero (NumPy's rule for rank < 2). Real or complex matrices.

    Raises:
        ShapeError: both tol and rtol given.
    """
    if not _traced(A, tol, rtol):
        return _np.linalg.matrix_rank(A, tol, hermitian, rtol=rtol)
    a = L.asnode(A)
    if a.dtype.kind in "biu":
        a = L.cast(a, _np.float64)
    if a.ndim < 2:
        nz = L.reduce("max", L.cast(L.binary("ne", a, 0.0), _np.int64)) if a.size else L.constant(_np.int64(0))
        return nz
    s = L.bind("svdvals", _matrix(a, "matrix_rank", complex_ok=True)) if not hermitian else \
        L.unary("abs", L.bind("eigvalsh", _symmetric_from(_matrix(a, "matrix_rank", square=True, complex_ok=True), "L",
                                                          "matrix_rank"),
                              uplo="L"))
    s = L.bind("stop_gradient", s)
    smax = L.reduce("max", s, axis=-1, keepdims=True)
    if tol is None:
        if rtol is None:
            rtol = _default_rcond(a)
        thr = L.mul(smax, L.asnode(_np.asarray(rtol, a.dtype)) if not isinstance(rtol, Node) else rtol)
    else:
        if rtol is not None:
            raise ShapeError("np.linalg.matrix_rank: tol and rtol cannot both be set")
        thr = L.asnode(tol if isinstance(tol, Node) else _np.asarray(tol, a.dtype))
        thr = L.reshape(thr, thr.shape + (1,)) if thr.ndim else thr
    return L.reduce("sum", L.cast(L.binary("gt", s, thr), _np.int64), axis=-1)


def matrix_norm_sv(x: Node, ord: Any, axes: tuple[int, int], keepdims: bool) -> Node:
    """The matrix norms of singular values over `axes` of x: ord 2 (the largest), -2 (the smallest), 'nuc'
    (their sum); `symgraph.numpy.linear_algebra.norm` calls this for those ords.

    The 2-norm's derivative is u1 v1^T, shared equally... by the SVD's rule: at a repeated largest
    singular value it is the subgradient that rule gives (docs/linalg.md).
    """
    r, c = axes
    nd = x.ndim
    rest = [i for i in range(nd) if i not in (r, c)]
    xm = L.transpose(x, tuple(rest) + (r, c))
    s = svdvals(xm)
    if ord == 2:
        out = L.reduce("max", s, axis=-1)
    elif ord == -2:
        out = L.reduce("min", s, axis=-1)
    else:
        out = L.reduce("sum", s, axis=-1)
    if keepdims:
        out = L.reshape(out, tuple(1 if i in (r, c) else d for i, d in enumerate(x.shape)))
    return out


@api_call("np.linalg.cond")
def cond(x: Any, p: Any = None) -> Any:
    """np.linalg.cond: the condition number s_max / s_min for p None, 2 (and s_min / s_max for -2), else
    norm(x, p) · norm(inv(x), p) (inv through np.linalg.inv's rule). Real or complex matrices (a real result).

    Raises:
        ShapeError: rank < 2; a non-square matrix with p other than None, 2, -2.
    """
    if not _traced(x):
        return _np.linalg.cond(x, p)
    x = _matrix(x, "cond", complex_ok=True)
    if p is None or p in (2, -2):
        s = svdvals(x)
        smax, smin = L.reduce("max", s, axis=-1), L.reduce("min", s, axis=-1)
        return L.div(smin, smax) if p == -2 else L.div(smax, smin)
    if x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"np.linalg.cond: norm ord {p!r} needs square matrices, got shape {x.shape}")
    return L.mul(_np.linalg.norm(x, p, axis=(-2, -1)), _np.linalg.norm(_np.linalg.inv(x), p, axis=(-2, -1)))


@api_call("np.linalg.matrix_power")
def matrix_power(a: Any, n: int) -> Any:
    """np.linalg.matrix_power: a^n for square (..., m, m) a and integer n, by repeated squaring
    (n < 0: the inverse's power, through np.linalg.inv's rule; n = 0: the identity).

    Raises:
        ShapeError: not square, or rank < 2. DTypeError: n not an integer.
    """
    if not _traced(a):
        return _np.linalg.matrix_power(a, n)
    if not isinstance(n, (int, _np.integer)):
        raise DTypeError(f"np.linalg.matrix_power: exponent must be an integer, got {type(n).__name__}")
    a = L.asnode(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"np.linalg.matrix_power: needs square matrices (..., m, m), got shape {a.shape}")
    n = int(n)
    if n == 0:
        return L.broadcast_to(L.constant(_np.eye(a.shape[-1], dtype=a.dtype)), a.shape)
    if n < 0:
        a = _np.linalg.inv(a)
        n = -n
    result = None
    base = a
    while True:
        if n & 1:
            result = base if result is None else L.matmul(result, base)
        n >>= 1
        if not n:
            return result
        base = L.matmul(base, base)


def _chain_order(dims: Sequence[int]) -> list:
    """Optimal parenthesization of a matrix chain (Cormen et al., Introduction to Algorithms, sec. 15.2)."""
    k = len(dims) - 1
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = None
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s
    return split


@api_call("np.linalg.multi_dot")
def multi_dot(arrays: Sequence[Any], *, out: Any = None) -> Any:
    """np.linalg.multi_dot: the product of 2-d matrices (the first and last may be 1-d) in the cheapest order.

    Raises:
        ShapeError: fewer than two arrays, inner arrays not 2-d, or dimensions that do not chain.
        UnsupportedOpError: out=.
    """
    arrays = list(arrays)
    if not _traced(*arrays):
        return _np.linalg.multi_dot(arrays, out=out)
    if out is not None:
        raise UnsupportedOpError("np.linalg.multi_dot(out=...) writes in place, which tracing does not support")
    if len(arrays) < 2:
        raise ShapeError("np.linalg.multi_dot: expecting at least two arrays")
    xs = [L.asnode(x) for x in arrays]
    first_vec, last_vec = xs[0].ndim == 1, xs[-1].ndim == 1
    if first_vec:
        xs[0] = L.reshape(xs[0], (1, xs[0].shape[0]))
    if last_vec:
        xs[-1] = L.reshape(xs[-1], (xs[-1].shape[0], 1))
    for i, x in enumerate(xs):
        if x.ndim != 2:
            raise ShapeError(f"np.linalg.multi_dot: array {i} has {x.ndim} dimensions; it needs 2 (or 1 at the ends)")
    dims = [xs[0].shape[0]] + [x.shape[1] for x in xs]
    for i in range(len(xs) - 1):
        if xs[i].shape[1] != xs[i + 1].shape[0]:
            raise ShapeError(f"np.linalg.multi_dot: shapes {xs[i].shape} (array {i}) and {xs[i + 1].shape} "
                             f"(array {i + 1}) not aligned")
    split = _chain_order(dims)

    def product(i: int, j: int) -> Node:
        if i == j:
            return xs[i]
        s = split[i][j]
        return L.matmul(product(i, s), product(s + 1, j))

    out_ = product(0, len(xs) - 1)
    if first_vec and last_vec:
        return L.reshape(out_, ())
    if first_vec:
        return L.reshape(out_, (out_.shape[1],))
    if last_vec:
        return L.reshape(out_, (out_.shape[0],))
    return out_


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.linalg.eig: eig, _np.linalg.eigvals: eigvals, _np.linalg.eigh: eigh, _np.linalg.eigvalsh: eigvalsh, _np.linalg.svd: svd, _np.linalg.qr: qr,
    _np.linalg.pinv: pinv, _np.linalg.lstsq: lstsq, _np.linalg.matrix_rank: matrix_rank,
    _np.linalg.matrix_power: matrix_power, _np.linalg.multi_dot: multi_dot, _np.linalg.cond: cond,
}
if hasattr(_np.linalg, "svdvals"):
    FUNCTIONS[_np.linalg.svdvals] = svdvals
