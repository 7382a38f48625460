"""Elementwise elementary functions: exponentials, logarithms, roots, trigonometric and hyperbolic functions.

Also sigmoid, erf and logaddexp. Functions without a primitive of their own
(exp2, log2, sinh, ...) are built from primitives with their accuracy stated.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as _np

from .. import custom as _custom
from .. import lax as L
from ..ir import Node
from .arithmetic import (
    abs, add, divide, floor, maximum, minimum, multiply, negative, power, reciprocal, stop_gradient, subtract,
)
from .logic import greater, isnan, less, where

__all__ = [
    "arcsinh", "cos", "cosh", "erf", "exp", "exp2", "expm1", "log", "log10", "log1p", "log2", "logaddexp",
    "sigmoid", "sin", "sinh", "sqrt", "tan", "tanh",
]


def _unary(name: str, doc: str):
    def fn(x: Any) -> Any:
        return L.unary(name, x)

    fn.__name__ = name
    fn.__doc__ = doc
    return fn


exp = _unary("exp", "e**x, elementwise.")
log = _unary("log", "Natural logarithm.")
log1p = _unary("log1p", "log(1 + x), accurate for small x.")
expm1 = _unary("expm1", "exp(x) - 1, accurate for small x.")
sqrt = _unary("sqrt", "Square root; derivative +inf at 0.")
sin = _unary("sin", "Sine (radians).")
cos = _unary("cos", "Cosine (radians).")
tan = _unary("tan", "Tangent (radians).")
tanh = _unary("tanh", "Hyperbolic tangent.")
sigmoid = _unary("sigmoid", "Logistic function 1 / (1 + exp(-x)), stable for large |x|.")
erf = _unary("erf", "Error function.")
arcsinh = _unary("arcsinh", "Inverse hyperbolic sine; derivative 1 / sqrt(x**2 + 1).")


def log2(x: Any) -> Any:
    """Base-2 logarithm."""
    return multiply(log(x), 1.0 / math.log(2.0))


def log10(x: Any) -> Any:
    """Base-10 logarithm."""
    return multiply(log(x), 1.0 / math.log(10.0))


def exp2(x: Any) -> Any:
    """2**x as exp((x - n) ln 2) * 2**n1 * 2**n2, n = floor(x), n1 = floor(n/2), n2 = n - n1.

    exp(x ln 2) was up to 609 ulp off near x = 965 (the rounding of x ln 2 is
    amplified by |x|); here the exponential only sees x - n in [0, 1), and the
    powers of two are exact (pow of 2 to an integer is exact on both
    backends). Scaling in two halves keeps the intermediate finite and rounds
    once into the subnormal range. x is clamped to [-1200, 1200] first, so
    exp2(inf) = inf and exp2(-inf) = 0 (NaN stays NaN). Shape of x; float32
    stays float32, integers become float64. Accuracy (tests/test_ops.py):
    within 1 ulp of NumPy in float64, 4 ulp in float32. The reduction to
    [0, 1) and exact scaling by 2**n follow Cody & Waite (1980), ch. 6.
    """
    x = minimum(maximum(L.to_float(x), -1200.0), 1200.0)
    n = floor(x)
    n1 = floor(multiply(n, 0.5))
    e = exp(multiply(subtract(x, n), math.log(2.0)))
    return multiply(multiply(e, power(2.0, n1)), power(2.0, subtract(n, n1)))


#: |x| from which sinh and cosh drop exp(-|x|) (relative size e**-40 < 2**-57, below float64's rounding)
#: and square exp(|x|/2), so that they reach the largest finite value where NumPy's do.
_HYPERBOLIC_LARGE = 20.0


def _exp_half_squared(a: Any) -> Any:
    """exp(a) / 2 as t * (t / 2) with t = exp(a / 2): finite up to the float type's overflow of sinh/cosh."""
    t = exp(multiply(a, 0.5))
    return multiply(t, multiply(t, 0.5))


def _sinh(x: Any) -> Any:
    a = abs(x)
    e = expm1(a)
    small = multiply(add(e, divide(e, add(e, 1.0))), 0.5)
    v = where(less(a, _HYPERBOLIC_LARGE), small, _exp_half_squared(a))
    return where(less(x, 0.0), negative(v), where(greater(x, 0.0), v, x))


def _cosh(x: Any) -> Any:
    a = abs(x)
    ea = exp(a)
    small = multiply(add(ea, reciprocal(ea)), 0.5)
    return where(less(a, _HYPERBOLIC_LARGE), small, _exp_half_squared(a))


_sinh_rule = _custom.custom_jvp(_sinh)
_cosh_rule = _custom.custom_jvp(_cosh)


# derivative rules sinh' = cosh, cosh' = sinh: exact, and no cancellation in the derivative of the
# cosh formula (whose own derivative would be (e**a - e**-a)/2 near 0)
_sinh_rule.defjvps(lambda t, out, x: multiply(t, _cosh_rule(x)))


_cosh_rule.defjvps(lambda t, out, x: multiply(t, _sinh_rule(x)))


def sinh(x: Any) -> Any:
    """Hyperbolic sine, within a few ulp of NumPy over the whole range; derivative cosh(x).

    With a = |x| and E = expm1(a): sinh(a) = (E + E / (E + 1)) / 2, exact
    algebra with no cancellation for small a (sinh(1e-20) = 1e-20); for
    a >= 20 it is exp(a/2) * exp(a/2) / 2, which stays finite wherever the
    true value is (float32 sinh(89) = 2.2e38). The sign of x (also of -0.0
    and NaN) is restored. Reference: the identity of fdlibm's s_sinh.c.
    """
    x = L.to_float(x)
    return _sinh_rule(x) if isinstance(x, Node) else _np.sinh(x)


def cosh(x: Any) -> Any:
    """Hyperbolic cosine, within a few ulp of NumPy over the whole range; derivative sinh(x).

    (exp(a) + 1/exp(a)) / 2 with a = |x| (no cancellation); for a >= 20,
    exp(a/2) * exp(a/2) / 2, finite wherever the true value is.
    """
    x = L.to_float(x)
    return _cosh_rule(x) if isinstance(x, Node) else _np.cosh(x)


def logaddexp(x: Any, y: Any) -> Any:
    """log(exp(x) + exp(y)), stable: shifted by the stopped-gradient maximum.

    Its derivatives are the softmax weights exp(x - out), exp(y - out) at every
    point (1/2 each at x == y, no tie convention involved).
    """
    x, y = L.to_float(x), L.to_float(y)
    m = stop_gradient(maximum(x, y))
    m = where(isnan(subtract(m, m)), 0.0, m)  # infinite maxima: shift by 0 instead of creating NaN
    return add(log(add(exp(subtract(x, m)), exp(subtract(y, m)))), m)


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
    "exp": exp, "log": log, "log1p": log1p, "expm1": expm1, "log2": log2, "log10": log10, "exp2": exp2,
    "sqrt": sqrt, "sin": sin, "cos": cos, "tan": tan, "tanh": tanh, "sinh": sinh, "cosh": cosh, "arcsinh": arcsinh,
    "logaddexp": logaddexp,
}

FUNCTIONS = {
    _np.exp: exp, _np.log: log, _np.sqrt: sqrt, _np.tanh: tanh,
}
