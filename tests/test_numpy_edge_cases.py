"""NumPy edge cases a new user hit: std of one element, mean/var of Python floats, stacking 0-d arrays,
grad of a one-element output."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp


def test_std_derivative_is_zero_where_the_variance_is_zero_both_modes():
    assert sg.grad(np.std)(3.5) == 0.0                       # was NaN
    assert sg.jvp(np.std, (3.5,), (1.0,)) == (0.0, 0.0)
    np.testing.assert_array_equal(sg.grad(np.std)(np.full(4, 2.0)), np.zeros(4))
    x = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(sg.grad(np.std)(x), (x - x.mean()) / (x.size * x.std()), rtol=1e-14)
    sg.check_grads(lambda x: np.std(x, axis=1), (np.array([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]]),), order=2)
    assert sg.compile(sg.grad(np.std))(3.5) == 0.0


@pytest.mark.parametrize("f", [snp.mean, snp.var, snp.std])
def test_mean_var_std_of_python_numbers(f):
    assert f(3.5) == getattr(np, f.__name__)(3.5)
    assert f([1.0, 2.0, 4.0]) == getattr(np, f.__name__)([1.0, 2.0, 4.0])


def test_vstack_and_hstack_of_0d_arrays_as_numpy():
    a, b = np.float64(1.0), np.float64(2.0)
    for stack in (np.vstack, np.hstack):
        g = sg.trace(lambda a, b: stack([a, b]), a, b)
        np.testing.assert_array_equal(g.evaluate(a, b), stack([a, b]))
    np.testing.assert_array_equal(sg.grad(lambda a: np.sum(np.vstack([a, 2 * a])))(1.0), 3.0)


@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1)])
def test_grad_of_a_one_element_output(shape):
    """Accepted as a scalar, as autograd does (JAX takes shape () only): docs/differentiation.md."""
    x = np.arange(1.0, 4.0)

    def f(x):
        return np.reshape(np.sum(x * x), shape)

    np.testing.assert_array_equal(sg.grad(f)(x), 2 * x)
    v, g = sg.compile(sg.value_and_grad(f))(x)
    assert v.shape == shape and v.item() == 14.0 and np.array_equal(g, 2 * x)  # the value keeps its shape
    with pytest.raises(sg.NonScalarOutputError, match=r"shape \(2,\)"):
        sg.grad(lambda x: x[:2])(x)


def test_tuples_inside_an_index_tuple_are_index_arrays_as_numpy():
    x = np.arange(64.0).reshape(4, 4, 4) / 7.0
    for f in (lambda x: x[(0, 1, 0), (3, 3, 2)], lambda x: x[((0, 1), (1, 0)), :, (2, 3)],
              lambda x: x[1, (0, 2)]):
        np.testing.assert_array_equal(sg.trace(f, x).evaluate(x), f(x))
        sg.check_grads(f, (x,), order=2)
    g = sg.grad(lambda x: np.sum(x[(0, 0, 1), (2, 2, 3)] ** 2))(x[0])  # a repeated index accumulates
    want = np.zeros((4, 4))
    want[0, 2], want[1, 3] = 4 * x[0, 0, 2], 2 * x[0, 1, 3]
    np.testing.assert_allclose(g, want, rtol=1e-15)


def test_vstack_hstack_and_row_stack_take_dtype_and_casting():
    x, y = np.array([1.0, 2.0, 3.0]), np.array([[4.0, 5.0, 6.0]])
    for f in (lambda x, y: np.vstack([x, y], dtype=np.float32), lambda x, y: np.hstack([x, y[0]], dtype=np.float32),
              lambda x, y: np.vstack([x, y], casting="same_kind")):
        got = sg.trace(f, x, y).evaluate(x, y)
        assert got.dtype == f(x, y).dtype
        np.testing.assert_array_equal(got, f(x, y))
    if hasattr(np, "row_stack"):  # NumPy's deprecated alias passes dtype= and casting= to vstack
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            np.testing.assert_array_equal(sg.trace(lambda x, y: np.row_stack([x, y]), x, y).evaluate(x, y),
                                          np.vstack([x, y]))
            sg.check_grads(lambda x, y: np.row_stack([x, y]), (x, y), order=2)


def test_logaddexp2_second_derivatives_at_ties():
    """At x == y NumPy's value takes x + 1; the derivatives are the base-2 softmax weights at every order."""
    x = np.array([0.4, -1.3, 2.0])
    sg.check_grads(np.logaddexp2, (x, x.copy()), order=2)  # was wrong in forward mode (order 2) at ties
    # d2/dx2 log2(2^x + 2^y) = ln 2 * w (1 - w) with w = 2^(x - out) = 1/2 at a tie
    d2 = sg.grad(sg.grad(lambda x: np.logaddexp2(x, 0.7)))(0.7)
    np.testing.assert_allclose(d2, np.log(2.0) / 4, rtol=1e-14)
    _, t = sg.jvp(lambda x: sg.jvp(lambda x: np.logaddexp2(x, 0.7), (x,), (1.0,))[1], (0.7,), (1.0,))
    np.testing.assert_allclose(t, np.log(2.0) / 4, rtol=1e-14)


def test_grad_passes_keyword_and_non_differentiated_arguments_unchanged():
    """As JAX's and autograd's grad: only argnums are traced; the rest reach f as they are."""
    def f(a, b, c, d, scale=1.0, shift=0.0):
        return scale * (np.sin(a) + b * np.cos(c) + d) + shift

    args = (0.5, -0.3, 0.2, -1.1)
    g = sg.grad(f, argnums=(2, 0))(*args, scale=2.0, shift=9.0)
    np.testing.assert_allclose(g, (2.0 * 0.3 * np.sin(0.2), 2.0 * np.cos(0.5)), rtol=1e-15)
    v, g = sg.value_and_grad(f, argnums=1)(*args, scale=2.0)
    np.testing.assert_allclose((v, g), (f(*args, scale=2.0), 2.0 * np.cos(0.2)), rtol=1e-15)

    def branchy(x, kind, flag, table):
        assert isinstance(table, dict) and kind in table
        return np.sum(x ** table[kind]) if flag else np.sum(x)

    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(sg.grad(branchy)(x, "cube", True, {"cube": 3}), 3 * x ** 2)
    np.testing.assert_array_equal(sg.grad(branchy)(x, "cube", False, {"cube": 3}), np.ones(2))
    np.testing.assert_array_equal(sg.grad(lambda ex, t: 1.0 if isinstance(ex, t) else 0.0)([[]], list), [[]])
    # jacobian and hessian (built on it) too
    f = lambda x, kind, p=2.0: x ** p if kind == "pow" else x  # noqa: E731
    np.testing.assert_array_equal(sg.jacobian(f)(x, "pow", p=3.0), np.diag(3 * x ** 2))
    np.testing.assert_array_equal(sg.hessian(lambda x, kind: np.sum(x ** 3) if kind == "cube" else 0.0)(x, "cube"),
                                  np.diag(6 * x))
    ja, jb = sg.jacobian(lambda a, on, b: a * b if on else a, argnums=(0, 2))(x, True, np.array([3.0, 4.0]))
    np.testing.assert_array_equal(ja, np.diag([3.0, 4.0]))
    np.testing.assert_array_equal(jb, np.diag(x))
    with pytest.raises(sg.DTypeError, match=r"argument 1 \(kind\) has type str"):
        sg.grad(lambda x, kind: x, argnums=1)(1.0, "cube")  # a differentiated argument must still be an array
