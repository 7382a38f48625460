"""Spectral decompositions as primitives: eigh, eigvalsh, svd, svdvals, qr (float32/float64 and complex64/complex128,
batched; the complex rules are the real ones with conjugate transposes, under JAX's convention: docs/linalg.md,
"Complex matrices"; eigenvalues and singular values of complex matrices are real, stored in the packed complex
result).

Every op works on the last two axes and is batched over the leading ones.
IR nodes have one output, so the decompositions with several results pack
them into one array, which `symgraph.numpy.decompositions` slices apart
(views, free in compiled code):

- ``eigh(A)`` -> (..., n+1, n): row 0 the eigenvalues w (ascending), rows
  1..n the eigenvector matrix V (column j belongs to w[j]). The input is
  taken as symmetric: the op is eigh((A + A^T)/2), and the trace-time caller
  builds a symmetric input from the triangle NumPy reads (`uplo`).
- ``svd(A)`` -> (..., m+1+n, p): rows 0..m-1 U, row m the singular values
  s (descending), rows m+1.. V = Vt^T. Reduced (``full=False``, p = min(m, n))
  or full (``full=True``, p = max(m, n), U (m, m) and V (n, n) padded with
  zero columns, s with zeros).
- ``qr(A)`` -> (..., m+n, q): rows 0..m-1 Q (m, q), rows m.. R^T (n, q);
  q = min(m, n) (reduced) or m (``complete=True``).
- ``eigvalsh(A)`` -> (..., n) and ``svdvals(A)`` -> (..., min(m, n)) compute
  the values only (LAPACK jobz='N'); their derivatives bind eigh / svd.

Values are NumPy's (the evaluator calls np.linalg, the LLVM backend the same
LAPACK routines, ?syevd, ?gesdd, ?geqrf + ?orgqr), so the sign of every
eigenvector and singular vector is LAPACK's. A non-finite input, or a LAPACK
failure (info != 0), raises `symgraph.errors.LinAlgError`.

Derivatives (written in graph ops, so they differentiate again):

- eigh: Giles, "Collected matrix derivative results for forward and reverse
  mode AD" (2008), sec. 3.1; Seeger, Hetzel, Dai, Meissner, Lawrence,
  "Auto-differentiating linear algebra" (2017), sec. 3.
- svd: Townsend, "Differentiating the singular value decomposition" (2016),
  including the (I - U U^T) and (I - V V^T) terms of non-square matrices.
- qr: Walter & Lehmann, "Algorithmic differentiation of linear algebra
  functions with application in optimum experimental design" (2018), and
  Roberts & Roberts, "QR and LQ decomposition matrix backpropagation
  algorithms for square, wide, and deep matrices" (2020), for m >= n.

Degeneracy convention: the terms 1/(w_j - w_i) (eigh) and 1/(s_j^2 - s_i^2)
(svd) are set to 0 where |w_j - w_i| <= `GAP_RTOL` * n * eps * max|w| (the
same with s^2), and 1/s_i to 0 where s_i <= n * eps * max(s). Then the
derivative of any function invariant to the choice of basis inside a
degenerate eigenspace (sums of eigenvalues, projectors, U diag(s) V^T) is
finite and correct; the derivative of an individual eigenvector of a
repeated eigenvalue is not defined, and this convention gives a finite
value for it, not a meaningful one. QR's rules invert R: a diagonal entry below n * eps * max|r_jj|
(rank deficiency, where QR has no derivative) is inverted as 0. The extra columns of the full SVD and of
the complete QR of a tall matrix are not unique (any orthonormal basis of a complement): as in
PyTorch, their cotangent is ignored and their tangent is zero; the other outputs differentiate as
in the reduced decomposition.
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..errors import LinAlgError, ShapeError
from .batch import rebind
from .core import Op, inexact, register
from .factor import conj, mH

__all__ = ["GAP_RTOL", "eigh_flops", "svd_flops", "qr_flops"]

#: Relative gap (in units of n * eps * max|w|) below which two eigenvalues (squared singular values) count as
#: equal in the derivative rules: their 1/gap term is 0.
GAP_RTOL = 1.0


# ----- NumPy reference implementations (with LAPACK failures as LinAlgError) -----


def _check_finite(a: np.ndarray, op: str) -> None:
    if a.size and not np.isfinite(a).all():
        raise LinAlgError(f"{op}: the matrix contains NaN or infinity")


def _lapack(op: str, fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except np.linalg.LinAlgError as e:
        raise LinAlgError(f"{op}: LAPACK failed: {e}") from None


def _eigh_impl(a, *, uplo):
    _check_finite(a, "eigh")
    w, v = _lapack("eigh", np.linalg.eigh, a, UPLO=uplo)
    return np.concatenate([w[..., None, :], v], axis=-2)


def _eigvalsh_impl(a, *, uplo):
    _check_finite(a, "eigvalsh")
    return _lapack("eigvalsh", np.linalg.eigvalsh, a, UPLO=uplo)


def _svd_impl(a, *, full):
    _check_finite(a, "svd")
    m, n = a.shape[-2:]
    u, s, vt = _lapack("svd", np.linalg.svd, a, full_matrices=full)
    v = np.conj(np.swapaxes(vt, -1, -2))  # V with A = U S Vᴴ (Vt's conjugate transpose)
    if not full:
        return np.concatenate([u, s[..., None, :], v], axis=-2)
    p = max(m, n)
    out = np.zeros(a.shape[:-2] + (m + 1 + n, p), a.dtype)
    out[..., :m, :m] = u
    out[..., m, :s.shape[-1]] = s
    out[..., m + 1:, :n] = v
    return out


def _svdvals_impl(a):
    _check_finite(a, "svdvals")
    return _lapack("svdvals", np.linalg.svd, a, compute_uv=False)


def _qr_impl(a, *, complete):
    _check_finite(a, "qr")
    q, r = _lapack("qr", np.linalg.qr, a, mode="complete" if complete else "reduced")
    return np.concatenate([q, np.swapaxes(r, -1, -2)], axis=-2)


# ----- shape rules -----


def _matrix(s, op):
    if len(s) < 2:
        raise ShapeError(f"{op}: needs a matrix (..., m, n), got shape {s}")
    return s[:-2], s[-2], s[-1]


def _square(s, op):
    lead, m, n = _matrix(s, op)
    if m != n:
        raise ShapeError(f"{op}: needs square matrices, got shape {s}")
    return lead, n


def _eigh_shape(s, *, uplo):
    lead, n = _square(s, "eigh")
    return lead + (n + 1, n)


def _eigvalsh_shape(s, *, uplo):
    lead, n = _square(s, "eigvalsh")
    return lead + (n,)


def _svd_shape(s, *, full):
    lead, m, n = _matrix(s, "svd")
    return lead + (m + 1 + n, max(m, n) if full else min(m, n))


def _svdvals_shape(s):
    lead, m, n = _matrix(s, "svdvals")
    return lead + (min(m, n),)


def _qr_shape(s, *, complete):
    lead, m, n = _matrix(s, "qr")
    return lead + (m + n, m if complete else min(m, n))


# ----- graph-op helpers for the rules -----


def rows(x, lo: int, hi: int):
    """Rows [lo, hi) of x along axis -2 (a slice node)."""
    nd = x.ndim
    return L.bind("slice", x, starts=(0,) * (nd - 2) + (lo, 0), stops=x.shape[:-2] + (hi, x.shape[-1]),
                  steps=(1,) * nd)


def cols(x, lo: int, hi: int):
    """Columns [lo, hi) of x along axis -1."""
    nd = x.ndim
    return L.bind("slice", x, starts=(0,) * (nd - 1) + (lo,), stops=x.shape[:-1] + (hi,), steps=(1,) * nd)


def row(x, i: int):
    """Row i of x along axis -2, that axis dropped: (..., k)."""
    r = rows(x, i, i + 1)
    return L.reshape(r, x.shape[:-2] + (x.shape[-1],))


def mT(x):
    """The matrix transpose of the last two axes."""
    return L.swap_last(x)


def mm(a, b):
    """Batched matrix product (operands of equal rank and batch)."""
    return L.bind("matmul", a, b)


def as_row(v):
    """(..., k) -> (..., 1, k)."""
    return L.reshape(v, v.shape[:-1] + (1, v.shape[-1]))


def as_col(v):
    """(..., k) -> (..., k, 1)."""
    return L.reshape(v, v.shape + (1,))


def diag_part(x):
    """The diagonal (..., k) of square matrices (..., k, k)."""
    k = x.shape[-1]
    return L.reduce("sum", L.mul(x, np.eye(k, dtype=x.dtype)), axis=-1)


def diag_embed(v):
    """Diagonal matrices (..., k, k) with diagonal v (..., k)."""
    k = v.shape[-1]
    return L.mul(as_row(v), np.eye(k, dtype=v.dtype))


def tri_mask(x, k: int = 0, lower: bool = True):
    """x with the entries outside the triangle zeroed (a select, so NaN and inf outside do not leak)."""
    m, n = x.shape[-2:]
    mask = np.tri(m, n, k, dtype=bool) if lower else ~np.tri(m, n, k - 1, dtype=bool)
    return L.where(mask, x, 0.0)


def _abs(x):
    """|x| (real), for real or complex x."""
    return L.bind("complex_abs", x) if x.dtype.kind == "c" else L.unary("abs", x)


def _safe_recip(d, tol):
    """1/d where |d| > tol, else 0 (a double select: the masked branch never divides by ~0)."""
    small = L.binary("le", _abs(d), tol)
    return L.where(small, 0.0, L.div(1.0, L.where(small, 1.0, d)))


def inverse_gaps(w, n_scale: int):
    """F (..., k, k) with F_ij = 1/(w_j - w_i), 0 on the diagonal and where the gap is below the tolerance."""
    eps = float(np.finfo(w.dtype).eps)
    d = L.sub(as_row(w), as_col(w))                    # d_ij = w_j - w_i
    scale = L.reduce("max", L.unary("abs", w), axis=-1, keepdims=True)
    tol = L.mul(as_col(scale), GAP_RTOL * n_scale * eps)  # (..., 1, 1)
    return _safe_recip(d, L.broadcast_to(tol, d.shape))


def safe_inverse_values(s, n_scale: int):
    """1/s_i where s_i > n * eps * max(s), else 0 (the pseudo-inverse convention)."""
    eps = float(np.finfo(s.dtype).eps)
    scale = L.reduce("max", L.unary("abs", s), axis=-1, keepdims=True)
    tol = L.broadcast_to(L.mul(scale, n_scale * eps), s.shape)
    return _safe_recip(s, tol)


def _sym(x):
    """The symmetric (Hermitian, for complex x) part (x + xᴴ) / 2."""
    return L.mul(L.add(x, mH(x)), 0.5)


def real_values(x):
    """The real part of a packed row of real values (eigenvalues, singular values) of a complex decomposition."""
    return L.bind("real", x) if x.dtype.kind == "c" else x


def _as_dtype(x, dtype):
    return L.cast(x, dtype) if x.dtype != dtype else x


def _values_dtype(d, **kw):
    """The dtype of eigenvalues / singular values: real (float32 for complex64, float64 for complex128)."""
    d = inexact(d)
    return np.dtype(np.float32 if d == np.complex64 else np.float64) if d.kind == "c" else d


def _pack(*parts):
    return parts[0] if len(parts) == 1 else L.bind("concatenate", *parts, axis=parts[0].ndim - 2)


# ----- eigh -----


def eigh_parts(node):
    """(w, V) of an eigh node (w real also for a complex Hermitian matrix)."""
    n = node.shape[-1]
    return real_values(row(node, 0)), rows(node, 1, n + 1)


def _eigh_jvp(tangents, node):
    # dw = diag(Vᴴ dA V) (real), dV = V (F ∘ Vᴴ dA V), dA = (t + tᴴ)/2 (Giles 2008 sec. 3.1; Hermitian: the
    # gauge Vᴴ dV with a zero diagonal, as JAX's)
    (t,) = tangents
    if t is None:
        return None
    w, v = eigh_parts(node)
    n = w.shape[-1]
    vtv = mm(mH(v), mm(_sym(t), v))                    # V^H dA V
    dw = real_values(diag_part(vtv))
    dv = mm(v, L.mul(inverse_gaps(w, n), vtv))
    return _pack(_as_dtype(as_row(dw), node.dtype), dv)


def _eigh_vjp(ct, node):
    # Abar = sym(V (diag(wbar) + F ∘ Vᵀ Vbar) Vᵀ); complex (JAX's cotangents, no conjugation): the conjugate of the
    # rule for the gradients conj(wbar), conj(Vbar) with conjugate transposes, sym(conj(V) (...) Vᵀ)
    w, v = eigh_parts(node)
    n = w.shape[-1]
    wbar, vbar = real_values(row(ct, 0)), rows(ct, 1, n + 1)
    inner = L.add(diag_embed(wbar), L.mul(inverse_gaps(w, n), mm(mT(v), vbar)))
    return (_sym(mm(conj(v), mm(inner, mT(v)))),)


def eigh_flops(n: int, vectors: bool = True) -> int:
    """Flops of a symmetric eigendecomposition of order n: ~9 n^3 with vectors, ~4/3 n^3 values only
    (Golub & Van Loan, Matrix Computations, 4th ed., sec. 8.3)."""
    return int((9 if vectors else 4 / 3) * n ** 3)


#: The lowering fact of every spectral op: compiled code calls LAPACK (codegen/cpu/lapack.py, codegen/llvm/lapack.py).
_LAPACK = {"lowering": "lapack"}


def _batch_count(node) -> int:
    return int(np.prod(node.inputs[0].shape[:-2], dtype=np.int64))


def _same_batch(node, bargs, size):
    return rebind(node, [bargs[0]])


register(Op("eigh", 1, "opaque", _eigh_shape, inexact, _eigh_impl, _eigh_vjp, _eigh_jvp,
            doc="symmetric (Hermitian) eigendecomposition packed as (..., n+1, n): row 0 the eigenvalues (ascending; "
                "real, stored in the complex dtype for complex input), rows 1.. the eigenvectors (LAPACK ?syevd / ?heevd)",
            flops=lambda node: _batch_count(node) * eigh_flops(node.shape[-1]), batch=_same_batch, extra=_LAPACK))


def _eigvalsh_vjp(ct, node):
    # V diag(wbar) Vᵀ; complex: conj(V) diag(wbar) Vᵀ (JAX's cotangent of a real output is real)
    a = node.inputs[0]
    _, v = eigh_parts(L.bind("eigh", a, uplo=node.attr("uplo")))
    return (mm(L.mul(conj(v), as_row(ct)), mT(v)),)


def _eigvalsh_jvp(tangents, node):
    # dw_j = Re v_jᴴ dA v_j
    (t,) = tangents
    if t is None:
        return None
    _, v = eigh_parts(L.bind("eigh", node.inputs[0], uplo=node.attr("uplo")))
    return real_values(L.reduce("sum", L.mul(conj(v), mm(_sym(t), v)), axis=-2))


register(Op("eigvalsh", 1, "opaque", _eigvalsh_shape, _values_dtype, _eigvalsh_impl, _eigvalsh_vjp, _eigvalsh_jvp,
            doc="eigenvalues of a symmetric matrix, ascending (LAPACK ?syevd, values only)",
            flops=lambda node: _batch_count(node) * eigh_flops(node.shape[-1], vectors=False), batch=_same_batch, extra=_LAPACK))


# ----- svd -----


def _first_cols(x, k: int):
    return x if x.shape[-1] == k else cols(x, 0, k)


def _pad_cols(x, p: int):
    """x with zero columns appended up to p columns (the tangent of the full SVD's extra columns)."""
    k = x.shape[-1]
    if k == p:
        return x
    zeros = L.broadcast_to(L.constant(np.zeros((), x.dtype)), x.shape[:-1] + (p - k,))
    return L.bind("concatenate", x, zeros, axis=x.ndim - 1)


def svd_parts(node):
    """(U, s, V) of an svd node, the first k = min(m, n) columns of each (all of a reduced SVD):
    U (..., m, k), s (..., k) (real, also for a complex matrix), V (..., n, k), A = U diag(s) Vᴴ."""
    m, n = node.inputs[0].shape[-2:]
    k = min(m, n)
    return (_first_cols(rows(node, 0, m), k), real_values(_first_cols(row(node, m), k)),
            _first_cols(rows(node, m + 1, m + 1 + n), k))


def _svd_jvp(tangents, node):
    # Townsend 2016 with conjugate transposes: dP = Uᴴ dA V, ds = Re diag(dP), dU = U (F ∘ (dP S + S dPᴴ)),
    # dV = V (F ∘ (S dP + dPᴴ S)), F_ij = 1/(s_j² - s_i²); complex: plus U diag(i Im(dP_ii) / s_i), the phase that
    # keeps dA = dU S Vᴴ + U dS Vᴴ + U S dVᴴ in the gauge diag(Vᴴ dV) = 0 (as JAX's)
    (t,) = tangents
    if t is None:
        return None
    u, s, v = svd_parts(node)
    m, n = node.inputs[0].shape[-2:]
    k = min(m, n)
    cplx = node.dtype.kind == "c"
    dp = mm(mH(u), mm(t, v))                          # U^H dA V (k, k)
    ds = real_values(diag_part(dp))
    f = inverse_gaps(L.mul(s, s), max(m, n))
    srow = as_row(s)
    dps = L.mul(dp, srow)                             # dP S
    sdp = L.mul(as_col(s), dp)                        # S dP
    du = mm(u, L.mul(f, L.add(dps, mH(dps))))
    dv = mm(v, L.mul(f, L.add(sdp, mH(sdp))))
    sinv = as_row(safe_inverse_values(s, max(m, n)))
    if cplx:
        phase = L.mul(as_row(L.bind("complex", L.zeros_like(ds), L.bind("imag", diag_part(dp)))), sinv)
        du = L.add(du, L.mul(u, phase))
    if m > k:
        tv = mm(t, v)
        du = L.add(du, L.mul(L.sub(tv, mm(u, mm(mH(u), tv))), sinv))
    if n > k:
        tu = mm(mH(t), u)
        dv = L.add(dv, L.mul(L.sub(tu, mm(v, mm(mH(v), tu))), sinv))
    p = node.shape[-1]  # full SVD: the extra columns get a zero tangent (their cotangent is ignored)
    return _pack(_pad_cols(du, p), _pad_cols(_as_dtype(as_row(ds), node.dtype), p), _pad_cols(dv, p))


def _svd_vjp(ct, node):
    # the transpose of the JVP. Complex: with JAX's cotangents (no conjugation), the conjugate of the rule for the
    # gradients G = conj(cotangent) in the inner product Re tr(Xᴴ Y):
    # Abar = U (J S + diag(sbar) + S K + diag(i Im(Uᴴ G_U)_ii / s_i)) Vᴴ + (I - U Uᴴ) G_U S^-1 Vᴴ
    #        + U S^-1 G_Vᴴ (I - V Vᴴ), J = F ∘ (Uᴴ G_U - G_Uᴴ U), K = F ∘ (Vᴴ G_V - G_Vᴴ V)
    u, s, v = svd_parts(node)
    m, n = node.inputs[0].shape[-2:]
    k = min(m, n)
    cplx = node.dtype.kind == "c"
    # full SVD: the cotangent of U's (V's) columns past k is ignored (they are any basis of a complement)
    ubar, sbar = conj(_first_cols(rows(ct, 0, m), k)), real_values(_first_cols(row(ct, m), k))
    vbar = conj(_first_cols(rows(ct, m + 1, m + 1 + n), k))
    f = inverse_gaps(L.mul(s, s), max(m, n))
    utu = mm(mH(u), ubar)
    vtv = mm(mH(v), vbar)
    j = L.mul(f, L.sub(utu, mH(utu)))                 # F o (U^H Ubar - Ubar^H U)
    kk = L.mul(f, L.sub(vtv, mH(vtv)))                # F o (V^H Vbar - Vbar^H V)
    inner = L.add(L.add(L.mul(j, as_row(s)), diag_embed(sbar)), L.mul(as_col(s), kk))
    sinv = as_row(safe_inverse_values(s, max(m, n)))
    if cplx:
        im = L.mul(L.bind("imag", diag_part(utu)), L.reshape(sinv, s.shape))
        inner = L.add(inner, diag_embed(L.bind("complex", L.zeros_like(im), im)))
    abar = mm(u, mm(inner, mH(v)))
    if m > k:  # (I - U U^H) Ubar S^-1 V^H
        pu = L.sub(ubar, mm(u, utu))
        abar = L.add(abar, mm(L.mul(pu, sinv), mH(v)))
    if n > k:  # U S^-1 Vbar^H (I - V V^H)
        pv = L.sub(vbar, mm(v, vtv))
        abar = L.add(abar, mm(L.mul(u, sinv), mH(pv)))
    return (conj(abar),)


def svd_flops(m: int, n: int, vectors: bool = True) -> int:
    """Flops of an SVD of an m x n matrix (Golub & Van Loan, sec. 8.6, R-SVD): 4 m^2 n + 8 m n^2 + 9 n^3 with
    U and V (m >= n; transposed otherwise), 4 m n^2 - 4/3 n^3 for the values."""
    m, n = max(m, n), min(m, n)
    return int(4 * m * m * n + 8 * m * n * n + 9 * n ** 3) if vectors else int(4 * m * n * n - 4 / 3 * n ** 3)


register(Op("svd", 1, "opaque", _svd_shape, inexact, _svd_impl, _svd_vjp, _svd_jvp,
            doc="singular value decomposition packed as (..., m+1+n, p): rows U, then s (descending; real, stored in "
                "the complex dtype for complex input), then V = Vtᴴ (LAPACK ?gesdd)",
            flops=lambda node: _batch_count(node) * svd_flops(*node.inputs[0].shape[-2:]), batch=_same_batch, extra=_LAPACK))


def _svdvals_vjp(ct, node):
    # U diag(sbar) Vᴴ's conjugate, conj(U) diag(sbar) Vᵀ (U diag(sbar) Vᵀ for real matrices)
    u, _, v = svd_parts(L.bind("svd", node.inputs[0], full=False))
    return (mm(L.mul(conj(u), as_row(ct)), mT(v)),)


def _svdvals_jvp(tangents, node):
    # ds_i = Re u_iᴴ dA v_i
    (t,) = tangents
    if t is None:
        return None
    u, _, v = svd_parts(L.bind("svd", node.inputs[0], full=False))
    return real_values(L.reduce("sum", L.mul(conj(u), mm(t, v)), axis=-2))


register(Op("svdvals", 1, "opaque", _svdvals_shape, _values_dtype, _svdvals_impl, _svdvals_vjp, _svdvals_jvp,
            doc="singular values, descending (LAPACK ?gesdd, values only)",
            flops=lambda node: _batch_count(node) * svd_flops(*node.inputs[0].shape[-2:], vectors=False),
            batch=_same_batch, extra=_LAPACK))


# ----- qr -----


def qr_parts(node):
    """(Q, R) of a qr node: Q (..., m, q), R (..., q, n)."""
    m, n = node.inputs[0].shape[-2:]
    return rows(node, 0, m), mT(rows(node, m, m + n))


def _qr_rule_parts(node):
    """(Q, R) with k = min(m, n) columns of Q and rows of R: the complete QR's extra columns of Q (any basis
    of a complement) take no part in the derivative rules."""
    m, n = node.inputs[0].shape[-2:]
    k = min(m, n)
    q, r = qr_parts(node)
    return _first_cols(q, k), (r if r.shape[-2] == k else rows(r, 0, k))


def _tall_qr_jvp(q, r, t):
    # Walter & Lehmann (2018): C = Q^T dA R^-1, Omega = tril(C, -1) - tril(C, -1)^T,
    # dQ = Q Omega + (I - Q Q^T) dA R^-1, dR = (C - Omega) R. Complex (R's diagonal real, as LAPACK's): with
    # conjugate transposes, and Omega's diagonal i Im(C_ii), so that dR's diagonal stays real
    dar = mm(t, upper_inverse(r))                      # dA R^-1
    c = mm(mH(q), dar)
    low = tri_mask(c, -1)
    omega = L.sub(low, mH(low))
    if c.dtype.kind == "c":
        omega = L.add(omega, diag_embed(L.bind("complex", L.zeros_like(diag_part(L.bind("imag", c))),
                                               diag_part(L.bind("imag", c)))))
    return L.add(mm(q, L.sub(omega, c)), dar), mm(L.sub(c, omega), r)


def _tall_qr_vjp(q, r, qbar, rbar):
    # M = R Rbar^T - Qbar^T Q, Abar = (Qbar + Q copyltu(M)) R^-T (copyltu: the lower triangle mirrored).
    # Complex: qbar, rbar are the gradients (conjugate cotangents) and the result is a gradient: with conjugate
    # transposes, copyltu(M) = tril(M, -1) + tril(M, -1)ᴴ + Re diag(M) (the transpose of the JVP's Omega)
    mmat = L.sub(mm(r, mH(rbar)), mm(mH(qbar), q))
    if mmat.dtype.kind == "c":
        low = tri_mask(mmat, -1)
        re = diag_part(L.bind("real", mmat))
        copyltu = L.add(L.add(low, mH(low)), diag_embed(L.bind("complex", re, L.zeros_like(re))))
    else:
        copyltu = L.add(tri_mask(mmat, 0), mT(tri_mask(mmat, -1)))
    return mm(L.add(qbar, mm(q, copyltu)), mH(upper_inverse(r)))


def _qr_jvp(tangents, node):
    (t,) = tangents
    if t is None:
        return None
    q, r = _qr_rule_parts(node)
    m, n = node.inputs[0].shape[-2:]
    if m >= n:
        dq, dr = _tall_qr_jvp(q, r, t)
    else:  # A = [X | Y], X square: X = Q R_X, R_Y = Q^T Y (Roberts & Roberts 2020)
        y = cols(node.inputs[0], m, n)
        dq, drx = _tall_qr_jvp(q, cols(r, 0, m), cols(t, 0, m))
        dry = L.add(mm(mH(dq), y), mm(mH(q), cols(t, m, n)))
        dr = L.bind("concatenate", drx, dry, axis=t.ndim - 1)
    width = node.shape[-1]  # complete QR of a tall matrix: zero tangent for Q's extra columns, R's zero rows
    return _pack(_pad_cols(dq, width), _pad_cols(mT(dr), width))


def _qr_vjp(ct, node):
    q, r = _qr_rule_parts(node)
    m, n = node.inputs[0].shape[-2:]
    k = min(m, n)
    # complex: the gradients conj(cotangent), the rule with conjugate transposes, the result conjugated back
    qbar, rbar = conj(_first_cols(rows(ct, 0, m), k)), conj(mT(_first_cols(rows(ct, m, m + n), k)))
    if m >= n:
        return (conj(_tall_qr_vjp(q, r, qbar, rbar)),)
    y = cols(node.inputs[0], m, n)
    rbar_y = cols(rbar, m, n)
    ybar = mm(q, rbar_y)
    xbar = _tall_qr_vjp(q, cols(r, 0, m), L.add(qbar, mm(y, mH(rbar_y))), cols(rbar, 0, m))
    return (conj(L.bind("concatenate", xbar, ybar, axis=ct.ndim - 1)),)


def _axis_slice(x, axis: int, start: int, stop: int, step: int):
    nd = x.ndim
    axis %= nd
    return L.bind("slice", x, starts=tuple(start if j == axis else 0 for j in range(nd)),
                  stops=tuple(stop if j == axis else x.shape[j] for j in range(nd)),
                  steps=tuple(step if j == axis else 1 for j in range(nd)))


def upper_inverse(r):
    """R^-1 of upper-triangular R (..., n, n) in graph ops, by block doubling: with the inverses of the
    diagonal blocks of size s known, [[A, B], [0, C]]^-1 = [[A^-1, -A^-1 B C^-1], [0, C^-1]] gives those of
    size 2s, every pair at once as one batched product (Higham, Accuracy and Stability of Numerical
    Algorithms, 2nd ed., sec. 14.2, the recursive method). R is padded with an identity block to a power of
    two P; about 15 log2(P) nodes; exact, differentiable again.

    A diagonal entry |r_ii| <= n * eps * max|r_jj| (a rank-deficient R) is inverted as 0, the convention
    of `safe_inverse_values`, so QR's derivative stays finite (it is not defined there)."""
    n = r.shape[-1]
    lead = r.shape[:-2]
    nl = len(lead)
    P = 1 << max(0, (n - 1).bit_length())
    if P != n:  # [[R, 0], [0, I]]
        pad_cols = L.broadcast_to(L.constant(np.zeros((), r.dtype)), lead + (n, P - n))
        eye = L.broadcast_to(L.constant(np.concatenate([np.zeros((P - n, n)), np.eye(P - n)], 1).astype(r.dtype)),
                             lead + (P - n, P))
        r = L.bind("concatenate", L.bind("concatenate", r, pad_cols, axis=nl + 1), eye, axis=nl)
    eps = float(np.finfo(r.dtype).eps)
    d = diag_part(r)                                                   # (..., P)
    scale = L.reduce("max", _abs(d), axis=-1, keepdims=True)
    inv = _safe_recip(d, L.broadcast_to(L.mul(scale, n * eps), d.shape))
    inv = L.reshape(inv, lead + (P, 1, 1))                             # inverses of the 1 x 1 diagonal blocks
    s = 1
    while s < P:
        nb = P // s
        # the blocks of R of size s as (..., nb * nb, s, s), row-block major
        blocks = L.reshape(L.transpose(L.reshape(r, lead + (nb, s, nb, s)),
                                       tuple(range(nl)) + (nl, nl + 2, nl + 1, nl + 3)), lead + (nb * nb, s, s))
        upper = _axis_slice(blocks, nl, 1, nb * nb, 2 * (nb + 1))      # blocks (2i, 2i + 1): (..., nb/2, s, s)
        a_inv = _axis_slice(inv, nl, 0, nb, 2)
        c_inv = _axis_slice(inv, nl, 1, nb, 2)
        tr = L.neg(mm(a_inv, mm(upper, c_inv)))
        zero = L.zeros_like(tr)
        top = L.bind("concatenate", a_inv, tr, axis=nl + 2)
        bottom = L.bind("concatenate", zero, c_inv, axis=nl + 2)
        inv = L.bind("concatenate", top, bottom, axis=nl + 1)          # (..., nb/2, 2s, 2s)
        s *= 2
    inv = L.reshape(inv, lead + (P, P))
    return inv if P == n else cols(rows(inv, 0, n), 0, n)


def qr_flops(m: int, n: int, q: int) -> int:
    """Flops of a Householder QR (Golub & Van Loan, sec. 5.2): 2 n^2 (m - n/3) for R (m >= n), about as many
    again to form the q columns of Q."""
    k = min(m, n)
    return int(2 * k * k * (max(m, n) - k / 3) + 4 * m * q * k - 2 * (m + q) * k * k + 4 / 3 * k ** 3)


register(Op("qr", 1, "opaque", _qr_shape, inexact, _qr_impl, _qr_vjp, _qr_jvp,
            doc="QR decomposition packed as (..., m+n, q): rows Q, then R^T (LAPACK ?geqrf + ?orgqr)",
            flops=lambda node: _batch_count(node) * qr_flops(*node.inputs[0].shape[-2:], node.shape[-1]),
            batch=_same_batch, extra=_LAPACK))
