"""Automatic rolling of Python loops (`sg.compile(roll=True)`, symgraph.rolling).

A plain Python loop traces to K copies of its body; with roll=True compile
rewrites the chain into one `scan` loop before differentiating, so the
gradient comes from the scan's reverse loop. Compared here with the same
function compiled unrolled (roll=False): values equal (the evaluator gives
the same bits), gradients to rounding (the weight gradients sum the steps in
the other order); loops that must stay unrolled (bodies differ, too short)
stay unrolled.
"""

from __future__ import annotations

import numpy as np
import pytest

import symgraph as sg
from symgraph.rolling import MIN_STEPS, roll
from symgraph.tree import tree_flatten

RNG = np.random.default_rng(19)


def rnn(Wx, Wh, b, xs):
    h = np.zeros((2, 4))
    for t in range(xs.shape[0]):            # per-step x: a slice of an input
        h = np.tanh(xs[t] @ Wx + h @ Wh + b)
    return 0.5 * np.sum(h * h)


def lstm(W, xs):
    """Two carries, an accumulated loss with a per-step constant, per-step outputs read after the loop."""
    h, c, loss, outs = np.zeros(4), np.zeros(4), 0.0, []
    for t in range(xs.shape[0]):
        z = np.concatenate([xs[t], h]) @ W
        i, f, o, g = z[:4], z[4:8], z[8:12], z[12:]
        c = 1 / (1 + np.exp(-f)) * c + 1 / (1 + np.exp(-i)) * np.tanh(g)
        h = 1 / (1 + np.exp(-o)) * np.tanh(c)
        loss = loss + np.sum(h ** 2) * (t + 1) * 0.01
        outs.append(h)
    return loss + np.sum(np.stack(outs)[::3])


RNN_ARGS = (RNG.normal(size=(3, 4)), 0.5 * RNG.normal(size=(4, 4)), RNG.normal(size=4), RNG.normal(size=(30, 2, 3)))
LSTM_ARGS = (0.3 * RNG.normal(size=(7, 16)), RNG.normal(size=(12, 3)))


def _leaves(x):
    return [np.asarray(v) for v in tree_flatten(x)[0]]


def _scans(g):
    return [n for n in g.toposort() if n.op.name == "scan"]


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
@pytest.mark.parametrize("fn,args,argnums", [(rnn, RNN_ARGS, (0, 1, 2)), (lstm, LSTM_ARGS, (0, 1))],
                         ids=["rnn", "lstm"])
def test_rolled_values_and_gradients_equal_unrolled(backend, fn, args, argnums):
    vg = sg.value_and_grad(fn, argnums=argnums)
    ref = sg.compile(vg, backend=backend)
    cr = sg.compile(vg, backend=backend, roll=True)
    (v0, g0), (v1, g1) = ref(*args), cr(*args)
    assert v1 == pytest.approx(v0, rel=1e-14, abs=1e-14)
    for a, c in zip(_leaves(g0), _leaves(g1)):
        np.testing.assert_allclose(c, a, rtol=1e-12, atol=1e-14)
    assert ref.stats["rolled_loops"] == 0 and cr.stats["rolled_loops"] >= 1
    assert cr.stats["nodes"] * 5 < ref.stats["nodes"]
    # the gradient is the scan's reverse loop (rolled before differentiation), not K unrolled VJPs
    assert any(n.attr("region").name.startswith("vjp(") for n in _scans(cr.graph))


def test_rolled_rk4_forward_and_hessian():
    """RK4 (four stages that look alike inside each step) rolls at the step; grad of grad goes through it."""
    def rk4(y0, a):
        def f(y):
            return np.stack([a * (y[1] - y[0]), y[0] * (2.0 - y[2]) - y[1], y[0] * y[1] - a * y[2]])
        y = y0
        for _ in range(12):
            k1 = f(y)
            k2 = f(y + 0.05 * k1)
            k3 = f(y + 0.05 * k2)
            k4 = f(y + 0.1 * k3)
            y = y + (0.1 / 6) * (k1 + 2 * k2 + 2 * k3 + k4)
        return np.sum(y * y)

    y0 = np.array([1.0, 0.5, 0.2])
    g = sg.trace(rk4, y0, 1.5)
    rolled, n = roll(g)
    assert n == 1 and len(rolled) * 5 < len(g)
    assert rolled.evaluate(y0, 1.5) == g.evaluate(y0, 1.5)            # the same ops: the same bits
    hess = sg.grad(sg.grad(rk4, argnums=1), argnums=1)
    ref = sg.compile(hess, backend="numpy")(y0, 1.5)
    cr = sg.compile(hess, backend="numpy", roll=True)
    assert cr(y0, 1.5) == pytest.approx(ref, rel=1e-12) and cr.stats["rolled_loops"] >= 1


def test_rolled_jvp_and_two_loops_counted():
    def two(x, W):
        for _ in range(10):
            x = np.tanh(x @ W)
        y = x
        for _ in range(9):
            y = np.sin(y) + x
        return np.sum(y)

    x, W = RNG.normal(size=(2, 4)), 0.5 * RNG.normal(size=(4, 4))
    fwd = sg.compile(two, backend="numpy", roll=True)
    assert fwd(x, W) == sg.compile(two, backend="numpy")(x, W) and fwd.stats["rolled_loops"] == 2
    assert len(_scans(fwd.graph)) == 2
    tW = RNG.normal(size=(4, 4))
    jv = sg.compile(lambda x, W: sg.jvp(two, (x, W), (x, tW)), backend="numpy", roll=True)
    ref = sg.jvp(two, (x, W), (x, tW))
    np.testing.assert_allclose(jv(x, W), ref, rtol=1e-13)
    assert jv.stats["rolled_loops"] == 2


def test_a_value_read_by_several_alike_readers_rolls_as_one_loop():
    """Stacked diagonal LSTM layers (ADBench's): the top hidden state is read by three `mul`s alike in op and
    shape (the next step's two gates and the output layer); the readers are told apart by what they multiply
    by, so the per-step loss joins the layers' loop instead of a second loop reading stacked ys."""
    def stacked(wb, xs):
        b = xs.shape[1]
        hs, cs, total = [np.zeros(b), np.zeros(b)], [np.zeros(b), np.zeros(b)], 0.0
        for t in range(xs.shape[0] - 1):
            x = xs[t] * wb[0, :b]
            for i in range(2):
                w, bias = wb[1 + 2 * i], wb[2 + 2 * i]
                f = 1 / (1 + np.exp(-(x * w[:b] + bias[:b])))
                g = np.tanh(hs[i] * w[b:] + bias[b:])
                cs[i] = cs[i] * f + g
                hs[i] = np.tanh(cs[i]) * (hs[i] * w[b:] + 1.0)
                x = hs[i]
            y = x * wb[0, b:] + 0.5
            total = total + np.sum(xs[t + 1] * (y - np.log(np.sum(np.exp(y)) + 2.0)))
        return total

    wb, xs = 0.5 * RNG.normal(size=(5, 6)), RNG.normal(size=(16, 3))
    g = sg.trace(stacked, wb, xs)
    rolled, n = roll(g)
    assert n == 1 and len(_scans(rolled)) >= 1 and len(rolled) * 4 < len(g)
    assert not [x for x in rolled.toposort() if x.op.name == "concatenate"]    # no ys stacked into a 2nd loop
    assert rolled.evaluate(wb, xs) == g.evaluate(wb, xs)
    vg = sg.value_and_grad(stacked)
    (v0, g0), (v1, g1) = sg.compile(vg, backend="numpy")(wb, xs), sg.compile(vg, backend="numpy", roll=True)(wb, xs)
    assert v1 == v0
    np.testing.assert_allclose(g1, g0, rtol=1e-12, atol=1e-15)


def test_loops_that_must_not_roll():
    def differ(x):                          # ten steps, each a different function: no repeated body
        for f in (np.sin, np.cos, np.tanh, np.arctan, np.sinh, np.exp, np.log1p, np.sqrt, np.cbrt, np.square):
            x = f(x) * 0.5 + 1.0
        return np.sum(x)

    def short(h, W):                        # a repeated body, but fewer steps than MIN_STEPS
        for _ in range(MIN_STEPS - 1):
            h = np.tanh(h @ W)
        return np.sum(h)

    x = RNG.uniform(size=5)
    for f, args in ((differ, (x,)), (short, (x[:4], 0.5 * np.eye(4)))):
        cr = sg.compile(f, backend="numpy", roll=True)
        assert cr(*args) == sg.compile(f, backend="numpy")(*args)
        assert cr.stats["rolled_loops"] == 0 and not _scans(cr.graph)


def test_roll_false_is_the_default_and_bad_values_raise():
    def f(h):
        for _ in range(20):
            h = np.tanh(0.5 * h)
        return h

    cf = sg.compile(f, backend="numpy")
    cf(np.ones(2))
    assert cf.roll is False and cf.stats["rolled_loops"] == 0 and not _scans(cf.graph)
    cr = sg.compile(f, backend="numpy", roll=True)
    np.testing.assert_array_equal(cr(np.ones(2)), cf(np.ones(2)))
    assert cr.stats["rolled_loops"] == 1 and len(cr.graph) < 10
    with pytest.raises(sg.SymgraphError, match="roll"):
        sg.compile(f, roll="yes")


def test_rolled_under_vmap_and_inside_a_scan_body():
    """grad rolls its primal wherever it is built while compile(roll=True) traces: under vmap, in a scan body."""
    def f(W, x):
        h = x
        for t in range(10):
            h = np.tanh(h @ W) + 0.1 * t
        return np.sum(h ** 2)

    W, X = 0.5 * RNG.normal(size=(3, 3)), RNG.normal(size=(4, 3))
    for fn in (lambda W, X: sg.vmap(sg.grad(f), in_axes=(None, 0))(W, X),
               lambda W, X: sg.scan(lambda c, x: (c + sg.grad(f)(W, x), None), np.zeros((3, 3)), X)[0]):
        cr = sg.compile(fn, backend="numpy", roll=True)
        np.testing.assert_allclose(cr(W, X), sg.compile(fn, backend="numpy")(W, X), rtol=1e-13, atol=1e-15)
        assert cr.stats["rolled_loops"] == 1
