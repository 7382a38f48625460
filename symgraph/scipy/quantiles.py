"""Inverses of the incomplete gamma and beta functions (gammaincinv, gammainccinv, betaincinv, betainccinv) and
the implicit-function derivative rule that symgraph.scipy.stats' quantiles (ppf, isf) share.

A root x of F(x, theta) = q is found by a fixed number of Halley steps on
log F in t = log x (log F is close to linear there in both tails: F ~ c x**a
at 0), from an initial approximation (Wilson-Hilferty for gamma, the normal
approximation or the leading term of the series for beta). The derivatives
are not those of the iteration: each inverse is a `custom_jvp` whose rule is
the implicit function theorem, dx = (dq - dF/dtheta . dtheta) / (dF/dx),
written with graph ops on the inverse's own output (dF/dtheta is forward
mode on the CDF's composite at a fresh copy of theta), so the rule
differentiates again to any order, in both modes.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .. import lax as L
from ..autodiff import fresh, jvp_nodes
from ..custom import custom_jvp
from . import special as sp
from ._pieces import _c, _exp, _log, _log1p, _promote, _where

__all__ = ["gammaincinv", "gammainccinv", "betaincinv", "betainccinv", "implicit_inverse", "UFUNCS"]

#: Halley steps of the incomplete gamma inverse: (series terms, continued-fraction depth) of each (None: special's)
_GAMMA_STEPS = ((20, 12), (30, 20), (50, 30), None)
#: Halley steps of the incomplete beta inverse: the depth of the continued fraction in each (the first steps
#: on a short one: they only need to get close)
_BETA_UP = 2.0  #: the largest step up in t of the incomplete beta inverse
_BETA_STEPS = (30, 30, 30, 30, None)
_MAX_STEP = 8.0  #: largest step in t = log x


def _range(like) -> tuple[float, float, float]:
    """(t_min, t_max, tiny) of like's dtype: the range of t = log x in the iteration (exp(t) stays a normal
    number, with a margin) and the smallest normal number."""
    fi = np.finfo(np.dtype(like.dtype))
    return math.log(float(fi.tiny)) + 8.0, math.log(float(fi.max)) - 1.0, float(fi.tiny)


def implicit_inverse(name: str, solve: Callable, cdf: Callable, dcdf_dx: Callable, nparams: int) -> custom_jvp:
    """A custom_jvp function x = inv(q, *theta) with F(x, *theta) = q, differentiable by the implicit function theorem.

    Args:
        name: the function's name (errors, dumps).
        solve: solve(q, *theta) -> x, the root (its own derivative is never built).
        cdf: cdf(x, *theta) -> F, a composite differentiable in theta.
        dcdf_dx: dcdf_dx(x, *theta) -> dF/dx (the density, or minus it for a survival function).
        nparams: the number of theta arguments.

    Returns:
        inv(q, *theta), whose tangent is (dq - sum_i dF/dtheta_i dtheta_i) / (dF/dx) at its own output.
    """

    def inv(q, *theta):
        with np.errstate(all="ignore"):  # masked tail branches on concrete values: SciPy's values, no warnings
            return solve(q, *theta)

    inv.__name__ = name
    fn = custom_jvp(inv)

    @fn.defjvp
    def _rule(primals, tangents):
        q, theta = primals[0], primals[1:]
        x = fn(q, *theta)
        num = tangents[0]
        live = [(i, t) for i, t in enumerate(tangents[1:]) if t is not None]
        if live:
            th = [fresh(L.asnode(v)) for v in theta]  # theta read again, independently of x (which depends on it)
            d = jvp_nodes([L.asnode(cdf(x, *th))], [th[i] for i, _ in live], [t for _, t in live])[0]
            if d is not None:
                num = num - d
        return x, num / dcdf_dx(x, *theta)

    return fn


# ----- incomplete gamma -----


def _gamma_logs(a, x, lga, depth=None):
    """(log P(a, x), log Q(a, x)) for a > 0, x > 0 given lga = gammaln(a): the series below a + 1, the continued
    fraction above (special.gammainc's), each side's own logarithm exact and the other by log1p(-exp)."""
    use_series = x < a + 1.0
    xs = _where(use_series, x, _c(0.5, x))
    as_ = _where(use_series, a, _c(1.0, a))
    acc = 1.0 + 0.0 * xs
    terms, cf_depth = depth or (sp._GAMMAINC_SERIES, sp._GAMMAINC_CF)
    for n in range(terms, 0, -1):
        acc = 1.0 + xs / (as_ + float(n)) * acc
    lp_ser = as_ * _log(xs) - xs - (_where(use_series, lga, _c(0.0, a)) + _log(as_)) + _log(acc)
    xc = _where(use_series, _c(2.0, x), x)
    ac = _where(use_series, _c(1.0, a), a)
    t = 0.0 * xc
    for n in range(cf_depth, 0, -1):
        t = (float(n) * (float(n) - ac)) / (xc + (2.0 * n + 1.0) - ac - t)
    lq_cf = ac * _log(xc) - xc - _where(use_series, _c(0.0, a), lga) - _log(xc + 1.0 - ac - t)
    lp = _where(use_series, lp_ser, _log1p(-_exp(lq_cf)))
    lq = _where(use_series, _log1p(-_exp(lp_ser)), lq_cf)
    return lp, lq


def _halley(t, h, g, curv, up=None):
    """One Halley step on h(t) with h' = g and h'' = curv, the correction bounded (Newton where it is large);
    the step at most _MAX_STEP down and `up` (default _MAX_STEP) up."""
    r = h * curv / (2.0 * g * g)
    r = _where(sp._abs(r) < 0.5, r, _c(0.0, r))
    step = h / g / (1.0 - r)
    up = _MAX_STEP if up is None else up
    step = _where(step > _MAX_STEP, _c(_MAX_STEP, step), _where(step < -up, _c(-up, step), step))
    return t - step


def _clip_t(t):
    t_min, t_max, _ = _range(t)
    return _where(t < t_min, _c(t_min, t), _where(t > t_max, _c(t_max, t), t))


def _gammainc_solve(a, p, q):
    """x > 0 with P(a, x) = p (equivalently Q(a, x) = q = 1 - p), for a > 0 and 0 < p < 1 (both given)."""
    lower = p <= q
    lt = _log(_where(lower, p, q))
    lga = sp.gammaln(a)
    # initial approximations: Wilson-Hilferty, x = a (1 - 1/(9a) + z / (3 sqrt a))**3 with z the normal quantile;
    # the lower tail x**a / Gamma(a + 1) = p; the upper tail x**(a-1) e**-x / Gamma(a) = q (two fixed-point steps)
    z = _where(lower, sp.ndtri(p), -sp.ndtri(q))
    base = 1.0 - 1.0 / (9.0 * a) + z / (3.0 * sp._sqrt(a))
    wh_ok = base > 0.0
    x_wh = a * base * base * base
    t_lo = (_log(p) + lga + _log(a)) / a  # log of the lower-tail root: a lower bound of the root
    lu = -lt - lga
    xu = _where(lu > 1.0, lu, _c(1.0, lu))
    for _ in range(2):
        xu = lu + (a - 1.0) * _log(xu)
        xu = _where(xu > 1.0, xu, _c(1.0, xu))
    t_wh = _log(_where(wh_ok, x_wh, _c(1.0, x_wh)))
    t0 = _where(wh_ok & (t_wh > t_lo), t_wh, t_lo)
    t_u = _log(xu)
    t0 = _where(lower | (lu <= 1.0) | (t0 > t_u), t0, t_u)
    t_min, _, _ = _range(t0)
    tiny = t0 < t_min  # the root underflows (a tiny p and a small a): the lower-tail root is exact there
    t = _clip_t(t0)
    sign = _where(lower, _c(1.0, a), _c(-1.0, a))
    for depth in _GAMMA_STEPS:
        x = _exp(t)
        lp, lq = _gamma_logs(a, x, lga, depth)
        lf = _where(lower, lp, lq)
        # h = log F - log target; h' = s x f / F; h'' = h' (1 + x f'/f) - h'**2 with x f'/f = a - 1 - x
        g = sign * _exp((a - 1.0) * t - x - lga + t - lf)
        t = _clip_t(_halley(t, lf - lt, g, g * (a - x - g)))
    return _where(tiny, _exp(t0), _exp(t))


def _gammainc_inverse(a, p, q):
    ok = (a > 0.0) & (p >= 0.0) & (q >= 0.0)
    inner = ok & (p > 0.0) & (q > 0.0)
    one = _c(1.0, a)
    half = _c(0.5, a)
    x = _gammainc_solve(_where(inner, a, one), _where(inner, p, half), _where(inner, q, half))
    edge = _where(p == 0.0, _c(0.0, x), _c(np.inf, x))
    return _where(inner, x, _where(ok, edge, _c(np.nan, x)))


def _gamma_pdf(x, a):
    xs = _where(x > 0.0, x, _c(1.0, x))
    return _where(x > 0.0, _exp(sp.xlogy(a - 1.0, xs) - xs - sp.gammaln(a)), _c(0.0, x))


_gammaincinv_q = implicit_inverse("gammaincinv", lambda p, a: _gammainc_inverse(a, p, 1.0 - p),
                                  lambda x, a: sp.gammainc(a, x), _gamma_pdf, 1)
_gammainccinv_q = implicit_inverse("gammainccinv", lambda q, a: _gammainc_inverse(a, 1.0 - q, q),
                                   lambda x, a: sp.gammaincc(a, x), lambda x, a: -_gamma_pdf(x, a), 1)


def gammaincinv(a, p):
    """x with P(a, x) = p, the inverse of the regularized lower incomplete gamma function (scipy.special.gammaincinv).

    0 at p = 0, inf at p = 1, NaN for a <= 0 or p outside [0, 1] (SciPy's
    values). Halley steps on log P or log Q (whichever is below 1/2) in
    log x; relative error about 1e-13 for a up to 100. Differentiable in
    a and p (implicit function theorem).
    """
    a, p = _promote("gammaincinv", a, p)
    return _gammaincinv_q(p, a)


def gammainccinv(a, q):
    """x with Q(a, x) = q, the inverse of the regularized upper incomplete gamma function (scipy.special.gammainccinv)."""
    a, q = _promote("gammainccinv", a, q)
    return _gammainccinv_q(q, a)


# ----- incomplete beta -----


def _beta_logs(a, b, x, omx, lbeta, depth=None):
    """(log I_x(a, b), log(1 - I_x(a, b))) for a, b > 0, 0 < x < 1 (omx = 1 - x, given accurately), with
    lbeta = betaln(a, b): one continued fraction (special.betainc's, at (a, b, x) below the mean, at
    (b, a, 1 - x) above), whose side is exact; `depth` terms (special's depth by default).
"""
    low = x < (a + 1.0) / (a + b + 2.0)
    aa, bb = _where(low, a, b), _where(low, b, a)
    xx = _where(low, x, omx)
    t = 0.0 * xx
    for k in range(depth or sp._BETAINC_CF, 0, -1):
        m = float(k // 2)
        if k % 2:
            d = -((aa + m) * (aa + bb + m) * xx) / ((aa + 2.0 * m) * (aa + 2.0 * m + 1.0))
        else:
            d = (m * (bb - m) * xx) / ((aa + 2.0 * m - 1.0) * (aa + 2.0 * m))
        t = d / (1.0 + t)
    ld = aa * _log(xx) + bb * _log(_where(low, omx, x)) - lbeta - _log(aa) - _log1p(t)
    other = _log1p(-_exp(ld))
    return _where(low, ld, other), _where(low, other, ld)


def _betainc_solve(a, b, p, q):
    """log x for 0 < x < 1 with I_x(a, b) = p (and 1 - I_x(a, b) = q), for a, b > 0 and 0 < p < 1 (both given)."""
    lower = p <= q
    lt = _log(_where(lower, p, q))
    lbeta = sp.betaln(a, b)
    # initial approximations: the normal approximation (A&S 26.5.22) for a, b >= 1; else the leading terms
    # x**a / (a B) of the lower tail and (1-x)**b / (b B) of the upper one, split where their masses meet
    z = _where(lower, -sp.ndtri(p), sp.ndtri(q))
    lam = (z * z - 3.0) / 6.0
    r2a, r2b = 1.0 / (2.0 * a - 1.0), 1.0 / (2.0 * b - 1.0)
    hh = 2.0 / (r2a + r2b)
    w = z * sp._sqrt(_where(hh + lam > 0.0, hh + lam, _c(1.0, hh))) / hh - (r2b - r2a) * (lam + 5.0 / 6.0 - 2.0 / (3.0 * hh))
    t_norm = _log(a) - _log(a + b * _exp(2.0 * w))
    lsum = _log(a + b)
    lm_lo = a * (_log(a) - lsum) - _log(a)
    lm_up = b * (_log(b) - lsum) - _log(b)
    lw = _where(lm_lo > lm_up, lm_lo + _log1p(_exp(lm_up - lm_lo)), lm_up + _log1p(_exp(lm_lo - lm_up)))
    t_lo = (_log(a) + lw + _log(p)) / a
    s_up = (_log(b) + lw + _log(q)) / b  # log(1 - x)
    t_up = _log1p(-_exp(_where(s_up < 0.0, s_up, _c(-1e-300, s_up))))
    use_lo = _log(p) < lm_lo - lw
    # for a, b >= 1 the leading terms bound the root (t_lo below it in the lower tail, t_up above it in the
    # upper one), so the normal approximation is kept within them
    tb_lo = (_log(a) + lbeta + _log(p)) / a
    sb_up = (_log(b) + lbeta + _log(q)) / b
    tb_up = _log1p(-_exp(_where(sb_up < 0.0, sb_up, _c(-1e-300, sb_up))))
    t_mid = _where(hh + lam > 0.0, t_norm, _where(lower, tb_lo, tb_up))
    t_mid = _where(lower, _where(t_mid > tb_lo, t_mid, tb_lo), _where(t_mid < tb_up, t_mid, tb_up))
    t0 = _where((a >= 1.0) & (b >= 1.0), t_mid, _where(use_lo, t_lo, t_up))
    t0 = _where(t0 < 0.0, t0, _c(-1e-300, t0))
    # a root that underflows: the leading term of the lower tail is exact there
    t_min = _range(tb_lo)[0]
    tiny = lower & (tb_lo < t_min)
    t0 = _where(tiny, tb_lo, t0)
    t = _where(t0 < t_min, _c(t_min, t0), t0)
    sign = _where(lower, _c(1.0, a), _c(-1.0, a))
    for depth in _BETA_STEPS:
        x = _exp(t)
        omx = -L.unary("expm1", t)
        l1x = _log(omx)
        li, lc = _beta_logs(a, b, x, omx, lbeta, depth)
        lf = _where(lower, li, lc)
        # h' = s x f / F with x f = x**a (1 - x)**(b-1) / B; x f'/f = a - 1 - (b - 1) x / (1 - x)
        g = sign * _exp(a * t + (b - 1.0) * l1x - lbeta - lf)
        tn = _halley(t, lf - lt, g, g * (a - (b - 1.0) * x / omx - g), _BETA_UP)
        t = _where(tn < 0.0, tn, 0.5 * t)  # stay below x = 1
        t = _where(t < t_min, _c(t_min, t), t)
    return _where(tiny, t0, t)


def _betainc_inverse(a, b, p, q, log=False):
    """x with I_x(a, b) = p = 1 - q (SciPy's values at the edges), or log x with log=True (for roots that
    underflow: t.ppf far in its tails)."""
    ok = (a > 0.0) & (b > 0.0) & (p >= 0.0) & (q >= 0.0)
    inner = ok & (p > 0.0) & (q > 0.0)
    one, half = _c(1.0, a), _c(0.5, a)
    t = _betainc_solve(_where(inner, a, one), _where(inner, b, one), _where(inner, p, half), _where(inner, q, half))
    if log:
        edge = _where(p == 0.0, _c(-np.inf, t), _c(0.0, t))
        return _where(inner, t, _where(ok, edge, _c(np.nan, t)))
    # SciPy (Boost's ibeta_inv) returns the smallest normal number for a root that underflows
    tiny_x = _range(t)[2]
    x = _where(t < math.log(tiny_x), _c(tiny_x, t), _exp(t))
    edge = _where(p == 0.0, _c(0.0, x), _c(1.0, x))
    return _where(inner, x, _where(ok, edge, _c(np.nan, x)))


def _beta_pdf(x, a, b):
    inside = (x > 0.0) & (x < 1.0)
    xs = _where(inside, x, _c(0.5, x))
    return _where(inside, _exp(sp.xlogy(a - 1.0, xs) + sp.xlog1py(b - 1.0, -xs) - sp.betaln(a, b)), _c(0.0, x))


_betaincinv_q = implicit_inverse("betaincinv", lambda p, a, b: _betainc_inverse(a, b, p, 1.0 - p),
                                 lambda x, a, b: sp.betainc(a, b, x), _beta_pdf, 2)
_betainccinv_q = implicit_inverse("betainccinv", lambda q, a, b: _betainc_inverse(a, b, 1.0 - q, q),
                                  lambda x, a, b: sp.betainc(b, a, 1.0 - x), lambda x, a, b: -_beta_pdf(x, a, b), 2)


def betaincinv(a, b, p):
    """x with I_x(a, b) = p, the inverse of the regularized incomplete beta function (scipy.special.betaincinv).

    0 at p = 0, 1 at p = 1, NaN for a <= 0, b <= 0 or p outside [0, 1].
    Halley steps on log I or log(1 - I) (whichever is below 1/2) in log x;
    relative error about 1e-13 for a, b up to 100. Differentiable in a, b and p.
    """
    a, b, p = _promote("betaincinv", a, b, p)
    return _betaincinv_q(p, a, b)


def betainccinv(a, b, q):
    """x with 1 - I_x(a, b) = q (scipy.special.betainccinv), accurate for q near 0."""
    a, b, q = _promote("betainccinv", a, b, q)
    return _betainccinv_q(q, a, b)


#: scipy.special ufunc `__name__` -> the traced function; merged into special.UFUNCS (which tracing's
#: `__array_ufunc__` consults through special.ufunc_rule) when this module is imported, as symgraph.scipy does.
UFUNCS: dict = {"gammaincinv": gammaincinv, "gammainccinv": gammainccinv, "betaincinv": betaincinv,
                 "betainccinv": betainccinv}
sp.UFUNCS.update(UFUNCS)
