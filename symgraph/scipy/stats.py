"""`symgraph.scipy.stats`: log densities, densities, CDFs and quantiles on traced values (as `jax.scipy.stats`).

Each distribution is a namespace of functions with SciPy's argument names
(`norm.logpdf(x, loc=0, scale=1)`, `t.logpdf(x, df, loc, scale)`,
`gamma.logpdf(x, a, loc, scale)`, `beta.logpdf(x, a, b, loc, scale)`,
`chi2.logpdf(x, df, loc, scale)`, `poisson.logpmf(k, mu, loc)`,
`multivariate_normal.logpdf(x, mean, cov)`, `dirichlet.logpdf(x, alpha)`,
`logistic.logpdf(x, loc, scale)`), written with symgraph.numpy and
`symgraph.scipy.special`, so every argument may be traced and
differentiated (to any order). Values follow SciPy: -inf log density
outside the support. The CDFs of t, gamma, chi2, beta and poisson need the
incomplete beta and gamma functions, which are not provided yet.
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
    # log(1 + e**x) = max(x, 0) + log1p(e**-|x|)
    return snp.maximum(x, 0.0 * x) + sp._log1p(sp._exp(-sp._abs(x)))


def _logistic_logpdf(x, loc=0.0, scale=1.0):
    x, loc, scale = _promote(x, loc, scale)
    z = (x - loc) / scale
    az = sp._abs(z)
    return -az - 2.0 * sp._log1p(sp._exp(-az)) - sp._log(scale)


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


t = _Namespace("t", logpdf=_t_logpdf, pdf=lambda x, df, loc=0.0, scale=1.0: sp._exp(_t_logpdf(x, df, loc, scale)))

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


gamma = _Namespace("gamma", logpdf=_gamma_logpdf,
                   pdf=lambda x, a, loc=0.0, scale=1.0: sp._exp(_gamma_logpdf(x, a, loc, scale)))
chi2 = _Namespace("chi2", logpdf=_chi2_logpdf,
                  pdf=lambda x, df, loc=0.0, scale=1.0: sp._exp(_chi2_logpdf(x, df, loc, scale)))

# ----- beta -----


def _beta_logpdf(x, a, b, loc=0.0, scale=1.0):
    x, a, b, loc, scale = _promote(x, a, b, loc, scale)
    y = (x - loc) / scale
    inside = (y >= 0.0) & (y <= 1.0)
    ys = snp.where(inside, y, 0.5 + 0.0 * y)
    return _neg_inf_outside(inside, sp.xlogy(a - 1.0, ys) + sp.xlog1py(b - 1.0, -ys) - sp.betaln(a, b)
                            - sp._log(scale))


beta = _Namespace("beta", logpdf=_beta_logpdf,
                  pdf=lambda x, a, b, loc=0.0, scale=1.0: sp._exp(_beta_logpdf(x, a, b, loc, scale)))

# ----- poisson -----


def _poisson_logpmf(k, mu, loc=0.0):
    k, mu, loc = _promote(k, mu, loc)
    j = k - loc
    inside = (j >= 0.0) & (sp._floor(j) == j)
    js = snp.where(inside, j, 0.0 * j)
    return _neg_inf_outside(inside, sp.xlogy(js, mu) - sp.gammaln(js + 1.0) - mu)


poisson = _Namespace("poisson", logpmf=_poisson_logpmf,
                     pmf=lambda k, mu, loc=0.0: sp._exp(_poisson_logpmf(k, mu, loc)))

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


multivariate_normal = _Namespace("multivariate_normal", logpdf=_mvn_logpdf,
                                 pdf=lambda x, mean=None, cov=1.0: sp._exp(_mvn_logpdf(x, mean, cov)))

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
