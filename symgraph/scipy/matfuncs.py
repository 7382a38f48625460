"""Matrix functions on traced values: `expm` (scipy.linalg.expm), exported by `symgraph.scipy.linalg`.

expm is the scaling-and-squaring method with the degree-13 Padé approximant (Higham, "The
scaling and squaring method for the matrix exponential revisited", SIAM J. Matrix Anal. Appl.
26(4), 2005, Algorithm 2.3, its last branch): s = max(0, ceil(log2(|A|_1 / theta_13))), the
approximant r_13(A / 2^s) = Q^-1 P from one solve, then s squarings. s depends on the values,
so the squarings are `MAX_SQUARINGS` steps each of which squares only while its count is below
s (a select; the skipped steps square a zero matrix, so neither values nor derivatives see an
overflow). Everything is matmul, solve and elementwise ops: it differentiates to any order and
batches over leading dimensions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import lax as L
from ..errors import api_call, DTypeError, ShapeError
from ..numpy import factorizations as _fz

__all__ = ["expm", "MAX_SQUARINGS"]

#: Squaring steps in the graph: matrices up to |A|_1 = theta_13 * 2^48 (about 1.5e15) are scaled
#: to Higham's bound; larger ones get 48 squarings and a less accurate Padé step.
MAX_SQUARINGS = 48

_THETA13 = 5.371920351148152
# Padé coefficients b_0..b_13 of degree 13 (Higham 2005, Table 2.3's approximant)
_B = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
      10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)


def _mm(a: Any, b: Any) -> Any:
    return L.matmul(a, b)


@api_call("scipy.linalg.expm")
def expm(A: Any) -> Any:  # noqa: N803  (SciPy's name)
    """scipy.linalg.expm: the matrix exponential of (..., n, n) float32/float64/complex64/complex128
    matrices (ints as float64). Complex A: holomorphic, JAX's convention (docs/complex.md).

    Values agree with SciPy's to rounding (SciPy picks a lower Padé degree for small norms; this
    always takes degree 13 with scaling, Higham 2005's most accurate branch). On plain arrays it
    computes eagerly with the same steps. Compiled code needs the solve's native lowering.

    Raises:
        ShapeError: not square, or rank < 2. DTypeError: a non-numeric dtype or float16.
    """
    a = L.asnode(A) if L.is_node(A) else np.asarray(A)
    if a.dtype.kind in "biu":
        a = L.cast(a, np.float64)
    if a.dtype not in (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64), np.dtype(np.complex128)):
        raise DTypeError(f"expm: dtype {a.dtype} is not supported (float32, float64, complex64 or complex128)")
    shape = tuple(a.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ShapeError(f"expm: needs square matrices (..., n, n), got shape {shape}")
    n = shape[-1]
    if n == 0:
        return L.cast(a, a.dtype)
    eye = np.eye(n, dtype=a.dtype)
    # s = max(0, ceil(log2(|A|_1 / theta13))) per matrix (piecewise constant: no derivative)
    mod = L.bind("complex_abs", a) if a.dtype.kind == "c" else L.unary("abs", a)
    norm1 = L.reduce("max", L.reduce("sum", mod, axis=-2), axis=-1, keepdims=True)
    norm1 = L.bind("stop_gradient", norm1) if L.is_node(norm1) else norm1
    safe = L.where(L.binary("gt", norm1, 0.0), norm1, 1.0)
    s = L.unary("ceil", L.unary("log2", L.div(safe, _THETA13)))
    s = L.binary("minimum", L.binary("maximum", s, 0.0), float(MAX_SQUARINGS))
    s = L.reshape(s, s.shape + (1,))                                   # (..., 1, 1)
    x = L.mul(a, L.binary("pow", 2.0, L.neg(s)))
    x2 = _mm(x, x)
    x4 = _mm(x2, x2)
    x6 = _mm(x4, x2)
    b = _B
    u_in = L.add(_mm(x6, L.add(L.add(L.mul(x6, b[13]), L.mul(x4, b[11])), L.mul(x2, b[9]))),
                 L.add(L.add(L.add(L.mul(x6, b[7]), L.mul(x4, b[5])), L.mul(x2, b[3])), L.mul(eye, b[1])))
    u = _mm(x, u_in)
    v = L.add(_mm(x6, L.add(L.add(L.mul(x6, b[12]), L.mul(x4, b[10])), L.mul(x2, b[8]))),
              L.add(L.add(L.add(L.mul(x6, b[6]), L.mul(x4, b[4])), L.mul(x2, b[2])), L.mul(eye, b[0])))
    r = _fz.solve(L.sub(v, u), L.add(v, u))                            # r_13 = (V - U)^-1 (V + U)
    for k in range(MAX_SQUARINGS):
        on = L.binary("lt", np.asarray(float(k), s.dtype), s)         # (..., 1, 1): square this step?
        live = L.where(on, r, 0.0)
        r = L.where(on, _mm(live, live), r)
    return r
