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

__all__ = ["layered_layout", "layered_positions", "NODE_W", "NODE_H", "LAYER_GAP"]

NODE_W = 128  # drawn node width (px at zoom 1)
NODE_H = 34
X_GAP = 20
LAYER_GAP = 76  # distance between layer centres


def _layers(ins: list[list[int]], sources: set[int]) -> list[int]:
    layer = [0] * len(ins)
    consts: list[int] = []
    readers: list[list[int]] = [[] for _ in ins]
    done = [False] * len(ins)
    for n, xs in enumerate(ins):
        done[n] = True
        if n in sources:
            continue
        if not xs:
            consts.append(n)
            continue
        d = 0
        for x in xs:
            readers[x].append(n)
            if done[x] and layer[x] + 1 > d:
                d = layer[x] + 1
        layer[n] = max(d, 1)
    for c in consts:
        rd = readers[c]
        layer[c] = max(0, min(layer[r] for r in rd) - 1) if rd else 0
    return layer


def _place(row: list[int], want: dict[int, float], x: list[float], step: float) -> list[int]:
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


def layered_positions(ins: list[list[int]], sources: set[int] | None = None,
                      sweeps: int = 3) -> list[tuple[float, float]]:
    """Positions of the items 0..n-1 of a DAG given by each item's inputs (`ins[i]`, all < i).

    Args:
        ins: for each item, the items it reads (a topological numbering: inputs come first).
        sources: items that go to the first layer (the graph's inputs).
        sweeps: down/up barycenter sweep pairs.

    Returns:
        One (x, y) centre per item, in px at zoom 1 (y grows downwards).
    """
    sources = sources or set()
    layer = _layers(ins, sources)
    depth = max(layer, default=0)
    rows: list[list[int]] = [[] for _ in range(depth + 1)]
    for n in range(len(ins)):
        rows[layer[n]].append(n)
    readers: list[list[int]] = [[] for _ in ins]
    for n, xs in enumerate(ins):
        for x_ in xs:
            readers[x_].append(n)
    step = float(NODE_W + X_GAP)
    x = [0.0] * len(ins)
    for row in rows:
        w = (len(row) - 1) * step / 2
        for i, n in enumerate(row):
            x[n] = i * step - w
    for _ in range(sweeps):
        for row in rows[1:]:
            want = {}
            for n in row:
                if ins[n]:
                    want[n] = sum(x[i] for i in ins[n]) / len(ins[n])
            _place(row, want, x, step)
        for row in reversed(rows[:-1]):
            want = {}
            for n in row:
                rd = readers[n]
                if rd:
                    want[n] = sum(x[r] for r in rd) / len(rd)
            _place(row, want, x, step)
    for row in rows[1:]:  # a last downward pass: chains read straight down
        want = {n: sum(x[i] for i in ins[n]) / len(ins[n]) for n in row if ins[n]}
        _place(row, want, x, step)
    return [(x[n], layer[n] * LAYER_GAP) for n in range(len(ins))]


def layered_layout(graph: Graph, order: list[Node], sweeps: int = 3) -> dict[Node, tuple[float, float]]:
    """Positions of the graph's nodes (centres, y grows downwards), in px at zoom 1.

    Args:
        graph: the graph (its inputs go to the first layer).
        order: its nodes in a topological order (`node_ids` order).
        sweeps: down/up barycenter sweep pairs.

    Returns:
        dict node -> (x, y).
    """
    pos = {n: i for i, n in enumerate(order)}
    ins = [[pos[x] for x in n.inputs] for n in order]
    xy = layered_positions(ins, {pos[x] for x in graph.inputs if x in pos}, sweeps)
    return dict(zip(order, xy))
