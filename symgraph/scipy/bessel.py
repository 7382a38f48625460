"""Bessel functions on traced values: i0, i1, i0e, i1e (modified, orders 0 and 1), j0, j1, y0, y1 and the
integer orders jn, yn; composites of symgraph primitives, as in symgraph.scipy.special (which re-exports them).

- i0, i1, i0e, i1e: the power series (A&S 9.6.10) for |x| <= 20 and the
  asymptotic expansion (A&S 9.7.1) above: relative 5e-15.
- j0, j1, y0, y1: the power series for |x| <= 8, the Hankel form with fitted
  P and Q above: absolute 3e-13 of the envelope sqrt(2 / (pi x)).
- jn, yn: power series below the order, forward recurrence from j0/j1 or
  y0/y1 above.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .. import lax as L
from ..errors import UnsupportedOpError
from ._pieces import _EULER, _SQRT1_2, _abs, _c, _exp, _f, _horner, _log, _poly_hi_first, _sqrt, _where

__all__ = ["i0", "i1", "i0e", "i1e", "j0", "j1", "y0", "y1", "jn", "yn"]


# ----- modified Bessel functions of orders 0 and 1 -----

_BESSEL_T = 20.0
#: Power series (A&S 9.6.10) in u = x**2 / (4 T**2): I0 = sum_k (T**2 u)**k / k!**2, I1 = x/2 sum_k ... / (k! (k+1)!).
_I0_SERIES = [float(Fraction(int(_BESSEL_T) ** (2 * k), math.factorial(k) ** 2)) for k in range(40)]
_I1_SERIES = [float(Fraction(int(_BESSEL_T) ** (2 * k), math.factorial(k) * math.factorial(k + 1))) for k in range(40)]


def _asym_coefs(nu: int, terms: int = 28) -> list[float]:
    """e**-x sqrt(2 pi x) I_nu(x) ~ sum_k (-1)**k prod_{j<=k} (4nu**2 - (2j-1)**2) / (k! 8**k x**k) (A&S 9.7.1),
    in v = T/x."""
    out, c = [], Fraction(1)
    for k in range(terms):
        out.append(float(c))
        c = c * -(4 * nu * nu - (2 * k + 1) ** 2) / ((k + 1) * 8 * int(_BESSEL_T))
    return out


_I0_ASYM = _asym_coefs(0)
_I1_ASYM = _asym_coefs(1)


def _bessel(x, order: int, scaled: bool):
    x = _f(x)
    ax = _abs(x)
    small = ax <= _BESSEL_T
    xs = _where(small, x, 1.0)
    u = (xs * xs) * (1.0 / (4.0 * _BESSEL_T * _BESSEL_T))
    ser = _horner(u, _I0_SERIES) if order == 0 else (0.5 * xs) * _horner(u, _I1_SERIES)
    if scaled:
        ser = ser * _exp(-_abs(xs))
    xl = _where(small, 2.0 * _BESSEL_T, ax)
    asym = _horner(_BESSEL_T / xl, _I0_ASYM if order == 0 else _I1_ASYM) / _sqrt((2.0 * math.pi) * xl)
    if order == 1:
        asym = asym * L.unary("sign", _where(small, 1.0, x), float_op=False)
    if not scaled:
        h = _exp(0.5 * xl)  # e**x as (e**(x/2))**2: finite up to x ~ 713 where I0 itself is finite
        asym = (asym * h) * h
    inf = ax == np.inf
    asym = _where(inf, (0.0 if scaled else np.inf) * (1.0 if order == 0 else L.unary("sign", x, float_op=False)),
                  asym)
    return _where(small, ser, asym)


def i0(x):
    """Modified Bessel function of the first kind, order 0 (scipy.special.i0)."""
    return _bessel(x, 0, False)


def i1(x):
    """Modified Bessel function of the first kind, order 1 (scipy.special.i1); odd."""
    return _bessel(x, 1, False)


def i0e(x):
    """Exponentially scaled i0: exp(-|x|) i0(x) (scipy.special.i0e)."""
    return _bessel(x, 0, True)


def i1e(x):
    """Exponentially scaled i1: exp(-|x|) i1(x) (scipy.special.i1e)."""
    return _bessel(x, 1, True)


# ----- Bessel functions of the first and second kind, orders 0 and 1 -----

#: |x| <= 8: the power series (A&S 9.1.10, 9.1.11, 9.1.13) in w = x**2 / 64 (t = x**2/4 = 16 w), 27 terms.
_J0_SERIES = [float(Fraction((-16) ** k, math.factorial(k) ** 2)) for k in range(27)]
_J1_SERIES = [float(Fraction((-16) ** k, math.factorial(k) * math.factorial(k + 1))) for k in range(27)]
_HARM = [float(sum(Fraction(1, j) for j in range(1, k + 1))) for k in range(29)]
_Y0_SERIES = [float(Fraction(-(-16) ** k, math.factorial(k) ** 2)) * _HARM[k] for k in range(27)]
_Y1_SERIES = [float(Fraction((-16) ** k, math.factorial(k) * math.factorial(k + 1)))
              * (_HARM[k] + _HARM[k + 1] - 2 * _EULER) for k in range(27)]
#: x > 8: J = sqrt(2/(pi x)) (P cos chi - Q sin chi), Y = sqrt(2/(pi x)) (P sin chi + Q cos chi),
#: chi = x - (2 nu + 1) pi/4 (A&S 9.2.5, 9.2.6); P(u) and Q(u) x / 8 as polynomials in u = 64/x**2
#: (highest power first), fitted here by least squares against SciPy on 3000 Chebyshev nodes of u in (0, 1]
#: (P to 1e-15, Q to 3e-12 relative: 5e-14 of the envelope).
_P0 = [3.323427975796123e-10, -2.3283100798918537e-09, 7.941528427747793e-09, -1.8949946282143495e-08,
       4.074432410384144e-08, -1.0140896652304103e-07, 3.6182982651078263e-07, -2.1838941659175064e-06,
       2.7380882169126294e-05, -0.0010986328124730194, 1.0000000000000002]
_Q0 = [-3.255701366761986e-10, 2.1863017397966282e-09, -7.065673160407192e-09, 1.561812954163537e-08,
       -2.995203181468215e-08, 6.325584910427839e-08, -1.814759702838492e-07, 8.23825394464346e-07,
       -6.93078508896279e-06, 0.000143051147438512, -0.015624999999999977]
_P1 = [-3.978013036954498e-10, 2.7096667929719096e-09, -9.010053133290183e-09, 2.106357327988981e-08,
       -4.484972636280945e-08, 1.1236460160565493e-07, -4.101595787320435e-07, 2.5809805090073695e-06,
       -3.52039925308876e-05, 0.001831054687478894, 1.0000000000000004]
_Q1 = [3.236521830230346e-10, -2.2115088280496507e-09, 7.285915141194179e-09, -1.6435107455489002e-08,
       3.214900440167303e-08, -6.918411639837737e-08, 2.0279711139792524e-07, -9.505625290304429e-07,
       8.47095903350307e-06, -0.0002002716063897598, 0.04687499999999952]


def _bessel_jy(x, nu: int, second: bool):
    x = _f(x)
    ax = _abs(x)
    small = ax <= 8.0
    xs = _where(small, x, _c(1.0, x))
    w = (xs * xs) * (1.0 / 64.0)
    if nu == 0:
        j_small = _horner(w, _J0_SERIES)
    else:
        j_small = (0.5 * xs) * _horner(w, _J1_SERIES)
    if second:
        xp = _where(xs > 0.0, xs, _c(1.0, x))
        lg = (2.0 / math.pi) * (_log(0.5 * xp) + (_EULER if nu == 0 else 0.0))
        if nu == 0:
            small_val = lg * j_small + (2.0 / math.pi) * _horner(w, _Y0_SERIES)
        else:
            small_val = lg * j_small - (2.0 / math.pi) / xp - (1.0 / math.pi) * (0.5 * xp) * _horner(w, _Y1_SERIES)
    else:
        small_val = j_small
    xl = _where(small, _c(10.0, x), ax)
    fin = xl < np.inf
    xl = _where(fin, xl, _c(10.0, x))
    u = 64.0 / (xl * xl)
    pp = _poly_hi_first(u, _P0 if nu == 0 else _P1)
    qq = (8.0 / xl) * _poly_hi_first(u, _Q0 if nu == 0 else _Q1)
    c, sn = L.unary("cos", xl), L.unary("sin", xl)
    if nu == 0:  # chi = x - pi/4
        cchi, schi = (c + sn) * _SQRT1_2, (sn - c) * _SQRT1_2
    else:  # chi = x - 3 pi/4
        cchi, schi = (sn - c) * _SQRT1_2, -(sn + c) * _SQRT1_2
    amp = _sqrt((2.0 / math.pi) / xl)
    large = amp * ((pp * schi + qq * cchi) if second else (pp * cchi - qq * schi))
    if nu == 1 and not second:
        large = large * L.unary("sign", _where(small, _c(1.0, x), x), float_op=False)
    large = _where(fin, large, _c(0.0, x))
    out = _where(small, small_val, large)
    if second:  # Y: -inf at 0, NaN for x < 0
        out = _where(x == 0.0, _c(-np.inf, x), _where(x < 0.0, _c(np.nan, x), out))
    return out


def j0(x):
    """Bessel function of the first kind of order 0 (scipy.special.j0): the power series for |x| <= 8, the
    Hankel form with fitted P, Q above; absolute error about 5e-14 (relative near the zeros is unbounded)."""
    return _bessel_jy(x, 0, False)


def j1(x):
    """Bessel function of the first kind of order 1 (scipy.special.j1); see j0."""
    return _bessel_jy(x, 1, False)


def y0(x):
    """Bessel function of the second kind of order 0 (scipy.special.y0); -inf at 0, NaN for x < 0; see j0."""
    return _bessel_jy(x, 0, True)


def y1(x):
    """Bessel function of the second kind of order 1 (scipy.special.y1); -inf at 0, NaN for x < 0; see j0."""
    return _bessel_jy(x, 1, True)


def _static_order(n, name: str) -> int:
    if L.is_node(n):
        raise UnsupportedOpError(f"{name}: the order must be a static integer, got a traced value")
    arr = np.asarray(n)
    if arr.ndim != 0 or not np.isfinite(arr) or float(arr) != int(arr):
        raise UnsupportedOpError(f"{name}: only a scalar integer order is supported, got {n!r}")
    return int(arr)


def jn(n, x):
    """Bessel function of the first kind of integer order n (scipy.special.jn / jv with an integer order).

    n = 0, 1: j0, j1. |n| >= 2: the power series (x/2)**n sum_k (-x**2/4)**k / (k! (n+k)!) (A&S 9.1.10,
    40 terms) where |x| < n + 10 ... the forward recurrence J_{k+1} = (2k/x) J_k - J_{k-1} (stable for
    |x| >= n) from j0, j1 elsewhere; J_{-n} = (-1)**n J_n.
    """
    order = _static_order(n, "jn")
    m = abs(order)
    sign = -1.0 if (order < 0 and m % 2) else 1.0
    if m == 0:
        return j0(x)
    if m == 1:
        return sign * j1(x)
    x = _f(x)
    ax = _abs(x)
    use_series = ax < float(m)
    xs = _where(use_series, x, _c(0.5, x))
    t = (xs * xs) * 0.25
    coefs = [(-1.0) ** k / (math.factorial(k) * math.factorial(m + k)) for k in range(40)]
    series = (0.5 * xs) ** m * _horner(t, coefs)
    xr = _where(use_series, _c(float(m) + 1.0, x), x)
    jm1, jk = j0(xr), j1(xr)
    for k in range(1, m):
        jm1, jk = jk, (2.0 * k) / xr * jk - jm1
    return sign * _where(use_series, series, jk)


def yn(n, x):
    """Bessel function of the second kind of integer order n (scipy.special.yn), by the forward recurrence
    Y_{k+1} = (2k/x) Y_k - Y_{k-1} from y0, y1 (stable); Y_{-n} = (-1)**n Y_n; NaN for x < 0."""
    order = _static_order(n, "yn")
    m = abs(order)
    sign = -1.0 if (order < 0 and m % 2) else 1.0
    if m == 0:
        return y0(x)
    x = _f(x)
    ym1, yk = y0(x), y1(x)
    for k in range(1, m):
        ym1, yk = yk, (2.0 * k) / x * yk - ym1
    return sign * yk


def _jv(v, x):
    return jn(_static_order(v, "jv (non-integer orders are not supported)"), x)
