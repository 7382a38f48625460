"""A layered (Sugiyama-style) layout of a graph in Python, for the HTML viewer: one (x, y) per node.

Nodes are put in layers by longest-path depth from the inputs (a value sits
one layer below the deepest value it reads; constants sit just above their
first reader instead of all in the first layer). Within a layer, nodes are
ordered and placed by the barycenter heuristic of Sugiyama, Tagawa and Toda
(1981, "Methods for visual understanding of hierarchical system
structures"): a few sweeps down (towards the mean x of the inputs) and up
(towards the mean x of the readers), each followed by a left-to-right pass
that keeps a minimum gap. Long edges get no dummy nodes (they are drawn as
curves), which keeps the layout linear in nodes plus edges: about a second
for 10,000 nodes. It needs no Graphviz.
"""

from __future__ import annotations

from ..ir import Graph, Node

__all__ = ["layered_layout", "NODE_W", "NODE_H", "LAYER_GAP"]

NODE_W = 128  # drawn node width (px at zoom 1)
NODE_H = 34
X_GAP = 20
LAYER_GAP = 76  # distance between layer centres


def _layers(order: list[Node], graph: Graph) -> dict[Node, int]:
    inputs = set(graph.inputs)
    layer: dict[Node, int] = {}
    consts: list[Node] = []
    readers: dict[Node, list[Node]] = {}
    for n in order:
        if n in inputs:
            layer[n] = 0
            continue
        if not n.inputs:
            consts.append(n)
            continue
        d = 0
        for x in n.inputs:
            readers.setdefault(x, []).append(n)
            lx = layer.get(x)
            if lx is not None and lx + 1 > d:
                d = lx + 1
        layer[n] = max(d, 1)
    for c in consts:
        rd = readers.get(c)
        layer[c] = max(0, min(layer[r] for r in rd) - 1) if rd else 0
    return layer


def _place(row: list[Node], want: dict[Node, float], x: dict[Node, float], step: float) -> list[Node]:
    """Order `row` by wanted x, then place it left to right at least `step` apart, centred on the wishes."""
    row.sort(key=lambda n: want.get(n, x[n]))
    pos = []
    prev = None
    for n in row:
        w = want.get(n, x[n])
        p = w if prev is None or w >= prev + step else prev + step
        pos.append(p)
        prev = p
    shift = sum(want.get(n, x[n]) - p for n, p in zip(row, pos)) / len(row)
    for n, p in zip(row, pos):
        x[n] = p + shift
    return row


def layered_layout(graph: Graph, order: list[Node], sweeps: int = 3) -> dict[Node, tuple[float, float]]:
    """Positions of the graph's nodes (centres, y grows downwards), in px at zoom 1.

    Args:
        graph: the graph (its inputs go to the first layer).
        order: its nodes in a topological order (`node_ids` order).
        sweeps: down/up barycenter sweep pairs.

    Returns:
        dict node -> (x, y).
    """
    layer = _layers(order, graph)
    depth = max(layer.values(), default=0)
    rows: list[list[Node]] = [[] for _ in range(depth + 1)]
    for n in order:
        rows[layer[n]].append(n)
    readers: dict[Node, list[Node]] = {n: [] for n in order}
    for n in order:
        for x_ in n.inputs:
            readers[x_].append(n)
    step = float(NODE_W + X_GAP)
    x: dict[Node, float] = {}
    for row in rows:
        w = (len(row) - 1) * step / 2
        for i, n in enumerate(row):
            x[n] = i * step - w
    for _ in range(sweeps):
        for row in rows[1:]:
            want = {}
            for n in row:
                if n.inputs:
                    want[n] = sum(x[i] for i in n.inputs) / len(n.inputs)
            _place(row, want, x, step)
        for row in reversed(rows[:-1]):
            want = {}
            for n in row:
                rd = readers[n]
                if rd:
                    want[n] = sum(x[r] for r in rd) / len(rd)
            _place(row, want, x, step)
    for row in rows[1:]:  # a last downward pass: chains read straight down
        want = {n: sum(x[i] for i in n.inputs) / len(n.inputs) for n in row if n.inputs}
        _place(row, want, x, step)
    return {n: (x[n], layer[n] * LAYER_GAP) for n in order}
