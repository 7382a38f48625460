"""Special-function primitives (the SciPy family, `symgraph.scipy.special`).

Only functions that the C math library provides become primitives here, so
the LLVM backend lowers them natively through their `MathFn` (glibc's
libmvec variant inside vectorized loops, the scalar libm function
elsewhere). Every other special function (gammaln, digamma, erfinv, the
Bessel functions, ...) is a composite of existing primitives written in
`symgraph.scipy.special`; composites need no op and compile natively.
"""

from __future__ import annotations

import math

import numpy as np

from .. import lax as L
from .core import MathFn, Op, float_only, register, same_shape

_erfc_vec = np.vectorize(math.erfc, otypes=[np.float64])


def _erfc(x):
    return _erfc_vec(x).astype(x.dtype) if x.size else x.copy()


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erfc_vjp(ct, node):
    x = node.inputs[0]
    return (ct * (-_TWO_OVER_SQRT_PI * L.unary("exp", -(x * x))),)


def _erfc_jvp(tangents, node):
    (t,) = tangents
    x = node.inputs[0]
    return None if t is None else t * (-_TWO_OVER_SQRT_PI * L.unary("exp", -(x * x)))


register(Op("erfc", 1, "elementwise", same_shape, float_only, _erfc, _erfc_vjp, _erfc_jvp,
            doc="complementary error function 1 - erf(x), accurate in the right tail (C99 erfc); "
                "derivative -2/sqrt(pi) exp(-x**2)",
            math=MathFn("erfc"), neg_zero="never"))
