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
