"""Elementwise elementary functions: exponentials, logarithms, roots, trigonometric and hyperbolic functions.

Also sigmoid, erf, logaddexp, logaddexp2, sinc and the angle conversions. Functions
without a primitive of their own (exp2, sinh, deg2rad, sinc, ...) are built from
primitives with their accuracy stated.
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
    "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "cbrt", "cos", "cosh", "deg2rad",
    "degrees", "erf", "exp", "exp2", "expm1", "hypot", "log", "log10", "log1p", "log2", "logaddexp", "logaddexp2",
    "rad2deg", "radians", "sigmoid", "sin", "sinc", "sinh", "sqrt", "tan", "tanh",
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


arcsin = _unary("arcsin", "Inverse sine, in [-pi/2, pi/2]; derivative 1 / sqrt((1 - x)(1 + x)), +inf at +-1.")
arccos = _unary("arccos", "Inverse cosine, in [0, pi]; derivative -1 / sqrt((1 - x)(1 + x)), -inf at +-1.")
arctan = _unary("arctan", "Inverse tangent, in (-pi/2, pi/2); derivative 1 / (1 + x**2).")
arccosh = _unary("arccosh", "Inverse hyperbolic cosine (x >= 1); derivative 1 / sqrt((x - 1)(x + 1)), +inf at 1.")
arctanh = _unary("arctanh", "Inverse hyperbolic tangent (|x| <= 1); derivative 1 / ((1 - x)(1 + x)).")
cbrt = _unary("cbrt", "Real cube root (cbrt(-8) = -2); derivative 1 / (3 cbrt(x)**2), +inf at 0.")
log2 = _unary("log2", "Base-2 logarithm, exact at powers of two (a primitive: libm's log2); derivative 1 / (x ln 2).")
log10 = _unary("log10", "Base-10 logarithm (a primitive: libm's log10); derivative 1 / (x ln 10).")


def _binary_math(name: str, doc: str):
    def fn(x1: Any, x2: Any) -> Any:
        return L.binary(name, x1, x2, float_op=True)

    fn.__name__ = name
    fn.__doc__ = doc
    return fn


arctan2 = _binary_math("arctan2", """Angle of the point (x2, x1) in radians, in [-pi, pi] (C's atan2, signed zeros).

Operands broadcast and promote as NumPy's (integers give float64). Derivatives
x2 / r**2 in x1 and -x1 / r**2 in x2 with r = hypot(x1, x2); at (0, 0), where
the angle is not continuous, both are 0 (docs/differentiation.md).""")
hypot = _binary_math("hypot", """sqrt(x1**2 + x2**2) without overflow or underflow (C's hypot).

Derivatives x1 / r and x2 / r; at (0, 0), the kink of the cone, both are 0
(the convention of abs'(0) and of norm at 0; docs/differentiation.md).""")


def _angle_factor(x: Any, num: float, den: float) -> tuple[Any, Any]:
    """x as float and the factor num/den computed as NumPy does: in x's float type, num and den rounded first."""
    x = L.to_float(x)
    dt = L.result_dtype(x)
    return x, _np.asarray(dt.type(num) / dt.type(den))


def deg2rad(x: Any) -> Any:
    """Degrees to radians: x * (pi / 180), bit for bit as NumPy (the factor rounded in x's float type).

    Integers give float64; float32 stays float32. Derivative pi / 180.
    """
    x, c = _angle_factor(x, math.pi, 180.0)
    return multiply(x, c)


def rad2deg(x: Any) -> Any:
    """Radians to degrees: x * (180 / pi), bit for bit as NumPy (float32: float32(180) / float32(pi)).

    Integers give float64; float32 stays float32. Derivative 180 / pi.
    """
    x, c = _angle_factor(x, 180.0, math.pi)
    return multiply(x, c)


radians = deg2rad
degrees = rad2deg


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


def _logaddexp2_value(x: Any, y: Any) -> Any:
    # NumPy's npy_logaddexp2: x == y gives x + 1 (also for infinities); otherwise the larger plus
    # log2(1 + 2**-|x - y|), that log computed as log1p(.) * log2(e); NaN propagates
    d = subtract(x, y)
    big = where(greater(d, 0.0), x, y)
    tail = multiply(log1p(exp2(negative(abs(d)))), 1.0 / math.log(2.0))
    out = add(big, tail)
    out = where(isnan(d), d, out)
    return where(L.binary("eq", x, y), add(x, 1.0), out)


_logaddexp2_rule = _custom.custom_jvp(_logaddexp2_value)
# the derivatives are the weights 2**(x - out) and 2**(y - out) (1/2 each at x == y), written through exp2 so
# that they differentiate again
_logaddexp2_rule.defjvps(lambda t, out, x, y: multiply(t, exp2(subtract(x, out))),
                         lambda t, out, x, y: multiply(t, exp2(subtract(y, out))))


def logaddexp2(x: Any, y: Any) -> Any:
    """log2(2**x + 2**y) as NumPy computes it (npy_logaddexp2), with exact derivatives.

    The larger operand plus log1p(2**-|x - y|) * log2(e); x == y gives x + 1
    (so logaddexp2(inf, inf) = inf). Operands broadcast and promote (integers
    give float64). Derivatives 2**(x - out) and 2**(y - out): the softmax
    weights in base 2, 1/2 each at x == y (no tie convention involved).
    """
    x, y = L.to_float(x), L.to_float(y)
    if not (isinstance(x, Node) or isinstance(y, Node)):
        return _np.logaddexp2(x, y)
    dt = L.result_dtype(x, y)
    shape = _np.broadcast_shapes(_np.shape(x), _np.shape(y))
    x, y = (L.broadcast_to(L.cast(v, dt) if isinstance(v, Node) else L.constant(_np.asarray(v, dt)), shape)
            for v in (x, y))
    return _logaddexp2_rule(x, y)


#: |pi x| below which sinc's derivative is its Taylor polynomial: (cos t - sin t / t) / x cancels there.
_SINC_TAYLOR = 0.1


def _sinc_value(x: Any) -> Any:
    # NumPy's formula: y = pi * where(x == 0, 1e-20, x); sin(y) / y
    y = multiply(math.pi, where(L.binary("eq", x, 0.0), 1.0e-20, x))
    return divide(sin(y), y)


_sinc_rule = _custom.custom_jvp(_sinc_value)


def _sinc_derivative(x: Any, out: Any) -> Any:
    # sinc'(x) = (cos(pi x) - sinc(x)) / x; for |t| = |pi x| < 0.1 its Taylor series
    # pi * (-t/3 + t**3/30 - t**5/840 + t**7/45360) (coefficient (-1)**n 2n / (2n+1)! of t**(2n-1)), which
    # gives sinc'(0) = 0 and sinc''(0) = -pi**2 / 3 exactly; both branches are NaN-free to any order
    t = multiply(math.pi, x)
    small = less(abs(t), _SINC_TAYLOR)
    t2 = multiply(t, t)
    series = multiply(multiply(t, add(-1.0 / 3.0, multiply(t2, add(1.0 / 30.0, multiply(
        t2, add(-1.0 / 840.0, multiply(t2, 1.0 / 45360.0))))))), math.pi)
    xs = where(small, 1.0, x)
    direct = divide(subtract(cos(multiply(math.pi, xs)), _sinc_rule(xs)), xs)
    return where(small, series, direct)


_sinc_rule.defjvps(lambda t, out, x: multiply(t, _sinc_derivative(x, out)))


def sinc(x: Any) -> Any:
    """The normalized sinc sin(pi x) / (pi x), 1 at 0, as NumPy computes it.

    Values are NumPy's formula (pi * where(x == 0, 1e-20, x) into sin(y) / y);
    float32 stays float32, integers give float64. The derivative is a rule of its
    own, (cos(pi x) - sinc(x)) / x, replaced by its Taylor polynomial for
    |pi x| < 0.1 where the formula cancels, so that sinc'(0) = 0 and
    sinc''(0) = -pi**2 / 3 as the true function's (any order differentiates).
    """
    x = L.to_float(x)
    return _sinc_rule(x) if isinstance(x, Node) else _np.sinc(x)


# ----- complex arguments: NumPy's formulas on the real and imaginary parts -----
# Each is composed of real operations on z = x + iy and `complex(re, im)`, so it differentiates under JAX's
# convention, to any order, and compiles natively through the complex split like any real composite.
# log10, log2, exp2: NumPy's own formulas (bit for bit, given the complex log / exp); expm1, log1p, sinh, cosh:
# NumPy's formulas on this package's real functions (within 2 eps normwise of NumPy's, tests/test_complex_ufuncs.py).


def _is_c(x: Any) -> bool:
    return isinstance(x, (Node, _np.ndarray, _np.generic)) and x.dtype.kind == "c" or isinstance(x, complex)


def _parts(z: Any) -> tuple[Any, Any]:
    z = z if isinstance(z, Node) else _np.asarray(z)
    return L.bind("real", z), L.bind("imag", z)


def _cplx(re: Any, im: Any) -> Any:
    return L.bind("complex", re, im)


def _scaled_log(z: Any, c: float) -> Any:
    lz = L.unary("log", z if isinstance(z, Node) else _np.asarray(z))
    re, im = _parts(lz)
    return _cplx(multiply(re, c), multiply(im, c))


def _times_sin(f: Any, fx: Any, y: Any) -> Any:
    """f(x) sin(y) with f(x) * y at y == 0 (a signed zero even where f(x) overflows, and the derivative
    f(x) in y there), f(x) replaced by its sign where it is infinite in that branch only."""
    finite = where(L.binary("lt", abs(fx), _np.inf), fx, _np.asarray(f, fx.dtype) if not isinstance(f, Node) else f)
    return where(L.binary("eq", y, 0.0), multiply(finite, y), multiply(fx, sin(y)))


def _complex_expm1(z: Any) -> Any:
    x, y = _parts(z)
    a = sin(multiply(y, 0.5))
    re = subtract(multiply(expm1(x), cos(y)), multiply(2.0, multiply(a, a)))
    return _cplx(re, multiply(exp(x), sin(y)))  # NumPy's formula: inf * 0 = NaN on the real axis past overflow


def _complex_log1p(z: Any) -> Any:
    x, y = _parts(z)
    x1 = add(x, 1.0)
    return _cplx(log(hypot(x1, y)), arctan2(y, x1))


def _complex_sinh(z: Any) -> Any:
    x, y = _parts(z)
    return _cplx(multiply(sinh(x), cos(y)), _times_sin(1.0, cosh(x), y))


def _complex_cosh(z: Any) -> Any:
    x, y = _parts(z)
    sx = sinh(x)
    sign = where(L.binary("lt", x, 0.0), _np.asarray(-1.0, x.dtype), _np.asarray(1.0, x.dtype))
    return _cplx(multiply(cosh(x), cos(y)), _times_sin(sign, sx, y))


def _complex_exp2(z: Any) -> Any:
    x, y = _parts(z)
    ln2 = math.log(2.0)
    return L.unary("exp", _cplx(multiply(x, ln2), multiply(y, ln2)))


# The inverse functions: Kahan's formulas ("Branch cuts for complex elementary functions, or much ado
# about nothing's sign bit", in The State of the Art in Numerical Analysis, 1987, procedures ARCSIN, ARCCOS,
# ARCCOSH) from the complex square root, with their branch cuts and signed zeros; arctanh from the classic
# real/imaginary split (Abramowitz & Stegun 4.6.22 rearranged: re = log1p(4x / ((1-x)^2 + y^2)) / 4,
# im = atan2(2y, (1-x)(1+x) - y^2) / 2); arcsinh(z) = -i arcsin(iz), arctan(z) = -i arctanh(iz).


def _csqrt(z: Any) -> Any:
    return L.unary("sqrt", z)


def _add_c(z: Any, c: float, sign: float = 1.0) -> Any:
    """c + sign * z, on the parts (no rounding of the other part)."""
    x, y = _parts(z)
    return _cplx(add(c, multiply(sign, x)), multiply(sign, y))


def _complex_arcsin(z: Any) -> Any:
    x, _ = _parts(z)
    s1m, s1p = _csqrt(_add_c(z, 1.0, -1.0)), _csqrt(_add_c(z, 1.0))  # sqrt(1 - z), sqrt(1 + z)
    (a, b), (c, d) = _parts(s1m), _parts(s1p)
    # Re(s1m s1p) = a c - b d; Im(conj(s1m) s1p) = a d - b c
    return _cplx(arctan(divide(x, subtract(multiply(a, c), multiply(b, d)))),
                 arcsinh(subtract(multiply(a, d), multiply(b, c))))


def _complex_arccos(z: Any) -> Any:
    s1m, s1p = _csqrt(_add_c(z, 1.0, -1.0)), _csqrt(_add_c(z, 1.0))
    (a, b), (c, d) = _parts(s1m), _parts(s1p)
    # 2 atan(Re s1m / Re s1p) + i asinh(Im(conj(s1p) s1m)), Im(conj(s1p) s1m) = c b - d a
    return _cplx(multiply(2.0, arctan(divide(a, c))), arcsinh(subtract(multiply(c, b), multiply(d, a))))


def _complex_arccosh(z: Any) -> Any:
    sm, sp = _csqrt(_add_c(z, -1.0)), _csqrt(_add_c(z, 1.0))  # sqrt(z - 1), sqrt(z + 1)
    (a, b), (c, d) = _parts(sm), _parts(sp)
    # asinh(Re(conj(sm) sp)) + i 2 atan(Im sm / Re sp), Re(conj(sm) sp) = a c + b d
    return _cplx(arcsinh(add(multiply(a, c), multiply(b, d))), multiply(2.0, arctan(divide(b, c))))


def _complex_arctanh(z: Any) -> Any:
    x, y = _parts(z)
    y2 = multiply(y, y)

    def half_plane(t: Any) -> Any:  # the real part for t = x >= 0, where log1p's argument is >= 0 (no cancellation)
        omt = subtract(1.0, t)
        return multiply(0.25, log1p(divide(multiply(4.0, t), add(multiply(omt, omt), y2))))

    re = where(less(x, 0.0), negative(half_plane(negative(x))), half_plane(x))  # odd in x; -0.0 stays -0.0
    im = multiply(0.5, arctan2(multiply(2.0, y), subtract(multiply(subtract(1.0, x), add(1.0, x)), y2)))
    return _cplx(re, im)


def _times_i(z: Any, sign: float) -> Any:
    """sign * i * z on the parts: i (x + iy) = -y + ix."""
    x, y = _parts(z)
    return _cplx(multiply(-sign, y), multiply(sign, x))


def _complex_arcsinh(z: Any) -> Any:
    return _times_i(_complex_arcsin(_times_i(z, 1.0)), -1.0)


def _complex_arctan(z: Any) -> Any:
    return _times_i(_complex_arctanh(_times_i(z, 1.0)), -1.0)


def _with_complex(real_fn: Any, complex_fn: Any) -> Any:
    def fn(x: Any) -> Any:
        return complex_fn(x) if _is_c(x) else real_fn(x)

    fn.__name__, fn.__qualname__ = real_fn.__name__, real_fn.__qualname__
    fn.__doc__ = (real_fn.__doc__ or "") + "\n\nComplex x: NumPy's formula on the real and imaginary parts (see the module)."
    return fn


_LOG10E, _LOG2E = math.log10(math.e), math.log2(math.e)  # NumPy's NPY_LOG10E, NPY_LOG2E
log10 = _with_complex(log10, lambda z: _scaled_log(z, _LOG10E))
log2 = _with_complex(log2, lambda z: _scaled_log(z, _LOG2E))
exp2 = _with_complex(exp2, _complex_exp2)
expm1 = _with_complex(expm1, _complex_expm1)
log1p = _with_complex(log1p, _complex_log1p)
_real_sinh, _real_cosh = sinh, cosh
sinh = _with_complex(_real_sinh, _complex_sinh)
cosh = _with_complex(_real_cosh, _complex_cosh)
arcsin = _with_complex(arcsin, _complex_arcsin)
arccos = _with_complex(arccos, _complex_arccos)
arctan = _with_complex(arctan, _complex_arctan)
arcsinh = _with_complex(arcsinh, _complex_arcsinh)
arccosh = _with_complex(arccosh, _complex_arccosh)
arctanh = _with_complex(arctanh, _complex_arctanh)


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
    "exp": exp, "log": log, "log1p": log1p, "expm1": expm1, "log2": log2, "log10": log10, "exp2": exp2,
    "sqrt": sqrt, "sin": sin, "cos": cos, "tan": tan, "tanh": tanh, "sinh": sinh, "cosh": cosh, "arcsinh": arcsinh,
    "logaddexp": logaddexp, "logaddexp2": logaddexp2, "arcsin": arcsin, "arccos": arccos, "arctan": arctan,
    "arccosh": arccosh, "arctanh": arctanh, "arctan2": arctan2, "hypot": hypot, "cbrt": cbrt, "deg2rad": deg2rad,
    "rad2deg": rad2deg, "radians": radians, "degrees": degrees,
}

FUNCTIONS = {
    _np.exp: exp, _np.log: log, _np.sqrt: sqrt, _np.tanh: tanh, _np.sinc: sinc,
}
