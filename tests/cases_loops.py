"""Op-table rows for the loop primitive (symgraph/ops/loops.py: scan), built with sg.scan."""

from __future__ import annotations

import numpy as np

import symgraph as sg

from opcase import OpCase, pos, real


def _cell(c, x):
    h = np.tanh(0.5 * c + x * c[..., :1] + x)
    return h, np.sum(h * x)


def _scan(h, xs, reverse):
    return sg.scan(_cell, h, xs, reverse=reverse)


def _loop(h, xs, reverse):
    ys = [None] * len(xs)
    for t in (range(len(xs) - 1, -1, -1) if reverse else range(len(xs))):
        h, ys[t] = _cell(h, xs[t])
    return h, np.stack(ys).astype(h.dtype)


CASES = [
    OpCase("scan", _scan, _loop,
           [(((3,), (4, 3)), {"reverse": False}), (((2,), (3, 2)), {"reverse": True}),
            (((1,), (1, 1)), {"reverse": False})], (real, real), ip_rtol=1e-9),
]


def _branches(x, y):
    return sg.cond(np.sum(x) > 0, lambda x, y: np.sin(x) * y, lambda x, y: x * y + 1.0, x, y)


def _halvings(x):
    """The number of halvings until sum(|x|) <= 0.1 (an integer: its derivative is zero by definition)."""
    return sg.while_loop(lambda c: np.sum(np.abs(c[0])) > 0.1, lambda c: (c[0] * 0.5, c[1] + 1), (x, 0))[1]


def _halvings_loop(x):
    k = 0
    while np.sum(np.abs(x)) > 0.1:
        x, k = x * 0.5, k + 1
    return np.int64(k)


CASES += [
    OpCase("cond", _branches, lambda x, y: np.sin(x) * y, [(((3,), (3,)), {}), (((), ()), {})], (pos, real)),
    OpCase("while", _halvings, _halvings_loop, [(((3,),), {}), (((),), {})], (real,), order=0),
]


def _halve_bounded(x):
    """x halved until sum(|x|) <= 0.1, as a while_loop with max_steps (the guard checks that it ended)."""
    return sg.while_loop(lambda c: np.sum(np.abs(c)) > 0.1, lambda c: c * 0.5, x, max_steps=60)


def _halve_loop(x):
    while np.sum(np.abs(x)) > 0.1:
        x = x * 0.5
    return x


CASES += [
    OpCase("guard", _halve_bounded, _halve_loop, [(((3,),), {}), (((),), {})], (real,)),
]
