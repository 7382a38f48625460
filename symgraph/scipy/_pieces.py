"""The pieces symgraph.scipy's special functions are built from: float promotion, constants like an
argument, elementwise exp/log/log1p/sqrt/floor/abs, Horner evaluation, Bernoulli numbers.

Private to the symgraph.scipy package (special.py and bessel.py import it).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from .. import lax as L
from .. import numpy as snp
from ..errors import DTypeError


def _f(x: Any) -> Any:
    """x as a float array or node (integers and booleans become float64, as SciPy's ufuncs do)."""
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return np.float64(x)
    if not L.is_node(x):
        x = np.asarray(x)
    dt = np.dtype(x.dtype)
    if dt.kind in "biu":
        return L.cast(x, np.float64)
    if dt.kind == "c":
        raise DTypeError("symgraph.scipy.special: complex arguments are not supported")
    return x


def _promote(op: str, *xs: Any) -> list:
    """Operands promoted (Python scalars weakly, as NumPy 2) and broadcast to one float dtype and shape."""
    xs = [x if isinstance(x, (int, float)) and not isinstance(x, bool) else _f(x) for x in xs]
    out = L.promote_and_broadcast(op, *xs)
    if np.dtype(out[0].dtype).kind in "biu":
        out = [L.cast(x, np.float64) for x in out]
    return out


def _c(v: float, like: Any) -> np.ndarray:
    """The constant v in the dtype of `like` (a where of two constants must not promote float32)."""
    return np.asarray(v, dtype=like.dtype)


def _exp(x):
    return L.unary("exp", x)


def _log(x):
    return L.unary("log", x)


def _log1p(x):
    return L.unary("log1p", x)


def _sqrt(x):
    return L.unary("sqrt", x)


def _floor(x):
    return L.unary("floor", x, float_op=False)


_where = snp.where


def _abs(x):
    return L.unary("abs", x, float_op=False)


def _horner(t, coefs):
    """c[0] + c[1] t + c[2] t**2 + ... (coefs from the constant term up)."""
    p = coefs[-1] + 0.0 * t
    for c in reversed(coefs[:-1]):
        p = p * t + c
    return p


def _bernoulli(n: int) -> list[Fraction]:
    """B_0 .. B_n (B_1 = -1/2), exactly, by the classical recurrence sum_k C(m+1, k) B_k = 0."""
    b = [Fraction(1)]
    for m in range(1, n + 1):
        b.append(-sum(math.comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return b


_B = _bernoulli(60)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_EULER = 0.57721566490153286061


def _poly_hi_first(t, coefs):
    return _horner(t, list(reversed(coefs)))


_SQRT1_2 = math.sqrt(0.5)
