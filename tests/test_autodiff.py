"""Differentiation: worked cases with known answers, conventions, errors, transformations.

Most tests run twice: on NumPy-spelled code (`np.tanh` on tracers) and on
`symgraph.numpy`-spelled code (`snp.tanh`).
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
import symgraph.numpy as snp
from symgraph import lax as L
from symgraph.autodiff import jvp_pass, vjp_pass
from symgraph.batching import vmap
from symgraph.ops import OPS
from symgraph.ops.core import Op, register, same_dtype, same_shape
from symgraph.testing import GradientCheckError, check_vjp_jvp
from symgraph.transforms import jacfwd, jacrev

SPELLINGS = [pytest.param(np, id="numpy"), pytest.param(snp, id="snp")]


def _norm(xp):
    return np.linalg.norm if xp is np else snp.linalg.norm


# ----- worked cases -----


@pytest.mark.parametrize("xp", SPELLINGS)
def test_fan_out_contributions_are_summed(xp):
    # b = (x + y) x at x = 2, y = 3: db/dx = 2x + y = 7, db/dy = x = 2
    def b(x, y):
        return xp.multiply(xp.add(x, y), x)

    dx, dy = sg.grad(b, argnums=(0, 1))(2.0, 3.0)
    assert float(dx) == 7.0 and float(dy) == 2.0
    g = sg.trace(b, 2.0, 3.0)
    x = g.inputs[0]
    assert len(g.readers()[x]) == 2  # x has two readers


@pytest.mark.parametrize("xp", SPELLINGS)
def test_chain_with_shared_subexpressions(xp):
    # a = x x, t = a + a, L = t t at x = 2: L = 64, dL/dx = 16 x^3 = 128
    def loss(x):
        a = xp.multiply(x, x)
        t = xp.add(a, a)
        return xp.multiply(t, t)

    v, g = sg.value_and_grad(loss)(2.0)
    assert float(v) == 64.0 and float(g) == 128.0
    assert float(sg.grad(sg.grad(loss))(2.0)) == 48.0 * 4  # 48 x^2


@pytest.mark.parametrize("xp", SPELLINGS)
def test_hvp_of_sum_of_squares_is_2v(xp):
    def loss(x):
        return xp.sum(x * x)

    np.testing.assert_array_equal(sg.hvp(loss, (np.arange(3.0),), (np.ones(3),)), 2 * np.ones(3))


@pytest.mark.parametrize("xp", SPELLINGS)
def test_hvp_matches_hessian_and_never_forms_it(xp):
    def loss(x):
        return xp.sum(xp.tanh(x) ** 2 * xp.sin(x[::-1]))

    n = 40
    rng = np.random.default_rng(0)
    x, v = rng.standard_normal(n), rng.standard_normal(n)
    np.testing.assert_allclose(sg.hvp(loss, (x,), (v,)), sg.hessian(loss)(x) @ v, rtol=1e-12, atol=1e-12)
    g = sg.trace(lambda x, v: sg.hvp(loss, (x,), (v,)), x, v)
    assert max(node.size for node in g) == n  # no n x n intermediate


def tanh_poly(n: int) -> list[int]:
    """Integer coefficients (lowest degree first) of P_n with d^n tanh / dx^n = P_n(tanh x).

    P_0(t) = t, P_{k+1}(t) = P_k'(t) (1 - t^2).
    """
    p = [0, 1]
    for _ in range(n):
        dp = [k * p[k] for k in range(1, len(p))] or [0]
        q = [0] * (len(dp) + 2)
        for k, c in enumerate(dp):
            q[k] += c
            q[k + 2] -= c
        p = q
    return p


def test_tanh_polynomials_are_right():
    assert tanh_poly(1) == [1, 0, -1]  # 1 - t^2
    assert tanh_poly(2)[:4] == [0, -2, 0, 2]  # -2t + 2t^3


def _nested(f, n):
    for _ in range(n):
        f = sg.grad(f)
    return f


@pytest.mark.parametrize("xp", SPELLINGS)
def test_nth_derivative_of_tanh_to_order_8(xp):
    t = np.tanh(0.3)
    sizes = []
    for n in range(1, 9):
        want = np.polynomial.polynomial.polyval(t, tanh_poly(n))
        got = _nested(xp.tanh, n)(0.3)
        assert abs(got - want) <= 1e-11 * max(1.0, abs(want)), (n, got, want)
        sizes.append(len(sg.trace(_nested(xp.tanh, n), 0.3)))
    # a DAG, not a tree: each order at most ~2.5x the previous one (raw trace, before simplification)
    assert all(b <= 2.5 * a for a, b in zip(sizes, sizes[1:])), sizes


def extended_rosenbrock(xp):
    def f(x):
        a, b = x[::2], x[1::2]
        return xp.sum(100.0 * (b - a**2) ** 2 + (1.0 - a) ** 2)

    return f


def rosenbrock_hessian(x):
    n = len(x)
    h = np.zeros((n, n))
    for i in range(0, n, 2):
        a, b = x[i], x[i + 1]
        h[i, i] = 1200 * a * a - 400 * b + 2
        h[i, i + 1] = h[i + 1, i] = -400 * a
        h[i + 1, i + 1] = 200.0
    return h


@pytest.mark.parametrize("xp", SPELLINGS)
@pytest.mark.parametrize("n", [10, 100])
def test_extended_rosenbrock_hessian_is_analytic(xp, n):
    x = np.random.default_rng(n).uniform(-2, 2, n)
    h = sg.hessian(extended_rosenbrock(xp))(x)
    assert h.shape == (n, n) and h.dtype == np.float64
    np.testing.assert_allclose(h, rosenbrock_hessian(x), rtol=1e-13, atol=1e-10)


def test_hessian_graph_size_does_not_grow_with_n():
    f = extended_rosenbrock(np)
    sizes = [len(sg.trace(sg.hessian(f), np.ones(n))) for n in (10, 100, 1000)]
    assert sizes[0] == sizes[1] == sizes[2], sizes
    jac_sizes = [len(sg.trace(sg.jacobian(lambda x: np.tanh(x) * x[::-1]), np.ones(n))) for n in (3, 300)]
    assert jac_sizes[0] == jac_sizes[1]


def test_hessian_n1000_matches_analytic():
    x = np.random.default_rng(7).uniform(-2, 2, 1000)
    np.testing.assert_allclose(sg.hessian(extended_rosenbrock(snp))(x), rosenbrock_hessian(x), rtol=1e-13, atol=1e-9)


# ----- numerically stable composites at large inputs -----


def test_logsumexp_at_1e3_has_finite_correct_gradient():
    x = np.array([1000.0, 1000.0])
    assert float(snp.logsumexp(x)) == pytest.approx(1000.0 + np.log(2.0), rel=1e-15)
    np.testing.assert_allclose(sg.grad(snp.logsumexp)(x), [0.5, 0.5], rtol=1e-15)
    y = np.array([1000.0, -1000.0, 999.0])
    w = np.exp(y - y.max()) / np.exp(y - y.max()).sum()
    np.testing.assert_allclose(sg.grad(snp.logsumexp)(y), w, rtol=1e-14)
    h = sg.hessian(snp.logsumexp)(y)
    np.testing.assert_allclose(h, np.diag(w) - np.outer(w, w), rtol=1e-12, atol=1e-15)


def test_softmax_and_log_softmax_at_1e3():
    x = np.array([[1000.0, 999.0, -1000.0], [-1000.0, -1001.0, -1000.0]])
    e = np.exp(x - x.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(sg.trace(snp.softmax, x).evaluate(x), s, rtol=1e-15)
    j = sg.jacobian(snp.softmax)(x)
    assert np.all(np.isfinite(j))
    for r in range(2):
        np.testing.assert_allclose(j[r, :, r, :], np.diag(s[r]) - np.outer(s[r], s[r]), atol=1e-15)
        np.testing.assert_array_equal(j[r, :, 1 - r, :], 0.0)
    w = np.array([[1.0, 2.0, -3.0], [0.5, 0.0, 1.0]])
    g = sg.grad(lambda x: snp.sum(w * snp.log_softmax(x)))(x)
    np.testing.assert_allclose(g, w - w.sum(-1, keepdims=True) * s, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(snp.log_softmax(x), x - x.max(-1, keepdims=True) - np.log(e.sum(-1, keepdims=True)))


def test_cross_entropy_gelu_layer_norm_large_inputs():
    logits = np.array([[1000.0, -1000.0, 0.0], [3.0, 1000.0, 999.0]])
    labels = np.array([1, 2])
    e = np.exp(logits - logits.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    g = sg.grad(lambda z: snp.cross_entropy(z, labels))(logits)
    np.testing.assert_allclose(g, (p - np.eye(3)[labels]) / 2, atol=1e-15)
    x = np.array([-1000.0, -3.0, 0.0, 3.0, 1000.0])
    dg = sg.grad(lambda x: snp.sum(snp.gelu(x)))(x)
    assert np.all(np.isfinite(dg)) and dg[0] == 0.0 and dg[-1] == 1.0
    sg.check_grads(lambda x: snp.gelu(x), (x[1:-1],), order=2)
    big = np.array([[1e3, -2e3, 5e2, 7e3]])
    sg.check_grads(lambda x: snp.layer_norm(x), (big,), order=1, eps=1e-3, rtol=1e-5, atol=1e-9)
    sg.check_grads(lambda x: snp.layer_norm(x), (np.array([[0.3, -1.2, 2.0, 0.1]]),), order=2)


# ----- guards: where(c, f(x), y) with a non-finite derivative on the untaken side -----


@pytest.mark.parametrize("xp", SPELLINGS)
def test_where_guarded_sqrt_and_log_have_zero_gradient_on_the_untaken_side(xp):
    x = np.array([-1.0, 0.0, 4.0])

    def f(x):
        return xp.sum(xp.where(x > 0, xp.sqrt(x), 0.0))

    np.testing.assert_array_equal(sg.grad(f)(x), [0.0, 0.0, 0.25])
    np.testing.assert_array_equal(sg.jvp(f, (x,), (np.ones(3),))[1], 0.25)
    np.testing.assert_array_equal(sg.hessian(f)(x), np.diag([0.0, 0.0, -0.25 * 4.0**-1.5]))

    def g(x):
        return xp.sum(xp.where(x > 0, xp.log(x), 0.0) * x)

    np.testing.assert_allclose(sg.grad(g)(x), [0.0, 0.0, np.log(4.0) + 1.0])
    np.testing.assert_allclose(sg.hessian(g)(x), np.diag([0.0, 0.0, 0.25]))


@pytest.mark.parametrize("xp", SPELLINGS)
def test_guards_through_chains_both_branches_and_nesting(xp):
    x = np.array([-4.0, 0.0, 9.0])
    # both branches read x: where(x > 0, sqrt(x), sqrt(-x)) -> sign(x) / (2 sqrt|x|), 0 -> inf at 0 only
    both = sg.grad(lambda x: xp.sum(xp.where(x > 0, xp.sqrt(x), xp.sqrt(-x))))(x)
    np.testing.assert_allclose(both[[0, 2]], [-0.25, 1.0 / 6.0])
    # a chain of elementwise ops inside the guard
    chain = sg.grad(lambda x: xp.sum(xp.where(x > 0, xp.exp(0.5 * xp.log(x)) * 2.0, 1.0)))(x)
    np.testing.assert_allclose(chain, [0.0, 0.0, 1.0 / 3.0])
    # nested guards: the innermost one protects log
    nested = sg.grad(lambda x: xp.sum(xp.where(x > -1, xp.where(x > 0, xp.log(x), 0.0), 0.0)))(x)
    np.testing.assert_allclose(nested, [0.0, 0.0, 1.0 / 9.0])
    # fan-out: two guarded terms summed
    two = sg.grad(lambda x: xp.sum(xp.where(x > 0, xp.sqrt(x), 0.0) + xp.where(x > 0, xp.log(x), 0.0)))(x)
    np.testing.assert_allclose(two, [0.0, 0.0, 1.0 / 6.0 + 1.0 / 9.0])
    # maximum/minimum mask the same way: maximum(log(x), -1) at x = 0
    mx = sg.grad(lambda x: xp.sum(xp.maximum(xp.log(x), -1.0)))(np.array([0.0, 2.0]))
    np.testing.assert_allclose(mx, [0.0, 0.5])
    # batched Jacobian of a guarded function
    np.testing.assert_allclose(sg.jacobian(lambda x: xp.where(x > 0, xp.sqrt(x), 0.0))(x),
                               np.diag([0.0, 0.0, 1.0 / 6.0]))


@pytest.mark.parametrize("xp", SPELLINGS)
def test_sqrt_and_norm_at_zero(xp):
    # sqrt'(0) = +inf, the true one-sided derivative
    assert np.all(sg.grad(lambda x: xp.sum(xp.sqrt(x)))(np.zeros(3)) == np.inf)
    norm = _norm(xp)
    # norm'(0) = 0, a subgradient; the norm is smooth elsewhere
    np.testing.assert_array_equal(sg.grad(norm)(np.zeros(3)), 0.0)
    np.testing.assert_array_equal(sg.hessian(norm)(np.zeros(3)), 0.0)
    x = np.array([3.0, -4.0])
    np.testing.assert_allclose(sg.grad(norm)(x), x / 5.0)
    np.testing.assert_allclose(sg.grad(lambda x: norm(x) ** 2)(np.zeros(2)), 0.0)
    sg.check_grads(norm, (x,), order=2)


# ----- subgradient conventions -----


@pytest.mark.parametrize("xp", SPELLINGS)
def test_relu_formulations_agree_including_zero(xp):
    x = np.array([-2.0, -0.0, 0.0, 1e-300, 3.0])
    forms = [lambda x: xp.maximum(x, 0.0), lambda x: xp.where(x > 0, x, 0.0), snp.relu,
             lambda x: xp.clip(x, 0.0, None)]
    grads = [sg.grad(lambda x, f=f: xp.sum(f(x)))(x) for f in forms]
    for g in grads:
        np.testing.assert_array_equal(g, [0.0, 0.0, 0.0, 1.0, 1.0])
    # minimum ties go to the second operand too: d minimum(x, 0) / dx at 0 is 0
    np.testing.assert_array_equal(sg.grad(lambda x: xp.sum(xp.minimum(x, 0.0)))(x), [1.0, 0.0, 0.0, 0.0, 0.0])
    # ...and maximum(0, x) gives the tie to x
    np.testing.assert_array_equal(sg.grad(lambda x: xp.sum(xp.maximum(0.0, x)))(x), [0.0, 1.0, 1.0, 1.0, 1.0])


@pytest.mark.parametrize("xp", SPELLINGS)
def test_abs_max_and_clip_conventions(xp):
    np.testing.assert_array_equal(sg.grad(lambda x: xp.sum(xp.abs(x)))(np.array([-2.0, 0.0, 3.0])), [-1.0, 0.0, 1.0])
    # max-reduction ties share the cotangent equally
    np.testing.assert_allclose(sg.grad(lambda x: xp.max(x))(np.array([1.0, 3.0, 3.0, 3.0])), [0, 1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(sg.grad(lambda x: xp.sum(xp.min(x, axis=1)))(np.array([[1.0, 1.0], [2.0, 5.0]])),
                               [[0.5, 0.5], [1.0, 0.0]])
    # clip: derivative 1 strictly inside, 0 at and beyond the bounds
    np.testing.assert_array_equal(sg.grad(lambda x: xp.sum(xp.clip(x, -1.0, 1.0)))(np.array([-2.0, -1.0, 0.5, 1.0, 2.0])),
                                  [0.0, 0.0, 1.0, 0.0, 0.0])


# ----- errors -----


def test_grad_of_nonscalar_output_names_shape_and_alternatives():
    with pytest.raises(sg.NonScalarOutputError, match=r"shape \(3,\)") as e:
        sg.grad(np.sin)(np.ones(3))
    assert "jacobian" in str(e.value) and "vjp" in str(e.value)


def test_integer_and_bool_wrt_raise_dtype_error():
    with pytest.raises(sg.DTypeError, match="int64"):
        sg.grad(lambda x: np.sum(x * 1.0))(np.arange(3))
    with pytest.raises(sg.DTypeError, match="bool"):
        sg.grad(lambda x, y: np.sum(y * 1.0), argnums=0)(np.array([True]), np.ones(1))
    with pytest.raises(sg.DTypeError):
        sg.jvp(lambda x: x * 1.0, (np.arange(3),), (np.ones(3),))
    with pytest.raises(sg.DTypeError):
        sg.hessian(lambda x: np.sum(x * 1.0))(np.arange(3))
    # an integer argument that is not differentiated is fine
    assert float(sg.grad(lambda x, n: np.sum(x * n))(np.ones(2), np.array([2, 3]))[1]) == 3.0


def test_mismatched_tangent_and_cotangent_raise_shape_error():
    with pytest.raises(sg.ShapeError, match=r"\(4,\).*\(3,\)"):
        sg.jvp(np.sin, (np.ones(3),), (np.ones(4),))
    _, pullback = sg.vjp(np.sin, np.ones(3))
    with pytest.raises(sg.ShapeError, match=r"\(2,\)"):
        pullback(np.ones(2))


@pytest.fixture
def norule_op():
    """A temporary primitive with an implementation but no derivative rules."""
    op = register(Op("test_norule_sin", 1, "elementwise", same_shape, same_dtype, np.sin))
    yield op
    del OPS[op.name]


def test_op_without_rule_raises_only_when_its_derivative_is_needed(norule_op):
    def f(x, y):
        return np.sum(L.bind("test_norule_sin", x) + y * y)

    x, y = np.ones(3), np.arange(3.0)
    assert float(sg.trace(f, x, y).evaluate(x, y)) == pytest.approx(3 * np.sin(1.0) + 5.0)
    np.testing.assert_allclose(sg.grad(f, argnums=1)(x, y), 2 * y)  # not through the op: fine
    with pytest.raises(sg.UnsupportedOpError, match="test_norule_sin") as e:
        sg.grad(f)(x, y)
    assert "test_autodiff.py" in str(e.value)  # points at the user's line
    with pytest.raises(sg.UnsupportedOpError, match="test_norule_sin"):
        sg.jvp(lambda x: f(x, y), (x,), (x,))


def test_check_grads_catches_a_wrong_rule():
    op = register(Op("test_wrong_sin", 1, "elementwise", same_shape, same_dtype, np.sin,
                     vjp=lambda ct, n: (ct * L.unary("cos", n.inputs[0]) * 1.01,),
                     jvp=lambda t, n: t[0] * L.unary("cos", n.inputs[0])))
    try:
        with pytest.raises(GradientCheckError, match="reverse mode"):
            sg.check_grads(lambda x: L.bind("test_wrong_sin", x), (np.linspace(0.1, 1.0, 4),), order=1)
        with pytest.raises(GradientCheckError, match="VJP"):
            check_vjp_jvp(lambda x: L.bind("test_wrong_sin", x), (np.linspace(0.1, 1.0, 4),))
        # a function computing in float32 from float64 arguments gets float32 steps and tolerances (float64
        # ones reported false failures), and a wrong rule is still caught there
        x = np.linspace(0.1, 1.0, 4)
        sg.check_grads(lambda x: np.sin(x.astype(np.float32)) * 3, (x,), order=2)
        with pytest.raises(GradientCheckError, match="VJP"):  # 1% off: caught by JVP against VJP at float32
            sg.check_grads(lambda x: L.bind("test_wrong_sin", x.astype(np.float32)) * 10, (x,), order=1)
    finally:
        del OPS[op.name]


# ----- argnums, pytrees, decorators -----


@pytest.mark.parametrize("xp", SPELLINGS)
def test_argnums_int_tuple_negative(xp):
    def f(x, y, z):
        return xp.sum(x * y**2 + xp.sin(z))

    x, y, z = np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([0.5, 1.5])
    np.testing.assert_allclose(sg.grad(f, argnums=1)(x, y, z), 2 * x * y)
    gx, gz = sg.grad(f, argnums=(0, 2))(x, y, z)
    np.testing.assert_allclose(gx, y**2)
    np.testing.assert_allclose(gz, np.cos(z))
    np.testing.assert_allclose(sg.grad(f, argnums=-1)(x, y, z), np.cos(z))
    (g1,) = sg.grad(f, argnums=(1,))(x, y, z)
    np.testing.assert_allclose(g1, 2 * x * y)
    h = sg.hessian(f, argnums=(0, 1))(x, y, z)
    np.testing.assert_allclose(h[0][1], np.diag(2 * y))
    np.testing.assert_allclose(h[1][1], np.diag(2 * x))
    np.testing.assert_array_equal(h[0][0], 0.0)


@pytest.mark.parametrize("xp", SPELLINGS)
def test_grad_of_dict_of_params(xp):
    rng = np.random.default_rng(0)
    params = {"W": rng.standard_normal((3, 2)), "b": rng.standard_normal(2), "extra": [np.ones(1)]}
    x = rng.standard_normal((4, 3))

    def loss(p, x):
        h = xp.tanh(x @ p["W"] + p["b"])
        return xp.sum(h**2) + xp.sum(p["extra"][0])

    g = sg.grad(loss)(params, x)
    assert set(g) == {"W", "b", "extra"} and isinstance(g["extra"], list)
    h = np.tanh(x @ params["W"] + params["b"])
    dz = 2 * h * (1 - h**2)
    np.testing.assert_allclose(g["W"], x.T @ dz)
    np.testing.assert_allclose(g["b"], dz.sum(0))
    np.testing.assert_allclose(g["extra"][0], [1.0])
    hb = sg.hessian(lambda p: loss(p, x))(params)
    assert hb["b"]["b"].shape == (2, 2) and hb["W"]["b"].shape == (3, 2, 2)
    np.testing.assert_allclose(hb["b"]["W"], np.transpose(hb["W"]["b"], (2, 0, 1)), rtol=1e-12)


def test_grad_as_decorator_and_float32_in_float32_out():
    @sg.grad
    def df(x):
        return np.sum(np.sin(x))

    @sg.grad(argnums=1)
    def dg(x, y):
        return np.sum(x * y)

    np.testing.assert_allclose(df(np.array([0.0, 1.0])), np.cos([0.0, 1.0]))
    np.testing.assert_allclose(dg(np.array([2.0]), np.array([5.0])), [2.0])
    g32 = df(np.ones(3, np.float32))
    assert g32.dtype == np.float32
    assert sg.grad(np.sin)(0.5).dtype == np.float64 and np.ndim(sg.grad(np.sin)(0.5)) == 0


# ----- nesting and Jacobians -----


@pytest.mark.parametrize("xp", SPELLINGS)
def test_nested_grad_jacobian_of_grad_and_hessian_agree(xp):
    def f(x):
        return xp.sum(xp.sin(x) * x[::-1] ** 2)

    x = np.array([0.3, -0.7, 1.1, 2.0])
    h = sg.hessian(f)(x)
    np.testing.assert_allclose(sg.jacobian(sg.grad(f))(x), h, rtol=1e-13)
    np.testing.assert_allclose(jacrev(jacrev(f))(x), h, rtol=1e-13)
    np.testing.assert_allclose(h, h.T, rtol=1e-13)
    # grad(grad) of a scalar function of a scalar, against the analytic value
    np.testing.assert_allclose(sg.grad(sg.grad(lambda t: xp.sin(t) * t**2))(0.7),
                               -np.sin(0.7) * 0.49 + 4 * 0.7 * np.cos(0.7) + 2 * np.sin(0.7))
    sg.check_grads(sg.grad(f), (x,), order=2)


@pytest.mark.parametrize("xp", SPELLINGS)
def test_jacobian_shapes_and_modes(xp):
    a = np.random.default_rng(1).standard_normal((3, 4))

    def f(x):  # (2, 4) -> (2, 3)
        return xp.tanh(x @ a.T)

    x = np.random.default_rng(2).standard_normal((2, 4))
    j = sg.jacobian(f)(x)
    assert j.shape == (2, 3, 2, 4)
    s = 1 - np.tanh(x @ a.T) ** 2
    want = np.einsum("ij,jk,il->ijlk", s, a, np.eye(2))
    np.testing.assert_allclose(j, want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jacfwd(f)(x), want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jacrev(f)(x), want, rtol=1e-13, atol=1e-15)
    j0, j1 = sg.jacobian(lambda x, y: x * y, argnums=(0, 1))(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    np.testing.assert_allclose(j0, np.diag([3.0, 4.0]))
    np.testing.assert_allclose(j1, np.diag([1.0, 2.0]))
    out = sg.jacobian(lambda x: (x * 2.0, xp.sum(x)))(np.ones(3))  # pytree output
    np.testing.assert_allclose(out[0], 2 * np.eye(3))
    np.testing.assert_allclose(out[1], np.ones(3))


def test_stop_gradient_blocks():
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(sg.stop_gradient(x) * x))(x), x)
    np.testing.assert_allclose(sg.grad(lambda x: np.sum(sg.stop_gradient(x**2)))(x), 0.0)


# ----- vmap -----


def test_vmap_axes_nesting_and_per_example_gradients():
    rng = np.random.default_rng(0)
    xs, w = rng.standard_normal((5, 3)), rng.standard_normal((3, 2))

    def loss(w, x):
        return np.sum(np.tanh(x @ w) ** 2)

    per = vmap(sg.grad(loss), in_axes=(None, 0))(w, xs)
    assert per.shape == (5, 3, 2)
    for i in range(5):
        np.testing.assert_allclose(per[i], sg.grad(loss)(w, xs[i]), rtol=1e-13)
    np.testing.assert_allclose(per.sum(0), sg.grad(lambda w: sum(loss(w, xs[i]) for i in range(5)))(w), rtol=1e-12)
    # in_axes other than 0, out_axes
    m = rng.standard_normal((3, 4))
    np.testing.assert_allclose(vmap(lambda c: np.sin(c) * 2.0, in_axes=1, out_axes=1)(m), np.sin(m) * 2.0)
    np.testing.assert_allclose(vmap(np.sum, in_axes=1)(m), m.sum(0))
    # vmap of vmap: outer product table
    table = vmap(vmap(lambda a, b: a * b, in_axes=(None, 0)), in_axes=(0, None))(np.arange(3.0), np.arange(4.0))
    np.testing.assert_allclose(table, np.outer(np.arange(3.0), np.arange(4.0)))
    # grad of vmap
    np.testing.assert_allclose(sg.grad(lambda v: np.sum(vmap(np.sin)(v)))(np.arange(3.0)), np.cos(np.arange(3.0)))


def test_vmap_errors():
    with pytest.raises(sg.ShapeError, match="different sizes"):
        vmap(lambda a, b: a + b)(np.ones(3), np.ones(4))
    with pytest.raises(sg.SymgraphError, match="no argument is mapped"):
        vmap(np.sin, in_axes=None)(np.ones(3))


# ----- the passes on graphs -----


def test_vjp_and_jvp_passes_share_the_forward_graph():
    g = sg.trace(lambda x: np.sum(np.exp(x) * x), np.ones(3))
    b = vjp_pass(g)
    assert sum(1 for n in b if n.op.name == "exp") == 1  # the backward sweep reads the forward exp
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(b.evaluate(x)[0], np.exp(x) * (x + 1))
    from symgraph.tracing import make_input

    with sg.Builder():
        t = make_input((3,), np.float64, 1, "t")
    f = jvp_pass(g, g.inputs, [t])
    np.testing.assert_allclose(f.evaluate(x, np.ones(3))[0], np.sum(np.exp(x) * (x + 1)))


def test_long_chain_differentiates_without_recursion():
    def f(x):
        for _ in range(5_000):
            x = x * 1.0001 + 0.0001
        return np.sum(x)

    np.testing.assert_allclose(sg.grad(f)(np.zeros(2)), np.full(2, 1.0001**5_000), rtol=1e-10)
