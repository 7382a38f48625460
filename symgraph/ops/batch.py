"""Helpers for the batching rules that op records carry (`Op.batch`), and the two generic rules.

A batching rule is `rule(node, bargs, size) -> Node`: `node` is the unbatched
node, `bargs[i]` the batched input i (a leading axis of `size`) or None when
input i is not batched; the result carries the leading batch axis. Rules are
written in graph ops, next to each op's VJP and JVP; `symgraph.batching`
applies them (JAX's batching interpreter: Bradbury et al., "JAX: composable
transformations of Python+NumPy programs", 2018).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .. import lax as L
from ..ir import Node, current_builder

__all__ = ["LOOP", "arg", "bcast", "rebind", "move0", "move_to0", "flat_index", "elementwise_rule", "loop_rule"]

#: `Op.batch = LOOP` declares a deliberate O(B) loop (`loop_rule`): random bits, user rules.
LOOP = "loop"


def bcast(x: Node, size: int) -> Node:
    """An unbatched node broadcast along a new leading axis of `size`."""
    return L.broadcast_to(x, (size,) + x.shape)


def arg(node: Node, bargs: list, i: int, size: int) -> Node:
    """Input i of node, batched (broadcast if it was not)."""
    b = bargs[i]
    return bcast(node.inputs[i], size) if b is None else b


def rebind(node: Node, ins: Sequence[Node], **attrs: Any) -> Node:
    """node's op on new inputs, with the same tag and attrs (some replaced)."""
    params = node.params
    params.update(attrs)
    return current_builder().make(node.op, ins, params, node.tag)


def move0(x: Node, dst: int) -> Node:
    """Move axis 0 to position dst."""
    perm = list(range(1, x.ndim))
    perm.insert(dst, 0)
    return L.transpose(x, tuple(perm))


def move_to0(x: Node, src: int) -> Node:
    """Move axis src to position 0."""
    perm = [src] + [i for i in range(x.ndim) if i != src]
    return L.transpose(x, tuple(perm))


def flat_index(idx: Node, n: int, size: int) -> Node:
    """Batched indices (B, *ishape) into rows of a (B * n, ...) array: normalized, clamped, offset by b * n."""
    idx = L.where(L.binary("lt", idx, 0), L.add(idx, np.asarray(n, idx.dtype)), idx)
    idx = L.binary("minimum", L.binary("maximum", idx, np.asarray(0, idx.dtype)), np.asarray(max(n - 1, 0), idx.dtype))
    off = np.arange(size, dtype=idx.dtype).reshape((size,) + (1,) * (idx.ndim - 1)) * n
    return L.add(idx, off)


def elementwise_rule(node: Node, bargs: list, size: int) -> Node:
    """Elementwise ops: broadcast the unbatched operands, same op (the default for elementwise records)."""
    return rebind(node, [arg(node, bargs, i, size) for i in range(len(node.inputs))])


def _take(x: Node, i: int) -> Node:
    nd = x.ndim
    s = L.bind("slice", x, starts=(i,) + (0,) * (nd - 1), stops=(i + 1,) + x.shape[1:], steps=(1,) * nd)
    return L.reshape(s, x.shape[1:])


def loop_rule(node: Node, bargs: list, size: int) -> Node:
    """Batch any op by applying it once per batch element and stacking (O(B) nodes)."""
    outs = []
    for j in range(size):
        ins = [x if b is None else _take(b, j) for x, b in zip(node.inputs, bargs)]
        outs.append(L.reshape(rebind(node, ins), (1,) + node.shape))
    return outs[0] if size == 1 else L.bind("concatenate", *outs, axis=0)
