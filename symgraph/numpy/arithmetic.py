"""Elementwise arithmetic: + - * /, floor division and remainders, powers, abs, sign, rounding, maximum, minimum, clip.

Also copysign, heaviside and float_power, and the rounding functions (floor, ceil,
trunc, rint, fix, round/around), which have zero derivative.

Also `stop_gradient` (x with zero derivative), which the composites use.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, UnsupportedOpError
from ..ir import Node
from .logic import equal, greater, isnan, less, logical_and, not_equal, where

__all__ = [
    "abs", "absolute", "add", "around", "ceil", "clip", "copysign", "divide", "divmod", "fabs", "fix", "float_power", "floor",
    "floor_divide", "fmax", "fmin", "fmod", "heaviside", "maximum", "minimum", "mod", "multiply", "negative",
    "positive", "power", "reciprocal", "remainder", "rint", "round", "sign", "square", "stop_gradient", "subtract",
    "true_divide", "trunc",
]


def add(x: Any, y: Any) -> Any:
    """x + y (broadcast, promoted)."""
    return L.binary("add", x, y)


def subtract(x: Any, y: Any) -> Any:
    """x - y."""
    return L.binary("sub", x, y)


def multiply(x: Any, y: Any) -> Any:
    """x * y."""
    return L.binary("mul", x, y)


def divide(x: Any, y: Any) -> Any:
    """x / y (true division; integers give float64)."""
    return L.binary("div", x, y, float_op=True)


true_divide = divide


def _int_operands(x: Any, y: Any) -> tuple[Any, Any] | None:
    """x and y for the integer ops (bools as int8, NumPy's bool loop), or None when they promote to a float."""
    dt = L.result_dtype(x, y)
    if dt.kind == "b":
        return L.cast(x, _np.int8), L.cast(y, _np.int8)
    return (x, y) if dt.kind in "iu" else None


def _divmod(x: Any, y: Any) -> tuple[Any, Any]:
    """(floor_divide, remainder) as NumPy computes them.

    Integers (and bools, as int8) go to the `int_floordiv` / `int_mod`
    primitives: floor toward -inf, the remainder with the sign of y, 0 and 0
    for y = 0 (where NumPy warns), MIN // -1 wrapping to MIN.

    Floats follow NumPy's algorithm (npy_divmod) on top of the exact fmod.
    floor(x / y) is not the floor division: 1.0 // 0.1 is 9.0 because 0.1 is
    slightly more than 1/10, while 1.0 / 0.1 rounds to 10.0. Like NumPy, the
    quotient is (x - fmod(x, y)) / y, corrected by one where the remainder's
    sign differs from y's; a zero remainder takes y's sign, a zero quotient
    the sign of x / y, and y = 0 gives x / y and NaN.
    """
    ints = _int_operands(x, y)
    if ints is not None:
        return L.binary("int_floordiv", *ints), L.binary("int_mod", *ints)
    x, y = L.to_float(x), L.to_float(y)
    m0 = L.binary("fmod", x, y)
    div0 = divide(subtract(x, m0), y)
    fix = logical_and(not_equal(m0, 0.0), not_equal(less(y, 0.0), less(m0, 0.0)))
    dt = L.result_dtype(x, y)
    zero_like_y = where(less(y, 0.0), _np.asarray(-0.0, dt), _np.asarray(0.0, dt))  # copysign(0, y); y != 0 here
    mod = where(fix, add(m0, y), where(equal(m0, 0.0), zero_like_y, m0))
    div = where(fix, subtract(div0, 1.0), div0)
    fd0 = floor(div)
    fd = where(greater(subtract(div, fd0), 0.5), add(fd0, 1.0), fd0)
    q = divide(x, y)
    fd = where(equal(div, 0.0), multiply(q, 0.0), fd)  # copysign(0, x/y): q is finite where div == 0
    fd = where(equal(y, 0.0), q, fd)
    fd = L.bind("stop_gradient", fd) if isinstance(fd, Node) else fd  # piecewise constant: zero derivative
    return fd, mod


def floor_divide(x: Any, y: Any) -> Any:
    """x // y as NumPy computes it (see `_divmod`): integers stay integers (bools give int8); zero derivative."""
    ints = _int_operands(x, y)
    if ints is not None:
        return L.binary("int_floordiv", *ints)
    return _divmod(x, y)[0]


def remainder(x: Any, y: Any) -> Any:
    """x % y with the sign of y, as NumPy computes it (see `_divmod`); integers stay integers.

    Derivatives (floats) 1 and -floor_divide(x, y) (almost everywhere).
    """
    ints = _int_operands(x, y)
    if ints is not None:
        return L.binary("int_mod", *ints)
    return _divmod(x, y)[1]


def divmod(x: Any, y: Any) -> tuple[Any, Any]:
    """(x // y, x % y), NumPy's np.divmod (and Python's divmod on traced values); see `_divmod`."""
    return _divmod(x, y)


def fmod(x: Any, y: Any) -> Any:
    """C's fmod: the exact remainder of truncated division, with the sign of x."""
    if L.result_dtype(x, y).kind in "iub":
        raise UnsupportedOpError("fmod of integer traced values is not supported")
    return L.binary("fmod", L.to_float(x), L.to_float(y))


mod = remainder


def negative(x: Any) -> Any:
    """-x."""
    return L.neg(x)


def positive(x: Any) -> Any:
    """+x."""
    return x


def power(x: Any, y: Any) -> Any:
    """x ** y. Small integer exponents (Python ints or integral floats, |y| <= 4) become products.

    Raises:
        DTypeError: an integer x to a negative integer constant power (NumPy raises ValueError: "Integers to
            negative integer powers are not allowed").
    """
    if (isinstance(x, Node) and x.dtype.kind in "iu" and not isinstance(y, (bool, _np.bool_, Node))
            and _np.asarray(y).dtype.kind in "iu" and bool(_np.any(_np.asarray(y) < 0))):
        raise DTypeError(f"integers to negative integer powers are not allowed (x is {x.dtype}, y = {y!r}), as in "
                         f"NumPy; use a float base (x.astype(float) ** y) or float_power")
    if _is_complex(x) or _is_complex(y):
        if isinstance(y, (int, float)) and not isinstance(y, bool) and y == 2 and isinstance(x, Node):
            return multiply(x, x)  # NumPy's z**2 is z*z bit for bit; other powers are NumPy's own algorithm
        return L.binary("pow", x, y, float_op=True)
    if isinstance(y, (int, float)) and not isinstance(y, bool) and float(y).is_integer() and builtins.abs(y) <= 4 and isinstance(x, Node):
        n = int(y)
        if n == 0:
            return L.full_like(L.to_float(x) if x.dtype.kind == "b" else x, 1)
        base = x if n > 0 else reciprocal(x)
        out = base
        for _ in range(builtins.abs(n) - 1):
            out = multiply(out, base)
        return out
    if (isinstance(x, Node) and x.dtype.kind in "iu" and not isinstance(y, (bool, _np.bool_))
            and (y.dtype.kind if isinstance(y, Node) else _np.asarray(y).dtype.kind) in "iu"):
        return L.binary("pow", x, y)  # integer ** integer stays integer, as in NumPy
    return L.binary("pow", x, y, float_op=True)


def power_operator(x: Any, y: Any) -> Any:
    """x ** y as Python's operator: NumPy's ndarray `**` takes sqrt for a complex base to the power 0.5.

    (NumPy's other operator shortcuts give power's values; for a complex base, z ** -1 is NumPy's
    reciprocal there and 1/z here, which can differ in the last bit: docs/complex.md.)
    """
    if _is_complex(x) and isinstance(x, Node) and type(y) is float and y == 0.5:
        return L.unary("sqrt", x)
    return power(x, y)


def square(x: Any) -> Any:
    """x * x."""
    return multiply(x, x)


def reciprocal(x: Any) -> Any:
    """1 / x. Complex x: NumPy's own reciprocal loop (Smith's division of 1 by x + iy, by the larger
    part), bit for bit: |x| >= |y|: r = y/x, d = x + y r, (1/d, -r/d); else r = x/y, d = x r + y, (r/d, -1/d)."""
    if _is_complex(x):
        z = x if isinstance(x, Node) else _np.asarray(x)
        re, im = L.bind("real", z), L.bind("imag", z)
        big = L.binary("ge", abs(re), abs(im))
        r1 = divide(im, re)
        d1 = add(re, multiply(im, r1))
        r2 = divide(re, im)
        d2 = add(multiply(re, r2), im)
        one = _np.asarray(1, re.dtype)
        return L.bind("complex", L.where(big, divide(one, d1), divide(r2, d2)),
                      L.where(big, negative(divide(r1, d1)), negative(divide(one, d2))))
    return divide(_np.asarray(1, dtype=L.result_dtype(x, 1.0)) if isinstance(x, Node) else 1.0, x)


def _is_complex(x: Any) -> bool:
    if isinstance(x, (Node, _np.ndarray, _np.generic)):
        return x.dtype.kind == "c"
    return isinstance(x, complex)


def abs(x: Any) -> Any:  # noqa: A001
    """Absolute value; derivative sign(x) (0 at 0).

    For complex x, |z| as a real array (complex64 -> float32), NumPy's value; derivative conj(z)/|z| under
    JAX's convention (docs/complex.md), 0 at z = 0.
    """
    if _is_complex(x):
        return L.unary("complex_abs", x)
    return L.unary("abs", x, float_op=False)


absolute = abs


def sign(x: Any) -> Any:
    """-1, 0, 1 (NaN for NaN); zero derivative.

    Complex x (NumPy 2's definition): z / |z|, and 0 at z = 0, a complex result of x's dtype (see
    `_complex_sign`); its derivative is that of z / |z| under JAX's convention (docs/complex.md), 0 at 0.
    """
    if _is_complex(x):
        return _complex_sign(x)
    return L.unary("sign", x, float_op=False)


def _complex_sign(z: Any) -> Any:
    """NumPy 2's complex sign, case by case as its loop (numpy/_core/src/umath/loops.c.src, CSIGN): with
    r = hypot(x, y), (x/r, y/r) for a finite nonzero r; (+0, +0) at r = 0; for an infinite r, (±1, +0) when
    only x is infinite, (+0, ±1) when only y is, NaN when both are; NaN for a NaN r (a NaN part, neither
    infinite). Composed of real ops on the parts, so it differentiates (order 2, both modes) and compiles
    as any real composite; the zero branch is guarded (r replaced by 1) so its derivative is 0, not NaN."""
    z = z if isinstance(z, Node) else _np.asarray(z)
    x, y = L.bind("real", z), L.bind("imag", z)
    dt = x.dtype
    r = L.binary("hypot", x, y, float_op=True)
    zero = equal(r, 0.0)
    rs = where(zero, _np.asarray(1.0, dt), r)
    re, im = where(zero, _np.asarray(0.0, dt), divide(x, rs)), where(zero, _np.asarray(0.0, dt), divide(y, rs))
    xinf, yinf = equal(abs(x), _np.inf), equal(abs(y), _np.inf)
    one = _np.asarray(1.0, dt)
    unit = lambda v: where(less(v, 0.0), -one, one)  # noqa: E731  (±1 of an infinite part)
    nan, z0 = _np.asarray(_np.nan, dt), _np.asarray(0.0, dt)
    both = logical_and(xinf, yinf)
    re = where(both, nan, where(xinf, unit(x), where(yinf, z0, re)))
    im = where(both, nan, where(xinf, z0, where(yinf, unit(y), im)))
    return L.bind("complex", re, im)


def floor(x: Any) -> Any:
    """Round toward -inf; zero derivative."""
    return L.unary("floor", x, float_op=False)


def ceil(x: Any) -> Any:
    """Round toward +inf (ceil(-0.5) = -0.0); integers keep their dtype, as in NumPy; zero derivative."""
    return L.unary("ceil", x, float_op=False)


def trunc(x: Any) -> Any:
    """Round toward 0 (trunc(-0.5) = -0.0); integers keep their dtype, as in NumPy; zero derivative."""
    return L.unary("trunc", x, float_op=False)


def fix(x: Any) -> Any:
    """Round toward 0, NumPy's fix (equal to trunc, signed zeros included); zero derivative."""
    return trunc(x)


def rint(x: Any) -> Any:
    """Round to the nearest integer, ties to even (rint(2.5) = 2.0, rint(-0.5) = -0.0); integers give float64.

    Zero derivative.
    """
    return L.unary("rint", x)


def round(x: Any, decimals: int = 0, out: Any = None) -> Any:  # noqa: A001
    """Round to `decimals` decimal places, NumPy's algorithm; zero derivative.

    As NumPy (PyArray_Round): for decimals >= 0, rint(x * 10**decimals) / 10**decimals,
    for decimals < 0, rint(x / 10**-decimals) * 10**-decimals, with the power of
    ten rounded to x's float type (so 2.675 rounds to 2.67 or 2.68 exactly as
    NumPy's does, ties to even). Integers with decimals >= 0 are returned
    unchanged; with decimals < 0 they are rounded through float64 and keep their
    dtype. A power of ten beyond the float range gives NaN, as in NumPy.

    Raises:
        UnsupportedOpError: `out=` (traced values are immutable).
    """
    if out is not None:
        raise UnsupportedOpError("np.round(..., out=...) writes in place, which tracing does not support")
    decimals = int(decimals)
    dt = L.result_dtype(x)
    if dt.kind in "biu":
        if decimals >= 0:
            return x
        return L.cast(round(L.cast(x, _np.float64), decimals), dt)
    try:
        f = 10.0 ** builtins.abs(decimals)
    except OverflowError:
        f = _np.inf
    with _np.errstate(over="ignore"):
        f = _np.asarray(f, dtype=dt)
    if decimals >= 0:
        return divide(rint(multiply(x, f)), f)
    return multiply(rint(divide(x, f)), f)


around = round


def fabs(x: Any) -> Any:
    """Absolute value as a float (integers give float64); derivative sign(x), 0 at 0 (as abs)."""
    return abs(L.to_float(x))


def copysign(x1: Any, x2: Any) -> Any:
    """|x1| with the sign bit of x2 (so -0.0 and a negative NaN count as negative), C's copysign.

    Operands broadcast and promote (integers give float64). Derivative
    sign(x1) * (+1 or -1 by x2's sign bit) in x1, 0 at x1 = 0 (the kink of
    |x1|, as abs'(0)); 0 in x2 (piecewise constant).
    """
    return L.binary("copysign", x1, x2, float_op=True)


def heaviside(x1: Any, x2: Any) -> Any:
    """The step function: 0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0, NaN where x1 is NaN (NumPy's).

    Operands broadcast and promote (integers give float64). Derivative 0 in x1
    (the Dirac mass at 0 is dropped: the convention of every piecewise-constant
    op); in x2, 1 where x1 == 0 (the value is x2 there) and 0 elsewhere.
    """
    x1, x2 = L.to_float(x1), L.to_float(x2)
    dt = L.result_dtype(x1, x2)
    step = where(less(x1, 0.0), _np.asarray(0.0, dt), _np.asarray(1.0, dt))
    out = where(equal(x1, 0.0), x2, step)
    return where(isnan(x1), _np.asarray(_np.nan, dt), out)


def float_power(x1: Any, x2: Any) -> Any:
    """x1 ** x2 in float64 (NumPy's float_power: both operands cast to float64 first, float32 too).

    The power is `power` on the float64 operands, with its derivative rules.
    """
    return power(L.cast(x1, _np.float64), L.cast(x2, _np.float64))


def maximum(x: Any, y: Any) -> Any:
    """Elementwise max; at a tie the derivative goes to y (so maximum(x, 0) has derivative 0 at 0)."""
    return L.binary("maximum", x, y)


def minimum(x: Any, y: Any) -> Any:
    """Elementwise min; at a tie the derivative goes to y."""
    return L.binary("minimum", x, y)


def fmax(x: Any, y: Any) -> Any:
    """Elementwise max ignoring NaN (NumPy's fmax: the other operand when one is NaN, NaN when both are).

    Operands broadcast and promote as in `maximum`; the derivative goes to the operand taken.
    """
    return where(isnan(y), x, where(isnan(x), y, maximum(x, y)))


def fmin(x: Any, y: Any) -> Any:
    """Elementwise min ignoring NaN (NumPy's fmin: the other operand when one is NaN, NaN when both are).

    Operands broadcast and promote as in `minimum`; the derivative goes to the operand taken.
    """
    return where(isnan(y), x, where(isnan(x), y, minimum(x, y)))


def clip(x: Any, a_min: Any = None, a_max: Any = None) -> Any:
    """minimum(maximum(x, a_min), a_max): derivative 1 strictly inside, 0 at and beyond the bounds."""
    if a_min is not None:
        x = maximum(x, a_min)
    if a_max is not None:
        x = minimum(x, a_max)
    return x


def stop_gradient(x: Any) -> Any:
    """x, with zero derivative."""
    if not isinstance(x, Node):
        return _np.asarray(x)
    return L.bind("stop_gradient", x)


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
    "add": add, "subtract": subtract, "multiply": multiply, "divide": divide, "true_divide": divide,
    "floor_divide": floor_divide, "remainder": remainder, "divmod": divmod, "fmod": fmod, "power": power, "negative": negative,
    "positive": positive, "absolute": abs, "sign": sign, "square": square, "reciprocal": reciprocal,
    "maximum": maximum, "minimum": minimum, "fmax": fmax, "fmin": fmin, "floor": floor, "ceil": ceil, "trunc": trunc,
    "rint": rint, "fabs": fabs, "copysign": copysign, "heaviside": heaviside, "float_power": float_power,
}

FUNCTIONS = {
    _np.clip: clip, _np.abs: abs, _np.square: square, _np.maximum: maximum, _np.minimum: minimum, _np.round: round,
    _np.around: around, _np.fix: fix,
}
