"""Closed-over NumPy arrays never give stale results from a compiled function.

Their contents are constants of the compiled code; before each call the
compiled function compares them with the bytes it traced and, when one was
written, traces and compiles again (docs/tracing.md, "Closed-over arrays").
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

import symgraph as sg


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_the_reported_case(backend):
    X = np.ones((5, 3))
    w = np.ones(3)
    cf = sg.compile(lambda w: np.sum((X @ w) ** 2), backend=backend)
    assert cf(w) == 45.0
    X[:] = 2.0
    assert cf(w) == 180.0          # NumPy: 180
    assert cf(w) == 180.0          # compiled again once, then cached
    X[0, 0] = 3.0
    np.testing.assert_allclose(cf(w), np.sum((X @ w) ** 2))


def test_gradient_of_a_closed_over_dataset_follows_writes():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 4)), rng.standard_normal(20)
    w = rng.standard_normal(4)
    step = sg.compile(sg.grad(lambda w: np.sum((X @ w - y) ** 2)))
    np.testing.assert_allclose(step(w), 2 * X.T @ (X @ w - y))
    X *= 0.5
    y[3] = 7.0
    np.testing.assert_allclose(step(w), 2 * X.T @ (X @ w - y))


def test_recompiles_once_per_change_and_logs(caplog):
    X = np.arange(6.0).reshape(2, 3)
    cf = sg.compile(lambda v: X @ v)
    v = np.ones(3)
    cf(v)
    first = cf._last
    cf(v)
    assert cf._last is first       # unchanged: the same compiled signature
    X[1, 2] = -1.0
    with caplog.at_level(logging.DEBUG, logger="symgraph"):
        np.testing.assert_array_equal(cf(v), X @ v)
    assert cf._last is not first
    assert any("closed-over array changed" in r.getMessage() for r in caplog.records)


def test_arrays_made_inside_the_function_and_scalars_cost_nothing():
    """Temporaries die with the trace and scalars are values: nothing is compared per call."""
    scale = 2.0
    cf = sg.compile(lambda v: v * scale + np.ones(3))
    v = np.ones(3)
    np.testing.assert_array_equal(cf(v), 3.0 * np.ones(3))
    assert cf._last.closed_over is None


def test_nan_contents_are_not_a_change():
    X = np.array([np.nan, 1.0, 2.0])
    cf = sg.compile(lambda v: np.sum(v) + X[1:] @ v[1:])
    cf(np.ones(3))
    first = cf._last
    cf(np.ones(3))
    assert cf._last is first
