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


def test_arrays_made_inside_the_function_cost_nothing():
    """Temporaries die with the trace: no array is compared per call (a closed-over number is, cheaply)."""
    scale = 2.0
    cf = sg.compile(lambda v: v * scale + np.ones(3))
    v = np.ones(3)
    np.testing.assert_array_equal(cf(v), 3.0 * np.ones(3))
    assert not cf._last.closed_over.arrays
    assert sg.compile(lambda v: v * 2.0 + np.ones(3))(v) is not None
    pure = sg.compile(lambda v: v * 2.0 + np.ones(3))
    pure(v)
    assert pure._last.closed_over is None


def test_nan_contents_are_not_a_change():
    X = np.array([np.nan, 1.0, 2.0])
    cf = sg.compile(lambda v: np.sum(v) + X[1:] @ v[1:])
    cf(np.ones(3))
    first = cf._last
    cf(np.ones(3))
    assert cf._last is first


@pytest.mark.parametrize("expr", [
    lambda Z, w: np.sum((Z[1:] @ w) ** 2),            # a view of the closed-over array
    lambda Z, w: np.sum((Z.T.T @ w) ** 2),
    lambda Z, w: np.sum(((Z * 1.0) @ w) ** 2),       # computed from it with NumPy before the trace sees it
    lambda Z, w: np.sum((np.log(np.exp(Z)) @ w) ** 2),
    lambda Z, w: np.sum((Z.reshape(6, 3) @ w) ** 2),
    lambda Z, w: np.sum((Z.copy() @ w) ** 2),
    lambda Z, w: np.sum((Z[[0, 2, 4]] @ w) ** 2),
], ids=["view", "T.T", "times 1", "log exp", "reshape", "copy", "gather"])
@pytest.mark.parametrize("transform", ["value", "grad"])
def test_arrays_derived_from_a_closed_over_array_follow_its_writes(expr, transform):
    """Found by a new user's trial: only arrays that reached the graph unchanged were checked."""
    Z = np.ones((6, 3))
    w = np.array([1.0, 2.0, 3.0])

    def f(w):
        return expr(Z, w)

    cf = sg.compile(f if transform == "value" else sg.grad(f))
    want = f if transform == "value" else sg.grad(f)
    np.testing.assert_allclose(cf(w), want(w))
    Z[:] = 2.0
    Z[3, 1] = -1.0
    np.testing.assert_allclose(cf(w), want(w))


def test_a_broadcast_view_follows_writes_to_its_base():
    base = np.ones(3)
    B = np.broadcast_to(base, (4, 3))                 # read-only view: its base is what changes
    cf = sg.compile(lambda w: np.sum(B @ w))
    w = np.ones(3)
    assert cf(w) == 12.0
    base[:] = 2.0
    assert cf(w) == 24.0


def test_rebinding_a_global_a_list_item_or_an_attribute():
    global _G
    _G = np.ones((5, 3))
    w = np.ones(3)
    cg = sg.compile(lambda w: np.sum((_G @ w) ** 2))
    assert cg(w) == 45.0
    _G = np.full((5, 3), 3.0)                         # a new object bound to the name
    assert cg(w) == 405.0

    params = [np.ones(3)]
    cl = sg.compile(lambda w: np.sum(params[0] * w))
    assert cl(w) == 3.0
    params[0] = np.full(3, 2.0)
    assert cl(w) == 6.0

    class Model:
        def __init__(self):
            self.W = np.ones(3)

        def f(self, w):
            return np.sum(self.W * w)

    m = Model()
    cm = sg.compile(m.f)
    assert cm(w) == 3.0
    m.W = np.full(3, 5.0)
    assert cm(w) == 15.0


def test_a_global_number_is_a_constant_that_follows_rebinding():
    global _LR
    _LR = 0.1
    cf = sg.compile(lambda w: w * _LR)
    np.testing.assert_array_equal(cf(np.ones(2)), 0.1)
    _LR = 0.5
    np.testing.assert_array_equal(cf(np.ones(2)), 0.5)


def test_many_changes_warn_to_pass_the_value_as_an_argument():
    X = np.ones(3)
    cf = sg.compile(lambda w: w * X)
    with pytest.warns(UserWarning, match="Pass values that change between calls as arguments"):
        for i in range(10):
            X[0] = i
            assert cf(np.ones(3))[0] == i


def test_the_check_is_a_memcmp():
    """A 1e6-element closed-over array costs about a memory comparison per call, not a Python loop (the first
    version compared bytes through a memoryview: 48 ms per call)."""
    import time

    A = np.random.default_rng(0).random((1000, 1000))
    v = np.ones(1000)
    cf = sg.compile(lambda v: np.sum(A * v))
    cf(v)
    t = time.perf_counter()
    for _ in range(10):
        cf(v)
    assert (time.perf_counter() - t) / 10 < 0.02     # ~1 ms here; a generous bound for a loaded machine
