"""Op-table rows for the spectral primitives (symgraph/ops/spectral.py, symgraph/ops/eig.py): eigh, eigvalsh, svd,
svdvals, qr, eig, eigvals (the "complex" rows on complex64/complex128 matrices).

Each row applies the primitive through `symgraph.numpy.decompositions` and returns a function of its results
that does not depend on LAPACK's choice of signs (w v^2, u^2 s, q^2 r^2), so finite differences, the VJP/JVP
identity and batching all see a well-defined derivative.
"""

from __future__ import annotations

import numpy as np

from opcase import OpCase, cplx, real
from symgraph.numpy import decompositions as D


def _eigh(lib):
    def f(x):
        w, v = lib.eigh(x)
        return v * np.conj(v) * w[..., None, :]  # |v|^2 w: invariant to each eigenvector's sign (phase)
    return f


def _svd(lib):
    def f(x):
        u, s, _ = lib.svd(x, full_matrices=False)
        return u * np.conj(u) * s[..., None, :]
    return f


def _qr(lib):
    def f(x):
        q, r = lib.qr(x)
        return (q * q) @ (r * r)
    return f


def _cdt(x):
    return np.complex64 if x.dtype in (np.float32, np.complex64) else np.complex128


def _eig_ref(x):
    w, v = np.linalg.eig(x)  # real arrays when every eigenvalue is real: symgraph's are always complex
    return w.astype(_cdt(x)), v.astype(_cdt(x))


def _eigvals_ref(x):
    return np.linalg.eigvals(x).astype(_cdt(x))


def _svdvals_ref(x):
    return np.linalg.svd(x, compute_uv=False)


_SQUARE = [(((3, 3),), {}), (((2, 3, 3),), {})]
_RECT = [(((4, 3),), {}), (((3, 4),), {}), (((2, 3, 3),), {})]

CASES = [
    OpCase("eigh", _eigh(D), _eigh(np.linalg), _SQUARE, (real,)),
    OpCase("eigvalsh", D.eigvalsh, np.linalg.eigvalsh, _SQUARE, (real,)),
    OpCase("eigh", _eigh(D), _eigh(np.linalg), _SQUARE, (cplx,), name="complex"),
    OpCase("eigvalsh", D.eigvalsh, np.linalg.eigvalsh, _SQUARE, (cplx,), name="complex"),
    OpCase("svd", _svd(D), _svd(np.linalg), _RECT, (real,), grad_variants=3),
    OpCase("svdvals", D.svdvals, _svdvals_ref, _RECT, (real,), grad_variants=3),
    OpCase("svd", _svd(D), _svd(np.linalg), _RECT, (cplx,), grad_variants=3, name="complex"),
    # eig: the eigenvectors themselves (their derivative keeps ?geev's normalization: unit norm, largest part real)
    OpCase("eig", lambda x: tuple(D.eig(x)), _eig_ref, _SQUARE, (real,)),
    OpCase("eig", lambda x: tuple(D.eig(x)), _eig_ref, _SQUARE, (cplx,), name="complex"),
    OpCase("eigvals", D.eigvals, _eigvals_ref, _SQUARE, (real,)),
    OpCase("eigvals", D.eigvals, _eigvals_ref, _SQUARE, (cplx,), name="complex"),
    OpCase("svdvals", D.svdvals, _svdvals_ref, _RECT, (cplx,), grad_variants=3, name="complex"),
    OpCase("qr", _qr(D), _qr(np.linalg), _RECT, (real,), grad_variants=3),
    OpCase("qr", lambda x: tuple(D.qr(x)), lambda x: tuple(np.linalg.qr(x)), _RECT, (cplx,), grad_variants=3,
           name="complex"),  # Q and R themselves: R's real diagonal fixes the phases
]
