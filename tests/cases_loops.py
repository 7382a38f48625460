"""Op-table rows for the loop primitive (symgraph/ops/loops.py: scan), built with sg.scan."""

from __future__ import annotations

import numpy as np

import symgraph as sg

from opcase import OpCase, real


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
