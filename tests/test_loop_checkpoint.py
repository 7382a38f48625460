"""Checkpointed loops: under checkpoint="sqrt" / "revolve" the reverse sweep through a scan stores snapshots.

The gradients are bitwise those of the store-everything schedule (evaluator and LLVM), the
schedule's counts are Griewank & Walther's optimum (checked against a brute force over the
split points), the evaluator runs exactly that many steps, and the planned memory goes down.
"""

import functools

import numpy as np
import pytest

import symgraph as sg
from symgraph.ops import OPS
from symgraph.passes.checkpoint import apply_checkpoint, checkpoint_stats, revolve_extra_steps
from symgraph.passes.checkpoint.loops import ADVANCE, RESTORE, REVERSE, STORE, loop_schedule


@functools.cache
def brute_force(l, s):
    """Fewest step evaluations to reverse l steps with s snapshots: every first split point tried."""
    if l == 1:
        return 0
    if s == 0:
        return float("inf")
    return min(m + brute_force(l - m, s - 1) + brute_force(m, s) for m in range(1, l))


def run_table(T, sch):
    """Execute a schedule on integer states: each REVERSE must see its step's input state."""
    slots = {0: 0}
    for q, j in enumerate(sch.forward_store):
        if j >= 0:
            slots[j] = q + 1
    cur, done = None, []
    for kind, q, j in sch.actions:
        if kind == ADVANCE:
            assert cur == q
            cur = q + 1
        elif kind == STORE:
            slots[j] = cur
        elif kind == RESTORE:
            cur = slots[j]
        else:
            assert kind == REVERSE and cur == q
            done.append(q)
    assert done == list(range(T - 1, -1, -1))


@pytest.mark.parametrize("T", [2, 3, 5, 8, 13])
def test_revolve_schedule_is_the_optimum(T):
    for s in range(1, 5):
        sch = loop_schedule(T, ("revolve", s))
        run_table(T, sch)
        assert revolve_extra_steps(T, s) == brute_force(T, s)
        # the backward loop recomputes t(T, s) minus the first sweep's T - 1 steps, and tapes each step once
        assert sch.advances == brute_force(T, s) - (T - 1)
        assert sch.reverses == T
        assert sch.slots <= s + 1   # s snapshots (the initial carry's included) + the last step's input
        assert sum(1 for a in sch.actions if a[0] == ADVANCE) == sch.advances
    sq = loop_schedule(T, "sqrt")
    run_table(T, sq)
    k = max(1, round(T ** 0.5))
    bounds = [round(i * T / k) for i in range(k + 1)]
    seg = max(b - a for a, b in zip(bounds, bounds[1:]))
    assert sq.slots <= k + seg
    assert sq.advances == T - k - (bounds[-1] - bounds[-2] - 1)   # the last segment was run by the forward loop


def rnn(W, U, xs, h0):
    def cell(c, x):
        h, n = c
        h = np.tanh(h @ W + x @ U)
        return (h, n + 1), np.sum(h * h)
    (h, n), ys = sg.scan(cell, (h0, np.int64(0)), xs)
    return np.sum(h ** 2) + np.sum(ys * np.arange(xs.shape[0]))


def rnn_reverse(W, U, xs, h0):
    h, ys = sg.scan(lambda h, x: (np.sin(h @ W) + x @ U, np.sum(h[0]) * x[0]), h0, xs, reverse=True)
    return np.sum(h * h) + np.sum(ys ** 3)


def data(T=12, H=5, B=3):
    rng = np.random.default_rng(0)
    return (0.6 * rng.normal(size=(H, H)), rng.normal(size=(2, H)), rng.normal(size=(T, B, 2)),
            rng.normal(size=(B, H)))


STRATEGIES = ["sqrt", "revolve", ("revolve", 2), ("sqrt", 2)]


@pytest.mark.parametrize("backend", ["numpy", "llvm"])
@pytest.mark.parametrize("f", [rnn, rnn_reverse])
def test_checkpointed_scan_gradients_are_bitwise(f, backend):
    args = data()
    vg = sg.value_and_grad(f, argnums=(0, 1, 2, 3))
    ref = sg.compile(vg, backend=backend)(*args)
    for s in STRATEGIES:
        cf = sg.compile(vg, backend=backend, checkpoint=s)
        got = cf(*args)
        assert all(np.array_equal(a, b) for a, b in zip(sg.tree_leaves(ref), sg.tree_leaves(got))), s
        (info,) = cf.stats["checkpointed_loops"]
        assert info["length"] == 12 and info["taped_steps"] == 12
    np.testing.assert_allclose(ref[1][0], sg.grad(f)(*args), rtol=1e-12)


def test_evaluator_runs_the_scheduled_steps(monkeypatch):
    calls = []
    impl = OPS["tanh"].impl
    monkeypatch.setattr(OPS["tanh"], "impl", lambda x: (calls.append(1), impl(x))[1])
    args = data(T=10)
    g = sg.simplify(sg.trace(sg.grad(rnn, argnums=(0, 1)), *args))
    ref = g.evaluate(*args)
    assert len(calls) == 10            # store-everything: the forward loop only (tanh's VJP reads its output)
    for s in (2, 3):
        gc = apply_checkpoint(g, ("revolve", s))
        calls.clear()
        got = gc.evaluate(*args)
        assert all(np.array_equal(a, b) for a, b in zip(ref, got))
        # forward loop + recomputed steps + one taped evaluation per step
        assert len(calls) == 10 + (brute_force(10, s) - 9) + 10
        (info,) = checkpoint_stats(gc)["checkpointed_loops"]
        assert info["stored_carries"] <= s + 1


def test_planned_memory_goes_down():
    rng = np.random.default_rng(1)
    W, U = 0.2 * rng.normal(size=(16, 16)), rng.normal(size=(2, 16))
    xs, h0 = rng.normal(size=(100, 4, 2)), np.zeros((4, 16))
    vg = sg.value_and_grad(rnn, argnums=(0, 1))
    peaks = {}
    for s in (None, "sqrt", ("revolve", 3)):
        cf = sg.compile(vg, checkpoint=s)
        cf(W, U, xs, h0)
        peaks[s] = cf.stats["peak_bytes"]
    # every step's residuals (100 x 4 x 16 float64 and more) against about 2 sqrt(T) or 4 carries
    assert peaks["sqrt"] < peaks[None] / 2 and peaks[("revolve", 3)] < peaks["sqrt"]


def test_fori_loop_bounded_while_and_second_order():
    A = np.array([[0.9, 0.2], [-0.3, 0.8]])

    def f(A, v):
        v = sg.fori_loop(0, 9, lambda i, v: np.tanh(A @ v) + 0.01 * i, v)
        w = sg.while_loop(lambda c: c[1] < 6, lambda c: (np.sin(A @ c[0]), c[1] + 1), (v, 0), max_steps=8)[0]
        return np.sum(w ** 2)

    v = np.array([0.3, -0.7])
    vg = sg.value_and_grad(f, argnums=(0, 1))
    for backend in ("numpy", "llvm"):
        ref = sg.compile(vg, backend=backend)(A, v)
        cf = sg.compile(vg, backend=backend, checkpoint="revolve")
        got = cf(A, v)
        assert all(np.array_equal(a, b) for a, b in zip(sg.tree_leaves(ref), sg.tree_leaves(got)))
        assert len(cf.stats["checkpointed_loops"]) == 2
    h = sg.compile(sg.hessian(f, argnums=1), backend="numpy", checkpoint="revolve")(A, v)
    np.testing.assert_allclose(h, sg.hessian(f, argnums=1)(A, v), rtol=1e-10, atol=1e-12)
