"""General (non-symmetric) eigendecomposition as primitives: eig and eigvals, real or complex input, complex output.

- ``eig(A)`` -> (..., n+1, n), complex: row 0 the eigenvalues w, rows 1..n the right eigenvectors V (column j
  belongs to w[j]), A V = V diag(w), as `np.linalg.eig` returns them (LAPACK ?geev: each column of unit 2-norm,
  its largest component real). A real A gives complex64/complex128 results always (NumPy returns real arrays
  when every eigenvalue happens to be real: a traced program cannot choose a dtype on values, so symgraph
  follows JAX here).
- ``eigvals(A)`` -> (..., n), complex: the eigenvalues alone (?geev with jobvr 'N', as `np.linalg.eigvals`).

Derivatives (graph ops, so they differentiate again; the solves with V are `lu` and `triangular_solve`):

- Forward (Giles, "Collected matrix derivative results for forward and reverse mode AD", 2008, sec. 3.1):
  with M = V^-1 dA V, dw = diag(M) and dV = V (F ∘ M) + V diag(c), F_ij = 1/(w_j - w_i) (0 on the diagonal),
  where c fixes LAPACK's normalization: Re(v_jᴴ dv_j) = 0 (unit norm) and Im(dv_kj) = 0 at the component k of
  largest modulus (kept real). So the derivative of V itself is that of what NumPy returns (away from ties of
  the largest component), and every function invariant to the eigenvectors' scaling is exact too.
- Reverse: the transpose of that map, under JAX's convention (docs/complex.md): with h = diag(Vᵀ V̄) and Ê zero
  but for Ê_kj = i Im(h_j) / v_kj,  Ā = V^-T (diag(w̄) + F ∘ Vᵀ (V̄ - conj(V) diag(Re h) - Ê)) Vᵀ, its real
  part for a real A. (autograd's grad_eig has the same form without the Ê term.)

Repeated eigenvalues: F_ij is 0 where |w_j - w_i| <= n·eps·max|w| (`spectral.GAP_RTOL` scales it), so the
derivative stays finite; eigenvectors are not differentiable there and the value is a convention. A defective
matrix (a singular V) makes the solves with V raise LinAlgError.

Compiled code: the outputs are complex, so the LLVM backend's complex split makes each node a
`lapack_parts` node (symgraph/ops/lapack_parts.py), run as zgeev, or dgeev for a real matrix with NumPy's
conjugate pairs assembled (codegen/llvm/lapack_complex.py).
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..errors import DTypeError, ShapeError
from .batch import rebind
from .core import Op, register
from .factor import conj, lu_solve
from .spectral import GAP_RTOL, as_row, diag_embed, diag_part, mT, mm, row, rows, _check_finite, _lapack

__all__ = ["eig_parts", "eig_flops"]


def _complex_dtype(d, **kw):
    d = np.dtype(d)
    if d in (np.float32, np.complex64):
        return np.dtype(np.complex64)
    if d in (np.float64, np.complex128):
        return np.dtype(np.complex128)
    raise DTypeError(f"eig: needs float32, float64, complex64 or complex128 matrices, got {d}")


def _square(s, op):
    if len(s) < 2 or s[-1] != s[-2]:
        raise ShapeError(f"{op}: needs square matrices (..., n, n), got shape {s}")
    return s[:-2], s[-1]


def _eig_shape(s):
    lead, n = _square(s, "eig")
    return lead + (n + 1, n)


def _eigvals_shape(s):
    lead, n = _square(s, "eigvals")
    return lead + (n,)


def _eig_impl(a):
    _check_finite(a, "eig")
    w, v = _lapack("eig", np.linalg.eig, a)
    d = _complex_dtype(a.dtype)
    return np.concatenate([w[..., None, :].astype(d), v.astype(d)], axis=-2)


def _eigvals_impl(a):
    _check_finite(a, "eigvals")
    return _lapack("eigvals", np.linalg.eigvals, a).astype(_complex_dtype(a.dtype))


def eig_parts(node):
    """(w, V) of an eig node: w (..., n), V (..., n, n), both complex."""
    n = node.shape[-1]
    return row(node, 0), rows(node, 1, n + 1)


def _inverse_gaps(w):
    """F_ij = 1/(w_j - w_i), 0 on the diagonal and where |w_j - w_i| <= n·eps·max|w| (complex w)."""
    n = w.shape[-1]
    eps = float(np.finfo(np.float32 if w.dtype == np.complex64 else np.float64).eps)
    d = L.sub(as_row(w), L.reshape(w, w.shape + (1,)))            # d_ij = w_j - w_i
    r = L.bind("complex_abs", d)
    scale = L.reduce("max", L.bind("complex_abs", w), axis=-1, keepdims=True)
    tol = L.broadcast_to(L.mul(L.reshape(scale, scale.shape + (1,)), GAP_RTOL * n * eps), r.shape)
    small = L.binary("le", r, tol)
    return L.where(small, 0.0, L.div(1.0, L.where(small, 1.0, d)))


def _largest(v):
    """(one-hot mask (..., n, n) of the component of largest modulus of each column, that component's real part
    (..., n)): the entry ?geev keeps real (the first of equal moduli, as LAPACK's i?amax)."""
    n = v.shape[-1]
    mag = L.bind("stop_gradient", L.bind("real", L.mul(v, conj(v))))
    k = L.bind("argmax", mag, axis=v.ndim - 2)                    # (..., n)
    hot = L.binary("eq", L.reshape(np.arange(n, dtype=np.int64), (n, 1)), as_row(k))
    vk = L.reduce("sum", L.where(hot, L.bind("real", v), 0.0), axis=-2)
    return hot, vk


def _phase_fix(v, du):
    """diag(c) with c_j = Re(v_jᴴ du_j) + i Im(du_kj) / v_kj: dV = du - V diag(c) keeps ?geev's normalization."""
    hot, vk = _largest(v)
    a = L.bind("real", L.reduce("sum", L.mul(conj(v), du), axis=-2))
    b = L.div(L.reduce("sum", L.where(hot, L.bind("imag", du), 0.0), axis=-2), vk)
    return L.bind("complex", a, b)


def _tangent_in(t, dtype):
    return L.cast(t, dtype) if t.dtype != dtype else t


def _eig_jvp(tangents, node):
    (t,) = tangents
    if t is None:
        return None
    w, v = eig_parts(node)
    t = _tangent_in(t, node.dtype)
    m = lu_solve(L.bind("lu", v), mm(t, v))                        # V^-1 dA V
    dw = diag_part(m)
    du = mm(v, L.mul(_inverse_gaps(w), m))
    dv = L.sub(du, L.mul(v, as_row(_phase_fix(v, du))))
    return L.bind("concatenate", as_row(dw), dv, axis=node.ndim - 2)


def _to_input(abar, node):
    return L.bind("real", abar) if node.inputs[0].dtype.kind != "c" else abar


def _eig_vjp(ct, node):
    w, v = eig_parts(node)
    n = w.shape[-1]
    wbar, vbar = row(ct, 0), rows(ct, 1, n + 1)
    h = L.reduce("sum", L.mul(v, vbar), axis=-2)                  # diag(V^T Vbar)
    hot, vk = _largest(v)
    e_hat = L.where(hot, as_row(L.bind("complex", L.zeros_like(vk), L.div(L.bind("imag", h), vk))), 0.0)
    g = L.sub(L.sub(vbar, L.mul(conj(v), as_row(L.cast(L.bind("real", h), v.dtype)))), e_hat)
    inner = L.add(diag_embed(wbar), L.mul(_inverse_gaps(w), mm(mT(v), g)))
    abar = lu_solve(L.bind("lu", v), mm(inner, mT(v)), trans=True)  # V^-T (...) V^T
    return (_to_input(abar, node),)


def eig_flops(n: int, vectors: bool = True) -> int:
    """Flops of a nonsymmetric eigendecomposition of order n by the QR algorithm: ~25 n^3 with the eigenvectors,
    ~10 n^3 for the eigenvalues (Golub & Van Loan, Matrix Computations, 4th ed., sec. 7.5.6)."""
    return (25 if vectors else 10) * n ** 3


def _batch_count(node) -> int:
    return int(np.prod(node.inputs[0].shape[:-2], dtype=np.int64))


def _same_batch(node, bargs, size):
    return rebind(node, [bargs[0]])


register(Op("eig", 1, "opaque", _eig_shape, _complex_dtype, _eig_impl, _eig_vjp, _eig_jvp,
            doc="general eigendecomposition packed as (..., n+1, n), complex: row 0 the eigenvalues, rows 1.. the "
                "right eigenvectors (unit norm, largest component real; LAPACK ?geev)",
            flops=lambda node: _batch_count(node) * eig_flops(node.shape[-1]), batch=_same_batch))


def _eigvals_vjp(ct, node):
    # V^-T diag(wbar) V^T
    _, v = eig_parts(L.bind("eig", node.inputs[0]))
    abar = lu_solve(L.bind("lu", v), L.mul(L.reshape(ct, ct.shape + (1,)), mT(v)), trans=True)
    return (_to_input(abar, node),)


def _eigvals_jvp(tangents, node):
    # dw = diag(V^-1 dA V)
    (t,) = tangents
    if t is None:
        return None
    _, v = eig_parts(L.bind("eig", node.inputs[0]))
    t = _tangent_in(t, node.dtype)
    return diag_part(lu_solve(L.bind("lu", v), mm(t, v)))


register(Op("eigvals", 1, "opaque", _eigvals_shape, _complex_dtype, _eigvals_impl, _eigvals_vjp, _eigvals_jvp,
            doc="eigenvalues of a general matrix, complex (LAPACK ?geev, values only)",
            flops=lambda node: _batch_count(node) * eig_flops(node.shape[-1], vectors=False), batch=_same_batch))
