"""The "mincut" planner: save the minimum-bytes cut between the forward sweep and the backward's reads.

References:
    PyTorch AOTAutograd min-cut rematerialization partitioner
    (torch/_functorch/partitioners.py), design post dev-discuss #467.
"""

from __future__ import annotations

from typing import Any

from ...ir import Node
from .analysis import _Analysis
from .plan import Plan, _bytes

_INF_SCALE = 4
#: Min-cut never recomputes a value the backward reads through more than this
#: many recomputed values in a row (PyTorch likewise bans long recompute chains).
MINCUT_MAX_DEPTH = 16


def _plan_mincut(a: _Analysis, max_depth: int | None = None) -> Plan:
    """Save the minimum-bytes cut between the forward sweep and the backward's reads.

    Flow network (PyTorch's partitioner): each forward value v is an edge
    v_in -> v_out of capacity bytes(v) (saving it); data edges u_out -> v_in
    are infinite; values the backward reads connect to the sink;
    contractions (matmul, einsum) and opaque ops cannot be recomputed (an
    infinite edge from the source); free values (random bits, broadcasts of
    inputs) and values a user region must recompute cannot be saved
    (infinite v_in -> v_out). Among minimum cuts the one closest to the sink
    is taken: it recomputes the fewest values. A value the backward reads
    whose recomputation would chain more than `max_depth` recomputed values
    is then banned from recomputation too, and the cut solved again (one
    recomputed copy per value lives from its first to its last backward
    reader, so long chains would raise the peak they were meant to lower).
    """
    import networkx as nx

    if max_depth is None:
        max_depth = MINCUT_MAX_DEPTH
    fset = list(a.fwd)
    idx = {v: i for i, v in enumerate(fset)}
    total = sum(_bytes(v) for v in fset) + 1
    INF = total * _INF_SCALE
    must = a.marks.must_recompute
    G = nx.DiGraph()
    src, snk = ("source",), ("sink",)
    G.add_node(src)
    G.add_node(snk)
    for v in fset:
        i = idx[v]
        unsaveable = v in a.free or v in must
        G.add_edge(("in", i), ("out", i), capacity=INF if unsaveable else _bytes(v))
        for x in v.inputs:
            j = idx.get(x)
            if j is not None:
                G.add_edge(("out", j), ("in", i), capacity=INF)
        if v.op.kind in ("contraction", "opaque") and v not in must:
            G.add_edge(src, ("in", i), capacity=INF)
        if v in a.needed:
            G.add_edge(("out", i), snk, capacity=INF)
    banned_late: set[Node] = set()
    while True:
        saved, flow_value = _solve_cut(G, src, snk, fset, idx, a, INF)
        # Depth of each recomputed value: the longest run of recomputed values above it.
        depth: dict[Node, int] = {}
        late = []
        for v in fset:
            if v in saved or v in a.free:
                continue
            d = 1 + max((depth.get(x, 0) for x in v.inputs), default=0)
            depth[v] = d
            if d > max_depth and v in a.needed and v not in must and v not in banned_late:
                late.append(v)
        if not late:
            break
        for v in late:
            banned_late.add(v)
            G.add_edge(src, ("in", idx[v]), capacity=INF)
    reasons: dict[Node, str] = {}
    for v in saved:
        if v in banned_late:
            why = f"recomputing it would chain more than {max_depth} recomputed values"
        elif v.op.kind == "contraction":
            why = "contraction (never recomputed)"
        else:
            why = f"{_bytes(v)} bytes"
        fv = flow_value if flow_value < INF else "inf"
        reasons[v] = f"on the minimum cut ({why}; cut total {fv} bytes)"
    return Plan("mincut", saved, reasons)


def _solve_cut(G: Any, src: Any, snk: Any, fset: list[Node], idx: dict[Node, int], a: _Analysis,
               INF: int) -> tuple[set[Node], int]:
    """Max flow, then the minimum cut closest to the sink; returns (saved values, cut bytes)."""
    import networkx as nx

    if G.out_degree(src) == 0 or G.in_degree(snk) == 0:
        return set(), 0
    from networkx.algorithms.flow import boykov_kolmogorov

    flow_value, flow = nx.maximum_flow(G, src, snk, flow_func=boykov_kolmogorov)
    reach: set = {snk}
    stack = [snk]
    while stack:
        w = stack.pop()
        for u in G.predecessors(w):  # u -> w with residual capacity
            if u not in reach and flow[u][w] < G[u][w]["capacity"]:
                reach.add(u)
                stack.append(u)
        for u in G.successors(w):  # the reverse residual edge u -> w carries flow[w][u]
            if u not in reach and flow[w][u] > 0:
                reach.add(u)
                stack.append(u)
    saved: set[Node] = set()
    for v in fset:
        i = idx[v]
        if ("in", i) not in reach and ("out", i) in reach:
            saved.add(v)
    # A value the backward reads that stayed on the source side is saved too
    # (only when an infinite edge had to be cut: a must-recompute conflict).
    for v in a.needed:
        if ("out", idx[v]) not in reach and v not in a.free:
            saved.add(v)
    return saved, flow_value
