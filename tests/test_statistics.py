"""searchsorted, the order statistics (median, quantile, percentile and their nan variants), interp, trapezoid.

Values are compared with NumPy bit for bit (np.testing.assert_array_equal,
which also matches NaN positions) through the evaluator over a sweep of
shapes, axes, methods and q, and through the LLVM backend on a few cases;
derivatives with check_grads to order 2 in both modes on tie-free inputs,
and the tie convention that docs/differentiation.md states.
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.batching import vmap

pytestmark = [pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning"),
              pytest.mark.filterwarnings("ignore:All-NaN slice:RuntimeWarning")]


def _eval(f, *args):
    return sg.trace(f, *args).evaluate(*args)


def _same(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_array_equal(got, want, err_msg=what)


# ----- searchsorted -----


def test_searchsorted_equals_numpy_sides_nans_ties_sorter_dtypes():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.integers(-4, 5, 17).astype(float), [np.nan, np.inf, -np.inf, 0.5]]).reshape(3, 7)
    for n in (0, 1, 2, 5, 8, 33):
        a = np.sort(rng.integers(-3, 4, n).astype(float))  # ties
        if n > 4:
            a[-2:] = np.nan  # NaN sorts last
        for side in ("left", "right"):
            for vv in (v, v[0, 0], v[1]):
                _same(_eval(lambda a, v: np.searchsorted(a, v, side=side), a, vv), np.searchsorted(a, vv, side), side)
            _same(_eval(lambda v: np.searchsorted(a, v, side), v), np.searchsorted(a, v, side))   # constant a
            _same(_eval(lambda a: np.searchsorted(a, 0.0, side), a), np.searchsorted(a, 0.0, side))  # constant v
    a = rng.standard_normal(9)
    s = np.argsort(a)
    for side in ("left", "right"):
        _same(_eval(lambda a, v: a.searchsorted(v, side=side, sorter=s), a, v), a.searchsorted(v, side, sorter=s))
    ai, vi = np.array([-3, 0, 0, 2, 7], np.int32), np.array([[0, 1], [-5, 9]], np.int64)
    _same(_eval(np.searchsorted, ai, vi), np.searchsorted(ai, vi))
    _same(_eval(lambda a, v: np.searchsorted(a, v, "right"), ai, vi), np.searchsorted(ai, vi, "right"))


def test_searchsorted_compiles_batches_and_has_zero_derivative():
    rng = np.random.default_rng(1)
    a = np.sort(rng.standard_normal(100))
    a[-3:] = np.nan
    v = np.concatenate([a[[0, 5, 50, 99]], rng.standard_normal(200), [np.nan, -np.inf]])
    cf = sg.compile(lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, side="right")))
    for got, side in zip(cf(a, v), ("left", "right")):
        _same(got, np.searchsorted(a, v, side))
    batched = vmap(lambda a, v: np.searchsorted(a, v), in_axes=(0, None))(np.stack([a, a - 1.0]), v)
    _same(batched, np.stack([np.searchsorted(a, v), np.searchsorted(a - 1.0, v)]))
    g = sg.grad(lambda a, v: np.sum(np.searchsorted(a, v) * v), argnums=(0, 1))(a[:-3], v[:-2])
    np.testing.assert_array_equal(g[0], 0.0)
    np.testing.assert_array_equal(g[1], np.searchsorted(a[:-3], v[:-2]).astype(float))


def test_searchsorted_errors():
    with pytest.raises(sg.ShapeError, match="1-d"):
        sg.trace(lambda a: np.searchsorted(a, 0.0), np.ones((2, 2)))
    with pytest.raises(sg.UnsupportedOpError, match="side"):
        sg.trace(lambda a: np.searchsorted(a, 0.0, side="middle"), np.ones(3))


# ----- order statistics -----

METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "weibull", "hazen", "median_unbiased",
           "normal_unbiased", "interpolated_inverted_cdf")
#: (shape, axis): 1-d, size 1, either axis of a matrix, a tuple of axes, all axes, a negative axis
LAYOUTS = [((7,), None), ((1,), 0), ((4, 6), 1), ((4, 6), 0), ((2, 3, 5), (0, 2)), ((2, 3, 4), None), ((3, 4), -1)]
QS = (0.3, np.array([0.0, 0.1, 0.5, 0.99, 1.0]), np.array([[0.25], [0.75]]), np.float32(0.4),
      np.array([0.2, 0.7], np.float32), 1, np.array([0, 1]))


def _sample(rng, shape, dtype, nans):
    a = rng.standard_normal(shape) * 3
    if dtype == np.int64:
        return np.round(a).astype(np.int64)
    a = a.astype(dtype)
    if nans:
        a.reshape(-1)[rng.random(a.size) < 0.3] = np.nan
        if a.ndim == 2:
            a[0, :] = np.nan  # an all-NaN slice for axis=1
    return a


def test_quantile_and_percentile_bitwise_equal_numpy_over_methods_q_layouts_dtypes():
    rng = np.random.default_rng(0)
    k = 0
    for method in METHODS:
        for _ in range(5):
            shape, axis = LAYOUTS[k % len(LAYOUTS)]
            dtype = (np.float64, np.float32, np.int64)[k % 3]
            q = QS[k % len(QS)]
            keepdims = k % 2 == 1
            a = _sample(rng, shape, dtype, nans=k % 4 == 3)
            k += 1
            for name in ("quantile", "percentile"):
                qq = q * 100 if name == "percentile" else q
                f = lambda a: getattr(np, name)(a, qq, axis=axis, method=method, keepdims=keepdims)  # noqa: E731
                _same(_eval(f, a), f(a), (name, method, shape, axis, dtype, q, keepdims))


def test_nan_quantiles_and_medians_bitwise_equal_numpy():
    rng = np.random.default_rng(1)
    for k, (shape, axis) in enumerate(LAYOUTS * 2):
        dtype = (np.float64, np.float32, np.int64)[k % 3]
        a = _sample(rng, shape, dtype, nans=k % 2 == 0)
        keepdims = k % 3 == 2
        for f in (lambda a: np.median(a, axis=axis, keepdims=keepdims),
                  lambda a: np.nanmedian(a, axis=axis, keepdims=keepdims),
                  lambda a: np.nanquantile(a, 0.3, axis=axis, method=METHODS[k % 10], keepdims=keepdims),
                  lambda a: np.nanpercentile(a, [10.0, 95.0], axis=axis, method=METHODS[(k + 3) % 10])):
            want = f(a)
            got = _eval(f, a)
            # NumPy gives an all-NaN slice its input's dtype when that slice is the whole result (float32 NaN
            # where an array q makes the others float64); symgraph keeps one result dtype
            if a.dtype == np.float32 and np.asarray(want).dtype == np.float32 and np.asarray(got).dtype == np.float64:
                want = np.asarray(want, np.float64)
            _same(got, want, (shape, axis, dtype, keepdims))
    # special values: NumPy's lerp gives NaN for [1, inf] at q = 1, median of +-inf is NaN
    for f, a in ((lambda a: np.quantile(a, [0.0, 0.5, 1.0]), np.array([1.0, np.inf])),
                 (np.median, np.array([np.inf, -np.inf])), (np.median, np.array([np.nan, 1.0, 2.0])),
                 (lambda a: np.quantile(a, 0.5, method="nearest"), np.array([4, -2, 7, 1]))):
        _same(_eval(f, a), f(a))


def test_order_statistics_compile_natively_and_batch():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 9))
    an = a.copy()
    an[0, 3] = np.nan
    an[1, :] = np.nan
    for f in (lambda a: np.median(a, axis=1), lambda a: np.quantile(a, [0.3, 0.8], axis=0, method="median_unbiased"),
              lambda a: np.nanquantile(a, [0.3, 0.8], axis=1), lambda a: np.nanmedian(a, axis=1, keepdims=True)):
        cf = sg.compile(f)
        for x in (a, an, a.astype(np.float32)):
            _same(cf(x), f(x))
    _same(vmap(lambda r: np.median(r))(a), np.median(a, axis=1))


def test_order_statistics_derivatives_order2_both_modes():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 6))  # tie-free
    for f in (lambda a: np.sum(np.median(a, axis=1) ** 2),
              lambda a: np.sum(np.quantile(a, [0.3, 0.8], axis=0) ** 2),
              lambda a: np.sum(np.nanpercentile(a, [30, 80], axis=(0, 1), method="hazen") ** 2),
              lambda a: np.sum(np.nanmedian(a, axis=0) ** 3)):
        sg.check_grads(f, (a,), order=2, modes=("fwd", "rev"))


def test_order_statistic_derivative_at_ties_follows_the_stable_sort():
    """Tied inputs take the tied ranks in array order: the first 1.0 (index 1) is order statistic 0, the second
    (index 2) order statistic 1, so quantile 0.3 (v = 1.2) sends 0.8 to index 2 and 0.2 to the next one, 2.0."""
    x = np.array([3.0, 1.0, 1.0, 5.0, 2.0])
    g = sg.grad(lambda x: np.quantile(x, 0.3))(x)
    np.testing.assert_allclose(g, [0.0, 0.0, 0.8, 0.0, 0.2], rtol=1e-6)
    np.testing.assert_array_equal(sg.grad(np.median)(np.array([2.0, 7.0, 2.0, 2.0])), [0.0, 0.0, 0.5, 0.5])
    np.testing.assert_array_equal(sg.grad(np.nanmedian)(np.array([2.0, np.nan, 2.0, 9.0])), [0.0, 0.0, 1.0, 0.0])
    _, t = sg.jvp(np.median, (np.array([2.0, 7.0, 2.0, 2.0]),), (np.array([1.0, 2.0, 3.0, 4.0]),))
    assert t == 3.5


def test_order_statistics_refuse_what_they_do_not_support():
    x = np.ones(4)
    for kw, word in (({"method": "inverted_cdf"}, "inverted_cdf"), ({"method": "closest_observation"}, "closest"),
                     ({"method": "averaged_inverted_cdf"}, "averaged"), ({"weights": np.ones(4)}, "weights"),
                     ({"method": "bogus"}, "bogus")):
        with pytest.raises(sg.UnsupportedOpError, match=word):
            sg.trace(lambda a: np.quantile(a, 0.5, **kw), x)
    with pytest.raises(sg.UnsupportedOpError, match="traced q"):
        sg.trace(lambda a, q: np.quantile(a, q), x, 0.5)
    with pytest.raises(sg.ShapeError, match="range"):
        sg.trace(lambda a: np.percentile(a, 101.0), x)
    with pytest.raises(sg.UnsupportedOpError, match="out="):
        sg.trace(lambda a: np.median(a, out=np.empty(())), x)


# ----- interp and trapezoid -----


def _same_signed(got, want, what=""):
    _same(got, want, what)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{what}: signs of zeros")


def test_interp_bitwise_equal_numpy_knots_ends_nans_infinities_period():
    rng = np.random.default_rng(4)
    xp = np.array([-1.0, 0.0, 0.5, 2.0, 2.0, 3.0])     # a repeated knot
    fp = np.array([1.0, -0.0, np.inf, 2.0, 5.0, -1.0])  # -0.0 and an infinite value (NumPy's NaN retries)
    x = np.concatenate([xp, [-2.0, 0.25, 1.0, 2.5, 4.0, np.nan, np.inf, -np.inf, 0.75], rng.uniform(-2, 4, 20)])
    for kw in ({}, {"left": -7.0, "right": 9.0}, {"period": 2.5}, {"period": -7.0}):
        f = lambda x, xp, fp: np.interp(x, xp, fp, **kw)  # noqa: E731
        _same_signed(_eval(f, x, xp, fp), f(x, xp, fp), kw)
    f = lambda x, xp, fp: np.interp(x, xp, fp, left=-7.0)  # noqa: E731
    _same_signed(sg.compile(f)(x, xp, fp), f(x, xp, fp))
    _same(_eval(lambda x: np.interp(x, [1.0], [3.0]), x), np.interp(x, [1.0], [3.0]))   # one point
    _same(_eval(lambda v: np.interp(v, xp, fp), 0.3), np.interp(0.3, xp, fp))             # 0-d x
    xf = x.astype(np.float32)
    _same(_eval(lambda v: np.interp(v, xp.astype(np.float32), fp), xf), np.interp(xf, xp.astype(np.float32), fp))
    rows = np.stack([np.sort(rng.standard_normal(6)) for _ in range(3)])
    _same(vmap(lambda r: np.interp(x[:8], r, fp))(rows), np.stack([np.interp(x[:8], r, fp) for r in rows]))


def test_interp_derivatives_and_the_knot_convention():
    rng = np.random.default_rng(5)
    xs, ys = np.sort(rng.uniform(0, 5, 8)), rng.standard_normal(8)
    xq = rng.uniform(-1, 6, 10)  # away from the knots
    sg.check_grads(lambda x, xp, fp: np.sum(np.interp(x, xp, fp) ** 2), (xq, xs, ys), order=2, modes=("fwd", "rev"))
    sg.check_grads(lambda x, fp: np.sum(np.sin(np.interp(x, xs, fp, period=6.0))), (xq, ys), order=2)
    # at a knot: the slope of the interval to its right (0 at the last knot), fp[j] gets 1 exactly
    np.testing.assert_array_equal(sg.grad(lambda x: np.sum(np.interp(x, xs, ys)))(xs),
                                  np.append(np.diff(ys) / np.diff(xs), 0.0))
    g = sg.grad(lambda fp: np.interp(xs[3], xs, fp))(ys)
    np.testing.assert_array_equal(g, np.eye(8)[3])
    _, t = sg.jvp(lambda x: np.interp(x, xs, ys), (xs[0],), (1.0,))
    assert t == (ys[1] - ys[0]) / (xs[1] - xs[0])


def test_trapezoid_equals_numpy_and_differentiates():
    rng = np.random.default_rng(6)
    y, x1 = rng.standard_normal((3, 5)), np.sort(rng.standard_normal(5))
    x2 = np.sort(rng.standard_normal((3, 5)), axis=1)
    for f in (np.trapezoid, lambda y: np.trapezoid(y, dx=0.3, axis=0), lambda y: np.trapezoid(y, x1),
              lambda y: np.trapezoid(y, x2, axis=1), lambda y: np.trapezoid(y[0].astype(np.float32))):
        want = f(y)
        for got in (_eval(f, y), sg.compile(f)(y)):
            assert np.asarray(got).dtype == np.asarray(want).dtype
            tol = 1e-6 if np.asarray(want).dtype == np.float32 else 1e-14  # summation order: rounding only
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    sg.check_grads(lambda y, x: np.sum(np.trapezoid(y, x) ** 2), (y, x1), order=2, modes=("fwd", "rev"))
    assert not hasattr(np, "trapz")  # NumPy 2 removed it: there is nothing to register
