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
