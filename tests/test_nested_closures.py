"""Transformations nested inside a trace that close over the outer trace's values (issue: 'input a0 is not bound').

Inside a trace, a transformation builds into the graph being traced, even when
its own arguments are concrete, so that a closed-over outer value is an
ordinary node of that graph. The cases include the classic perturbation
confusion examples (Siskind & Pearlmutter, "Perturbation confusion and
referential transparency", 2005): the inner derivative's variable must not be
confused with the outer one.
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg


def test_grad_of_a_function_whose_inner_grad_closes_over_x():
    def fun(x):
        return x * sg.grad(lambda y: x * y)(2.0)      # x * x

    assert sg.grad(fun)(1.0) == 2.0
    assert sg.grad(fun)(3.0) == 6.0
    assert sg.compile(sg.grad(fun))(3.0) == 6.0


def test_inner_grad_at_a_concrete_point_inside_an_outer_grad():
    def outer(w):
        return np.sum(sg.grad(lambda x: np.sum(x * x * w))(np.array([1.0, 2.0])))   # sum(2 x w) = 6 w

    assert sg.grad(outer)(3.0) == 6.0


def test_perturbation_confusion():
    # d/dx [x * (d/dy (x + y))(1)] = d/dx [x * 1] = 1 (a confused implementation gives 2)
    assert sg.grad(lambda x: x * sg.grad(lambda y: x + y)(1.0))(5.0) == 1.0
    # d/dx [d/dy (x * y)](y = 2) = d/dx [x] = 1
    assert sg.grad(lambda x: sg.grad(lambda y: x * y)(2.0))(7.0) == 1.0
    # mixed second derivative of sin(x y) at y = 1: cos(x) - x sin(x)
    x = 0.5
    np.testing.assert_allclose(sg.grad(lambda x: sg.grad(lambda y: np.sin(x * y))(1.0))(x),
                               np.cos(x) - x * np.sin(x), rtol=1e-14)


def test_jvp_and_vjp_closing_over_the_outer_value():
    def via_jvp(x):
        return sg.jvp(lambda y: x * y, (2.0,), (1.0,))[1] * x          # x * x

    def via_vjp(x):
        _, pullback = sg.vjp(lambda y: x * y * y, 2.0)
        return pullback(1.0)[0] * x                                   # 2 x y * x = 4 x^2

    assert sg.grad(via_jvp)(1.5) == 3.0
    assert sg.grad(via_vjp)(1.5) == 12.0
    # forward over reverse, too
    assert sg.jvp(via_vjp, (1.5,), (1.0,))[1] == 12.0


def test_vmap_and_compiled_functions_inside_a_grad():
    w = np.array([1.0, -2.0, 0.5])
    xs = np.arange(6.0).reshape(2, 3)

    def loss(w):
        per_example = sg.vmap(lambda x: np.sum(x * w) ** 2)(xs)       # closes over the traced w
        return np.sum(per_example)

    want = 2 * xs.T @ (xs @ w)
    np.testing.assert_allclose(sg.grad(loss)(w), want, rtol=1e-14)
    double = sg.compile(lambda a: a * 2.0)
    assert sg.grad(lambda x: double(x) * double(3.0))(1.0) == 12.0


def test_check_grads_of_a_nested_closure_to_second_order():
    def f(x):
        return np.sum(x * sg.grad(lambda y: np.sum(np.tanh(x * y)))(np.ones(3)))

    sg.check_grads(f, (np.array([0.3, -0.2, 0.7]),), order=2)


@pytest.mark.parametrize("backend", ["llvm", "numpy"])
def test_compiled_nested_closure(backend):
    def f(x):
        return x * sg.grad(lambda y: np.sin(x * y))(1.0)

    cf = sg.compile(sg.value_and_grad(f), backend=backend)
    v, g = cf(0.4)
    np.testing.assert_allclose(v, 0.4 * 0.4 * np.cos(0.4), rtol=1e-14)
    np.testing.assert_allclose(g, 2 * 0.4 * np.cos(0.4) - 0.4 ** 2 * np.sin(0.4), rtol=1e-14)
