"""The guard-mask rules of simplify (symgraph/passes/simplify/masks.py): exact, and they fire."""

import numpy as np

import symgraph as sg


def _ops(g):
    return [n.op.name for n in g.toposort()]


def _outs(v):
    return list(v) if isinstance(v, (tuple, list)) else [v]


def _simplified(f, *args):
    g = sg.simplify(sg.trace(f, *args))
    for got, want in zip(_outs(g.evaluate(*args)), _outs(sg.trace(f, *args).evaluate(*args)), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    return g


def test_indicator_sum_compared_with_zero_is_a_boolean_or():
    x = np.linspace(-2, 2, 9)

    def f(x):
        ind = (x > 1).astype(np.float64) + (x < -1).astype(np.float64)
        return ind[1:] > 0.0

    g = _simplified(f, x)
    ops = _ops(g)
    assert "cast" not in ops and "add" not in ops and "logical_or" in ops
    np.testing.assert_array_equal(g.evaluate(x), ((x > 1) | (x < -1))[1:])


def test_a_negative_or_unknown_operand_is_left_alone():
    x = np.linspace(-2, 2, 9)
    g = _simplified(lambda x: ((x > 1).astype(np.float64) - 0.5) > 0.0, x)
    assert "cast" in _ops(g)
    g = _simplified(lambda x: ((x > 1).astype(np.float64) + x) > 0.0, x)
    assert "cast" in _ops(g)


def test_slice_of_a_broadcast_is_a_broadcast_of_the_slice():
    x = np.arange(4.0)
    y = np.arange(12.0).reshape(4, 3)

    def f(x, y):
        b = np.broadcast_to(x[:, None], (4, 3))
        return b[1:3, 2:3] * y[1:3, 2:3], np.broadcast_to(y, (2, 4, 3))[:, 1:, ::2]

    g = _simplified(f, x, y)
    # no slice of a broadcast_to is left
    for n in g.toposort():
        if n.op.name == "slice":
            assert n.inputs[0].op.name != "broadcast_to"


def test_guards_with_one_condition_share_one_select():
    x = np.linspace(-1, 1, 7)

    def f(x):
        m = x > 0
        return np.where(m, np.sin(x), 0.0) + np.where(m, np.cos(x), 0.0)

    g = _simplified(f, x)
    assert _ops(g).count("where") == 1


def test_gradient_of_a_guarded_branch_on_a_broadcast_condition():
    """Reverse mode through where(zero, a, b) with a (n, 1) condition broadcast to (n, 3): the guards'
    indicator sums become boolean masks, and the gradient is still right (NaN-free in the untaken branch)."""
    rng = np.random.default_rng(0)
    r = rng.standard_normal((6, 3))
    r[2] = 0.0

    def f(r):
        sq = np.sum(r * r, axis=1, keepdims=True)
        zero = sq == 0
        theta = np.sqrt(np.where(zero, 1.0, sq))
        u = r / theta
        rotated = np.where(zero, r * 2.0, u * np.sin(theta))
        return np.sum(rotated * np.stack([r[:, 1], r[:, 2], r[:, 0]], axis=1))

    gf = sg.grad(f)
    g = sg.simplify(sg.trace(gf, r))
    casts = [n for n in g.toposort() if n.op.name == "cast" and n.inputs[0].dtype == np.bool_]
    assert not casts
    got = gf(r)
    assert np.all(np.isfinite(got))
    sg.check_grads(f, (r + 0.01 * (r != 0),), order=1)
    np.testing.assert_allclose(sg.compile(gf)(r), got, rtol=1e-13, atol=1e-15)
