"""Basic slices of every kind, empty ones and negative steps included, agree with NumPy everywhere.

An exhaustive sweep of 1-d slices (length n of 0-4; start and stop from
-(n+2) to n+2, -6..6 with SYMGRAPH_LONG_TESTS=1, or None; steps +-1..3) through the evaluator, forward mode, reverse mode and both
compiled backends. A normalized start of -1 with a negative step once read
as "the last element" (``np.sum(x[-5::-1])`` of ``np.ones(3)`` gave 3.0
instead of 0.0, and its gradient raised a bare ValueError).
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

import symgraph as sg

LONG = bool(os.environ.get("SYMGRAPH_LONG_TESTS"))
LENGTHS = range(5)
STEPS = (1, 2, 3, -1, -2, -3)


def _slices(n: int) -> list[slice]:
    """Every slice of a length-n axis with start and stop from two past either end (-(n+2)..n+2) or None.

    Bounds further out fall in the same classes (clipped to the ends, with normalized values below -1 or
    above n): SYMGRAPH_LONG_TESTS=1 sweeps -6..6 at every length, as the default run does at length 4.
    """
    reach = 6 if LONG else n + 2
    bounds = list(range(-reach, reach + 1)) + [None]
    return [slice(a, b, c) for a, b, c in itertools.product(bounds, bounds, STEPS)]


def _want(x, sl):
    """NumPy's value and gradient of sum(x[sl] ** 2)."""
    g = np.zeros_like(x)
    np.add.at(g, np.arange(x.size)[sl], 2 * x[sl])
    return np.sum(x[sl] ** 2), g


def _square_sum(sl):
    return lambda x: np.sum(x[sl] * x[sl])


def test_the_reported_case():
    x = np.ones(3)
    f = lambda x: np.sum(x[-5::-1])  # noqa: E731
    assert sg.trace(f, x).evaluate(x) == 0.0
    assert sg.jvp(f, (x,), (x,)) == (0.0, 0.0)
    np.testing.assert_array_equal(sg.grad(f)(x), np.zeros(3))
    for backend in ("numpy", "llvm"):
        value, grad = sg.compile(sg.value_and_grad(f), backend=backend)(x)
        assert value == 0.0
        np.testing.assert_array_equal(grad, np.zeros(3))


@pytest.mark.parametrize("n", LENGTHS)
def test_every_small_slice_evaluator_jvp_vjp(n):
    x = np.arange(1.0, n + 1.0)
    ones = np.ones(n)
    bad = []
    for sl in _slices(n):
        f = _square_sum(sl)
        value, grad = _want(x, sl)
        if sg.trace(f, x).evaluate(x) != value:
            bad.append((sl, "evaluate"))
        if sg.jvp(f, (x,), (ones,))[1] != np.sum(grad):
            bad.append((sl, "jvp"))
        if not np.array_equal(sg.grad(f)(x), grad):
            bad.append((sl, "grad"))
    assert not bad, bad[:10]


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
@pytest.mark.parametrize("n", LENGTHS)
def test_every_small_slice_compiled(n, backend):
    """All the slices of one length in one compiled function (one compile per length and backend)."""
    x = np.arange(1.0, n + 1.0)

    slices = _slices(n)

    def f(x):
        return tuple(sg.value_and_grad(_square_sum(sl))(x) for sl in slices)

    out = sg.compile(f, backend=backend)(x)
    bad = []
    assert len(out) == len(slices)
    for sl, (value, grad) in zip(slices, out):
        want_value, want_grad = _want(x, sl)
        if value != want_value or not np.array_equal(grad, want_grad):
            bad.append(sl)
    assert not bad, bad[:10]


def test_two_dimensional_empty_and_reversed_slices():
    x = np.arange(12.0).reshape(3, 4)
    for idx in [(slice(-5, None, -1), slice(None)), (slice(None, None, -1), slice(-1, -6, -2)),
                (slice(0, 0), slice(None, None, -1)), (slice(-1, None, -2), slice(-5, None, -1))]:
        f = lambda x, idx=idx: np.sum(x[idx] * x[idx])  # noqa: E731
        g = np.zeros_like(x)
        g[idx] += 2 * x[idx]
        np.testing.assert_array_equal(sg.grad(f)(x), g)
        np.testing.assert_array_equal(sg.compile(sg.grad(f))(x), g)
        assert sg.trace(f, x).evaluate(x) == np.sum(x[idx] ** 2)
