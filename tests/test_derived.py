"""Derived transformations (symgraph/derived.py) against analytic derivatives and the core transforms."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.errors import SymgraphError

RNG = np.random.default_rng(3)
X = RNG.standard_normal(5)
A = RNG.standard_normal((3, 5))
V = RNG.standard_normal(5)


def f_scalar(x, a):
    return np.sum(np.tanh(a @ x) ** 2) + np.sum(np.sin(x) * x)


def test_elementwise_grad_and_deriv_are_the_elementwise_derivative():
    for fn in (sg.elementwise_grad, sg.deriv):
        np.testing.assert_allclose(fn(np.tanh)(X), 1.0 - np.tanh(X) ** 2, rtol=1e-13)
    # of a 2-d input, and second derivative: d2/dx2 sin = -sin
    x2 = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(sg.elementwise_grad(sg.elementwise_grad(np.sin))(x2), -np.sin(x2), rtol=1e-13)
    # argnum picks the argument
    np.testing.assert_allclose(sg.elementwise_grad(lambda a, b: a * b ** 3, 1)(X, V), 3 * X * V ** 2, rtol=1e-13)


def test_grad_named_equals_grad_of_the_position_and_takes_keywords():
    ref = sg.grad(f_scalar, argnums=1)(X, A)
    np.testing.assert_allclose(sg.grad_named(f_scalar, "a")(X, A), ref, rtol=1e-13)
    np.testing.assert_allclose(sg.grad_named(f_scalar, "a")(X, a=A), ref, rtol=1e-13)
    with pytest.raises(SymgraphError, match="no parameter named 'b'"):
        sg.grad_named(f_scalar, "b")


def test_make_vjp_make_jvp_and_linearize_match_the_jacobian():
    f = lambda x, a: np.tanh(a @ x)  # noqa: E731
    J = sg.jacobian(f)(X, A)
    u = RNG.standard_normal(3)
    pullback, out = sg.make_vjp(f)(X, A)
    np.testing.assert_allclose(out, np.tanh(A @ X), rtol=1e-13)
    np.testing.assert_allclose(pullback(u), u @ J, rtol=1e-12)
    out2, t = sg.make_jvp(f)(X, A)(V)
    np.testing.assert_allclose(out2, out, rtol=1e-13)
    np.testing.assert_allclose(t, J @ V, rtol=1e-12)
    out3, f_jvp = sg.linearize(lambda x: f(x, A), X)
    np.testing.assert_allclose(f_jvp(V), J @ V, rtol=1e-12)
    np.testing.assert_allclose(sg.vector_jacobian_product(f)(X, A, u), u @ J, rtol=1e-12)
    np.testing.assert_allclose(sg.tensor_jacobian_product(f, 1)(X, A, u), np.einsum("i,ijk->jk", u,
                               sg.jacobian(f, 1)(X, A)), rtol=1e-12)


def test_hessian_products_match_the_hessian():
    H = sg.hessian(f_scalar)(X, A)
    for htp in (sg.hessian_tensor_product, sg.hessian_vector_product):
        np.testing.assert_allclose(htp(f_scalar)(X, A, V), H @ V, rtol=1e-11)
    hvp_fn, g = sg.make_hvp(f_scalar)(X, A)
    np.testing.assert_allclose(g, sg.grad(f_scalar)(X, A), rtol=1e-13)
    np.testing.assert_allclose(hvp_fn(V), H @ V, rtol=1e-11)


def test_make_ggnvp_is_jt_hg_j():
    f = lambda x: np.tanh(A @ x)  # noqa: E731
    J = sg.jacobian(f)(X)
    np.testing.assert_allclose(sg.make_ggnvp(f)(X)(V), J.T @ J @ V, rtol=1e-12)  # default g: Hessian I
    g = lambda y: np.sum(np.exp(y))  # noqa: E731  Hessian diag(exp(y))
    Hg = np.diag(np.exp(f(X)))
    np.testing.assert_allclose(sg.make_ggnvp(f, g)(X)(V), J.T @ Hg @ J @ V, rtol=1e-12)


def test_derived_transforms_compose_and_compile():
    step = sg.compile(lambda x: sg.elementwise_grad(np.tanh)(x) * 2.0)
    np.testing.assert_allclose(step(X), 2.0 * (1.0 - np.tanh(X) ** 2), rtol=1e-12)
    htp = sg.compile(lambda x, v: sg.hessian_tensor_product(f_scalar)(x, A, v))
    np.testing.assert_allclose(htp(X, V), sg.hessian(f_scalar)(X, A) @ V, rtol=1e-11)
    # a derived transform inside grad: d/dx sum(tanh'(x)) = sum(-2 tanh(x) (1 - tanh(x)^2))
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(sg.elementwise_grad(np.tanh)(x)))(X),
                               -2 * np.tanh(X) * (1 - np.tanh(X) ** 2), rtol=1e-12)


def test_bad_argnum_is_a_clear_error():
    with pytest.raises(SymgraphError, match="argnum=3"):
        sg.elementwise_grad(np.sin, 3)(X)
    with pytest.raises(SymgraphError, match="one integer position"):
        sg.make_vjp(np.sin, (0,))(X)
