"""Schedules and liveness: the shared execution order, last use, planned peak bytes."""

import numpy as np

import symgraph as sg
from symgraph import lax as L
from symgraph.ir import Builder, Graph, role
from symgraph.passes.schedule import (
    free_values,
    last_use,
    live_bytes,
    peak_bytes,
    regions,
    schedule,
)
from symgraph.tracing import make_input


def _mlp_loss(Ws, bs, x):
    for W, b in zip(Ws, bs):
        x = np.tanh(x @ W + b)
    return np.sum(x * x)


def _mlp(L_, w=8, batch=32, dtype=np.float64):
    rng = np.random.default_rng(0)
    Ws = [(rng.standard_normal((w, w)) / np.sqrt(w)).astype(dtype) for _ in range(L_)]
    bs = [(0.1 * rng.standard_normal(w)).astype(dtype) for _ in range(L_)]
    x = rng.standard_normal((batch, w)).astype(dtype)
    return Ws, bs, x


def _is_topological(order, graph):
    pos = {n: i for i, n in enumerate(order)}
    assert len(pos) == len(order) == len(graph.toposort())
    assert set(pos) == set(graph.toposort())
    for n in order:
        for x in n.inputs:
            assert pos[x] < pos[n], f"{n} scheduled before its input {x}"


def test_last_use_and_peak_bytes_by_hand():
    # a = x + 1 (8 bytes * 4), b = a * a, c = b - a: a lives until c, b until c.
    with Builder():
        x = make_input((4,), np.float64, 0, "x")
        a = L.add(x, 1.0)
        b = L.mul(a, a)
        c = L.sub(b, a)
    g = Graph([x], [c])
    order = g.toposort()
    last = last_use(order, g.outputs)
    pos = {n: i for i, n in enumerate(order)}
    assert last[a] == pos[c] and last[b] == pos[c]
    assert last[c] == len(order)  # an output lives to the end
    # a, b and c are live together when c runs: 3 * 32 bytes (constants and inputs not owned).
    assert peak_bytes(order, g.outputs) == 3 * 32
    prof = live_bytes(order, g.outputs)
    assert max(prof) == 96 and len(prof) == len(order)
    assert peak_bytes(order, g.outputs, select=lambda n: n is a) == 32


def test_forward_only_graph_keeps_its_topological_order():
    g = sg.trace(lambda x: np.sum(np.tanh(x) * np.sin(x)), np.ones(5))
    assert schedule(g) == g.toposort()
    assert schedule(g) is schedule(g)  # cached per graph


def test_joint_graph_schedule_is_topological_and_lowers_the_peak():
    L_ = 24
    Ws, bs, x = _mlp(L_)
    g = sg.simplify(sg.trace(sg.grad(_mlp_loss), Ws, bs, x))
    order = schedule(g)
    _is_topological(order, g)
    act = x.nbytes
    topo_peak = peak_bytes(g.toposort(), g.outputs)
    peak = peak_bytes(order, g.outputs)
    assert peak < topo_peak
    # Reverse mode keeps the L layer outputs; the backward adds a few temporaries.
    cls = regions(order)
    act_peak = peak_bytes(order, g.outputs, select=lambda n: cls[n] in ("F", "R"))
    assert L_ * act <= act_peak <= (L_ + 3) * act
    grads = sum(W.nbytes for W in Ws)
    assert peak <= act_peak + grads + 4 * act
    # Each weight gradient is produced as soon as its cotangent exists: the
    # first gradient computed is the last layer's.
    pos = {n: i for i, n in enumerate(order)}
    firsts = sorted(g.outputs, key=lambda o: pos[o])
    assert firsts[0] is g.outputs[L_ - 1]


def test_evaluator_runs_the_schedule_and_matches_numpy():
    Ws, bs, x = _mlp(6)
    g = sg.simplify(sg.trace(sg.grad(_mlp_loss), Ws, bs, x))
    got = g.evaluate(Ws, bs, x)
    # Hand-written backward.
    acts = [x]
    for W, b in zip(Ws, bs):
        acts.append(np.tanh(acts[-1] @ W + b))
    ct = 2 * acts[-1]
    want = [None] * len(Ws)
    for i in range(len(Ws) - 1, -1, -1):
        d = ct * (1 - acts[i + 1] ** 2)
        want[i] = acts[i].T @ d
        ct = d @ Ws[i].T
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_regions_and_free_values():
    def f(x, key):
        u = sg.numpy.random_uniform(key, x.shape)
        return np.sum(np.where(u > 0.5, np.tanh(x), 0.0) + np.broadcast_to(x[:1], x.shape))

    g = sg.simplify(sg.trace(sg.grad(f), np.ones((3, 4)), np.uint64(3)))
    order = g.toposort()
    cls = regions(order)
    assert {cls[n] for n in order} >= {"S", "F", "B"}
    assert all(cls[n] == "S" for n in g.inputs)
    free = free_values(order, cls)
    names = {n.op.name for n in free}
    assert "random_uniform" in names
    assert all(n.op.name != "tanh" for n in free)  # reads an activation-like value: not free
    rand_only = free_values(order, cls, random_only=True)
    assert rand_only <= free
    assert all(n.op.name == "random_uniform" or any(x in rand_only for x in n.inputs) for n in rand_only)


def test_backward_role_nodes_are_backward_region():
    with Builder():
        x = make_input((3,), np.float64, 0, "x")
        y = L.unary("tanh", x)
        with role("backward"):
            z = L.mul(y, y)
        w = L.add(z, 1.0)  # forward role, but reads a backward node
    cls = regions(Graph([x], [w]).toposort())
    assert cls[y] == "F" and cls[z] == "B" and cls[w] == "B" and cls[x] == "S"


def test_long_chain_schedules_quickly():
    n = 2000

    def f(x):
        for _ in range(n):
            x = np.sin(x)
        return np.sum(x)

    g = sg.trace(sg.grad(f), np.ones(2))
    order = schedule(g)
    _is_topological(order, g)
    x = np.array([0.3, -1.2])
    want = np.ones(2)
    for _ in range(n):  # chain rule: the product of cos(x_k)
        want *= np.cos(x)
        x = np.sin(x)
    np.testing.assert_allclose(g.evaluate(np.array([0.3, -1.2])), want, rtol=1e-12)


def test_assign_offsets_arrays_places_like_the_list_version(monkeypatch):
    """Many buffers are placed by `_assign_offsets_arrays`: the same offsets and arena size as the list scan,
    on random lifetimes and sizes (ties, zero sizes, nested and disjoint lifetimes), and no two buffers
    alive at one step share a byte."""
    import random

    from symgraph.passes import schedule as S

    rng = random.Random(3)
    for _ in range(60):
        n = rng.randint(1, 300)
        iv = []
        for _ in range(n):
            a = rng.randint(0, 150)
            iv.append((a, a + rng.randint(0, 50), rng.choice([0, 1, 64, 100, 4096, rng.randint(1, 10 ** 5)])))
        monkeypatch.setattr(S, "ASSIGN_OFFSETS_ARRAYS_MIN", 10 ** 9)
        want = S.assign_offsets(iv)
        monkeypatch.setattr(S, "ASSIGN_OFFSETS_ARRAYS_MIN", 0)
        got = S.assign_offsets(iv)
        assert got == want
        offs, total = got
        for i in range(n):
            for j in range(i):
                (f1, l1, s1), (f2, l2, s2) = iv[i], iv[j]
                if not (l1 < f2 or l2 < f1):
                    e1, e2 = offs[i] + max(s1, 1), offs[j] + max(s2, 1)
                    assert e1 <= offs[j] or e2 <= offs[i]
        assert total >= max(o + max(s, 1) for o, (_, _, s) in zip(offs, iv))
