"""The complex LAPACK calls of compiled code: routines, working precisions, workspace sizes and scratch layout.

A complex linear-algebra primitive reaches the backend as a `lapack_parts` node on split parts
(`symgraph.ops.lapack_parts`; codegen/complex_split.py makes it). `plan_complex` plans its call:

| primitive | routine | working precision (as NumPy / SciPy) |
|---|---|---|
| cholesky | ?potrf ('U' on the row-major lower triangle, as the real one) | complex128 (np.linalg.cholesky) |
| triangular_solve | ?trsm (side 'R' on the row-major right-hand side, as the real one) | the input's (scipy's ?trtrs) |
| lu | ?getrf | the input's (scipy's lu_factor) |
| eigh, eigvalsh | ?heevd | complex128 (np.linalg.eigh) |
| svd, svdvals | ?gesdd | complex128 (np.linalg.svd) |
| qr | ?geqrf + ?ungqr | complex128 (np.linalg.qr) |
| eig, eigvals | ?geev: zgeev for a complex matrix, dgeev for a real one (its conjugate pairs assembled) | complex128 / float64 (np.linalg.eig) |

LAPACK reads complex matrices interleaved, (re, im) pairs in column-major order; the split
keeps a complex array as two real arrays. So every call copies its operands into interleaved
buffers of the arena's LAPACK scratch (one matrix at a time) and writes the result back as
parts (codegen/llvm/lapack_complex.py). Workspace sizes are LAPACK's own query (once per shape,
with ctypes), at least the documented minimum. The status slot and `lapack_error` are the real
calls' (`codegen.cpu.lapack`): the same `LinAlgError` as the evaluator's, at the user's line.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from symgraph.errors import UnsupportedOpError

from .lapack import LapackCall, _layout, _lib, symbol

__all__ = ["plan_complex", "COMPLEX_ROUTINES"]

#: The routine of each primitive (`of` of the lapack_parts node).
COMPLEX_ROUTINES = {"cholesky": "potrf", "triangular_solve": "trsm", "lu": "getrf", "eigh": "heevd",
                    "eigvalsh": "heevd", "svd": "gesdd", "svdvals": "gesdd", "qr": "geqrf", "eig": "geev",
                    "eigvals": "geev"}

_I = ctypes.c_int64
_Z = np.dtype(np.complex128).str


def _c(ch: str) -> Any:
    return ctypes.byref(ctypes.c_char(ch.encode()))


def _r(v: int) -> Any:
    return ctypes.byref(_I(v))


@functools.lru_cache(maxsize=None)
def _query(routine: str, dtype: str, *dims: Any) -> tuple[int, int, int]:
    """(lwork, lrwork, liwork) from LAPACK's workspace query (lwork = -1) of a complex routine (or dgeev)."""
    fn = getattr(_lib(routine, dtypes=(dtype,)), symbol(routine, dtype))
    work, rwork, iwork = (ctypes.c_double * 2)(), (ctypes.c_double * 2)(), (_I * 2)()
    d1, d2, d3 = (ctypes.c_double * 2)(), (ctypes.c_double * 2)(), (ctypes.c_double * 2)()
    info = _I(0)
    if routine == "heevd":
        jobz, uplo, n = dims
        fn(_c(jobz), _c(uplo), _r(n), d1, _r(max(n, 1)), d2, work, _r(-1), rwork, _r(-1), iwork, _r(-1),
           ctypes.byref(info), _I(1), _I(1))
        return int(work[0]), int(rwork[0]), int(iwork[0])
    if routine == "gesdd":
        jobz, m, n, ldu, ldvt = dims
        fn(_c(jobz), _r(m), _r(n), d1, _r(max(m, 1)), d2, d3, _r(ldu), d1, _r(ldvt), work, _r(-1), rwork, iwork,
           ctypes.byref(info), _I(1))
        return int(work[0]), 0, 0
    if routine == "geqrf":
        m, n = dims
        fn(_r(m), _r(n), d1, _r(max(m, 1)), d2, work, _r(-1), ctypes.byref(info))
        return int(work[0]), 0, 0
    if routine == "ungqr":
        m, n, k = dims
        fn(_r(m), _r(n), _r(k), d1, _r(max(m, 1)), d2, work, _r(-1), ctypes.byref(info))
        return int(work[0]), 0, 0
    if routine == "geev":
        jobvr, n = dims
        ldvr = max(n, 1) if jobvr == "V" else 1
        if np.dtype(dtype).kind == "c":
            fn(_c("N"), _c(jobvr), _r(n), d1, _r(max(n, 1)), d2, d3, _r(1), d1, _r(ldvr), work, _r(-1), rwork,
               ctypes.byref(info), _I(1), _I(1))
        else:
            fn(_c("N"), _c(jobvr), _r(n), d1, _r(max(n, 1)), d2, d3, d1, _r(1), d2, _r(ldvr), work, _r(-1),
               ctypes.byref(info), _I(1), _I(1))
        return int(work[0]), 0, 0
    raise AssertionError(routine)  # pragma: no cover


def _batch(shape: tuple) -> int:
    return int(np.prod(shape, dtype=np.int64))


def plan_complex(node: Any) -> LapackCall:
    """The LAPACK call of a lapack_parts node: its routine, working precision, workspace and scratch layout.

    The scratch holds one matrix's interleaved buffers at a time (counts below are reals: 2 per complex
    element); `LapackCall.kinds` marks the call as complex for the emitter and `dtype` is the routine's
    precision ("<c16", "<c8", or "<f8" for dgeev).

    Raises:
        UnsupportedOpError: the routine is missing from NumPy's OpenBLAS.
    """
    of, kinds = node.attr("of"), node.attr("kinds")
    params = dict(node.attr("params"))
    routine = COMPLEX_ROUTINES[of]
    x = node.inputs[0]
    part = x.dtype  # float32 or float64: the parts' (and the result's) dtype
    own = np.dtype(np.complex64 if part == np.float32 else np.complex128).str  # the input's complex precision
    m, n = x.shape[-2:]
    k = min(m, n)
    lead = tuple(x.shape[:-2])
    base = dict(batch=_batch(lead), m=m, n=n, batch_shape=lead, kinds=kinds)
    if routine in ("trsm", "getrf"):
        dt = own
    elif kinds == "r":  # eig of a real matrix: dgeev, as np.linalg.eig
        dt = np.dtype(np.float64).str
    else:
        dt = _Z
    _lib(routine, *(("ungqr",) if routine == "geqrf" else ()), dtypes=(dt,))
    c = LapackCall(node, of, routine, dtype=dt, **base)
    sz = np.dtype(dt).itemsize // (2 if np.dtype(dt).kind == "c" else 1)  # bytes of one real number
    if routine == "potrf":
        c.uplo = "U"
        _layout(c, [("a", 2 * n * n)], [], sz)
    elif routine == "trsm":
        c.uplo = "U" if params["lower"] else "L"
        c.trans, c.unit, c.nrhs = bool(params["trans"]), bool(params["unit_diagonal"]), node.shape[-1]
        _layout(c, [("a", 2 * n * n), ("b", 2 * n * c.nrhs)], [], sz)
    elif routine == "getrf":
        _layout(c, [("a", 2 * n * n)], [("ipiv", n)], sz)
    elif routine == "heevd":
        c.jobz, c.uplo = ("V" if of == "eigh" else "N"), params["uplo"]
        lw, lrw, liw = _query("heevd", dt, c.jobz, c.uplo, n)
        vec = c.jobz == "V"
        c.lwork = max(lw, 2 * n + n * n if vec else n + 1, 1)
        c.lrwork = max(lrw, 1 + 5 * n + 2 * n * n if vec else n, 1)
        c.liwork = max(liw, 3 + 5 * n if vec else 1, 1)
        _layout(c, [("a", 2 * n * n), ("w", n), ("work", 2 * c.lwork), ("rwork", c.lrwork)], [("iwork", c.liwork)],
                sz)
    elif routine == "gesdd":
        if of == "svdvals":
            c.jobz, c.ucols, c.vtrows, ldu, ldvt = "N", 1, 1, 1, 1
        elif params["full"]:
            c.jobz, c.ucols, c.vtrows, ldu, ldvt = "A", m, n, m, n
        else:
            c.jobz, c.ucols, c.vtrows, ldu, ldvt = "S", k, k, m, k
        lw, _, _ = _query("gesdd", dt, c.jobz, m, n, max(ldu, 1), max(ldvt, 1))
        mx = max(m, n)
        c.lwork = max(lw, 2 * k + mx if c.jobz == "N" else k * k + 2 * k + mx, 1)
        # NumPy's real workspace (umath_linalg), at least LAPACK's documented minimum
        c.lrwork = max(7 * k if c.jobz == "N" else k * max(5 * k + 7, 2 * mx + 2 * k + 1), 1)
        c.liwork = 8 * k
        _layout(c, [("a", 2 * m * n), ("s", k), ("u", 2 * max(ldu, 1) * c.ucols), ("vt", 2 * max(ldvt, 1) * n),
                    ("work", 2 * c.lwork), ("rwork", c.lrwork)], [("iwork", c.liwork)], sz)
    elif routine == "geqrf":
        c.q = q = node.shape[-1]
        c.lwork = max(_query("geqrf", dt, m, n)[0], n, 1)
        c.lwork2 = max(_query("ungqr", dt, m, q, k)[0], q, 1) if m and q else 1
        _layout(c, [("a", 2 * m * n), ("tau", 2 * k), ("qbuf", 2 * m * q), ("work", 2 * max(c.lwork, c.lwork2))],
                [], sz)
    elif routine == "geev":
        c.jobz = "V" if of == "eig" else "N"
        vec = c.jobz == "V"
        lw, _, _ = _query("geev", dt, c.jobz, n)
        if kinds == "r":  # dgeev: real and imaginary parts of w, real eigenvector columns
            c.lwork = max(lw, 4 * n if vec else 3 * n, 1)
            _layout(c, [("a", n * n), ("wr", n), ("wi", n), ("vr", n * n if vec else 1), ("vl", 1),
                        ("work", c.lwork)], [], sz)
        else:
            c.lwork = max(lw, 2 * n, 1)
            c.lrwork = max(2 * n, 1)
            _layout(c, [("a", 2 * n * n), ("w", 2 * n), ("vr", 2 * n * n if vec else 2), ("vl", 2),
                        ("work", 2 * c.lwork), ("rwork", c.lrwork)], [], sz)
    else:  # pragma: no cover - COMPLEX_ROUTINES names the routines above
        raise UnsupportedOpError(f"codegen: complex {of} has no LAPACK lowering")
    return c
