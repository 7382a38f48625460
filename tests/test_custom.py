"""User-defined derivative rules: custom_vjp and custom_jvp (traced into the graph, differentiable again)."""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph import lax as L
from symgraph.batching import vmap
from symgraph.custom import custom_jvp, custom_vjp
from symgraph.ops import OPS
from symgraph.ops.core import Op, register, same_dtype, same_shape
from symgraph.transforms import jacfwd, jacrev

# ----- custom_vjp -----


@custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (snp.clip(g, -1.0, 1.0),))


def test_custom_vjp_rule_is_used_not_the_primal_derivative():
    assert float(sg.grad(lambda x: 5.0 * clip_gradient(x))(2.0)) == 1.0
    assert float(sg.grad(lambda x: 0.5 * clip_gradient(x))(2.0)) == 0.5
    np.testing.assert_array_equal(clip_gradient(np.array([3.0])), [3.0])  # eager: just runs


@custom_vjp
def fake_square_derivative(x):
    return x  # value x, but a declared derivative of x**2


fake_square_derivative.defvjp(lambda x: (x, x), lambda x, g: (g * x**2,))


def test_custom_vjp_rule_is_traced_and_differentiated_again():
    f = fake_square_derivative
    x = 1.5
    assert float(sg.grad(f)(x)) == pytest.approx(x**2)
    assert float(sg.grad(sg.grad(f))(x)) == pytest.approx(2 * x)  # d/dx of the rule g * x**2
    assert float(sg.grad(sg.grad(sg.grad(f)))(x)) == pytest.approx(2.0)
    # forward mode differentiates the primal code (the identity)
    assert float(sg.jvp(f, (x,), (1.0,))[1]) == 1.0


@custom_vjp
def my_sin(x):
    return np.sin(x)


my_sin.defvjp(lambda x: (np.sin(x), np.cos(x)), lambda c, g: (g * c,))


def test_custom_vjp_higher_order_transformations():
    x = np.array([0.3, -1.2, 2.0])
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(my_sin(x)))(x), np.cos(x))
    np.testing.assert_allclose(sg.hessian(lambda x: np.sum(my_sin(x)))(x), np.diag(-np.sin(x)), atol=1e-15)
    np.testing.assert_allclose(jacrev(my_sin)(x), np.diag(np.cos(x)), atol=1e-15)
    np.testing.assert_allclose(jacfwd(my_sin)(x), np.diag(np.cos(x)), atol=1e-15)
    sg.check_grads(my_sin, (x,), order=2)
    # per-example gradients (grad inside vmap) and grad of a vmapped custom function (loop fallback)
    np.testing.assert_allclose(vmap(sg.grad(my_sin))(x), np.cos(x))
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(vmap(my_sin)(x)))(x), np.cos(x))


def _scaled_fwd(scale, params, x):
    y = params["w"] * x + params["b"]
    return (y * scale, np.sum(y)), (params["w"], x, "note", 3)


def _scaled_bwd(scale, res, g):
    w, x, note, three = res
    assert note == "note" and three == 3  # static residual leaves come back as they were
    gy, gs = g
    gy = gy * scale + gs
    return {"w": snp.sum(gy * x), "b": snp.sum(gy)}, gy * w


@pytest.fixture
def scaled():
    f = custom_vjp(lambda scale, params, x: (scale * (params["w"] * x + params["b"]),
                                             np.sum(params["w"] * x + params["b"])), nondiff_argnums=(0,))
    f.defvjp(_scaled_fwd, _scaled_bwd)
    return f


def test_custom_vjp_pytrees_nondiff_args_and_several_outputs(scaled):
    params = {"w": np.array(2.0), "b": np.array(0.5)}
    x = np.array([1.0, -3.0, 0.5])

    def loss(params, x):
        y, s = scaled(3.0, params, x)
        return np.sum(y * y) + 2.0 * s

    def ref(params, x):
        y = params["w"] * x + params["b"]
        return np.sum((3.0 * y) ** 2) + 2.0 * np.sum(y)

    # the rule is the true derivative here, so it must match the primal's ordinary derivative
    gp, gx = sg.grad(loss, argnums=(0, 1))(params, x)
    rp, rx = sg.grad(ref, argnums=(0, 1))(params, x)
    np.testing.assert_allclose(gx, rx)
    np.testing.assert_allclose(gp["w"], rp["w"])
    np.testing.assert_allclose(gp["b"], rp["b"])


def test_custom_vjp_none_cotangents_and_integer_arguments():
    @custom_vjp
    def f(x, n, y):
        return x * n + y

    f.defvjp(lambda x, n, y: (x * n + y, n), lambda n, g: (g * n, None, None))
    gx, gy = sg.grad(lambda x, n, y: np.sum(f(x, n, y)), argnums=(0, 2))(np.ones(2), np.array([2, 3]), np.ones(2))
    np.testing.assert_allclose(gx, [2.0, 3.0])
    np.testing.assert_array_equal(gy, 0.0)  # None: the rule declares no dependence


def test_custom_vjp_errors():
    @custom_vjp
    def no_rule(x):
        return x

    with pytest.raises(sg.SymgraphError, match="defvjp"):
        sg.grad(no_rule)(1.0)

    @custom_vjp
    def bad_count(x, y):
        return x * y

    bad_count.defvjp(lambda x, y: (x * y, (x, y)), lambda r, g: (g * r[1],))
    with pytest.raises(sg.SymgraphError, match="one cotangent per differentiable argument"):
        sg.grad(bad_count)(1.0, 2.0)

    @custom_vjp
    def bad_shape(x):
        return np.sum(x)

    bad_shape.defvjp(lambda x: (np.sum(x), None), lambda r, g: (np.ones(2) * g,))
    with pytest.raises(sg.ShapeError, match=r"\(2,\).*\(3,\)"):
        sg.grad(bad_shape)(np.ones(3))

    stat = custom_vjp(lambda k, x: x * k, nondiff_argnums=(0,))
    stat.defvjp(lambda k, x: (x * k, None), lambda k, r, g: (g * k,))
    assert float(sg.grad(lambda x: stat(2.0, x))(1.0)) == 2.0
    with pytest.raises(sg.SymgraphError, match="nondiff_argnums"):
        sg.grad(lambda x: stat(x, x))(1.0)


# ----- custom_jvp -----


@custom_jvp
def softplus(x):
    return np.log1p(np.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * snp.sigmoid(x)


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def test_custom_jvp_gives_a_stable_derivative_in_both_modes():
    naive = sg.grad(lambda x: np.log1p(np.exp(x)))(1000.0)
    assert np.isnan(naive)  # inf / inf: why the rule exists
    assert float(sg.grad(softplus)(1000.0)) == 1.0
    assert float(sg.jvp(softplus, (1000.0,), (2.0,))[1]) == 2.0
    x = np.array([-3.0, 0.0, 2.5])
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(softplus(x)))(x), _sig(x))
    np.testing.assert_allclose(jacrev(softplus)(x), np.diag(_sig(x)), atol=1e-16)
    np.testing.assert_allclose(jacfwd(softplus)(x), np.diag(_sig(x)), atol=1e-16)


def test_custom_jvp_rule_is_differentiated_again():
    x = np.array([-3.0, 0.0, 2.5])
    d2 = _sig(x) * (1 - _sig(x))
    np.testing.assert_allclose(sg.hessian(lambda x: np.sum(softplus(x)))(x), np.diag(d2), atol=1e-16)
    np.testing.assert_allclose(sg.grad(sg.grad(softplus))(0.0), 0.25)
    d3 = d2 * (1 - 2 * _sig(x))
    np.testing.assert_allclose(vmap(sg.grad(sg.grad(sg.grad(softplus))))(x), d3, atol=1e-15)
    np.testing.assert_allclose(sg.hvp(lambda x: np.sum(softplus(x)), (x,), (np.ones(3),)), d2)
    sg.check_grads(softplus, (x,), order=2)


def test_custom_jvp_defjvps_several_arguments_and_nondiff():
    @custom_jvp
    def f(x, y):
        return x * np.sin(y)

    f.defjvps(lambda tx, out, x, y: tx * np.sin(y), lambda ty, out, x, y: ty * x * np.cos(y))
    x, y = np.array([1.5, -2.0]), np.array([0.3, 0.9])
    gx, gy = sg.grad(lambda x, y: np.sum(f(x, y)), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.sin(y))
    np.testing.assert_allclose(gy, x * np.cos(y))
    sg.check_grads(f, (x, y), order=2)

    g = custom_jvp(lambda p, x: x**p, nondiff_argnums=(0,))
    g.defjvp(lambda p, primals, tangents: (primals[0] ** p, p * primals[0] ** (p - 1) * tangents[0]))
    np.testing.assert_allclose(sg.grad(lambda x: g(3, x))(2.0), 12.0)


def test_custom_jvp_nonlinear_rule_is_rejected_in_reverse_mode_only():
    @custom_jvp
    def f(x):
        return x * 1.0

    f.defjvp(lambda p, t: (p[0], t[0] * t[0]))  # not linear in the tangent
    assert float(sg.jvp(f, (1.0,), (3.0,))[1]) == 9.0
    with pytest.raises(sg.UnsupportedOpError, match="not linear"):
        sg.grad(f)(1.0)


@pytest.fixture
def norule_sin():
    op = register(Op("test_custom_norule_sin", 1, "elementwise", same_shape, same_dtype, np.sin))
    yield op
    del OPS[op.name]


def test_custom_rules_make_an_op_without_rules_differentiable(norule_sin):
    @custom_jvp
    def s(x):
        return L.bind("test_custom_norule_sin", x)

    s.defjvp(lambda p, t: (s(p[0]), t[0] * np.cos(p[0])))
    x = np.array([0.2, 1.0])
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(s(x)))(x), np.cos(x))
    np.testing.assert_allclose(sg.jvp(s, (x,), (np.ones(2),))[1], np.cos(x))  # the primal's JVP is never built
    np.testing.assert_allclose(sg.hessian(lambda x: np.sum(s(x)))(x), np.diag(-np.sin(x)))

    @custom_vjp
    def v(x):
        return L.bind("test_custom_norule_sin", x)

    v.defvjp(lambda x: (v.fun(x), x), lambda x, g: (g * np.cos(x),))
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(v(x)))(x), np.cos(x))
    with pytest.raises(sg.UnsupportedOpError, match="test_custom_norule_sin"):
        sg.jvp(v, (x,), (np.ones(2),))  # forward mode of custom_vjp needs the primal's rule


def test_wrappers_are_marked_for_simplify_and_removed_by_it():
    for name in ("custom_vjp_call", "custom_jvp_call"):
        assert OPS[name].identity_of == -1 and OPS[name].kind == "opaque"  # a derivative wrapper
    g = sg.trace(lambda x: np.sum(softplus(x) * my_sin(x)), np.ones(3))
    assert {"custom_vjp_call", "custom_jvp_call"} <= {n.op.name for n in g}
    s = sg.simplify(g)
    assert not {"custom_vjp_call", "custom_jvp_call"} & {n.op.name for n in s}
    x = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(s.evaluate(x), g.evaluate(x))
    np.testing.assert_allclose(g.evaluate(x), np.sum(np.log1p(np.exp(x)) * np.sin(x)))


def test_custom_jvp_defjvps_primal_out_differentiates_through_the_rule():
    """defjvps hands the rule the custom function's own output (as JAX does), so a derivative of the rule
    goes through the rule again, never through the primal's value graph (here deliberately wrong: its
    derivative is 0, the rule's is exp)."""
    @custom_jvp
    def e(x):
        return sg.stop_gradient(np.exp(x))

    e.defjvps(lambda t, out, x: t * out)
    x = np.array([0.3, -1.2])
    for k in range(1, 4):  # d^k/dx^k exp = exp, in both modes
        f = lambda x: np.sum(e(x))
        for _ in range(k - 1):
            f = (lambda g: lambda x: np.sum(sg.grad(g)(x)))(f)
        np.testing.assert_allclose(sg.grad(f)(x), np.exp(x), rtol=1e-14)
    _, t = sg.jvp(lambda x: sg.jvp(e, (x,), (np.ones(2),))[1], (x,), (np.ones(2),))
    np.testing.assert_allclose(t, np.exp(x), rtol=1e-14)
    sg.check_grads(e, (x,), order=2)


def test_fwd_may_call_the_custom_function_itself_as_jax_documents():
    from symgraph.custom import custom_vjp

    @custom_vjp
    def f(x, y):
        return np.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (np.cos(x), np.sin(x), y)  # JAX's example: fwd calls f (was a RecursionError)

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return cos_x * g * y, sin_x * g

    f.defvjp(f_fwd, f_bwd)
    assert sg.grad(f)(2.0, 3.0) == np.cos(2.0) * 3.0
    assert sg.grad(f, argnums=1)(2.0, 3.0) == np.sin(2.0)
    assert sg.compile(sg.grad(f))(2.0, 3.0) == pytest.approx(np.cos(2.0) * 3.0, rel=1e-15)
