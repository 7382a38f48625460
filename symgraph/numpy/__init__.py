"""The `symgraph.numpy` namespace: NumPy's names on traced values, plus composites.

Every function accepts graph nodes, NumPy arrays and Python numbers; with no
traced argument it computes eagerly with NumPy. Plain NumPy calls on traced
values land here too (through `__array_ufunc__` / `__array_function__`).

Composites for neural networks (softmax, log_softmax, logsumexp, gelu,
layer_norm, cross_entropy, dropout, ...) are built from primitives; each is
written to be numerically stable in value and gradient.
"""

from __future__ import annotations

from .arithmetic import *  # noqa: F403  (the split by concern follows)
