"""The complex elementary functions on the LLVM backend: log, sqrt, sin, cos, tan, tanh and pow as formulas on parts.

`codegen.complex_split` rewrites a complex graph as a real one; this module gives it each function of
z = x + iy as a pair (real part, imaginary part) of real graph nodes built from the real ops the backend
lowers natively (exp, expm1, log, log1p, sin, cos, sqrt, hypot, arctan2, copysign, where), so they run in
the fused vectorized loops. The formulas are the stable ones of Kahan, "Branch cuts for complex elementary
functions, or much ado about nothing's sign bit" (1987), with the special values (zeros of either sign,
infinities, NaNs, the branch cut on the negative real axis) of C99 Annex G (G.6), as NumPy's complex
loops give them (NumPy calls the C library's clog, csqrt, csin, ...). Values agree with NumPy's to a few
ulps in the normwise relative error |f - f_numpy| / |f_numpy| (docs/complex.md states the bound and
tests/test_complex.py checks it on a grid with the special points), not bit for bit.

Every function works on graph nodes and, unchanged, on NumPy arrays (the `symgraph.lax` builders run
the op's NumPy implementation when no input is a node), which the tests use to check the formulas alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from symgraph import lax as L

__all__ = ["clog", "csqrt", "csin", "ccos", "ctan", "ctanh", "cpow", "ELEMENTARY"]

INF = float("inf")


def _f32(x: Any) -> bool:
    return np.dtype(x.dtype) == np.float32


def _abs(x: Any) -> Any:
    return L.unary("abs", x, float_op=False)


def _finite(x: Any) -> Any:
    """|x| < inf: false for infinities and NaNs."""
    return L.binary("lt", _abs(x), INF)


def _and(a: Any, b: Any) -> Any:
    return L.binary("logical_and", a, b)


def _or(a: Any, b: Any) -> Any:
    return L.binary("logical_or", a, b)


def _not(a: Any) -> Any:
    return L.unary("logical_not", a, float_op=False)


def _full(x: Any, v: float) -> Any:
    return L.full_like(x, v) if isinstance(x, L.Node) else np.full(np.shape(x), v, x.dtype)


def _sinh_cosh(ax: Any, big: float) -> tuple[Any, Any]:
    """(sinh a, cosh a) for 0 <= a <= big, from t = expm1(a) (accurate near 0): sinh a = (t + t/(t+1))/2,
    cosh a = (e + 1/e)/2 with e = t + 1. Above big the values are not used (the callers scale instead)."""
    t = L.unary("expm1", L.binary("minimum", ax, big))
    e = t + 1.0
    return 0.5 * (t + t / e), 0.5 * (e + 1.0 / e)


def _big_exp(x: Any) -> float:
    """The largest |x| for which expm1(|x|) and the unscaled sinh/cosh formulas stay finite."""
    return 88.0 if _f32(x) else 709.0


def _hyperbolic(x: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(sinh x, cosh x, far, signed h/2, h) for the real part x: far marks |x| > 709 (88 for float32), where
    f · cosh x is computed as (f · copysign(h/2, x)) · h with h = e^(|x|/2) (likewise sinh), so that a
    product NumPy keeps finite stays finite."""
    big = _big_exp(x)
    ax = _abs(x)
    s, c = _sinh_cosh(ax, big)
    far = L.binary("gt", ax, big)
    h = L.unary("exp", 0.5 * ax)
    return L.binary("copysign", s, x), c, far, L.binary("copysign", 0.5 * h, x), h


def csinh(x: Any, y: Any) -> tuple[Any, Any]:
    """sinh(x + iy) = sinh x cos y + i cosh x sin y (C99 G.6.2.5), as (re, im).

    Special values: csinh(±0 + i·inf or NaN) = ±0 + i·NaN, csinh(±inf + i·inf or NaN) = ±inf + i·NaN,
    csinh(x ± i0) keeps the zero imaginary part (also for an infinite or NaN x); the rest follow from the
    formula (NaN in, NaN out).
    """
    sx, cx, far, hs, h = _hyperbolic(x)
    sy, cy = L.unary("sin", y), L.unary("cos", y)
    re = L.where(far, (cy * hs) * h, sx * cy)
    im = L.where(far, (sy * _abs(hs)) * h, cx * sy)
    ax = _abs(x)
    zero_or_inf = _or(L.binary("eq", ax, 0.0), L.binary("eq", ax, INF))
    re = L.where(_and(zero_or_inf, _not(_finite(y))), x, re)
    im = L.where(L.binary("eq", y, 0.0), y, im)
    return re, im


def ccosh(x: Any, y: Any) -> tuple[Any, Any]:
    """cosh(x + iy) = cosh x cos y + i sinh x sin y (C99 G.6.2.4), as (re, im).

    Special values: ccosh(±inf + i·inf or NaN) = +inf + i·NaN, ccosh(±0 + i·inf or NaN) = NaN ± i0,
    ccosh(x ± i0) has the zero imaginary part sign(x)·(±0) (also for an infinite or NaN x).
    """
    sx, cx, far, hs, h = _hyperbolic(x)
    sy, cy = L.unary("sin", y), L.unary("cos", y)
    re = L.where(far, (cy * _abs(hs)) * h, cx * cy)
    im = L.where(far, (sy * hs) * h, sx * sy)
    ax = _abs(x)
    nonfinite_y = _not(_finite(y))
    re = L.where(_and(L.binary("eq", ax, INF), nonfinite_y), _full(x, INF), re)
    im = L.where(_and(L.binary("eq", ax, 0.0), nonfinite_y), _full(x, 0.0), im)  # NaN + i0: C99 leaves the sign
    im = L.where(L.binary("eq", y, 0.0), L.binary("copysign", _full(x, 1.0), x) * y, im)
    return re, im


def ctanh(x: Any, y: Any) -> tuple[Any, Any]:
    """tanh(x + iy) (C99 G.6.2.6), as (re, im): (sinh x cosh x + i sin y cos y) / (sinh² x + cos² y).

    The denominator is a sum of squares (no cancellation, as in Kahan's formula with tan y = sin y / cos y);
    beyond |x| = 20 (10 for float32) tanh x rounds to ±1 and the imaginary part is 4 sin y cos y e^(-2|x|).
    Special values: ctanh(±inf + iy) = ±1 + i·copysign(0, sin 2y), ±1 ± i0 for an infinite or NaN y;
    ctanh(x ± i0) keeps the zero imaginary part (also for a NaN x).
    """
    sx, cx, _, _, _ = _hyperbolic(x)
    sy, cy = L.unary("sin", y), L.unary("cos", y)
    ax = _abs(x)
    far = L.binary("gt", ax, 10.0 if _f32(x) else 20.0)
    den = sx * sx + cy * cy
    re = L.where(far, L.binary("copysign", _full(x, 1.0), x), (sx * cx) / den)
    im = L.where(far, (4.0 * sy * cy) * L.unary("exp", -2.0 * ax), (sy * cy) / den)
    im = L.where(_and(L.binary("eq", ax, INF), _not(_finite(y))), L.binary("copysign", _full(x, 0.0), y), im)
    im = L.where(L.binary("eq", y, 0.0), y, im)
    re = L.where(_and(_finite(x), _not(_finite(y))), _full(x, float("nan")), re)  # C99: tanh(x + i·inf) = NaN
    re = L.where(L.binary("eq", x, 0.0), x, re)  # C11: tanh(±0 + i·inf or NaN) = ±0 + i·NaN
    return re, im


def csin(x: Any, y: Any) -> tuple[Any, Any]:
    """sin z = -i sinh(iz) (C99 G.5.1): sin x cosh y + i cos x sinh y, with csinh's special values."""
    re, im = csinh(L.neg(y), x)
    # sin(inf or NaN ± i·inf) = NaN + i·inf (the sign is unspecified in C99; NumPy's C library gives +inf)
    return im, L.where(_and(_not(_finite(x)), L.binary("eq", _abs(y), INF)), _full(x, INF), L.neg(re))


def ccos(x: Any, y: Any) -> tuple[Any, Any]:
    """cos z = cosh(iz) (C99 G.5.1): cos x cosh y - i sin x sinh y, with ccosh's special values."""
    re, im = ccosh(L.neg(y), x)
    # cos(±0 + i·NaN) = NaN ± i0 (the zero's sign is unspecified in C99; NumPy's C library gives x's)
    return re, L.where(_and(L.binary("eq", x, 0.0), L.binary("ne", y, y)), x, im)


def ctan(x: Any, y: Any) -> tuple[Any, Any]:
    """tan z = -i tanh(iz) (C99 G.5.1), with ctanh's special values except for an infinite or NaN x (below)."""
    re, im = ctanh(L.neg(y), x)
    # tan(inf or NaN + iy) = NaN + i·NaN for a finite y != 0 (the C library's ctan, which NumPy calls, for every
    # such y: tanh -> ±1 is not used), NaN ± i0 for y = ±0
    odd = _not(_finite(x))
    re_t = L.where(_and(odd, _finite(y)), _full(x, float("nan")), im)
    im_t = L.where(_and(odd, _finite(y)), L.where(L.binary("eq", y, 0.0), y, _full(x, float("nan"))), L.neg(re))
    return re_t, im_t


def clog(x: Any, y: Any) -> tuple[Any, Any]:
    """log z = log|z| + i·atan2(y, x) (C99 G.6.3.2), as (re, im): the principal branch, the cut on the negative
    real axis (log(x ± i0) = log|x| ± iπ for x < 0, the sign of the zero choosing the side).

    log|z| is log(hypot(x, y)) (no overflow or underflow), except near the unit circle, where it is
    log1p((a - 1)(a + 1) + b²) / 2 for a = max(|x|, |y|) in [0.5, 1.5] and b = min(|x|, |y|) (a - 1 exact),
    so that a value of |z| near 1 keeps its relative accuracy. Special values from the real ops:
    log(±0 + i0) = -inf + i·(0 or π), log(±inf + iy) = +inf + i·atan2(y, ±inf), NaN in, NaN out.
    """
    ax, ay = _abs(x), _abs(y)
    a, b = L.binary("maximum", ax, ay), L.binary("minimum", ax, ay)
    near = _and(L.binary("ge", a, 0.5), L.binary("le", a, 1.5))
    am = L.where(near, a, 1.0)  # the branch not taken on safe operands
    re = L.where(near, 0.5 * L.unary("log1p", (am - 1.0) * (am + 1.0) + b * b),
                 L.unary("log", L.binary("hypot", x, y)))
    return re, L.binary("arctan2", y, x)


def csqrt(x: Any, y: Any) -> tuple[Any, Any]:
    """sqrt z (C99 G.6.4.2), as (re, im): Kahan's stable principal branch.

    t = sqrt((|x| + |z|) / 2); for x >= 0 (also -0): (t, y / (2t)); for x < 0: (|y| / (2t), copysign(t, y)),
    so the cut on the negative real axis follows the sign of y's zero (sqrt(-4 ± i0) = 0 ± 2i). Arguments
    near overflow are scaled by 1/16 and those near underflow by 2^108 (2^50 for float32) and the result
    by the square root of that (exact powers of two). Special values: sqrt(±0 ± i0) = +0 ± i0,
    sqrt(x ± i·inf) = +inf ± i·inf (any x, NaN too), sqrt(-inf + iy) = +0 + i·copysign(inf, y),
    sqrt(+inf + iy) = +inf + i·copysign(0, y), NaN otherwise.
    """
    f32 = _f32(x)
    hi, lo = (2.0 ** 124, 2.0 ** -120) if f32 else (2.0 ** 1020, 2.0 ** -1000)
    up = 2.0 ** 50 if f32 else 2.0 ** 108
    ax, ay = _abs(x), _abs(y)
    a = L.binary("maximum", ax, ay)
    large, small = L.binary("gt", a, hi), L.binary("lt", a, lo)
    scale = L.where(large, _full(x, 1.0 / 16.0), L.where(small, _full(x, up), _full(x, 1.0)))
    unscale = L.where(large, _full(x, 4.0), L.where(small, _full(x, up ** -0.5), _full(x, 1.0)))
    xs, ys = x * scale, y * scale
    t = L.unary("sqrt", 0.5 * (_abs(xs) + L.binary("hypot", xs, ys)))
    neg = L.binary("lt", x, 0.0)
    re = L.where(neg, _abs(ys) / (2.0 * t), t) * unscale
    im = L.where(neg, L.binary("copysign", t, y), ys / (2.0 * t)) * unscale
    zero = _and(L.binary("eq", ax, 0.0), L.binary("eq", ay, 0.0))
    re = L.where(zero, _full(x, 0.0), re)
    im = L.where(zero, y, im)
    inf_y = L.binary("eq", ay, INF)
    return L.where(inf_y, _full(x, INF), re), L.where(inf_y, y, im)


def cexp(x: Any, y: Any) -> tuple[Any, Any]:
    """exp z = e^x (cos y + i sin y) (C99 G.6.3.1), with NumPy's shortcut exp(x ± i0) = e^x ± i0 (no 0·inf)."""
    e = L.unary("exp", x)
    y0 = L.binary("eq", y, 0.0)
    re, im = L.where(y0, e, e * L.unary("cos", y)), L.where(y0, y, e * L.unary("sin", y))
    # exp(-inf + i·inf or NaN) = ±0 ± i0, exp(+inf + i·inf or NaN) = inf + i·NaN (C99 G.6.3.1)
    odd = _not(_finite(y))
    lo, hi = _and(odd, L.binary("eq", x, -INF)), _and(odd, L.binary("eq", x, INF))
    zero = L.where(L.binary("eq", y, y), L.binary("copysign", _full(x, 0.0), y), _full(x, 0.0))
    return L.where(lo, _full(x, 0.0), L.where(hi, _full(x, INF), re)), L.where(lo, zero, im)


def cpow(a: tuple, b: tuple) -> tuple[Any, Any]:
    """a ** b = exp(b · log a) (the C library's cpow, which NumPy calls outside its integer-exponent path),
    with NumPy's rules first: a ** 0 = 1 + 0i, 0 ** b = 0 for Re b > 0 and NaN + i·NaN otherwise."""
    (ar, ai), (br, bi) = a, b
    lr, li = clog(ar, ai)
    er, ei = cexp(br * lr - bi * li, br * li + bi * lr)
    b0 = _and(L.binary("eq", br, 0.0), L.binary("eq", bi, 0.0))
    a0 = _and(L.binary("eq", ar, 0.0), L.binary("eq", ai, 0.0))
    zr = L.where(L.binary("gt", br, 0.0), _full(ar, 0.0), _full(ar, float("nan")))
    er, ei = L.where(a0, zr, er), L.where(a0, zr, ei)
    return L.where(b0, _full(ar, 1.0), er), L.where(b0, _full(ar, 0.0), ei)


#: The unary complex functions by op name: (re, im) -> (re, im) of the result.
ELEMENTARY = {"log": clog, "sqrt": csqrt, "sin": csin, "cos": ccos, "tan": ctan, "tanh": ctanh, "exp": cexp}
