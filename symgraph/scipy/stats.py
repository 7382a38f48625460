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
about 100). Quantiles (ppf) exist for norm and logistic only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import lax as L
from .. import numpy as snp
from ..errors import ShapeError
from . import special as sp

__all__ = ["norm", "logistic", "t", "gamma", "chi2", "beta", "poisson", "multivariate_normal", "dirichlet"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _promote(*xs):
    return sp._promote("scipy.stats", *xs)


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


norm = _Namespace("norm", logpdf=_norm_logpdf, pdf=lambda x, loc=0.0, scale=1.0: sp._exp(_norm_logpdf(x, loc, scale)),
                  cdf=_norm_cdf, logcdf=_norm_logcdf, sf=_norm_sf, logsf=_norm_logsf, ppf=_norm_ppf, isf=_norm_isf)

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


logistic = _Namespace("logistic", logpdf=_logistic_logpdf,
                      pdf=lambda x, loc=0.0, scale=1.0: sp._exp(_logistic_logpdf(x, loc, scale)),
                      cdf=_logistic_cdf, logcdf=_logistic_logcdf, sf=_logistic_sf, logsf=_logistic_logsf,
                      ppf=_logistic_ppf)

# ----- t -----


def _t_logpdf(x, df, loc=0.0, scale=1.0):
    x, df, loc, scale = _promote(x, df, loc, scale)
    z = (x - loc) / scale
    half = 0.5 * (df + 1.0)
    return (sp.gammaln(half) - sp.gammaln(0.5 * df) - 0.5 * sp._log(df * math.pi) - sp._log(scale)
            - half * sp._log1p(z * z / df))


def _t_cdf(x, df, loc=0.0, scale=1.0):
    """P(T <= x) = 1 - I_{df/(df+z^2)}(df/2, 1/2)/2 for z >= 0 (by symmetry below)."""
    x, df, loc, scale = _promote(x, df, loc, scale)
    z = (x - loc) / scale
    tail = 0.5 * sp.betainc(0.5 * df, 0.5 + 0.0 * df, df / (df + z * z))
    return snp.where(z < 0.0, tail, 1.0 - tail)


def _t_sf(x, df, loc=0.0, scale=1.0):
    x, df, loc, scale = _promote(x, df, loc, scale)
    return _t_cdf(loc - (x - loc), df, loc, scale)


t = _Namespace("t", logpdf=_t_logpdf, pdf=lambda x, df, loc=0.0, scale=1.0: sp._exp(_t_logpdf(x, df, loc, scale)),
               cdf=_t_cdf, sf=_t_sf,
               logcdf=lambda x, df, loc=0.0, scale=1.0: _log_prob(_t_cdf(x, df, loc, scale), _t_sf(x, df, loc, scale)),
               logsf=lambda x, df, loc=0.0, scale=1.0: _log_prob(_t_sf(x, df, loc, scale), _t_cdf(x, df, loc, scale)))

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


def _cdf_family(name, logpdf, cdf, *params):
    """A namespace with logpdf, pdf, cdf, logcdf, sf, logsf from logpdf and cdf(..., upper=)."""
    return _Namespace(name, logpdf=logpdf, pdf=lambda *a, **k: sp._exp(logpdf(*a, **k)), cdf=cdf,
                      logcdf=lambda *a, **k: _log_prob(cdf(*a, **k), cdf(*a, upper=True, **k)),
                      sf=lambda *a, **k: cdf(*a, upper=True, **k),
                      logsf=lambda *a, **k: _log_prob(cdf(*a, upper=True, **k), cdf(*a, **k)))


gamma = _cdf_family("gamma", _gamma_logpdf, _gamma_cdf)
chi2 = _cdf_family("chi2", _chi2_logpdf, _chi2_cdf)

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


beta = _cdf_family("beta", _beta_logpdf, _beta_cdf)

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


poisson = _Namespace("poisson", logpmf=_poisson_logpmf,
                     pmf=lambda k, mu, loc=0.0: sp._exp(_poisson_logpmf(k, mu, loc)), cdf=_poisson_cdf,
                     logcdf=lambda k, mu, loc=0.0: _log_prob(_poisson_cdf(k, mu, loc), _poisson_cdf(k, mu, loc, True)),
                     sf=lambda k, mu, loc=0.0: _poisson_cdf(k, mu, loc, upper=True),
                     logsf=lambda k, mu, loc=0.0: _log_prob(_poisson_cdf(k, mu, loc, True), _poisson_cdf(k, mu, loc)))

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


def _mvn_logpdf(x, mean=None, cov=1.0):
    """log N(x; mean, cov) with x of shape (..., d); cov a scalar, a length-d diagonal or d x d (traced: an
    unrolled Cholesky factorization, O(d**3) graph nodes, for small d)."""
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
                                 pdf=lambda x, mean=None, cov=1.0: sp._exp(_mvn_logpdf(x, mean, cov)),
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
