"""Op-table rows for lapack_parts (symgraph/ops/lapack_parts.py), the complex linear-algebra primitives on split
parts that compiled code runs as complex LAPACK calls; references are NumPy's / SciPy's functions of the assembled
complex matrices, results packed (2, ...) (real parts, then imaginary parts)."""

import numpy as np

from opcase import OpCase, real
from symgraph.ops.lapack_parts import lapack_parts


def _cd(re):
    return np.complex64 if np.dtype(re.dtype) == np.float32 else np.complex128


def _z(re, im):
    return re.astype(_cd(re)) + 1j * im.astype(_cd(re))


def _pack(y, d):
    return np.stack([y.real, y.imag]).astype(d)


def _hpd_part(part):
    """A sampler of one part of a fixed Hermitian positive definite matrix (both parts of the same matrix)."""
    def sample(rng, shape, dtype):
        r = np.random.default_rng(11)
        a = r.standard_normal(shape) + 1j * r.standard_normal(shape)
        h = a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])
        return (h.real if part == 0 else h.imag).astype(dtype)
    return sample


def _well(rng, shape, dtype):
    return (rng.standard_normal(shape) + 4.0 * np.eye(shape[-1])).astype(dtype)


def _bind(of, *parts, kinds, out, **params):
    return lapack_parts(*parts, of=of, params=tuple(params.items()), kinds=kinds, out=out)


def _cout(re):
    return _cd(re)


def _chol(re, im):
    return _bind("cholesky", re, im, kinds="c", out=_cout(re))


def _trsm(ar, ai, br, bi, lower, trans):
    return _bind("triangular_solve", ar, ai, br, bi, kinds="cc", out=_cout(ar), lower=lower, trans=trans,
                 unit_diagonal=False)


def _trsm_ref(ar, ai, br, bi, lower, trans):
    a = _z(ar, ai)
    t = np.tril(a) if lower else np.triu(a)
    return _pack(np.linalg.solve(np.swapaxes(t, -1, -2) if trans else t, _z(br, bi)), ar.dtype)


def _lu(re, im):
    return _bind("lu", re, im, kinds="c", out=_cout(re))


def _lu_ref(re, im):
    from scipy.linalg import lu_factor

    lu, piv = lu_factor(_z(re, im))
    return _pack(np.concatenate([lu, piv[None, :].astype(lu.dtype)], axis=0), re.dtype)


def _eigh(re, im):
    return _bind("eigh", re, im, kinds="c", out=_cout(re), uplo="L")


def _eigh_ref(re, im):
    w, v = np.linalg.eigh(_z(re, im))
    return _pack(np.concatenate([w[..., None, :].astype(v.dtype), v], axis=-2), re.dtype)


def _svdvals(re, im):
    return _bind("svdvals", re, im, kinds="c", out=re.dtype)


def _qr(re, im):
    return _bind("qr", re, im, kinds="c", out=_cout(re), complete=False)


def _qr_ref(re, im):
    q, r = np.linalg.qr(_z(re, im))
    return _pack(np.concatenate([q, np.swapaxes(r, -1, -2)], axis=-2), re.dtype)


def _eigvals(x):
    return _bind("eigvals", x, kinds="r", out=_cout(x))


CASES = [
    OpCase("lapack_parts", _chol, lambda re, im: _pack(np.linalg.cholesky(_z(re, im)), re.dtype),
           [(((4, 4), (4, 4)), {}), (((2, 3, 3), (2, 3, 3)), {})], (_hpd_part(0), _hpd_part(1)), order=0,
           name="cholesky"),
    OpCase("lapack_parts", _trsm, _trsm_ref, [(((3, 3), (3, 3), (3, 2), (3, 2)), {"lower": True, "trans": False}),
                                              (((2, 3, 3), (2, 3, 3), (2, 3, 1), (2, 3, 1)), {"lower": False, "trans": True})],
           (_well, real, real, real), order=0, name="triangular_solve"),
    OpCase("lapack_parts", _lu, _lu_ref, [(((4, 4), (4, 4)), {})], (real, real), order=0, name="lu"),
    OpCase("lapack_parts", _eigh, _eigh_ref, [(((3, 3), (3, 3)), {}), (((2, 4, 4), (2, 4, 4)), {})], (real, real),
           order=0, name="eigh"),
    OpCase("lapack_parts", _svdvals, lambda re, im: np.linalg.svd(_z(re, im), compute_uv=False).astype(re.dtype),
           [(((3, 5), (3, 5)), {})], (real, real), order=0, name="svdvals"),
    OpCase("lapack_parts", _qr, _qr_ref, [(((5, 3), (5, 3)), {})], (real, real), order=0, name="qr"),
    OpCase("lapack_parts", _eigvals, lambda x: _pack(np.linalg.eigvals(x.astype(np.float64)), x.dtype),
           [(((4, 4),), {})], (real,), order=0, name="eigvals"),
]
