"""Reverse mode through `sg.while_loop(..., checkpoints=s)`: a run-time trip count, s carry snapshots.

Gradients equal the max_steps version's (which stores every step) to rounding and central
differences; the evaluator runs the body exactly n + t(n, s) + n times, t the binomial optimum
found by a brute force over the split points; the compiled arena does not depend on n.
"""

import functools
import math

import numpy as np
import pytest

import symgraph as sg
from symgraph.ops import OPS
from symgraph.passes.checkpoint import revolve_extra_steps
from symgraph.while_checkpoint import while_schedule_counts


@functools.cache
def brute_force(l, s):
    """Fewest step evaluations to reverse l steps with s snapshots: every first split point tried."""
    if l <= 1:
        return 0
    if s == 0:
        return float("inf")
    return min(m + brute_force(l - m, s - 1) + brute_force(m, s) for m in range(1, l))


def split_formula(l, ss):
    """The split `revolve_split` computes in the graph (the module docstring's formula), in Python."""
    r = 0
    while math.comb(ss + r, ss) < l:
        r += 1
    c = lambda n, k: math.comb(n, k) if n >= 0 and k >= 0 else 0  # noqa: E731
    return min(max(c(ss + r - 2, ss), l - c(ss + r - 1, ss - 1), 1), c(ss + r - 1, ss), l - 1)


def online_placement(n, s):
    """The online rule of the module docstring, written out independently: entry j's trigger lengths are the
    binomial capacities C(s - j + r, s - j), r = 0, 1, ...; the lowest live entry (s - j >= 2) that hits wins."""
    entries = [(0, 0)]     # (start, r)
    for p in range(1, n):
        for j, (a, r) in enumerate(entries):
            if s - j >= 2 and p - a == math.comb(s - j + r, s - j):
                entries = entries[:j] + [(a, r + 1), (p, 0)]
                break
    return [a for a, _ in entries]


def online_recomputed(n, s):
    pos = online_placement(n, s)
    return sum(brute_force(b - a, s - j) for j, (a, b) in enumerate(zip(pos, pos[1:] + [n])))


def test_online_placement_is_never_worse_than_offline():
    for s in range(1, 6):
        for n in range(1, 150):
            c = while_schedule_counts(n, s)
            assert c["positions"] == online_placement(n, s)
            assert c["recomputed_steps"] == online_recomputed(n, s)
            assert c["known_length_recomputed_steps"] <= c["recomputed_steps"] <= c["offline_recomputed_steps"]
            assert c["offline_recomputed_steps"] == brute_force(n, s)
    assert [while_schedule_counts(100, 4)[k] for k in ("recomputed_steps", "offline_recomputed_steps",
                                                       "known_length_recomputed_steps")] == [283, 374, 275]


def test_split_formula_is_optimal():
    for ss in range(1, 7):
        for l in range(2, 120):
            m = split_formula(l, ss)
            assert 1 <= m < l
            assert m + brute_force(l - m, ss - 1) + brute_force(m, ss) == brute_force(l, ss), (l, ss, m)


def sqrt_newton(a, **kw):
    return sg.while_loop(lambda c: np.abs(c * c - a) > 1e-12 * a, lambda c: 0.5 * (c + a / c), a, **kw)


def rnn(W, b, h0, N, **kw):
    """A loop whose trip count depends on the data (|h| grows past a threshold) and on N (traced)."""
    def cond(c):
        h, k = c
        return np.logical_and(np.sum(h * h) < 4.0, k < N)

    def body(c):
        h, k = c
        return np.tanh(W @ h + b) * 1.5 + 0.1 * h, k + 1

    h, k = sg.while_loop(cond, body, (h0, np.int64(0)), **kw)
    return np.sum(h ** 3) + np.sum(h)


def rnn_data(H=4):
    rng = np.random.default_rng(0)
    return 0.5 * rng.normal(size=(H, H)), 0.3 * rng.normal(size=H), 0.2 * rng.normal(size=H)


def trips(W, b, h0, N):
    h, k = h0, 0
    while np.sum(h * h) < 4.0 and k < N:
        h, k = np.tanh(W @ h + b) * 1.5 + 0.1 * h, k + 1
    return k


def test_newton_gradient_matches_bounded_and_analytic():
    for s in (1, 2, 3):
        g = sg.grad(lambda a: sqrt_newton(a, checkpoints=s))(2.0)
        ref = sg.grad(lambda a: sqrt_newton(a, max_steps=40))(2.0)
        np.testing.assert_allclose(g, ref, rtol=1e-13)
        np.testing.assert_allclose(g, 0.5 / np.sqrt(2.0), rtol=1e-12)
        both = sg.compile(sg.grad(lambda a: sqrt_newton(a, checkpoints=s, max_steps=40)))(2.0)  # a bound as well
        np.testing.assert_allclose(both, ref, rtol=1e-13)
    sg.check_grads(lambda a: sqrt_newton(a, checkpoints=2), (3.0,), order=1)


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
def test_data_dependent_loop_matches_bounded(backend):
    W, b, h0 = rnn_data()
    for N in (0, 1, 5, 30):
        vg_c = sg.compile(sg.value_and_grad(lambda W, b, h0, N: rnn(W, b, h0, N, checkpoints=3), argnums=(0, 1, 2)),
                          backend=backend)
        vg_b = sg.compile(sg.value_and_grad(lambda W, b, h0, N: rnn(W, b, h0, N, max_steps=40), argnums=(0, 1, 2)),
                          backend=backend)
        (v1, g1), (v2, g2) = vg_c(W, b, h0, np.int64(N)), vg_b(W, b, h0, np.int64(N))
        assert np.isclose(v1, v2, rtol=1e-14)
        for x, y in zip(g1, g2):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)
    assert trips(W, b, h0, 200) == 23   # the threshold, not N, ends the last loop


def test_data_dependent_loop_finite_differences():
    W, b, h0 = rnn_data()
    sg.check_grads(lambda W, b, h0: rnn(W, b, h0, np.int64(100), checkpoints=2), (W, b, h0), order=1)


@pytest.mark.parametrize("s", [1, 2, 3, 4])
def test_body_runs_the_optimal_number_of_times(s, monkeypatch):
    calls = []
    impl = OPS["tanh"].impl
    monkeypatch.setattr(OPS["tanh"], "impl", lambda x: (calls.append(1), impl(x))[1])
    W, b, h0 = rnn_data()
    f = sg.grad(lambda W, N: rnn(W, b, h0, N, checkpoints=s))
    g = sg.simplify(sg.trace(f, W, np.int64(3)))
    ref = sg.grad(lambda W, N: rnn(W, b, h0, N, max_steps=15))
    for n in range(0, 14):
        assert trips(W, b, h0, n) == n
        calls.clear()
        got = g.evaluate(W, np.int64(n))
        # the primal loop, the reverse loop's advances from the snapshots the primal loop placed, one taped
        # step each; each stack entry's advances are the brute force's optimum for its length and snapshots
        assert len(calls) == n + online_recomputed(n, s) + n == while_schedule_counts(n, s)["body_evaluations"]
        assert revolve_extra_steps(n, s) == brute_force(n, s)
        monkeypatch.setattr(OPS["tanh"], "impl", impl)
        np.testing.assert_allclose(got, ref(W, np.int64(n)), rtol=1e-12, atol=1e-15)
        monkeypatch.setattr(OPS["tanh"], "impl", lambda x: (calls.append(1), impl(x))[1])


def test_arena_does_not_depend_on_the_trip_count():
    rng = np.random.default_rng(3)
    H = 64
    W, b, h0 = 0.05 * rng.normal(size=(H, H)), 0.01 * rng.normal(size=H), 0.01 * rng.normal(size=H)

    def f(W, N, **kw):
        h, k = sg.while_loop(lambda c: c[1] < N, lambda c: (np.tanh(W @ c[0] + b), c[1] + 1), (h0, np.int64(0)),
                             **kw)
        return np.sum(h * h)

    cf = sg.compile(sg.grad(lambda W, N: f(W, N, checkpoints=4)))
    peaks = []
    for n in (3, 50, 400):
        g = cf(W, np.int64(n))
        peaks.append(cf.stats["peak_bytes"])
        np.testing.assert_allclose(g, sg.compile(sg.grad(lambda W, N: f(W, N, max_steps=n)))(W, np.int64(n)),
                                   rtol=1e-10, atol=1e-16)
    assert len(set(peaks)) == 1   # one compiled program, one arena, whatever n
    cb = sg.compile(sg.grad(lambda W, N: f(W, N, max_steps=400)))
    cb(W, np.int64(400))
    # 400 stored steps (a tanh output and a carry each, 64 float64) against 4 snapshots and a few carries
    assert peaks[0] < cb.stats["peak_bytes"] / 4


def test_second_order():
    def f(a):
        return sqrt_newton(a, checkpoints=2) ** 3

    # d/da a^(3/2) = 1.5 sqrt(a); d2 = 0.75 / sqrt(a)
    np.testing.assert_allclose(sg.grad(f)(2.0), 1.5 * np.sqrt(2.0), rtol=1e-12)
    np.testing.assert_allclose(sg.hvp(f, (2.0,), (1.0,)), 0.75 / np.sqrt(2.0), rtol=1e-10)
    np.testing.assert_allclose(sg.hessian(f)(2.0), 0.75 / np.sqrt(2.0), rtol=1e-10)
    np.testing.assert_allclose(sg.compile(sg.hessian(f))(2.0), 0.75 / np.sqrt(2.0), rtol=1e-10)  # LLVM
    # reverse over the reverse sweep gave wrong values (0.0 for three steps of sin): refused, naming the fix
    g = lambda x: sg.while_loop(lambda c: c[1] < 3, lambda c: (np.sin(c[0]), c[1] + 1), (x, 0), checkpoints=2)[0]  # noqa: E731
    with pytest.raises(sg.UnsupportedOpError, match="sg.hessian"):
        sg.grad(sg.grad(g))(0.7)
    x1, x2 = np.sin(0.7), np.sin(np.sin(0.7))  # sin(sin(sin(x))): its first and second derivatives
    d1 = np.cos(0.7) * np.cos(x1) * np.cos(x2)
    d2 = (-np.sin(0.7) * np.cos(x1) * np.cos(x2) - np.cos(0.7) ** 2 * np.sin(x1) * np.cos(x2)
          - np.cos(0.7) ** 2 * np.cos(x1) ** 2 * np.sin(x2))
    np.testing.assert_allclose(sg.grad(g)(0.7), d1, rtol=1e-12)
    np.testing.assert_allclose(sg.hessian(g)(0.7), d2, rtol=1e-12)
    W, b, h0 = rnn_data()
    hv = sg.hvp(lambda b: rnn(W, b, h0, np.int64(100), checkpoints=2), (b,), (np.ones_like(b),))
    ref = sg.hvp(lambda b: rnn(W, b, h0, np.int64(100), max_steps=30), (b,), (np.ones_like(b),))
    np.testing.assert_allclose(hv, ref, rtol=1e-10, atol=1e-12)
    H = sg.compile(sg.hessian(lambda b: rnn(W, b, h0, np.int64(100), checkpoints=3)))(b)
    np.testing.assert_allclose(H, sg.hessian(lambda b: rnn(W, b, h0, np.int64(100), max_steps=30))(b),
                               rtol=1e-9, atol=1e-11)


def test_bad_checkpoints():
    for bad in (0, -2, 1.5, True, "3"):
        with pytest.raises(sg.SymgraphError, match="checkpoints must be an int >= 1"):
            sqrt_newton(2.0, checkpoints=bad)
    with pytest.raises(sg.LoopLimitError, match="max_steps=3"):
        sg.grad(lambda a: sqrt_newton(a, checkpoints=2, max_steps=3))(2.0)   # Newton needs 5 steps here
    with pytest.raises(sg.UnsupportedOpError, match="checkpoints=s"):
        sg.grad(sqrt_newton)(2.0)
    with pytest.raises(sg.SymgraphError, match=">= 1"):
        while_schedule_counts(5, 0)


def test_closed_over_per_step_inputs():
    """xs[k] read per step: its cotangent is an accumulator of xs's size, built only when xs is differentiated."""
    rng = np.random.default_rng(4)
    T, H = 300, 32
    W, xs = 0.1 * rng.normal(size=(H, H)), rng.normal(size=(T, H))

    def f(W, xs, **kw):
        def body(c):
            h, k = c
            return np.tanh(W @ h + xs[k]), k + 1
        h, _ = sg.while_loop(lambda c: c[1] < T, body, (np.zeros(H), np.int64(0)), **kw)
        return np.sum(h ** 2)

    cw = sg.compile(sg.grad(lambda W, xs: f(W, xs, checkpoints=3)))
    gw = cw(W, xs)
    np.testing.assert_allclose(gw, sg.grad(lambda W, xs: f(W, xs, max_steps=T))(W, xs), rtol=1e-10, atol=1e-16)
    assert cw.stats["peak_bytes"] < xs.nbytes       # no (T, H) cotangent carried for xs
    gx = sg.compile(sg.grad(lambda W, xs: f(W, xs, checkpoints=3), argnums=1))(W, xs)
    np.testing.assert_allclose(gx, sg.grad(lambda W, xs: f(W, xs, max_steps=T), argnums=1)(W, xs), rtol=1e-10,
                               atol=1e-16)


def test_per_example_gradients_with_different_trip_counts():
    a = np.array([2.0, 9.0, 100.0, 0.5])   # Newton takes a different number of steps for each
    f = sg.vmap(sg.grad(lambda a: sqrt_newton(a, checkpoints=2)))
    np.testing.assert_allclose(f(a), 0.5 / np.sqrt(a), rtol=1e-12)
    np.testing.assert_allclose(sg.compile(f)(a), 0.5 / np.sqrt(a), rtol=1e-12)


def test_odeint_with_checkpoints():
    from symgraph.scipy.integrate import odeint

    def lv(y, t, a, b):
        return np.stack([a * y[0] - b * y[0] * y[1], -3.0 * y[1] + y[0] * y[1]])

    t = np.linspace(0.0, 2.0, 3)

    def loss(y0, a, **kw):
        return np.sum(odeint(lv, y0, t, a, 1.0, rtol=1e-6, atol=1e-6, **kw)[-1] ** 2)

    y0 = np.array([1.0, 1.0])
    ref = sg.grad(lambda y0, a: loss(y0, a, mxstep=200), argnums=(0, 1))(y0, 1.5)
    for backend in ("numpy", "llvm"):
        cf = sg.compile(sg.value_and_grad(lambda y0, a: loss(y0, a, mxstep=200, checkpoints=3), argnums=(0, 1)),
                        backend=backend)
        v, got = cf(y0, 1.5)
        assert np.isclose(v, loss(y0, 1.5, mxstep=200), rtol=1e-12)
        for x, y in zip(got, ref):
            np.testing.assert_allclose(x, y, rtol=1e-10)
    # a gradient with respect to args only: the interval loop's guard flag is an output of the loop and of
    # its saver; the LLVM region kernel wrote only one of the two (the other read as False: a spurious
    # LoopLimitError), with or without checkpoints
    for kw in ({}, {"checkpoints": 3}):
        ga = sg.compile(sg.grad(lambda a: loss(y0, a, mxstep=200, **kw)))(1.5)
        np.testing.assert_allclose(ga, ref[1], rtol=1e-10)
    with pytest.raises(sg.LoopLimitError, match="mxstep=3"):
        sg.grad(lambda a: loss(y0, a, mxstep=3, checkpoints=2))(1.5)


def test_the_compile_checkpoint_dial_leaves_it_alone():
    W, b, h0 = rnn_data()
    ref = sg.grad(lambda W: rnn(W, b, h0, np.int64(100), max_steps=30))(W)
    for ck in ("revolve", ("revolve", 2), "sqrt", "mincut", 10 ** 5):
        cf = sg.compile(sg.grad(lambda W: rnn(W, b, h0, np.int64(100), checkpoints=3)), checkpoint=ck)
        np.testing.assert_allclose(cf(W), ref, rtol=1e-12, atol=1e-14)


def test_nested_loops_pytrees_float32():
    def f(W, **kw):
        def body(c):
            inner = sg.while_loop(lambda d: d["k"] < 3, lambda d: {"h": np.tanh(W @ d["h"]) + 0.1, "k": d["k"] + 1},
                                  {"h": c["h"], "k": np.int64(0)}, **kw)
            return {"h": inner["h"] * np.float32(0.9), "k": c["k"] + 1, "z": c["z"] + np.sum(inner["h"])}
        out = sg.while_loop(lambda c: c["k"] < 7, body,
                            {"h": np.ones(3, np.float32), "k": np.int64(0), "z": np.float32(0)}, **kw)
        return np.sum(out["h"] ** 2) + out["z"]

    W = (0.5 * np.random.default_rng(1).normal(size=(3, 3))).astype(np.float32)
    ref = sg.grad(lambda W: f(W, max_steps=10))(W)
    for s in (1, 3):
        g = sg.grad(lambda W: f(W, checkpoints=s))(W)
        assert g.dtype == np.float32 and np.array_equal(g, ref)
        np.testing.assert_allclose(sg.compile(sg.grad(lambda W: f(W, checkpoints=s)))(W), ref, rtol=1e-6)


def test_reverse_through_a_vmapped_checkpointed_loop_names_the_fix():
    f = lambda x: sg.while_loop(lambda c: c[1] < 3, lambda c: (np.sin(c[0]), c[1] + 1), (x, 0), checkpoints=2)[0]  # noqa: E731
    xs = np.array([0.3, 0.7])
    with pytest.raises(sg.UnsupportedOpError, match=r"sg.vmap\(sg.grad\(f\)\)"):
        sg.grad(lambda xs: np.sum(sg.vmap(f)(xs)))(xs)
    d = np.cos(xs) * np.cos(np.sin(xs)) * np.cos(np.sin(np.sin(xs)))
    np.testing.assert_allclose(sg.vmap(sg.grad(f))(xs), d, rtol=1e-12)
