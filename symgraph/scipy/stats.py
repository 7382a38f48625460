"""`symgraph.scipy.stats`: log densities, densities, CDFs and quantiles on traced values (as `jax.scipy.stats`).

Each distribution is a namespace of functions with SciPy's argument names
(`norm.logpdf(x, loc=0, scale=1)`, `t.logpdf(x, df, loc, scale)`,
`gamma.logpdf(x, a, loc, scale)`, `beta.logpdf(x, a, b, loc, scale)`,
`chi2.logpdf(x, df, loc, scale)`, `poisson.logpmf(k, mu, loc)`,
`multivariate_normal.logpdf(x, mean, cov)`, `dirichlet.logpdf(x, alpha)`,
`logistic.logpdf(x, loc, scale)`), written with symgraph.numpy and
`symgraph.scipy.special`, so every argument may be traced and
differentiated (to any order). Values follow SciPy: -inf log density
outside the support. The CDFs (cdf, logcdf, sf, logsf) of t, gamma, chi2,
beta and poisson use `special.gammainc`/`gammaincc`/`betainc` (fixed-depth
series and continued fractions: relative 1e-13 for shape parameters up to
about 100). Quantiles (ppf, isf) of every distribution but the multivariate
ones: t, gamma, chi2 and beta by the inverses in `symgraph.scipy.quantiles`
(Halley steps, differentiated by the implicit function theorem), poisson by
a search over a window of integers (piecewise constant). SciPy's edge values:
NaN for parameters outside their domain (scale <= 0, df <= 0, ...), NaN
arguments and q outside [0, 1]; the limits at x = +-inf (`_guarded`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import lax as L
from .. import numpy as snp
from ..errors import ShapeError, UnsupportedOpError
from . import quantiles as Q
from . import special as sp

__all__ = ["norm", "logistic", "t", "gamma", "chi2", "beta", "poisson", "multivariate_normal", "dirichlet"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _promote(*xs):
    return sp._promote("scipy.stats", *xs)


def _scale_ok(scale, out):
    """out where scale > 0, NaN elsewhere (SciPy's value for a non-positive or NaN scale)."""
    return snp.where(scale > 0.0, out, sp._c(np.nan, out))


def _neg_inf_outside(inside, logp):
    return snp.where(inside, logp, sp._c(-np.inf, logp))


class _Namespace:
    """A distribution: its functions as attributes (norm.logpdf, ...)."""

    def __init__(self, name: str, **fns: Any):
        self.__name__ = name
        for k, v in fns.items():
            setattr(self, k, v)

    def __repr__(self) -> str:
        return f"<symgraph.scipy.stats.{self.__name__}>"


#: The values of each kind of function at x = -inf and x = +inf.
_AT_INF = {"logpdf": (-np.inf, -np.inf), "pdf": (0.0, 0.0), "logpmf": (-np.inf, -np.inf), "pmf": (0.0, 0.0),
           "cdf": (0.0, 1.0), "logcdf": (-np.inf, 0.0), "sf": (1.0, 0.0), "logsf": (0.0, -np.inf)}


def _guarded(dist: str, kind: str, fn, params: tuple, check, limit=None):
    """fn(x, *params) with SciPy's values at the edges of its domain.

    NaN where a parameter fails the distribution's check (`check(values)`: df > 0, a > 0, ...; NaN fails
    it), where scale <= 0, where x is NaN, and for ppf/isf where q is outside [0, 1]; the limits at
    x = -inf/+inf (fn runs at a finite point there, so no NaN reaches a gradient). `limit` is
    (name, test, safe value, fn_at_limit): where test(value) the function is fn_at_limit(x, *the other
    parameters) (t with df = inf is the normal distribution).
    """
    names = [n for n, _ in params]
    first = "q" if kind in ("ppf", "isf") else ("k" if dist == "poisson" else "x")  # SciPy's name of it

    def f(*args, **kw):
        if args:
            x, args = args[0], args[1:]
        elif first in kw:
            x = kw.pop(first)
        else:
            raise TypeError(f"{dist}.{kind}() missing required argument {first!r}")
        if len(args) > len(params):
            raise TypeError(f"{dist}.{kind}() takes at most {len(params) + 1} positional arguments")
        vals = dict(params)
        vals.update(zip(names, args))
        for k, v in kw.items():
            if k not in vals:
                raise TypeError(f"{dist}.{kind}() got an unexpected keyword argument {k!r}")
            vals[k] = v
        missing = [n for n in names if vals[n] is None]
        if missing:
            raise TypeError(f"{dist}.{kind}() missing required argument {missing[0]!r}")
        x, *pv = _promote(x, *[vals[n] for n in names])
        d = dict(zip(names, pv))
        ok = check(d)
        if "scale" in d:
            ok = ok & (d["scale"] > 0.0)
        if kind in ("ppf", "isf"):
            ok = ok & (x >= 0.0) & (x <= 1.0)
            xs = x
        else:
            ok = ok & snp.logical_not(snp.isnan(x))
            finite = snp.isfinite(x)
            centre = d["loc"] + (0.5 * d["scale"] if "scale" in d else 0.0 * d["loc"])
            xs = snp.where(finite, x, snp.where(snp.isfinite(centre), centre, 0.0 * centre))
        if limit is None:
            out = fn(xs, *pv)
        else:
            lname, test, safe, at_limit = limit
            at = test(d[lname])
            args_ = [snp.where(at, safe + 0.0 * v, v) if n == lname else v for n, v in zip(names, pv)]
            out = snp.where(at, at_limit(xs, *[v for n, v in zip(names, pv) if n != lname]), fn(xs, *args_))
        if kind not in ("ppf", "isf"):
            lo, hi = _AT_INF[kind]
            # the limits, unless (x - loc) / scale is NaN there (loc = x = inf, scale = inf), as in SciPy
            z = (x - d["loc"]) / d["scale"] if "scale" in d else x - d["loc"]
            ok = ok & (finite | snp.logical_not(snp.isnan(z)))
            out = snp.where(finite, out, snp.where(x > 0.0, sp._c(hi, out), sp._c(lo, out)))
        return snp.where(ok, out, sp._c(np.nan, out))

    def quiet(*args, **kw):
        # on concrete values the masked branches (edges, tails) divide by zero as SciPy's own code
        # does internally; SciPy gives its NaN/inf without a RuntimeWarning, and so does this
        with np.errstate(all="ignore"):
            return f(*args, **kw)

    f.__name__ = f"{dist}.{kind}"
    f.__doc__ = f"scipy.stats.{dist}.{kind} on traced values (SciPy's argument names: {first}, {', '.join(names)})."
    quiet.__name__, quiet.__qualname__, quiet.__doc__ = f.__name__, f.__name__, f.__doc__
    return quiet


def _distribution(name: str, params: tuple, check, fns: dict, limit=None) -> _Namespace:
    """A namespace of the functions in fns, each guarded by _guarded (SciPy's edge values)."""
    lim = None
    if limit is not None:
        lname, test, safe, other = limit
        lim = lambda kind: (lname, test, safe, getattr(other, "_raw")[kind])  # noqa: E731
    ns = _Namespace(name, **{k: _guarded(name, k, v, params, check, None if lim is None else lim(k))
                             for k, v in fns.items()})
    ns._raw = dict(fns)
    return ns


_LOC_SCALE = (("loc", 0.0), ("scale", 1.0))


def _NO_CHECK(d):  # noqa: N802  (norm and logistic have no shape parameter: scale > 0 is checked for all)
    return d["scale"] > 0.0


# ----- norm -----


def _norm_logpdf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    z = (x - loc) / scale
    return -0.5 * (z * z) - sp._log(scale) - _HALF_LOG_2PI


def _norm_cdf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    return sp.ndtr((x - loc) / scale)


def _norm_logcdf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    return sp.log_ndtr((x - loc) / scale)


def _norm_sf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    return sp.ndtr((loc - x) / scale)


def _norm_logsf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    return sp.log_ndtr((loc - x) / scale)


def _norm_ppf(q, loc=0.0, scale=1.0):
    q, loc, scale = _promote(q, loc, scale)
    return loc + scale * sp.ndtri(q)


def _norm_isf(q, loc=0.0, scale=1.0):
    q, loc, scale = _promote(q, loc, scale)
    return loc - scale * sp.ndtri(q)


norm = _distribution("norm", _LOC_SCALE, _NO_CHECK, dict(
    logpdf=_norm_logpdf, pdf=lambda x, loc=0.0, scale=1.0: sp._exp(_norm_logpdf(x, loc, scale)), cdf=_norm_cdf,
    logcdf=_norm_logcdf, sf=_norm_sf, logsf=_norm_logsf, ppf=_norm_ppf, isf=_norm_isf))

# ----- logistic -----


def _softplus(x):
    # log(1 + e**x) = -log_expit(-x), by branches that are smooth through 0
    return -sp.log_expit(-x)


def _logistic_logpdf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    z = (x - loc) / scale
    # log(e**-z / (1 + e**-z)**2) = log expit(z) + log expit(-z)
    return sp.log_expit(z) + sp.log_expit(-z) - sp._log(scale)


def _logistic_cdf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    return sp.expit((x - loc) / scale)


def _logistic_logcdf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    return -_softplus(-(x - loc) / scale)


def _logistic_sf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    return sp.expit((loc - x) / scale)


def _logistic_logsf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    return -_softplus((x - loc) / scale)


def _logistic_ppf(q, loc=0.0, scale=1.0):
    q, loc, scale = _promote(q, loc, scale)
    return loc + scale * sp.logit(q)


def _logistic_isf(q, loc=0.0, scale=1.0):
    q, loc, scale = _promote(q, loc, scale)
    return loc - scale * sp.logit(q)


logistic = _distribution("logistic", _LOC_SCALE, _NO_CHECK, dict(
    logpdf=_logistic_logpdf, pdf=lambda x, loc=0.0, scale=1.0: sp._exp(_logistic_logpdf(x, loc, scale)),
    cdf=_logistic_cdf, logcdf=_logistic_logcdf, sf=_logistic_sf, logsf=_logistic_logsf, ppf=_logistic_ppf,
    isf=_logistic_isf))

# ----- t -----


def _t_logpdf(x, df, loc=0.0, scale=1.0):
    x, df, loc, scale = _promote(x, df, loc, scale)
    z = (x - loc) / scale
    half = 0.5 * (df + 1.0)
    return (sp.gammaln(half) - sp.gammaln(0.5 * df) - 0.5 * sp._log(df * math.pi) - sp._log(scale)
            - half * sp._log1p(z * z / df))


_T_SERIES = 30  #: terms of the series of the t CDF near its median


def _t_cdf(x, df, loc=0.0, scale=1.0):
    """P(T <= x) = 1 - I_{df/(df+z^2)}(df/2, 1/2)/2 for z >= 0 (by symmetry below); near the median
    (z**2 < min(1, df/4)) 1/2 + z c 2F1(1/2, (df+1)/2; 3/2; -z**2/df) with c = the density at 0 (A&S 26.7.1
    written as a hypergeometric series), smooth through z = 0 (the incomplete beta function's derivatives at
    its end point y = 1 are 0 * inf there)."""
    x, df, loc, scale = _promote(x, df, loc, scale)
    z = (x - loc) / scale
    small = z * z < snp.minimum(1.0 + 0.0 * df, 0.25 * df)
    zl = snp.where(small, 1.0 + 0.0 * z, z)
    tail = 0.5 * sp.betainc(0.5 * df, 0.5 + 0.0 * df, df / (df + zl * zl))
    zs = snp.where(small, z, 0.0 * z)
    u = -(zs * zs) / df
    b = 0.5 * (df + 1.0)
    acc = 1.0 + 0.0 * u
    for n in range(_T_SERIES - 1, -1, -1):
        acc = 1.0 + (0.5 + n) * (b + float(n)) / ((1.5 + n) * (n + 1.0)) * u * acc
    c = sp._exp(-sp.betaln(0.5 * df, 0.5 + 0.0 * df)) / sp._sqrt(df)  # 1 / (sqrt(df) B(df/2, 1/2))
    return snp.where(small, 0.5 + zs * c * acc, snp.where(z < 0.0, tail, 1.0 - tail))


def _t_sf(x, df, loc=0.0, scale=1.0):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _t_cdf(loc - (x - loc), df, loc, scale)


def _t_std_cdf(x, df):
    return _t_cdf(x, df)


def _t_std_pdf(x, df):
    return sp._exp(_t_logpdf(x, df))


def _t_solve(q, df):
    """The standard t quantile: |x| from one incomplete beta inverse. Near the median (|2q - 1| < 1/2)
    w = z**2 / (df + z**2) solves I_w(1/2, df/2) = |2q - 1|; in the tails y = df / (df + z**2) solves
    I_y(df/2, 1/2) = 2 min(q, 1 - q); df = inf is the normal quantile."""
    ok = (df > 0.0) & (q >= 0.0) & (q <= 1.0)
    inner = ok & (q > 0.0) & (q < 1.0) & (df < np.inf)
    qs = snp.where(inner, q, 0.5 + 0.0 * q)
    dfs = snp.where(inner, df, 1.0 + 0.0 * df)
    c = sp._abs(2.0 * qs - 1.0)  # exact (Sterbenz) near the median
    tail = 2.0 * snp.where(qs < 0.5, qs, 1.0 - qs)
    central = c < 0.5
    half = 0.5 + 0.0 * dfs
    a = snp.where(central, half, 0.5 * dfs)
    b = snp.where(central, 0.5 * dfs, half)
    pp = snp.where(central, c, tail)
    ly = Q._betainc_inverse(a, b, pp, snp.where(central, tail - 0.0 * c, c), log=True)
    inside = ly > -np.inf
    lys = snp.where(inside, ly, sp._c(-1.0, ly))
    y = sp._exp(lys)
    omy = -L.unary("expm1", lys)
    # |x| = sqrt(df w / (1 - w)) near the median, sqrt(df (1 - y) / y) = sqrt(df (1 - y)) e**(-log(y)/2) in
    # the tails (y may underflow there: t.ppf(1e-300, 1) = -3.2e299)
    mag = snp.where(central, sp._sqrt(dfs * y / omy), sp._sqrt(dfs * omy) * sp._exp(-0.5 * lys))
    mag = snp.where(inside, mag, snp.where(central, 0.0 * lys, sp._c(np.inf, ly)))
    x = snp.where(qs < 0.5, -mag, mag)
    x = snp.where(df == np.inf, sp.ndtri(q), x)
    edge = snp.where(q == 0.0, sp._c(-np.inf, x), sp._c(np.inf, x))
    return snp.where(inner | (ok & (df == np.inf)), x, snp.where(ok, edge, sp._c(np.nan, x)))


_t_ppf_std = Q.implicit_inverse("t_ppf", _t_solve, _t_std_cdf, _t_std_pdf, 1)


def _t_ppf(q, df, loc=0.0, scale=1.0):
    q, df, loc, scale = _promote(q, df, loc, scale)
    return _scale_ok(scale, loc + scale * _t_ppf_std(q, df))


def _t_isf(q, df, loc=0.0, scale=1.0):
    q, df, loc, scale = _promote(q, df, loc, scale)
    return _scale_ok(scale, loc - scale * _t_ppf_std(q, df))


t = _distribution("t", (("df", None),) + _LOC_SCALE, lambda d: d["df"] > 0.0, dict(
    logpdf=_t_logpdf, pdf=lambda x, df, loc=0.0, scale=1.0: sp._exp(_t_logpdf(x, df, loc, scale)), cdf=_t_cdf,
    sf=_t_sf, ppf=_t_ppf, isf=_t_isf,
    logcdf=lambda x, df, loc=0.0, scale=1.0: _log_prob(_t_cdf(x, df, loc, scale), _t_sf(x, df, loc, scale)),
    logsf=lambda x, df, loc=0.0, scale=1.0: _log_prob(_t_sf(x, df, loc, scale), _t_cdf(x, df, loc, scale))),
    limit=("df", lambda df: df == np.inf, 1.0, norm))  # df = inf: the normal distribution

# ----- gamma, chi2 -----


def _gamma_logpdf(x, a, loc=0.0, scale=1.0):
    x, a, loc, scale = _promote(x, a, loc, scale)
    y = (x - loc) / scale
    inside = y >= 0.0
    ys = snp.where(inside, y, 1.0 + 0.0 * y)
    return _neg_inf_outside(inside, sp.xlogy(a - 1.0, ys) - ys - sp.gammaln(a) - sp._log(scale))


def _chi2_logpdf(x, df, loc=0.0, scale=1.0):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _gamma_logpdf(x, 0.5 * df, loc, 2.0 * scale)


def _gamma_cdf(x, a, loc=0.0, scale=1.0, upper=False):
    x, a, loc, scale = _promote(x, a, loc, scale)
    y = (x - loc) / scale
    inside = y >= 0.0
    ys = snp.where(inside, y, 0.0 * y)
    fn = sp.gammaincc if upper else sp.gammainc
    return snp.where(inside, fn(a, ys), sp._c(1.0 if upper else 0.0, ys))


def _chi2_cdf(x, df, loc=0.0, scale=1.0, upper=False):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _gamma_cdf(x, 0.5 * df, loc, 2.0 * scale, upper)


def _log_prob(p, complement):
    """log p, as log1p(-(1 - p)) where p > 1/2 so that p = 1 - 1e-12 keeps its digits."""
    big = p > 0.5
    return snp.where(big, sp._log1p(-snp.where(big, complement, 0.0 * complement)),
                     sp._log(snp.where(big, 0.5 + 0.0 * p, p)))


def _cdf_family(name, params, check, logpdf, cdf, **quantiles):
    """A distribution with logpdf, pdf, cdf, logcdf, sf, logsf from logpdf and cdf(..., upper=) (and ppf, isf)."""
    return _distribution(name, params, check, dict(
        logpdf=logpdf, pdf=lambda *a: sp._exp(logpdf(*a)), cdf=cdf,
        logcdf=lambda *a: _log_prob(cdf(*a), cdf(*a, upper=True)), sf=lambda *a: cdf(*a, upper=True),
        logsf=lambda *a: _log_prob(cdf(*a, upper=True), cdf(*a)), **quantiles))


def _gamma_ppf(q, a, loc=0.0, scale=1.0):
    q, a, loc, scale = _promote(q, a, loc, scale)
    return _scale_ok(scale, loc + scale * Q.gammaincinv(a, q))


def _gamma_isf(q, a, loc=0.0, scale=1.0):
    q, a, loc, scale = _promote(q, a, loc, scale)
    return _scale_ok(scale, loc + scale * Q.gammainccinv(a, q))


def _chi2_ppf(q, df, loc=0.0, scale=1.0):
    q, df, loc, scale = _promote(q, df, loc, scale)
    return _gamma_ppf(q, 0.5 * df, loc, 2.0 * scale)


def _chi2_isf(q, df, loc=0.0, scale=1.0):
    q, df, loc, scale = _promote(q, df, loc, scale)
    return _gamma_isf(q, 0.5 * df, loc, 2.0 * scale)


gamma = _cdf_family("gamma", (("a", None),) + _LOC_SCALE, lambda d: d["a"] > 0.0, _gamma_logpdf, _gamma_cdf,
                    ppf=_gamma_ppf, isf=_gamma_isf)
chi2 = _cdf_family("chi2", (("df", None),) + _LOC_SCALE, lambda d: d["df"] > 0.0, _chi2_logpdf, _chi2_cdf,
                   ppf=_chi2_ppf, isf=_chi2_isf)

# ----- beta -----


def _beta_logpdf(x, a, b, loc=0.0, scale=1.0):
    x, a, b, loc, scale = _promote(x, a, b, loc, scale)
    y = (x - loc) / scale
    inside = (y >= 0.0) & (y <= 1.0)
    ys = snp.where(inside, y, 0.5 + 0.0 * y)
    return _neg_inf_outside(inside, sp.xlogy(a - 1.0, ys) + sp.xlog1py(b - 1.0, -ys) - sp.betaln(a, b)
                            - sp._log(scale))


def _beta_cdf(x, a, b, loc=0.0, scale=1.0, upper=False):
    x, a, b, loc, scale = _promote(x, a, b, loc, scale)
    y = (x - loc) / scale
    ys = snp.minimum(snp.maximum(y, 0.0 * y), 1.0 + 0.0 * y)
    if upper:  # 1 - I_y(a, b) = I_{1-y}(b, a)
        return sp.betainc(b, a, 1.0 - ys)
    return sp.betainc(a, b, ys)


def _beta_ppf(q, a, b, loc=0.0, scale=1.0):
    q, a, b, loc, scale = _promote(q, a, b, loc, scale)
    return _scale_ok(scale, loc + scale * Q.betaincinv(a, b, q))


def _beta_isf(q, a, b, loc=0.0, scale=1.0):
    q, a, b, loc, scale = _promote(q, a, b, loc, scale)
    return _scale_ok(scale, loc + scale * Q.betainccinv(a, b, q))


beta = _cdf_family("beta", (("a", None), ("b", None)) + _LOC_SCALE, lambda d: (d["a"] > 0.0) & (d["b"] > 0.0),
                   _beta_logpdf, _beta_cdf, ppf=_beta_ppf, isf=_beta_isf)

# ----- poisson -----


def _poisson_logpmf(k, mu, loc=0.0):
    k, mu, loc = _promote(k, mu, loc)
    j = k - loc
    inside = (j >= 0.0) & (sp._floor(j) == j)
    js = snp.where(inside, j, 0.0 * j)
    return _neg_inf_outside(inside, sp.xlogy(js, mu) - sp.gammaln(js + 1.0) - mu)


def _poisson_cdf(k, mu, loc=0.0, upper=False):
    """P(K <= k) = Q(floor(k) + 1, mu) (the upper regularized gamma function); 0 below the support."""
    k, mu, loc = _promote(k, mu, loc)
    j = sp._floor(k - loc)
    inside = j >= 0.0
    js = snp.where(inside, j, 0.0 * j)
    fn = sp.gammainc if upper else sp.gammaincc
    return snp.where(inside, fn(js + 1.0, mu), sp._c(1.0 if upper else 0.0, js))


_POISSON_WINDOW = 64  #: the candidate quantiles of poisson.ppf: a window of this many integers around a guess


def _poisson_quantile(p, qc, mu, loc):
    """The smallest integer k >= 0 with P(K <= k) >= p (qc = 1 - p, given accurately), plus loc.

    A window of _POISSON_WINDOW integers j around the Cornish-Fisher guess
    mu + sqrt(mu) z + (z**2 - 1)/6; one incomplete gamma function anchors the
    CDF at the window's start (P(K < j0) = Q(j0, mu)) for p <= 1/2, or the
    survival function at its end for p > 1/2 (P(K > j1) = P(j1 + 1, mu)), and
    sums of the pmf across the window give the rest; k counts the window's j
    with P(K <= j) < p. Piecewise constant: no derivative (stop_gradient).
    """
    ok = (mu >= 0.0) & (p >= 0.0) & (qc >= 0.0)
    inner = ok & (p > 0.0) & (qc > 0.0)
    mus = snp.where(inner, mu, 1.0 + 0.0 * mu)
    ps = snp.where(inner, p, 0.5 + 0.0 * p)
    qs = snp.where(inner, qc, 0.5 + 0.0 * qc)
    upper = ps > 0.5
    z = snp.where(upper, -sp.ndtri(qs), sp.ndtri(ps))
    cf = mus + sp._sqrt(mus) * z + (z * z - 1.0) / 6.0
    # far in the upper tail the Cornish-Fisher guess overshoots (z**2/6 grows, the quantile ~ z**2/log z); there
    # the leading term of P(K > k) = P(k + 1, mu) ~ mu**s e**-mu / s!, s = k + 1, is a close lower bound: s from
    # Newton steps on s log mu - mu - log s! = log(1 - p), kept above mu (below mu it has no root)
    lq = sp._log(qs)
    lmu = sp._log(snp.where(mus > 0.0, mus, 1.0 + 0.0 * mus))
    sl = snp.maximum(cf, mus) + 1.0
    for _ in range(4):
        g = sl * lmu - mus - sp.gammaln(sl + 1.0) - lq
        dg = lmu - sp.digamma(sl + 1.0)
        sl = snp.maximum(sl - g / snp.where(dg < 0.0, dg, -1.0 + 0.0 * dg), mus)
    guess = snp.where(upper, snp.minimum(cf, sl + 8.0), snp.minimum(cf, mus))
    w = _POISSON_WINDOW
    j0 = snp.maximum(sp._floor(guess) - float(w // 2), 0.0 * guess)
    top = j0 + float(w - 1)
    pq = sp._gammainc_pq(snp.where(upper, top + 1.0, snp.maximum(j0, 1.0 + 0.0 * j0)), mus)
    anchor = snp.where(upper, pq[0], snp.where(j0 > 0.0, pq[1], 0.0 * j0))
    js = snp.expand_dims(j0, -1) + np.arange(w, dtype=np.dtype(j0.dtype))
    m = snp.expand_dims(mus, -1)
    pmf = sp._exp(sp.xlogy(js, m) - sp.gammaln(js + 1.0) - m)
    cdf = snp.expand_dims(anchor, -1) + snp.cumsum(pmf, axis=-1)  # P(K <= j) from the start
    rev = snp.flip(snp.cumsum(snp.flip(pmf, axis=-1), axis=-1), axis=-1)  # sum_{i >= j} pmf(i) to the end
    after = snp.concatenate([rev[..., 1:], 0.0 * rev[..., :1]], axis=-1)
    sf = snp.expand_dims(anchor, -1) + after  # P(K > j) from the end
    below = snp.where(snp.expand_dims(upper, -1), sf > snp.expand_dims(qs, -1), cdf < snp.expand_dims(ps, -1))
    k = j0 + snp.sum(snp.where(below, 1.0 + 0.0 * pmf, 0.0 * pmf), axis=-1)
    k = snp.where(mus == 0.0, 0.0 * k, k)  # mu = 0: all the mass at 0
    edge = snp.where(p == 0.0, sp._c(-1.0, k), sp._c(np.inf, k))
    return snp.stop_gradient(snp.where(inner, k, snp.where(ok, edge, sp._c(np.nan, k))) + loc)


def _poisson_ppf(q, mu, loc=0.0):
    q, mu, loc = _promote(q, mu, loc)
    return _poisson_quantile(q, 1.0 - q, mu, loc)


def _poisson_isf(q, mu, loc=0.0):
    """The smallest integer k with P(K > k) <= q (SciPy's poisson.isf)."""
    q, mu, loc = _promote(q, mu, loc)
    return _poisson_quantile(1.0 - q, q, mu, loc)


poisson = _distribution("poisson", (("mu", None), ("loc", 0.0)), lambda d: d["mu"] >= 0.0, dict(
    logpmf=_poisson_logpmf, pmf=lambda k, mu, loc=0.0: sp._exp(_poisson_logpmf(k, mu, loc)), cdf=_poisson_cdf,
    logcdf=lambda k, mu, loc=0.0: _log_prob(_poisson_cdf(k, mu, loc), _poisson_cdf(k, mu, loc, True)),
    sf=lambda k, mu, loc=0.0: _poisson_cdf(k, mu, loc, upper=True),
    logsf=lambda k, mu, loc=0.0: _log_prob(_poisson_cdf(k, mu, loc, True), _poisson_cdf(k, mu, loc)),
    ppf=_poisson_ppf, isf=_poisson_isf))

# ----- multivariate_normal -----


def _shape(x) -> tuple:
    return tuple(x.shape) if L.is_node(x) else np.shape(x)


def _cholesky_rows(cov, d: int):
    """The lower Cholesky factor of a d x d covariance as a list of rows of scalars (unrolled, O(d**3) nodes)."""
    a = [[cov[i, j] for j in range(d)] for i in range(d)]
    lo: list[list[Any]] = [[None] * d for _ in range(d)]
    for j in range(d):
        s = a[j][j]
        for k in range(j):
            s = s - lo[j][k] * lo[j][k]
        lo[j][j] = sp._sqrt(s)
        for i in range(j + 1, d):
            s = a[i][j]
            for k in range(j):
                s = s - lo[i][k] * lo[j][k]
            lo[i][j] = s / lo[j][j]
    return lo


def _mvn_logpdf(x, mean=None, cov=1.0, allow_singular=False):
    """log N(x; mean, cov) with x of shape (..., d); cov a scalar, a length-d diagonal or d x d (traced: an
    unrolled Cholesky factorization, O(d**3) graph nodes, for small d).

    allow_singular=True (SciPy's keyword) takes a singular concrete d x d cov as SciPy does: the density on
    the support, with the pseudo-determinant and pseudo-inverse from the eigenvalues above SciPy's cutoff
    (1e6 eps max|eigenvalue| in float64, 1e3 eps in float32) and rank r in place of d. A traced cov with
    allow_singular=True raises UnsupportedOpError (the rank would depend on the traced values).
    """
    if allow_singular and _shape(sp._f(cov)) not in ((),) and len(_shape(sp._f(cov))) == 2:
        return _mvn_logpdf_singular(x, mean, cov)
    x = sp._f(x)
    xs = _shape(x)
    d = xs[-1] if xs else 1
    if mean is None:
        mean = 0.0
    mean = sp._f(mean)
    cov = sp._f(cov)
    ms, cs = _shape(mean), _shape(cov)
    if ms not in ((), (d,)):
        raise ShapeError(f"multivariate_normal.logpdf: mean has shape {ms}, expected ({d},)")
    diff = x - mean
    if len(cs) <= 1:
        if cs not in ((), (d,)):
            raise ShapeError(f"multivariate_normal.logpdf: cov has shape {cs}, expected (), ({d},) or ({d}, {d})")
        var = cov + 0.0 * diff
        quad = snp.sum(diff * diff / var, axis=-1) if xs else diff * diff / var
        logdet = snp.sum(sp._log(var), axis=-1) if xs else sp._log(var)
        return -0.5 * quad - 0.5 * logdet - d * _HALF_LOG_2PI
    if cs != (d, d):
        raise ShapeError(f"multivariate_normal.logpdf: cov has shape {cs}, expected ({d}, {d})")
    if not L.is_node(cov):
        lo_np = np.linalg.cholesky(np.asarray(cov))
        lo = [[lo_np[i, j] for j in range(d)] for i in range(d)]
    else:
        lo = _cholesky_rows(cov, d)
    # forward substitution L z = diff, vectorized over the leading axes of x
    z: list[Any] = []
    quad = 0.0
    logdet = 0.0
    for i in range(d):
        s = diff[..., i]
        for k in range(i):
            s = s - lo[i][k] * z[k]
        zi = s / lo[i][i]
        z.append(zi)
        quad = quad + zi * zi
        logdet = logdet + sp._log(lo[i][i] + 0.0 * zi) if L.is_node(cov) else logdet + math.log(lo[i][i])
    return -0.5 * quad - logdet - d * _HALF_LOG_2PI


def _mvn_logpdf_singular(x, mean, cov):
    if L.is_node(cov):
        raise UnsupportedOpError("multivariate_normal.logpdf(allow_singular=True) needs a concrete cov (its rank "
                                 "would depend on traced values); pass cov as a NumPy array or use "
                                 "allow_singular=False")
    c = np.asarray(cov)
    w, u = np.linalg.eigh(c)
    eps = (1e3 if c.dtype == np.float32 else 1e6) * np.finfo(c.dtype).eps * np.max(np.abs(w))
    keep = w > eps
    factor = u[:, keep] / np.sqrt(w[keep])  # cov^+ = factor factor^T on the support
    x = sp._f(x)
    diff = x - (0.0 if mean is None else sp._f(mean))
    z = snp.matmul(diff, factor.astype(c.dtype))
    quad = snp.sum(z * z, axis=-1)
    rank = int(keep.sum())
    return -0.5 * quad - 0.5 * float(np.sum(np.log(w[keep]))) - rank * _HALF_LOG_2PI


def _mvn_entropy(mean=None, cov=1.0):
    """Differential entropy (d log(2 pi e) + log det cov) / 2; d from mean (or cov)."""
    cov = sp._f(cov)
    cs = _shape(cov)
    d = cs[0] if cs else (_shape(sp._f(mean))[-1] if mean is not None and _shape(sp._f(mean)) else 1)
    if len(cs) <= 1:
        var = cov + np.zeros(d, dtype=cov.dtype) if not cs else cov
        logdet = snp.sum(sp._log(var))
    else:
        lo = _cholesky_rows(cov, d) if L.is_node(cov) else np.linalg.cholesky(np.asarray(cov))
        logdet = 0.0
        for i in range(d):
            logdet = logdet + 2.0 * sp._log(lo[i][i] if L.is_node(cov) else np.asarray(lo[i, i]))
    return 0.5 * (d * (1.0 + math.log(2.0 * math.pi)) + logdet)


multivariate_normal = _Namespace("multivariate_normal", logpdf=_mvn_logpdf,
                                 pdf=lambda x, mean=None, cov=1.0, allow_singular=False: sp._exp(
                                     _mvn_logpdf(x, mean, cov, allow_singular)),
                                 entropy=_mvn_entropy)

# ----- dirichlet -----


def _dirichlet_logpdf(x, alpha):
    """log Dirichlet(x; alpha); x has the K components along its first axis (SciPy's layout), alpha shape (K,)."""
    x, alpha = sp._f(x), sp._f(alpha)
    xs, as_ = _shape(x), _shape(alpha)
    if len(as_) != 1 or not xs or xs[0] != as_[0]:
        raise ShapeError(f"dirichlet.logpdf: x has shape {xs} and alpha {as_}; expected alpha (K,), x (K, ...)")
    a = snp.reshape(alpha, as_ + (1,) * (len(xs) - 1)) if len(xs) > 1 else alpha
    lnb = snp.sum(sp.gammaln(alpha)) - sp.gammaln(snp.sum(alpha))
    return snp.sum(sp.xlogy(a - 1.0, x), axis=0) - lnb


dirichlet = _Namespace("dirichlet", logpdf=_dirichlet_logpdf,
                       pdf=lambda x, alpha: sp._exp(_dirichlet_logpdf(x, alpha)))
