"""NumPy edge cases a new user hit: std of one element, mean/var of Python floats, stacking 0-d arrays,
grad of a one-element output."""

from __future__ import annotations

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
