"""Quantiles of symgraph.scipy.stats (ppf, isf) and the incomplete gamma/beta inverses, and SciPy's values at
the edges of every distribution's domain: values against SciPy, derivatives (implicit function theorem), the
compiled code against the evaluator.

Where SciPy's own answer is wrong the comparison uses an independent check instead (t.ppf below 1e-200,
where SciPy gives +-inf for a finite quantile; poisson.isf below 1e-15, where SciPy gives NaN; poisson.ppf
within 1e-15 of 1): the defining inequalities through SciPy's CDF and survival function.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import symgraph as sg
import symgraph.scipy.quantiles as sq
import symgraph.scipy.stats as st

scipy = pytest.importorskip("scipy")
import scipy.special as ss  # noqa: E402
import scipy.stats as sst  # noqa: E402

LONG = bool(os.environ.get("SYMGRAPH_LONG_TESTS"))
# the quantiles' second derivatives run through the continued fractions twice: order 2 with SYMGRAPH_LONG_TESTS=1
ORDER = 2 if LONG else 1


def _quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with np.errstate(all="ignore"):
            return fn(*a, **k)


def _close(ours, ref, rtol):
    """Equal NaN/inf pattern, and relative error <= rtol elsewhere (0 compared exactly)."""
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    assert ours.shape == ref.shape
    bad = np.isnan(ours) != np.isnan(ref)
    assert not bad.any(), (ours[bad], ref[bad])
    inf = np.isinf(ref) | np.isinf(ours)
    assert np.array_equal(ours[inf], ref[inf]), (ours[inf], ref[inf])
    fin = np.isfinite(ref) & np.isfinite(ours)
    err = np.abs(ours[fin] - ref[fin]) / np.maximum(np.abs(ref[fin]), 1e-300)
    assert err.size == 0 or err.max() <= rtol, (err.max(), ours[fin][err.argmax()], ref[fin][err.argmax()])


#: q in (0, 1): both tails down to 1e-300 and 1 - 1e-16, the median; then the edges 0, 1, outside and NaN.
Q_IN = np.concatenate([[1e-300, 1e-100], np.geomspace(1e-20, 0.5, 10), 1.0 - np.geomspace(1e-16, 0.5, 8)])
Q_EDGE = np.array([0.0, 1.0, -0.1, 1.1, np.nan])
Q_ALL = np.concatenate([Q_IN, Q_EDGE])


def test_incomplete_gamma_inverses_match_scipy():
    a = np.geomspace(0.02, 150.0, 25)
    p = np.concatenate([np.geomspace(1e-300, 0.5, 25), 1.0 - np.geomspace(1e-16, 0.5, 20)])
    aa, pp = np.meshgrid(a, p)
    _close(_quiet(sq.gammaincinv, aa, pp), ss.gammaincinv(aa, pp), 5e-13)
    _close(_quiet(sq.gammainccinv, aa, pp), ss.gammainccinv(aa, pp), 5e-13)
    edge_a = np.array([0.0, -1.0, np.nan, 2.0, 2.0, 2.0, 2.0, np.inf])
    edge_p = np.array([0.5, 0.5, 0.5, 0.0, 1.0, -0.1, np.nan, 0.5])
    _close(_quiet(sq.gammaincinv, edge_a, edge_p), ss.gammaincinv(edge_a, edge_p), 0.0)
    _close(_quiet(sq.gammainccinv, edge_a, edge_p), ss.gammainccinv(edge_a, edge_p), 0.0)


def test_incomplete_beta_inverses_match_scipy():
    a = np.geomspace(0.05, 100.0, 10)
    p = np.concatenate([np.geomspace(1e-200, 0.5, 15), 1.0 - np.geomspace(1e-15, 0.5, 10)])
    aa, bb, pp = np.meshgrid(a, a, p)
    ref = ss.betaincinv(aa, bb, pp)
    ours = _quiet(sq.betaincinv, aa, bb, pp)
    assert np.all(np.isfinite(ours)) and np.isnan(ref).sum() < 20  # SciPy fails on a few q < 1e-40 with a, b > 10
    # where the two differ by more than 1e-12, ours solves I_x(a, b) = p at least as well (SciPy's own betainc)
    with np.errstate(all="ignore"):
        off = np.abs(ours - ref) > 1e-12 * ref
    res = lambda x: np.abs(ss.betainc(aa[off], bb[off], x) / pp[off] - 1.0)  # noqa: E731
    assert off.sum() < 10 and np.all(res(ours[off]) <= np.maximum(res(ref[off]), 1e-12))
    # the complement near x = 1: 1 - x below 1e-9 is resolved by neither (SciPy's residual there is 1e-4)
    ref = ss.betainccinv(aa, bb, pp)
    ours = _quiet(sq.betainccinv, aa, bb, pp)
    assert np.all(np.isfinite(ours)) and np.isnan(ref).sum() < 20
    ok = np.isfinite(ref)
    ours, ref = ours[ok], ref[ok]
    keep = ref < 1.0 - 1e-9
    _close(ours[keep], ref[keep], 1e-12)
    np.testing.assert_allclose(ours[~keep], ref[~keep], rtol=1e-11)
    # roots that underflow: SciPy (Boost) gives about the smallest normal number, and we give it
    assert sq.betaincinv(0.05, 3.0, 1e-250) == np.finfo(np.float64).tiny
    np.testing.assert_allclose(ss.betaincinv(0.05, 3.0, 1e-250), np.finfo(np.float64).tiny, rtol=1e-15)
    edge = (np.array([0.0, 1.0, 2.0, 2.0, 2.0, np.nan]), np.array([1.0, -1.0, 3.0, 3.0, 3.0, 1.0]),
            np.array([0.5, 0.5, 0.0, 1.0, 1.5, 0.5]))
    _close(_quiet(sq.betaincinv, *edge), ss.betaincinv(*edge), 0.0)
    _close(_quiet(sq.betainccinv, *edge), ss.betainccinv(*edge), 0.0)


_CONTINUOUS = [  # (distribution, shape parameters, loc, scale)
    ("t", (0.3,), 0.0, 1.0), ("t", (1.0,), 0.5, 2.0), ("t", (3.5,), 0.0, 1.0), ("t", (40.0,), -1.0, 0.5),
    ("t", (np.inf,), 0.0, 1.0),
    ("gamma", (0.1,), 0.0, 1.0), ("gamma", (1.0,), 0.5, 2.0), ("gamma", (3.3,), 0.0, 1.0), ("gamma", (60.0,), 0.0, 3.0),
    ("chi2", (0.5,), 0.0, 1.0), ("chi2", (7.0,), 1.0, 2.0),
    ("beta", (0.2, 0.5), 0.0, 1.0), ("beta", (2.0, 3.0), 0.0, 1.0), ("beta", (1.0, 1.0), 0.5, 2.0),
    ("beta", (30.0, 4.0), 0.0, 1.0),
    # edges: no valid parameter, SciPy's NaN everywhere
    ("t", (0.0,), 0.0, 1.0), ("t", (-1.0,), 0.0, 1.0), ("gamma", (0.0,), 0.0, 1.0), ("gamma", (2.0,), 0.0, -1.0),
    ("chi2", (np.nan,), 0.0, 1.0), ("beta", (0.0, 1.0), 0.0, 1.0), ("beta", (2.0, 3.0), 0.0, 0.0),
]


@pytest.mark.parametrize("dist,shape,loc,scale", _CONTINUOUS, ids=[f"{c[0]}{c[1]}{c[2]},{c[3]}" for c in _CONTINUOUS])
def test_continuous_ppf_isf_match_scipy(dist, shape, loc, scale):
    q = Q_ALL
    if dist in ("t", "beta"):  # below 1e-100 SciPy gives +-inf or a clamped value for t, NaN for beta.isf
        q = q[(q > 1e-100) | ~(q > 0.0)]
    tol = 2e-11 if dist == "beta" and shape[0] > 10 else 5e-13  # x ~ q**(1/a) amplifies the CDF's error a-fold
    for fn in ("ppf", "isf"):
        ours = _quiet(getattr(getattr(st, dist), fn), q, *shape, loc, scale)
        _close(ours, getattr(getattr(sst, dist), fn)(q, *shape, loc=loc, scale=scale), tol)


def test_float32_quantiles():
    # float32 in, float32 out: the same iterations with float32's range of log x; relative 1e-5 of SciPy's
    # float64 (the CDF's float32 error, times 1/a where x ~ q**(1/a) for a small shape a)
    q = np.concatenate([np.geomspace(1e-30, 0.5, 12), 1 - np.geomspace(1e-6, 0.5, 6)]).astype(np.float32)
    for dist, shape in (("gamma", (0.3,)), ("beta", (0.4, 7.0)), ("t", (0.8,)), ("chi2", (5.0,))):
        for fn in ("ppf", "isf"):
            ours = _quiet(getattr(getattr(st, dist), fn), q, *[np.float32(v) for v in shape])
            ref = getattr(getattr(sst, dist), fn)(q.astype(np.float64), *shape)
            assert ours.dtype == np.float32
            keep = np.abs(ref) > 1e-37  # float32 underflows below: 0 (or its smallest normal for beta)
            np.testing.assert_allclose(ours[keep], ref[keep], rtol=1e-5)
    np.testing.assert_array_equal(st.poisson.ppf(q, np.float32(3.0)), sst.poisson.ppf(q.astype(np.float64), 3.0))


def test_t_ppf_far_tails_where_scipy_overflows():
    # t.ppf(1e-300, 2.5) is -8.77e119 (SciPy: +inf). Far in the tail F(x) = f(x) |x| / df (1 + O(1/x**2)),
    # with SciPy's log density; df = 1 (Cauchy): F(x) = atan(1/|x|)/pi = 1/(pi |x|)
    for df in (2.5, 10.0):
        x = st.t.ppf(1e-300, df)
        assert x < 0 and abs(np.exp(sst.t.logpdf(x, df) + np.log(-x / df) + 300 * np.log(10.0)) - 1.0) < 1e-12
        assert st.t.isf(1e-300, df) == -x
    x = st.t.ppf(1e-300, 1.0)
    assert abs(-1.0 / (np.pi * x) / 1e-300 - 1.0) < 1e-13 and st.t.isf(1e-300, 1.0) == -x


def test_poisson_ppf_isf():
    mus = np.array([0.0, 0.01, 0.7, 3.0, 17.0, 60.0, 100.0])
    q = np.concatenate([np.geomspace(1e-300, 0.5, 20), 1.0 - np.geomspace(1e-14, 0.5, 12)])
    mm, qq = np.meshgrid(mus, q)
    np.testing.assert_array_equal(st.poisson.ppf(qq, mm, 2.0), sst.poisson.ppf(qq, mm, loc=2.0))
    k = st.poisson.isf(qq, mm)
    ref = sst.poisson.isf(qq, mm)
    ok = qq > 1e-15  # SciPy gives NaN below about 1e-15, and can be one below near it (sf(60; 17) > 8.4e-17)
    np.testing.assert_array_equal(k[ok], ref[ok])
    # everywhere (SciPy's NaNs included): the smallest k with P(K > k) <= q
    sf, sf_prev = sst.poisson.sf(k, mm), sst.poisson.sf(k - 1.0, mm)
    assert np.all(sf <= qq) and np.all((sf_prev > qq) | (k == 0))
    # within 1e-15 of 1: the smallest k with P(K > k) <= 1 - q, exactly (SciPy's pdtrik can be one below)
    qn = 1.0 - np.array([1.1102230246251565e-16, 3e-16])
    kn = st.poisson.ppf(qn, 17.0)
    assert np.all(sst.poisson.sf(kn, 17.0) <= 1.0 - qn) and np.all(sst.poisson.sf(kn - 1.0, 17.0) > 1.0 - qn)
    edge = np.array([0.0, 1.0, -0.1, 1.1, np.nan, 0.5, 0.5, 0.5])
    mu = np.array([2.0, 2.0, 2.0, 2.0, 2.0, 0.0, -1.0, np.nan])
    np.testing.assert_array_equal(st.poisson.ppf(edge, mu), sst.poisson.ppf(edge, mu))
    np.testing.assert_array_equal(st.poisson.isf(edge, mu), sst.poisson.isf(edge, mu))
    # piecewise constant: the derivative is zero in both modes
    assert np.all(sg.grad(lambda q, m: np.sum(st.poisson.ppf(q, m)), argnums=(0, 1))(np.array([0.3, 0.9]), 3.0)[0] == 0)
    assert sg.jvp(lambda m: st.poisson.ppf(0.3, m), (3.0,), (1.0,))[1] == 0.0


def test_quantile_derivatives_are_the_implicit_function_theorem():
    q = np.array([1e-6, 0.2, 0.5, 0.97])
    a, b = 2.5, 1.5
    x, y = st.gamma.ppf(q, a), st.beta.isf(q, a, b)
    # dx/dq = 1 / pdf(x) (isf: -1 / pdf(x)); dx/da = -(dF/da) / pdf(x), dF/da by central differences of SciPy's
    # CDF; one pass for all of them (t.ppf: test_quantile_check_grads)
    def f(q1, q2, s):
        return np.sum(st.gamma.ppf(q1, a)) + np.sum(st.beta.isf(q2, a, b)) + np.sum(st.gamma.ppf(q, s))

    g1, g2, gs = sg.grad(f, argnums=(0, 1, 2))(q, q, a)
    np.testing.assert_allclose(g1, 1.0 / sst.gamma.pdf(x, a), rtol=1e-12)
    np.testing.assert_allclose(g2, -1.0 / sst.beta.pdf(y, a, b), rtol=1e-11)
    h = 1e-6
    dfa = (sst.gamma.cdf(x, a + h) - sst.gamma.cdf(x, a - h)) / (2 * h)
    np.testing.assert_allclose(gs, np.sum(-dfa / sst.gamma.pdf(x, a)), rtol=1e-6)
    if not LONG:  # (4 s; check_grads to order 2 checks the second derivatives too with SYMGRAPH_LONG_TESTS=1)
        return
    # the second derivative in q: d2x/dq2 = -f'(x) / f(x)**3, f'(x)/f(x) = (a - 1)/x - 1 for the gamma
    d2 = sg.elementwise_grad(sg.elementwise_grad(lambda q: st.gamma.ppf(q, a)))(q)
    np.testing.assert_allclose(d2, -((a - 1.0) / x - 1.0) / sst.gamma.pdf(x, a) ** 2, rtol=1e-10)


# the default run checks t.ppf (the gamma's first derivatives: test_quantile_derivatives_are_the_implicit_function_
# theorem); SYMGRAPH_LONG_TESTS=1 every family to order 2
_GRAD_CASES = [
    ("t.ppf", (np.array([0.003, 0.2, 0.5, 0.85, 0.999]), 3.5, 0.3, 1.7)),
]
_LONG_GRAD_CASES = [
    ("gamma.ppf", (np.array([0.003, 0.2, 0.5, 0.85, 0.999]), 2.5, 0.3, 1.7)),
    ("beta.isf", (np.array([0.003, 0.2, 0.5, 0.85, 0.999]), 0.7, 3.0)),
    ("gamma.isf", (np.array([0.01, 0.4, 0.9]), 0.6)), ("chi2.ppf", (np.array([0.01, 0.4, 0.9]), 3.0)),
    ("beta.ppf", (np.array([0.01, 0.4, 0.9]), 2.5, 1.5)), ("t.isf", (np.array([0.01, 0.5, 0.9]), 1.5)),
]


@pytest.mark.parametrize("name,args", _GRAD_CASES + (_LONG_GRAD_CASES if LONG else []),
                         ids=[c[0] for c in _GRAD_CASES + (_LONG_GRAD_CASES if LONG else [])])
def test_quantile_check_grads(name, args):
    dist, fn = name.split(".")
    f = getattr(getattr(st, dist), fn)
    sg.check_grads(f, tuple(np.asarray(v, float) for v in args), order=ORDER, rtol=1e-5, atol=1e-7)


def test_quantiles_compile_to_the_evaluator():
    q = np.array([1e-30, 0.003, 0.5, 0.999, 1 - 1e-12, 0.0, 1.0, np.nan])

    def f(q, a):
        out = (st.gamma.ppf(q, a, 0.5, 2.0),)
        if LONG:
            out += (st.poisson.ppf(q, 3.0 * a), st.beta.isf(q, a, 0.7), st.t.ppf(q, a), st.chi2.isf(q, a),
                    st.poisson.isf(q, a))
        return out

    a = np.full(8, 2.5)
    ref = _quiet(f, q, a)
    for o, r in zip(_quiet(sg.compile(f), q, a), ref):
        _close(o, r, 4e-15)


def test_scipy_special_inverses_trace():
    def f(a, p):
        return ss.gammaincinv(a, p) + ss.betaincinv(a, 2.0, p) + ss.gammainccinv(a, p) + ss.betainccinv(a, 2.0, p)

    a, p = np.array([0.5, 3.0]), np.array([0.2, 0.9])
    np.testing.assert_allclose(sg.trace(f, a, p).evaluate(a, p), f(a, p), rtol=1e-12)
    g = sg.grad(lambda p: np.sum(ss.gammaincinv(3.0, p)))(p)
    np.testing.assert_allclose(g, 1.0 / sst.gamma.pdf(ss.gammaincinv(3.0, p), 3.0), rtol=1e-11)


# ----- SciPy's values at the edges of every distribution's domain -----

_X = np.array([-np.inf, -2.0, -0.0, 0.0, 0.3, 1.0, 1.5, 3.0, np.inf, np.nan])
_K = np.array([-np.inf, -1.0, 0.0, 0.5, 1.0, 2.0, 7.0, np.inf, np.nan])
_EDGES = {
    "norm": [(0.0, 1.0), (0.0, -1.0), (0.0, 0.0), (np.nan, 1.0), (0.0, np.nan), (np.inf, 1.0), (0.0, np.inf)],
    "logistic": [(0.0, 1.0), (0.0, -1.0), (0.0, 0.0), (np.nan, 1.0)],
    "t": [(3.0,), (0.0,), (-1.0,), (np.nan,), (np.inf,), (3.0, 0.0, -1.0), (3.0, 0.0, 0.0), (3.0, np.nan, 1.0)],
    "gamma": [(2.0,), (0.0,), (-1.0,), (np.nan,), (2.0, 0.0, -1.0), (2.0, 0.0, 0.0), (2.0, 0.5, 1.0), (np.inf,)],
    "chi2": [(3.0,), (0.0,), (-1.0,), (np.nan,), (3.0, 0.0, -2.0)],
    "beta": [(2.0, 3.0), (0.0, 1.0), (1.0, -1.0), (np.nan, 1.0), (2.0, 3.0, 0.0, -1.0), (2.0, 3.0, 0.5, 2.0),
             (0.5, 0.5), (1.0, 1.0)],
    "poisson": [(2.0,), (0.0,), (-1.0,), (np.nan,), (2.0, 1.0), (2.0, 0.5), (np.inf,)],
}


@pytest.mark.parametrize("dist", list(_EDGES))
def test_stats_values_at_the_edges_match_scipy(dist):
    ours, ref = getattr(st, dist), getattr(sst, dist)
    dens = ("logpmf", "pmf") if dist == "poisson" else ("logpdf", "pdf")
    for params in _EDGES[dist]:
        # gamma with a = inf, poisson with mu = inf: no density (SciPy: NaN from inf - inf); the CDFs are 0
        fns = ("cdf", "logcdf", "sf", "logsf", "ppf", "isf") if np.isinf(params[0]) and dist in ("gamma", "poisson") else \
            dens + ("cdf", "logcdf", "sf", "logsf", "ppf", "isf")
        for fn in fns:
            # (the quantiles' values inside (0, 1): the tests above; here the edges and one inner point)
            x = np.append(Q_EDGE, 0.3) if fn in ("ppf", "isf") else (_K if dist == "poisson" else _X)
            want = _quiet(getattr(ref, fn), x, *params)
            got = _quiet(getattr(ours, fn), x, *params)
            if fn in dens and dist in ("gamma", "chi2", "poisson"):
                # at x = +inf the limit (0 density, -inf log density); SciPy's formula gives inf - inf = NaN
                limit = 0.0 if fn in ("pdf", "pmf") else -np.inf
                valid = not np.isnan(want[x == 1.0][0])
                assert got[x == np.inf].tolist() == [limit] if valid else np.isnan(got[x == np.inf]).all()
                keep = x != np.inf
                got, want = got[keep], want[keep]
            if dist == "poisson" and fn == "logcdf" and not params[0] >= 0:
                keep = _K != np.inf  # SciPy gives 0 at k = inf before checking mu (and NaN for cdf itself)
                got, want = got[keep], want[keep]
            try:
                _close(got, want, 1e-12)
            except AssertionError as e:
                raise AssertionError(f"{dist}.{fn}{params}: {e}") from None


def test_stats_keyword_arguments_as_scipy():
    assert st.poisson.pmf(k=3.0, mu=2.0) == pytest.approx(sst.poisson.pmf(k=3.0, mu=2.0), rel=1e-14)
    assert st.gamma.ppf(q=0.3, a=2.0, scale=3.0) == pytest.approx(sst.gamma.ppf(q=0.3, a=2.0, scale=3.0), rel=1e-13)
    assert st.norm.logpdf(x=0.5, loc=1.0) == pytest.approx(sst.norm.logpdf(x=0.5, loc=1.0), rel=1e-15)
    with pytest.raises(TypeError, match="'df'"):
        st.t.cdf(0.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'mean'"):
        st.norm.cdf(0.5, mean=1.0)

