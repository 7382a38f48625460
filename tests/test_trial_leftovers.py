"""Regressions from a new user's trial (issue 16): integer powers, traced fold_in, tensordot's errors."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.errors import DTypeError, ShapeError

BACKENDS = ["numpy", "llvm"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_powers_stay_integer_as_in_numpy(backend):
    x = np.array([-3, -1, 0, 1, 2, 5], np.int32)
    y = np.array([3, 3, 2, 0, 1, 4], np.int32)
    for f, ref in [(lambda a, b: a ** b, x ** y), (lambda a, b: a ** np.array([1, 2, 0, 3, 1, 2], np.int32),
                                                    x ** np.array([1, 2, 0, 3, 1, 2], np.int32)),
                   (lambda a, b: a ** 7, x ** 7), (lambda a, b: a ** 2, x ** 2)]:
        out = sg.compile(f, backend=backend)(x, y)
        assert out.dtype == ref.dtype
        np.testing.assert_array_equal(out, ref)


def test_integer_to_negative_constant_power_raises_as_numpy_does():
    with pytest.raises(ValueError):
        np.arange(1, 4) ** -1
    for y in [-1, -3, np.array([1, -2, 3])]:
        with pytest.raises(DTypeError, match="negative integer powers"):
            sg.compile(lambda a, y=y: a ** y, backend="numpy")(np.arange(1, 4))
    np.testing.assert_allclose(sg.compile(lambda a: a ** -1)(np.arange(1.0, 4.0)), 1.0 / np.arange(1.0, 4.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_fold_in_takes_a_traced_integer_and_agrees_with_the_static_form(backend):
    k = sg.random.key(7)
    keyed = sg.compile(lambda key, i: sg.random.fold_in(key, i), backend=backend)
    draws = sg.compile(lambda key, i: sg.random.uniform(sg.random.fold_in(key, i), (3,)), backend=backend)
    seen = set()
    for i in [0, 1, 2, 3, -1, 2**40]:
        static = sg.random.fold_in(k, i)
        assert keyed(k, np.int64(i)) == static
        np.testing.assert_array_equal(draws(k, np.int64(i)), sg.random.uniform(static, (3,)))
        seen.add(int(static))
    assert len(seen) == 6
    with pytest.raises(DTypeError):
        sg.compile(lambda key, x: sg.random.fold_in(key, x), backend=backend)(k, np.float64(1.0))


def test_tensordot_errors_name_tensordot_and_the_axes():
    a, b = np.ones((2, 3)), np.ones((4, 5))
    for axes, text in [(([1], [0]), "shape mismatch for sum: a's axis 1 has size 3, b's axis 0 has size 4"),
                       (1, "shape mismatch for sum"), (3, "axes=3"), (([0, 1], [0]), "2 axes of a"),
                       (([5], [0]), "out of range")]:
        with pytest.raises(ShapeError, match="tensordot") as e:
            sg.grad(lambda x: np.sum(np.tensordot(x, b, axes=axes)))(a)
        assert text in str(e.value)
    b = np.arange(15.0).reshape(3, 5)
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(np.tensordot(x, b, axes=([1], [0]))))(a),
                               np.broadcast_to(b.sum(1), (2, 3)))


# ----- from the session-6 trial (issue 17) -----


@pytest.mark.parametrize("backend", BACKENDS)
def test_norm_of_nan_is_nan_and_zero_keeps_its_subgradient(backend):
    v, m = np.array([np.nan, 1.0]), np.array([[np.nan, 1.0], [0.0, 1.0]])
    for ord_, x in [(None, v), (2, v), (3, v), (0.5, v), ("fro", m), (None, m)]:
        out = sg.compile(lambda x, o=ord_: np.linalg.norm(x, o), backend=backend)(x)
        assert np.isnan(out) and np.isnan(np.linalg.norm(x, ord_))
        assert np.isnan(sg.grad(lambda x, o=ord_: np.linalg.norm(x, o))(x)).all()
    np.testing.assert_array_equal(sg.grad(np.linalg.norm)(np.zeros(3)), np.zeros(3))
    np.testing.assert_array_equal(sg.grad(lambda x: np.linalg.norm(x, 3))(np.zeros(2)), np.zeros(2))
    np.testing.assert_allclose(sg.grad(np.linalg.norm)(np.array([3.0, 4.0])), [0.6, 0.8])


@pytest.mark.parametrize("backend", BACKENDS)
def test_argmax_argmin_take_keepdims(backend):
    m = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])

    def f(z):
        return (z.argmax(axis=1, keepdims=True), np.argmin(z, axis=0, keepdims=True), np.argmax(z, keepdims=True),
                z.argmax(), np.argmax(z, -1))

    for got, want in zip(sg.compile(f, backend=backend)(m), f(m)):
        assert np.shape(got) == np.shape(want)
        np.testing.assert_array_equal(got, want)


def test_vmap_in_axes_may_be_a_prefix_of_a_pytree_argument():
    from symgraph.errors import SymgraphError

    W, X = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(4, 3)
    out = sg.vmap(lambda p, x: p["a"] @ x + p["b"], in_axes=({"a": None, "b": 0}, 0))({"a": W, "b": np.ones((4, 2))}, X)
    np.testing.assert_allclose(out, X @ W.T + 1.0)
    np.testing.assert_allclose(sg.vmap(lambda t: t[0] * t[1], in_axes=((0, None),))((np.arange(3.0), 2.0)),
                               [0.0, 2.0, 4.0])
    g = sg.grad(lambda w: np.sum(sg.vmap(lambda p, x: np.tanh(p["a"] @ x), in_axes=({"a": None}, 0))({"a": w}, X)))(W)
    np.testing.assert_allclose(g, ((1 - np.tanh(X @ W.T) ** 2).T @ X), rtol=1e-12)
    with pytest.raises(SymgraphError, match="has keys"):
        sg.vmap(lambda p: p["a"], in_axes=({"z": 0},))({"a": np.ones(3)})
    with pytest.raises(SymgraphError, match="prefix of the argument's structure"):
        sg.vmap(lambda p: p, in_axes=("x",))(np.ones(3))
