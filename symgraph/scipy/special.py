"""`symgraph.scipy.special`: SciPy's special functions on traced values (as `jax.scipy.special`).

Every function here is a composite of symgraph primitives (exp, log, log1p,
erf, erfc, where, floor, polynomials evaluated with mul/add, a fixed number
of recurrence or Newton steps), so it traces, differentiates to any order in
both modes (the derivative of the composite is itself a composite: the
derivative of the shifted Stirling series of gammaln is the shifted
asymptotic series of digamma, and so on), batches with the elementwise rules,
and compiles natively with the LLVM backend. Nothing here imports SciPy.

The names SciPy implements as ufuncs (gammaln, psi, erf, erfc, erfinv, expit,
logit, xlogy, xlog1py, log_ndtr, ndtr, ndtri, i0, i1, i0e, i1e, j0, j1, y0,
y1, betaln, gamma, gammasgn, rgamma, beta, gammainc, gammaincc, betainc; and
gammaincinv, gammainccinv, betaincinv, betainccinv of symgraph.scipy.quantiles,
which adds them to `UFUNCS` on import) also trace when user code calls
`scipy.special.<name>(tracer)`: tracing finds them in `UFUNCS` (keyed by the ufunc's `__name__`; `scipy.special.digamma.__name__`
is "psi"). SciPy's Python-level functions (logsumexp, softmax, log_softmax,
polygamma, multigammaln) convert their arguments with `np.asarray` first, so
call the versions here.

Accuracy (float64, measured against SciPy in tests/test_scipy.py; float32
inputs run the same formulas in float32):
- gammaln: relative 1e-13 for x > 0 (series at 2 on [0, 2.5), Stirling after
  shifting to x >= 10 elsewhere); x < 0 by reflection, absolute 1e-12 away
  from the poles.
- digamma: relative 1e-13 for x > 0 (shift to x >= 10, asymptotic series;
  the Taylor series at the zero x0 = 1.4616... within 1/4 of it); x < 0 by
  reflection, absolute 1e-13 near its zeros there.
- polygamma(n, x), n >= 1: relative 1e-13 for x > 0 (NaN for x <= 0).
- erfinv / ndtri: an initial approximation of the form of Giles (2012),
  "Approximating the erfinv function" (GPU Computing Gems, vol. 2),
  w = -log((1 - x)(1 + x)), with coefficients fitted here by least squares
  (relative error <= 2e-5), then two Halley steps on erf (on erfc in the
  tails, so that ndtri(1e-300) is accurate): relative 1e-15.
- log_ndtr: log1p(-ndtr(-x)) for x > 0, log(ndtr) down to -30 (-10 in
  float32), the asymptotic series of the Mills ratio below (A&S 26.2.12), so
  the value and gradient stay finite to -1e150.
- the Bessel functions (i0, i1, i0e, i1e, j0, j1, y0, y1, jn, yn) live in
  symgraph/scipy/bessel.py with their accuracy, and are re-exported here;
  the shared pieces (promotion, Horner, Bernoulli numbers) in _pieces.py.
- betaln: gammaln(a) + gammaln(b) - gammaln(a + b) for max(a, b) < 10, else
  the Stirling difference written with log1p (no cancellation for large b).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Any

import numpy as np

from .. import lax as L
from .. import numpy as snp
from ..errors import UnsupportedOpError
from ._pieces import _B, _EULER, _HALF_LOG_2PI, _SQRT1_2, _abs, _c, _exp, _f, _floor, _horner, _log, _log1p, _poly_hi_first, _promote, _sqrt, _where
from .bessel import _jv, i0, i0e, i1, i1e, j0, j1, jn, y0, y1, yn

__all__ = [
    "gammaln", "digamma", "psi", "polygamma", "multigammaln", "erf", "erfc", "erfcx", "erfinv", "erfcinv", "expit",
    "logit", "log_expit", "entr", "rel_entr", "kl_div", "xlogy", "xlog1py", "log_ndtr", "ndtr", "ndtri", "i0",
    "i1", "i0e", "i1e", "betaln", "beta",
    "gamma", "gammasgn", "rgamma", "j0", "j1", "y0", "y1", "jn", "yn", "gammainc", "gammaincc", "betainc", "logsumexp",
    "softmax", "log_softmax", "ufunc_rule", "UFUNCS",
]

# ----- gamma family -----

#: Stirling's series of log Gamma(w): sum_k B_2k / (2k (2k-1) w**(2k-1)), k = 1..7 (error < 3e-17 for w >= 10).
_STIRLING = [float(_B[2 * k] / (2 * k * (2 * k - 1))) for k in range(1, 8)]


def _zeta_minus_1(k: int) -> float:
    """zeta(k) - 1 for k >= 2: sum_{n=2}^{N-1} n**-k plus the Euler-Maclaurin tail at N = 30."""
    n_cut = 30
    head = math.fsum(n ** -float(k) for n in range(2, n_cut))
    tail = n_cut ** (1.0 - k) / (k - 1) + 0.5 * n_cut ** -float(k)
    fall = 1.0
    for j in range(1, 6):  # B_2j / (2j)! * k (k+1) ... (k+2j-2) * N**(-k-2j+1)
        fall = math.prod(range(k, k + 2 * j - 1))
        tail += float(_B[2 * j]) / math.factorial(2 * j) * fall * n_cut ** (-k - 2 * j + 1.0)
    return head + tail


#: log Gamma(2 + e) = (1 - gamma) e + sum_{k>=2} (-1)**k (zeta(k) - 1) / k e**k (A&S 6.1.33); 28 terms for |e| <= 0.5.
_LGAMMA2 = [0.0, 1.0 - _EULER] + [(-1) ** k * _zeta_minus_1(k) / k for k in range(2, 30)]


def _stirling(w):
    """log Gamma(w) for w >= 10: (w - 1/2)(log w - 1) + (log(2 pi) - 1)/2 + Stirling's correction."""
    u = 1.0 / w
    return (w - 0.5) * (_log(w) - 1.0) + (_HALF_LOG_2PI - 0.5) + u * _horner(u * u, _STIRLING)


def _lgamma_pos(z):
    """log Gamma(z) for z >= 0 (or NaN): the series at 2 below 2.5, shifted Stirling above."""
    small = z < 2.5
    # z < 2.5: e = z - n in [-0.5, 0.5); log G(z) = log G(2 + e) - [n <= 1] log z - [n == 0] log1p(z)
    zs = _where(small, z, 1.0)
    n = _where(zs < 0.5, _c(0.0, zs), _where(zs < 1.5, _c(1.0, zs), _c(2.0, zs)))
    e = zs - n
    low = (_horner(e, _LGAMMA2) - _log(_where(n <= 1.0, zs, 1.0))
           - _log1p(_where(n == 0.0, zs, 0.0)))
    # 2.5 <= z < 10: log G(z) = log G(z + 8) - log(z (z+1) ... (z+7)); z >= 10: Stirling at z
    zb = _where(small, 10.0, z)
    mid = zb < 10.0
    zm = _where(mid, zb, 2.5)
    prod = zm
    for k in range(1, 8):
        prod = prod * (zm + float(k))
    high = _stirling(_where(mid, zm + 8.0, zb)) - _log(_where(mid, prod, 1.0))
    return _where(small, low, high)


def _sinpi_abs(x):
    """|sin(pi x)| with the argument reduced exactly: r = x - round(x) in [-1/2, 1/2]."""
    r = x - _floor(x + 0.5)
    return _abs(L.unary("sin", math.pi * r))


def gammaln(x):
    """log |Gamma(x)| elementwise (scipy.special.gammaln); float in, same float out (integers -> float64).

    x >= 0 by the series of log Gamma at 2 (|x - n| <= 1/2) or Stirling's
    series after shifting x up to >= 10; x < 0 by the reflection
    log G(x) = log(pi / |sin(pi x)|) - log G(1 - x). +inf at 0 and the negative
    integers. Derivative: digamma (the derivative of the composite).
    """
    x = _f(x)
    neg = x < 0.0
    xn = _where(neg, x, -0.5)
    z = _where(neg, 1.0 - xn, x)
    pos = _lgamma_pos(z)
    refl = (math.log(math.pi) - _log(_sinpi_abs(xn))) - pos
    return _where(neg, refl, pos)


#: digamma's asymptotic series: psi(w) = log w - 1/(2w) - sum_k B_2k / (2k w**2k), k = 1..7 (error < 5e-17 at w >= 10).
_PSI_ASYM = [float(_B[2 * k] / (2 * k)) for k in range(1, 8)]


#: The positive zero of digamma, x0 = 1.46163214496836234126... (hi + lo, two doubles).
_PSI_ROOT = Fraction("1.46163214496836234126265954232572132846819620400644635129598840859878644035380181024307")
_PSI_ROOT_HI = float(_PSI_ROOT)
_PSI_ROOT_LO = float(_PSI_ROOT - Fraction(_PSI_ROOT_HI))


def _hurwitz_at_root(s: int) -> float:
    """zeta(s, x0) for s >= 2: sum_{k<20} (x0+k)**-s plus the Euler-Maclaurin tail at x0 + 20."""
    x0 = _PSI_ROOT_HI
    big = x0 + 20.0
    head = math.fsum((x0 + k) ** -float(s) for k in range(20))
    tail = big ** (1.0 - s) / (s - 1) + 0.5 * big ** -float(s)
    for j in range(1, 8):
        rising = math.prod(range(s, s + 2 * j - 1))
        tail += float(_B[2 * j]) / math.factorial(2 * j) * rising * big ** (-s - 2 * j + 1.0)
    return head + tail


#: Taylor series of digamma at its zero: psi(x0 + d) = sum_n (-1)**(n+1) zeta(n+1, x0) d**n (n = 1..24),
#: used for |x - x0| < 1/4 so that the relative error stays small where psi(x) -> 0.
_PSI_ROOT_TAYLOR = [0.0] + [(-1.0) ** (n + 1) * _hurwitz_at_root(n + 1) for n in range(1, 25)]


def _digamma_pos(z):
    near = _abs(z - _PSI_ROOT_HI) < 0.25
    d = (_where(near, z, _c(_PSI_ROOT_HI, z)) - _PSI_ROOT_HI) - _PSI_ROOT_LO
    root = _horner(d, _PSI_ROOT_TAYLOR)
    return _where(near, root, _digamma_far(z))


def _digamma_far(z):
    shift = z < 10.0
    zs = _where(shift, z, 10.0)
    acc = 1.0 / zs  # (not zs + 0.0: psi(-0.0) = +inf)
    for k in range(1, 10):
        acc = acc + 1.0 / (zs + float(k))
    w = _where(shift, zs + 10.0, z)
    u = 1.0 / w
    asym = _log(w) - 0.5 * u - (u * u) * _horner(u * u, _PSI_ASYM)
    return asym - _where(shift, acc, 0.0)


def digamma(x):
    """The digamma function psi(x) = d/dx log Gamma(x) (scipy.special.digamma / psi).

    x >= 0: psi(x) = psi(x + 10) - sum_{k<10} 1/(x + k) below 10, then the
    asymptotic series; x < 0: reflection psi(x) = psi(1 - x) - pi / tan(pi x)
    (NaN at the negative integers, -inf at +0, +inf at -0, as SciPy).
    """
    x = _f(x)
    neg = x < 0.0
    xn = _where(neg, x, -0.25)
    z = _where(neg, 1.0 - xn, x)
    pos = _digamma_pos(z)
    r = xn - _floor(xn + 0.5)
    t = L.unary("tan", math.pi * r)
    t = _where(r == 0.0, np.nan, t)  # a pole: SciPy gives NaN
    return _where(neg, pos - math.pi / t, pos)


psi = digamma


def _polygamma_terms(n: int) -> tuple[float, int]:
    """(shift target W, number of asymptotic terms K) for psi^(n): the first term past K is < 1e-17 relative."""
    for w in (10.0, 15.0, 20.0, 30.0, 50.0):
        lead = math.factorial(n - 1) / w ** n
        for k in range(1, 25):
            term = abs(float(_B[2 * k])) * math.factorial(2 * k + n - 1) / math.factorial(2 * k) / w ** (2 * k + n)
            if term < 1e-17 * lead:
                return w, k - 1
    raise UnsupportedOpError(f"polygamma: order n = {n} is too large (n <= 30 supported)")


def polygamma(n, x):
    """The n-th derivative of digamma, psi^(n)(x), for a static integer n >= 0 (scipy.special.polygamma).

    n = 0 is digamma. n >= 1: (-1)**(n+1) n! sum_{k<N} (x+k)**-(n+1) shifts x
    to x + N >= W, then the asymptotic series
    (-1)**(n+1) [(n-1)!/w**n + n!/(2 w**(n+1)) + sum_k B_2k (2k+n-1)!/((2k)! w**(2k+n))]
    (A&S 6.4.11); x <= 0 gives NaN for n >= 1 (SciPy extends it there). The
    derivative of polygamma(n) is polygamma(n + 1) (that of the composite).

    Raises:
        UnsupportedOpError: n is not a Python (or NumPy) integer >= 0, or is traced.
    """
    if L.is_node(n) or not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 0:
        arr = None if L.is_node(n) else np.asarray(n)
        if arr is not None and arr.ndim == 0 and float(arr) == int(arr) and arr >= 0:
            n = int(arr)
        else:
            raise UnsupportedOpError(f"polygamma: the order n must be a static integer >= 0, got {n!r}")
    n = int(n)
    if n == 0:
        return digamma(x)
    x = _f(x)
    big_w, k_terms = _polygamma_terms(n)
    shift_n = int(big_w)
    ok = x > 0.0
    z = _where(ok, x, 1.0)
    shift = z < big_w
    zs = _where(shift, z, big_w)
    acc = 0.0
    for k in range(shift_n):
        acc = acc + (1.0 / (zs + float(k))) ** (n + 1)
    w = _where(shift, zs + float(shift_n), z)
    u = 1.0 / w
    coefs = [float(_B[2 * k] * math.factorial(2 * k + n - 1) / math.factorial(2 * k)) for k in range(1, k_terms + 1)]
    series = math.factorial(n - 1) + (0.5 * math.factorial(n)) * u
    if coefs:
        series = series + (u * u) * _horner(u * u, coefs)
    asym = series * u ** n
    sign = float((-1) ** (n + 1))
    val = sign * (asym + math.factorial(n) * _where(shift, acc, 0.0))
    return _where(ok, val, np.nan)


def multigammaln(a, d: int):
    """log of the multivariate gamma function of dimension d (scipy.special.multigammaln).

    d(d-1)/4 log(pi) + sum_{j=1}^{d} gammaln(a + (1 - j)/2); d is a static
    integer >= 1. SciPy raises for a <= (d-1)/2; here those give the value of
    the formula (inf or a finite log|.|), as traced values cannot be checked.
    """
    if L.is_node(d) or int(d) != d or int(d) < 1:
        raise UnsupportedOpError(f"multigammaln: d must be a static integer >= 1, got {d!r}")
    d = int(d)
    a = _f(a)
    out = d * (d - 1) / 4.0 * math.log(math.pi) + 0.0 * a
    for j in range(1, d + 1):
        out = out + gammaln(a + (1 - j) / 2.0)
    return out


def gammasgn(x):
    """The sign of Gamma(x) (scipy.special.gammasgn): 1 for x > 0 and +0, -1 for -0, (-1)**ceil(-x) between the
    negative poles, NaN at the negative integers, -inf and NaN. Piecewise constant: zero derivative."""
    x = _f(x)
    one, mone, nan = _c(1.0, x), _c(-1.0, x), _c(np.nan, x)
    neg = x < 0.0
    fl = _floor(_where(neg, x, _c(0.5, x)))
    odd = (fl - 2.0 * _floor(fl * 0.5)) != 0.0
    pole = neg & (fl == x)
    zero_sign = _where(1.0 / _where(x == 0.0, x, one) < 0.0, mone, one)  # -1 for -0.0
    out = _where(neg, _where(odd, mone, one), _where(x == 0.0, zero_sign, one))
    return _where(pole | snp.isnan(x), nan, out)


def gamma(x):
    """Gamma(x) = gammasgn(x) exp(gammaln(x)) (scipy.special.gamma): +-inf at +-0, NaN at the negative integers."""
    x = _f(x)
    return gammasgn(x) * _exp(gammaln(x))


def rgamma(x):
    """1 / Gamma(x) = gammasgn(x) exp(-gammaln(x)) (scipy.special.rgamma): 0 at the poles 0, -1, -2, ..."""
    x = _f(x)
    pole = (x <= 0.0) & (_floor(_where(x <= 0.0, x, _c(0.5, x))) == x)
    xs = _where(pole, _c(1.0, x), x)
    return _where(pole, _c(0.0, x), gammasgn(xs) * _exp(-gammaln(xs)))


def betaln(a, b):
    """log |B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b) (scipy.special.betaln).

    With a <= b (the function is symmetric): for b >= 10 and a > 0 the
    difference gammaln(b) - gammaln(a + b) is written as Stirling terms,
    -(b - 1/2) log1p(a/b) - a log(a + b) + a + S(b) - S(a + b), which does not
    cancel for large b; otherwise the three gammaln directly.
    """
    a, b = _promote("betaln", a, b)
    order = a <= b  # (a where, not minimum/maximum: at a == b each argument keeps its own derivative)
    lo = _where(order, a, b)
    hi = _where(order, b, a)
    big = (hi >= 10.0) & (lo > 0.0)
    direct = gammaln(_where(big, 1.0, lo)) + gammaln(_where(big, 1.0, hi)) - gammaln(_where(big, 2.0, lo + hi))
    la = _where(big, lo, 1.0)
    lb = _where(big, hi, 10.0)
    s = la + lb

    def corr(w):
        u = 1.0 / w
        return u * _horner(u * u, _STIRLING)

    asym = (gammaln(la) - (lb - 0.5) * _log1p(la / lb) - la * _log(s) + la + corr(lb) - corr(s))
    return _where(big, asym, direct)


def beta(a, b):
    """B(a, b) for a, b > 0: exp(betaln(a, b))."""
    return _exp(betaln(a, b))


# ----- incomplete gamma and beta functions -----

_GAMMAINC_SERIES = 100  #: terms of the series of P(a, x) (x < a + 1)
_GAMMAINC_CF = 60  #: depth of Legendre's continued fraction of Q(a, x) (x >= a + 1)
_BETAINC_CF = 120  #: depth of the continued fraction of I_x(a, b)


def _gammainc_pq(a, x):
    """(P(a, x), Q(a, x)): the series (x < a + 1) or the continued fraction (NR 6.2.5, 6.2.7), fixed depths."""
    a, x = _promote("gammainc", a, x)
    ok = (a > 0.0) & (x >= 0.0)
    fin = ok & (a < np.inf) & (x < np.inf)
    a_s = _where(fin, a, _c(1.0, a))
    x_s = _where(fin, x, _c(1.0, x))
    use_series = x_s < a_s + 1.0
    # series: P = x**a e**-x / Gamma(a + 1) * sum_n x**n / ((a+1)...(a+n)), summed from the inside out
    xs = _where(use_series, x_s, _c(0.5, x))
    as_ = _where(use_series, a_s, _c(1.0, a))
    acc = 1.0 + 0.0 * xs
    for n in range(_GAMMAINC_SERIES, 0, -1):
        acc = 1.0 + xs / (as_ + float(n)) * acc
    p_ser = _exp(xlogy(as_, xs) - xs - gammaln(as_ + 1.0)) * acc
    # continued fraction: Q = e**-x x**a / Gamma(a) / (x + 1 - a - 1(1-a)/(x + 3 - a - 2(2-a)/(...)))
    xc = _where(use_series, _c(2.0, x), x_s)
    ac = _where(use_series, _c(1.0, a), a_s)
    t = 0.0 * xc
    for n in range(_GAMMAINC_CF, 0, -1):
        t = (float(n) * (float(n) - ac)) / (xc + (2.0 * n + 1.0) - ac - t)
    q_cf = _exp(ac * _log(xc) - xc - gammaln(ac)) / (xc + 1.0 - ac - t)
    p = _where(use_series, p_ser, 1.0 - q_cf)
    q = _where(use_series, 1.0 - p_ser, q_cf)
    # the limits: P(a, inf) = 1 and P(inf, x) = 0 for finite x (SciPy's values; both infinite: NaN)
    x_inf, a_inf = x == np.inf, a == np.inf
    p = _where(x_inf, _c(1.0, p), _where(a_inf, _c(0.0, p), p))
    q = _where(x_inf, _c(0.0, q), _where(a_inf, _c(1.0, q), q))
    ok = ok & snp.logical_not(x_inf & a_inf)
    nan = _c(np.nan, p)
    return _where(ok, p, nan), _where(ok, q, nan)


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x) (scipy.special.gammainc), a > 0, x >= 0.

    The series for x < a + 1 (100 terms) or Legendre's continued fraction
    (depth 60) above, both of fixed length: relative 1e-13 for a <= 100
    (larger a converge more slowly; the error grows). Differentiable in x and a.
    """
    return _gammainc_pq(a, x)[0]


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x) (scipy.special.gammaincc)."""
    return _gammainc_pq(a, x)[1]


def _betainc_cf(a, b, x):
    """I_x(a, b) by the continued fraction (NR 6.4.5) evaluated from a fixed depth inwards; x below the mean."""
    t = 0.0 * x
    for k in range(_BETAINC_CF, 0, -1):
        m = float(k // 2)
        if k % 2:  # d_{2m+1}
            d = -((a + m) * (a + b + m) * x) / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
        else:  # d_{2m}
            d = (m * (b - m) * x) / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
        t = d / (1.0 + t)
    front = _exp(xlogy(a, x) + xlog1py(b, -x) - betaln(a, b)) / a
    return front / (1.0 + t)


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (scipy.special.betainc), a, b > 0, 0 <= x <= 1.

    The continued fraction (NR 6.4.5) of fixed depth 120 for x < (a + 1)/(a + b + 2), else
    1 - I_{1-x}(b, a): relative 1e-13 for a, b <= 100. Differentiable in x, a and b.
    """
    a, b, x = _promote("betainc", a, b, x)
    ok = (a > 0.0) & (b > 0.0) & (x >= 0.0) & (x <= 1.0)
    a = _where(ok, a, _c(1.0, a))
    b = _where(ok, b, _c(1.0, b))
    x = _where(ok, x, _c(0.5, x))
    low = x < (a + 1.0) / (a + b + 2.0)
    direct = _betainc_cf(_where(low, a, b), _where(low, b, a), _where(low, x, 1.0 - x))
    return _where(ok, _where(low, direct, 1.0 - direct), _c(np.nan, x))


# ----- error function family -----


def erf(x):
    """The error function (scipy.special.erf); the `erf` primitive."""
    return L.unary("erf", _f(x))


def erfc(x):
    """1 - erf(x), accurate in the right tail (scipy.special.erfc); the `erfc` primitive (C99 erfc)."""
    return L.unary("erfc", _f(x))


_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
#: erfinv(a)/a as polynomials (highest power first, in t - mid), fitted by least squares against SciPy on
#: Chebyshev nodes: w = -log((1-a)(1+a)) in [0, 5] (rel 1.5e-7), s = sqrt(w) in [sqrt 5, 4] (3e-7), [4, 26.6] (1.6e-5).
_ERFINV_W = (2.5, [2.3285844415591005e-08, 3.4252485742362253e-07, -3.4633561643556865e-06, -4.383631590193493e-06,
                   0.0002183469146877566, -0.0012537486107351908, -0.004177389759073056, 0.24664075823047807,
                   1.5014093598328815])
_ERFINV_S1 = (3.118033988749895, [0.0010433120124020894, -0.0028265919623330893, 0.004007930038110243,
                                  -0.005333011636998051, 0.007139546943394207, 1.0036135700994573, 2.95132908125856])
_ERFINV_S2 = (15.3, [2.939262200073795e-11, -2.8772372718873165e-10, -5.17984064568385e-09, 5.545827067389224e-08,
                     -6.225594220201839e-08, 5.389852541833416e-06, -0.0001609544076803784, 1.003469490345592,
                     15.214689364713948])


def _erfinv_core(x, c):
    """y with erf(y) = x, given c = 1 - |x| accurately (c in [0, 1]); +-inf at c = 0."""
    edge = c == 0.0
    cs = _where(edge, 0.5, c)
    xs = _where(edge, 0.5, x)
    w = -_log(cs) - _log1p(1.0 - cs)  # -log((1 - a)(1 + a)), a = 1 - c
    mid_w, pw = _ERFINV_W
    mid1, p1 = _ERFINV_S1
    mid2, p2 = _ERFINV_S2
    central = w < 5.0
    s = _sqrt(_where(central, 5.0, w))
    tail = _where(s < 4.0, _poly_hi_first(s - mid1, p1), _poly_hi_first(s - mid2, p2))
    y = xs * _where(central, _poly_hi_first(_where(central, w, 2.5) - mid_w, pw), tail)
    sgn = L.unary("sign", xs, float_op=False)
    inner = _abs(xs) < 0.5
    for _ in range(2):  # Halley: y <- y - v / (1 + v y), v = f / f', f = erf(y) - x, f'' / f' = -2y
        f = _where(inner, erf(y) - xs, sgn * (cs - erfc(sgn * y)))
        v = f / (_TWO_OVER_SQRT_PI * _exp(-(y * y)))
        y = y - v / (1.0 + v * y)
    return _where(edge, _where(x > 0.0, _c(np.inf, y), _c(-np.inf, y)), y)


def erfinv(x):
    """The inverse error function on [-1, 1] (scipy.special.erfinv): +-inf at +-1, NaN outside.

    An initial approximation of the form of Giles (2012) refined by two Halley
    steps (see the module docstring); relative error about 1e-15 in float64.
    """
    x = _f(x)
    c = 1.0 - _abs(x)
    bad = c < 0.0
    out = _erfinv_core(_where(bad, 0.0, x), _where(bad, 1.0, c))
    return _where(bad, np.nan, out)


def erfcinv(y):
    """The inverse of erfc on [0, 2] (scipy.special.erfcinv): erfcinv(y) = erfinv(1 - y), accurate for tiny y."""
    y = _f(y)
    lower = y <= 1.0
    c = _where(lower, y, 2.0 - y)
    bad = (y < 0.0) | (y > 2.0)
    cs = _where(bad, 1.0, c)
    out = _erfinv_core(_where(lower, 1.0 - cs, cs - 1.0), cs)
    return _where(bad, np.nan, out)


#: erfcx(x) ~ 1/(x sqrt(pi)) sum_k (-1)**k (2k-1)!! / (2x**2)**k for x >= 25 (A&S 7.1.23), 8 terms.
_ERFCX_ASYM = [float((-1) ** k * math.prod(range(1, 2 * k, 2))) / 2.0 ** k for k in range(9)]


def erfcx(x):
    """The scaled complementary error function exp(x**2) erfc(x) (scipy.special.erfcx).

    exp(x**2) erfc(x) for x < 25 (relative error about x**2 eps from rounding x**2), the asymptotic series
    above, where erfc underflows; +inf for x < -26.6 as SciPy.
    """
    x = _f(x)
    big = x >= 25.0
    xs = _where(big, _c(0.0, x), x)
    direct = _exp(xs * xs) * erfc(xs)
    xb = _where(big, x, _c(30.0, x))
    u = 1.0 / (xb * xb)
    asym = _horner(u, _ERFCX_ASYM) / (xb * math.sqrt(math.pi))
    return _where(big, asym, direct)


def ndtr(x):
    """The standard normal CDF, 0.5 erfc(-x / sqrt 2) (scipy.special.ndtr)."""
    x = _f(x)
    return 0.5 * erfc(-x * _SQRT1_2)


def ndtri(p):
    """The inverse of ndtr on [0, 1] (scipy.special.ndtri): sqrt(2) erfinv(2p - 1), with 2 min(p, 1-p) as
    the complement so the tails are accurate (ndtri(1e-300) = -37.04...); +-inf at 0 and 1, NaN outside."""
    p = _f(p)
    bad = (p < 0.0) | (p > 1.0)
    ps = _where(bad, 0.5, p)
    c = 2.0 * _where(ps < 0.5, ps, 1.0 - ps)
    return _where(bad, np.nan, math.sqrt(2.0) * _erfinv_core(2.0 * ps - 1.0, c))


#: log(Mills ratio correction): sum_k (-1)**k (2k-1)!! / x**(2k), k = 0..8 (A&S 26.2.12), in u = 1/x**2.
_MILLS = [float((-1) ** k * math.prod(range(1, 2 * k, 2))) for k in range(9)]


def log_ndtr(x):
    """log of the standard normal CDF (scipy.special.log_ndtr), finite with a finite gradient far left.

    x > 0: log1p(-ndtr(-x)); -30 < x <= 0: log(ndtr(x)) (-10 in float32); x <= -30:
    -x**2/2 - log(-x) - log(2 pi)/2 + log(sum_k (-1)**k (2k-1)!!/x**(2k)).
    """
    x = _f(x)
    right = x > 0.0
    xr = _where(right, x, 1.0)
    r = _log1p(-0.5 * erfc(xr * _SQRT1_2))
    cut = -30.0 if np.dtype(x.dtype) == np.float64 else -10.0  # erfc(-cut/sqrt 2) stays normal in the dtype
    midm = (x > cut) & snp.logical_not(right)
    xm = _where(midm, x, 0.0)
    m = _log(0.5 * erfc(-xm * _SQRT1_2))
    xl = _where(right | midm, cut - 1.0, x)
    u = 1.0 / (xl * xl)
    left = -0.5 * (xl * xl) - _log(-xl) - _HALF_LOG_2PI + _log(_horner(u, _MILLS))
    return _where(right, r, _where(midm, m, left))


def expit(x):
    """The logistic sigmoid 1 / (1 + exp(-x)) (scipy.special.expit); the `sigmoid` primitive."""
    return L.unary("sigmoid", _f(x))


def logit(p):
    """log(p / (1 - p)) (scipy.special.logit); log1p((2p - 1)/(1 - p)) on (0.3, 0.65), where p/(1-p) ~ 1."""
    p = _f(p)
    mid = (p > 0.3) & (p < 0.65)
    pm = _where(mid, p, 0.5)
    po = _where(mid, 0.25, p)
    return _where(mid, _log1p((2.0 * pm - 1.0) / (1.0 - pm)), _log(po / (1.0 - po)))


def _xlog(x, y, fn, regular):
    x, y = _promote("xlogy", x, y)
    # x == 0 gives 0 unless y is NaN (SciPy); where y is in the regular domain of fn the product x fn(y)
    # is used as is, so d/dx = fn(y) at x = 0 too; elsewhere (fn(y) infinite or NaN) the value 0, derivative 0
    zero = (x == 0.0) & snp.logical_not(regular(y)) & snp.logical_not(snp.isnan(y))
    ys = _where(zero, 1.0, y)
    return _where(zero, 0.0, x * fn(ys))


def xlogy(x, y):
    """x log(y), 0 where x = 0 (and y is not NaN) (scipy.special.xlogy)."""
    return _xlog(x, y, _log, lambda y: (y > 0.0) & (y < np.inf))


def xlog1py(x, y):
    """x log1p(y), 0 where x = 0 (and y is not NaN) (scipy.special.xlog1py)."""
    return _xlog(x, y, _log1p, lambda y: (y > -1.0) & (y < np.inf))


def log_expit(x):
    """log(expit(x)) = -log1p(exp(-x)), stable for both signs (scipy.special.log_expit)."""
    x = _f(x)
    pos = x >= 0.0  # branches smooth through 0 (a max/abs form would give the derivative 0 there)
    xp = _where(pos, x, _c(0.0, x))
    xn = _where(pos, _c(0.0, x), x)
    return _where(pos, -_log1p(_exp(-xp)), xn - _log1p(_exp(xn)))


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf for x < 0 (scipy.special.entr)."""
    x = _f(x)
    pos = x > 0.0
    xs = _where(pos, x, _c(1.0, x))
    return _where(pos, -xs * _log(xs), _where(x == 0.0, _c(0.0, x), _where(x < 0.0, _c(-np.inf, x), x)))


def _entropy_terms(x, y, kl: bool):
    x, y = _promote("rel_entr", x, y)
    both = (x > 0.0) & (y > 0.0)
    xs, ys = _where(both, x, _c(1.0, x)), _where(both, y, _c(1.0, y))
    val = xs * _log(xs / ys)
    if kl:
        val = val - xs + ys
    edge = (x == 0.0) & (y >= 0.0)
    other = _where(snp.isnan(x) | snp.isnan(y), _c(np.nan, x), _c(np.inf, x))
    return _where(both, val, _where(edge, (y if kl else _c(0.0, x)) + 0.0 * x, other))


def rel_entr(x, y):
    """x log(x/y) for x, y > 0; 0 for x = 0 <= y; inf otherwise (scipy.special.rel_entr)."""
    return _entropy_terms(x, y, False)


def kl_div(x, y):
    """x log(x/y) - x + y for x, y > 0; y for x = 0 <= y; inf otherwise (scipy.special.kl_div)."""
    return _entropy_terms(x, y, True)


# ----- reductions: logsumexp, softmax, log_softmax -----


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over `axis` (scipy.special.logsumexp), stable (the maximum is factored out).

    b (broadcast against a) weights the terms; with return_sign=True the
    result is (log|s|, sign(s)) and negative sums are allowed, else a negative
    sum gives NaN as in SciPy. All -inf gives -inf.
    """
    a = _f(a)
    if b is not None:
        b = _f(b)
        a, b = L.promote_and_broadcast("logsumexp", a, b)
    ndim = len(np.shape(a)) if not L.is_node(a) else len(a.shape)
    axes = _axes(axis, ndim)
    m = snp.max(a, axis=axes, keepdims=True) if axes else a
    m = snp.stop_gradient(_where(_abs(m) == np.inf, 0.0, m))
    e = _exp(a - m)
    if b is not None:
        e = b * e
    s = snp.sum(e, axis=axes, keepdims=True) if axes else e
    if return_sign:
        sign = L.unary("sign", s, float_op=False)
        out = _log(_abs(s)) + m
    else:
        out = _log(s) + m
    if not keepdims and axes:
        out = snp.squeeze(out, axis=axes)
        if return_sign:
            sign = snp.squeeze(sign, axis=axes)
    return (out, sign) if return_sign else out


def log_softmax(x, axis=None):
    """x - logsumexp(x, axis, keepdims=True) (scipy.special.log_softmax; axis None: all elements), as
    (x - max) - log(sum(exp(x - max))) so that the largest entries keep their relative accuracy."""
    x = _f(x)
    ndim = len(x.shape)
    axes = _axes(axis, ndim)
    m = snp.max(x, axis=axes, keepdims=True) if axes else x
    m = snp.stop_gradient(_where(_abs(m) == np.inf, _c(0.0, m), m))
    shifted = x - m
    s = snp.sum(_exp(shifted), axis=axes, keepdims=True) if axes else _exp(shifted)
    return shifted - _log(s)


def softmax(x, axis=None):
    """exp(log_softmax(x, axis)) (scipy.special.softmax; axis None: all elements)."""
    return _exp(log_softmax(x, axis=axis))


# ----- dispatch of scipy.special ufuncs (tracing's __array_ufunc__) -----

#: scipy.special ufunc `__name__` -> the traced function. digamma's ufunc is named "psi".
UFUNCS: dict = {
    "gammaln": gammaln, "psi": digamma, "erf": erf, "erfc": erfc, "erfinv": erfinv, "erfcinv": erfcinv,
    "expit": expit, "logit": logit, "xlogy": xlogy, "xlog1py": xlog1py, "log_ndtr": log_ndtr, "ndtr": ndtr,
    "ndtri": ndtri, "i0": i0, "i1": i1, "i0e": i0e, "i1e": i1e, "betaln": betaln, "gamma": gamma, "beta": beta,
    "erfcx": erfcx, "log_expit": log_expit, "entr": entr, "rel_entr": rel_entr, "kl_div": kl_div,
    "gammasgn": gammasgn, "rgamma": rgamma, "j0": j0, "j1": j1, "y0": y0, "y1": y1, "jv": _jv, "yn": yn,
    "gammainc": gammainc, "gammaincc": gammaincc, "betainc": betainc,
}


def ufunc_rule(ufunc: Any):
    """The traced function of a scipy.special ufunc, or None (SciPy is looked up, never imported)."""
    mod = sys.modules.get("scipy.special")
    name = getattr(ufunc, "__name__", None)
    if mod is None or name not in UFUNCS or getattr(mod, name, None) is not ufunc:
        return None
    return UFUNCS[name]
