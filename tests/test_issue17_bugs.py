"""Regression tests for the bugs of issue 17: std's derivative at zero variance, transformations nested
with closures over outer traced values (perturbation confusion), grad of one-element outputs, mean/var
of Python numbers, vstack/hstack of 0-d arrays."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp

# ----- std and var where the variance is 0 -----


def test_std_and_var_derivatives_at_zero_variance_are_zero_in_both_modes_to_order_two():
    for f in (np.std, np.var, snp.std, snp.var):
        assert sg.grad(f)(3.5) == 0.0
        assert sg.jvp(f, (3.5,), (1.0,)) == (0.0, 0.0)
        assert sg.grad(sg.grad(f))(3.5) == 0.0
        assert sg.compile(sg.grad(f))(3.5) == 0.0
        np.testing.assert_array_equal(sg.grad(f)(np.full(4, -2.0)), np.zeros(4))
        np.testing.assert_array_equal(sg.jvp(f, (np.full(4, -2.0),), (np.arange(4.0),))[1], 0.0)
    np.testing.assert_array_equal(sg.hessian(np.std)(np.full(3, 2.0)), np.zeros((3, 3)))
    # away from 0 the derivatives are the ordinary ones, to second order, per axis too
    x = np.array([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]])
    for ddof in (0, 1):
        sg.check_grads(lambda x: np.std(x, axis=1, ddof=ddof), (x,), order=2)
        sg.check_grads(lambda x: np.var(x, axis=0, ddof=ddof), (x,), order=2)
    # a row of equal values beside an ordinary one: 0 there, the usual gradient elsewhere
    y = np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]])
    g = sg.grad(lambda y: np.sum(np.std(y, axis=1)))(y)
    np.testing.assert_array_equal(g[0], 0.0)
    r = y[1] - y[1].mean()
    np.testing.assert_allclose(g[1], r / (3 * np.std(y[1])), rtol=1e-14)


@pytest.mark.parametrize("ddof", [0, 1, 2, 5])
@pytest.mark.parametrize("f", [np.std, np.var])
def test_std_and_var_values_for_every_ddof_as_numpy(f, ddof):
    """ddof >= n divides by max(n - ddof, 0), as NumPy: inf, or NaN for 0 / 0 (never a negative variance)."""
    for x in (np.array([3.5]), np.array([1.0, 2.0, 4.0]), np.full(3, 2.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = f(x, ddof=ddof)
            got = sg.trace(lambda x: f(x, ddof=ddof), x).evaluate(x)
            np.testing.assert_array_equal(got, want)


def test_std_of_nan_is_nan_as_numpy():
    """The zero-variance guard must not turn a NaN variance into 0."""
    x = np.array([[np.nan, 1.0], [2.0, 2.0]])
    for f in (np.std, lambda x: np.std(x, axis=1), lambda x: np.std(x, axis=0)):
        np.testing.assert_array_equal(sg.trace(f, x).evaluate(x), f(x))
        np.testing.assert_array_equal(sg.compile(f)(x), f(x))


def test_std_derivative_at_zero_variance_is_documented():
    doc = open(__file__.replace("tests/test_issue17_bugs.py", "docs/differentiation.md")).read()
    assert "`np.std` where the variance is 0" in doc


# ----- nested transformations closing over outer traced values -----


def test_the_issue_examples():
    def fun(x):
        return x * sg.grad(lambda y: x * y)(2.0)          # x * x

    assert sg.grad(fun)(1.0) == 2.0
    assert sg.jvp(fun, (1.0,), (1.0,))[1] == 2.0
    out, pullback = sg.vjp(fun, 1.0)
    assert out == 1.0 and pullback(1.0)[0] == 2.0
    outer = lambda w: np.sum(sg.grad(lambda x: np.sum(x * x * w))(np.array([1.0, 2.0])))  # noqa: E731  (6 w)
    assert sg.grad(outer)(3.0) == 6.0
    assert sg.compile(sg.grad(outer))(3.0) == 6.0


def _pc(inner_transform):
    """x * (d/dy (x + y))(1) by the given inner transformation: the derivative in x must be 1, not 2."""
    return lambda x: x * inner_transform(lambda y: x + y)


INNER = {
    "grad": lambda f: sg.grad(f)(1.0),
    "jvp": lambda f: sg.jvp(f, (1.0,), (1.0,))[1],
    "vjp": lambda f: sg.vjp(f, 1.0)[1](1.0)[0],
    "value_and_grad": lambda f: sg.value_and_grad(f)(1.0)[1],
    "jacobian": lambda f: sg.jacobian(f)(1.0),
    "compiled grad": lambda f: sg.compile(sg.grad(f))(1.0),
}
OUTER = {
    "grad": lambda f: sg.grad(f)(5.0),
    "jvp": lambda f: sg.jvp(f, (5.0,), (1.0,))[1],
    "vjp": lambda f: sg.vjp(f, 5.0)[1](1.0)[0],
    "jacfwd": lambda f: sg.jacfwd(f)(5.0),
    "compile(grad)": lambda f: sg.compile(sg.grad(f))(5.0),
}


PAIRS = [(o, i) for o in sorted(OUTER) for i in sorted(INNER) if i != "compiled grad" or o == "grad"]


@pytest.mark.parametrize("outer,inner", PAIRS, ids=[f"{o}-of-{i}" for o, i in PAIRS])
def test_perturbation_confusion_every_pair_of_transformations(outer, inner):
    """Siskind & Pearlmutter's example: d/dx [x * d/dy (x + y)] = 1 (a confused implementation gives 2)."""
    assert float(OUTER[outer](_pc(INNER[inner]))) == 1.0


def test_perturbation_confusion_classics():
    # d/dx [d/dy (x * y)](2) = d/dx x = 1
    assert sg.grad(lambda x: sg.grad(lambda y: x * y)(2.0))(7.0) == 1.0
    # the inner derivative taken at a point computed from x: d/dx [2 x y]_(y = x) = 4 x
    assert sg.grad(lambda x: sg.grad(lambda y: x * y * y)(x))(3.0) == 12.0
    # three levels: d/dx x * d/dy [y * d/dz (x y z)] = d/dx x * 2 x y at y = 3 -> 12 x
    f = lambda x: x * sg.grad(lambda y: y * sg.grad(lambda z: x * y * z)(2.0))(3.0)  # noqa: E731
    assert sg.grad(f)(1.5) == 18.0
    # the mixed second derivative of sin(x y) at y = 1
    np.testing.assert_allclose(sg.grad(lambda x: sg.grad(lambda y: np.sin(x * y))(1.0))(0.5),
                               np.cos(0.5) - 0.5 * np.sin(0.5), rtol=1e-14)
    # the same inner gradient function used twice in one outer trace
    g = sg.grad(lambda y: y ** 3)
    assert sg.grad(lambda x: g(x) + g(2 * x))(1.0) == 30.0
    # an argument passed twice to the inner function is two variables there
    assert sg.grad(lambda x: sg.grad(lambda a, b: a * b, argnums=(0, 1))(x, x)[0] * x)(3.0) == 6.0


def test_vmap_inside_grad_and_grad_inside_vmap():
    w = np.array([1.0, -2.0, 0.5])
    xs = np.arange(6.0).reshape(2, 3)
    loss = lambda w: np.sum(sg.vmap(lambda x: np.sum(x * w) ** 2)(xs))  # noqa: E731  (vmap closes over w)
    np.testing.assert_allclose(sg.grad(loss)(w), 2 * xs.T @ (xs @ w), rtol=1e-14)
    sg.check_grads(loss, (w,), order=2)
    per_example = sg.vmap(lambda x: sg.grad(lambda w: np.sum(w * x) ** 2)(w))(xs)   # grad closes over x
    np.testing.assert_allclose(per_example, np.stack([2 * np.sum(w * x) * x for x in xs]), rtol=1e-14)
    # perturbation confusion under vmap: d/dy [y * d/dz (y + z)] = 1 for every example
    pc = sg.vmap(lambda x: sg.grad(lambda y: y * sg.grad(lambda z: y + z)(1.0))(x))(np.arange(3.0))
    np.testing.assert_array_equal(pc, np.ones(3))
    pc2 = sg.vmap(lambda x: sg.grad(lambda y: y * sg.grad(lambda z: y * z)(x))(x))(np.arange(3.0))
    np.testing.assert_array_equal(pc2, 2 * np.arange(3.0))


def test_nested_jacobian_hessian_hvp_and_pytrees_closing_over_the_outer_value():
    assert sg.grad(lambda w: np.sum(sg.jacobian(lambda x: x * w)(np.ones(2))))(3.0) == 2.0
    assert sg.grad(lambda w: np.sum(sg.hessian(lambda x: np.sum(x ** 3) * w)(np.ones(2))))(3.0) == 12.0
    assert sg.grad(lambda w: np.sum(sg.hvp(lambda x: np.sum(x ** 2) * w, (np.ones(2),), (np.ones(2),))))(3.0) == 4.0
    inner = lambda x: sg.grad(lambda p: p["a"] * x + p["b"][0] * x * x)({"a": 1.0, "b": (2.0,)})  # noqa: E731
    assert sg.grad(lambda x: inner(x)["b"][0])(3.0) == 6.0
    np.testing.assert_array_equal(sg.jacobian(lambda x: x * sg.grad(lambda y: np.sum(x * y))(np.ones(2)))(
        np.array([1.0, 2.0])), np.diag([2.0, 4.0]))
    # a traced tangent and a traced cotangent given to an inner jvp / vjp
    assert sg.grad(lambda t: sg.jvp(lambda y: y * y, (3.0,), (t,))[1])(1.0) == 6.0
    assert sg.grad(lambda c: sg.vjp(lambda y: y * y, 3.0)[1](c)[0])(1.0) == 6.0


def test_inner_transformations_in_a_plain_trace_custom_rules_and_checkpoints():
    g = sg.trace(lambda x: sg.grad(lambda y: x * y * y)(2.0), 1.5)   # 4 x: the trace of the inner grad
    assert g.evaluate(3.0) == 12.0

    @sg.custom_vjp
    def f(x):
        return np.sin(x)

    f.defvjp(lambda x: (np.sin(x), x), lambda x, ct: (ct * np.cos(x),))
    want = np.cos(0.5) - 0.5 * np.sin(0.5)   # d/dw [w cos(w x)] at x = 1
    np.testing.assert_allclose(sg.grad(lambda w: sg.grad(lambda x: f(x * w))(1.0))(0.5), want, rtol=1e-14)
    np.testing.assert_allclose(sg.grad(lambda w: sg.grad(sg.checkpoint(lambda x: np.sin(x * w)))(1.0))(0.5), want,
                               rtol=1e-14)
    assert sg.grad(lambda x: x * sg.grad(lambda y: sg.stop_gradient(x) * y)(1.0))(2.0) == 2.0


def test_nested_closure_to_second_order_and_compiled():
    def f(x):
        return np.sum(x * sg.grad(lambda y: np.sum(np.tanh(x * y)))(np.ones(3)))

    x = np.array([0.3, -0.2, 0.7])
    sg.check_grads(f, (x,), order=2)
    np.testing.assert_allclose(sg.compile(sg.grad(f))(x), sg.grad(f)(x), rtol=1e-13)


# ----- grad of a one-element output -----


@pytest.mark.parametrize("shape", [(1,), (1, 1), (1, 1, 1)])
def test_grad_of_a_one_element_output_as_autograd(shape):
    x = np.array([1.0, -2.0, 3.0])
    f = lambda x: np.reshape(np.sum(x * x), shape)  # noqa: E731
    np.testing.assert_array_equal(sg.grad(f)(x), 2 * x)
    np.testing.assert_array_equal(sg.compile(sg.grad(f))(x), 2 * x)
    v, g = sg.value_and_grad(f)(x)
    assert np.shape(v) == shape and np.array_equal(g, 2 * x)
    np.testing.assert_array_equal(sg.hessian(f)(x), 2 * np.eye(3))
    # the common spellings: a (1, 1) product, a [:1] slice
    np.testing.assert_allclose(sg.grad(lambda x: x[None, :] @ x[:, None])(x), 2 * x)
    np.testing.assert_array_equal(sg.grad(lambda x: x[:1] * 3.0)(x), [3.0, 0.0, 0.0])


def test_grad_of_more_than_one_element_is_still_refused():
    with pytest.raises(sg.NonScalarOutputError, match=r"shape \(2,\)"):
        sg.grad(lambda x: x[:2])(np.ones(3))
    with pytest.raises(sg.NonScalarOutputError, match=r"shape \(0,\)"):
        sg.grad(lambda x: x[:0])(np.ones(3))


def test_the_output_shape_rule_is_documented():
    doc = open(__file__.replace("tests/test_issue17_bugs.py", "docs/differentiation.md")).read()
    assert "shape `(1,)` or `(1, 1)` counts as a scalar" in doc


# ----- mean/var/std of Python numbers, stacks of 0-d arrays -----


@pytest.mark.parametrize("name", ["mean", "var", "std"])
def test_mean_var_std_of_python_numbers_and_lists(name):
    f, ref = getattr(snp, name), getattr(np, name)
    for v in (3.5, 2, True, [1.0, 2.0, 4.0], (1, 2)):
        got, want = f(v), ref(v)
        assert np.asarray(got).dtype == np.asarray(want).dtype and got == want
    assert sg.grad(lambda x: f(x) * x)(3.5) == (7.0 if name == "mean" else 0.0)


@pytest.mark.parametrize("stack", [np.vstack, np.hstack, np.column_stack, np.stack])
def test_stacks_of_0d_arrays_as_numpy(stack):
    a, b = np.float64(1.5), np.float64(-2.0)
    got = sg.trace(lambda a, b: stack([a, b]), a, b).evaluate(a, b)
    want = stack([a, b])
    assert got.shape == want.shape and np.array_equal(got, want)
    np.testing.assert_array_equal(sg.grad(lambda a: np.sum(stack([a, 2 * a, 1.0])))(1.0), 3.0)
    np.testing.assert_array_equal(sg.compile(lambda a, b: stack([a, b]))(a, b), want)
