"""Reading a joint forward+backward graph for checkpointing: its markers, its regions, its chain.

`_strip_markers` removes the marker ops of the user API, remembering names
and which values user regions must recompute (`_Marks`); `_analyze` splits
the stripped graph into forward and backward values and finds the chain
steps (`_find_chain`) that the "sqrt" and "revolve" planners work on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...ir import Builder, Graph, Node, meta, role, source_location
from ..schedule import forward_order, free_values, regions, static_values
from .api import _REGIONS, _set_names


@dataclass
class _Marks:
    """What the markers said, in terms of the stripped graph's nodes."""

    must_recompute: dict[Node, str] = field(default_factory=dict)  # node -> region description
    region_saveable: dict[Node, str] = field(default_factory=dict)  # node -> "policy saves it" reason
    names: dict[Node, frozenset] = field(default_factory=dict)


def _strip_markers(graph: Graph) -> tuple[Graph, _Marks]:
    """Remove marker ops, remembering names and which values user regions recompute."""
    order = graph.toposort()
    marks = _Marks()
    if not any(n.op.marker for n in order):
        return graph, marks
    # Region internals: downstream of a region's begin markers and upstream of its end markers.
    begins: dict[int, list[Node]] = {}
    ends: dict[int, list[Node]] = {}
    for n in order:
        if n.op.name == "remat_begin":
            begins.setdefault(n.attr("region"), []).append(n)
        elif n.op.name == "remat_end":
            ends.setdefault(n.attr("region"), []).append(n)
    rd = graph.readers()
    inside: dict[Node, list[int]] = {}
    for rid, es in ends.items():
        up: set[Node] = set()
        stack = [e.inputs[0] for e in es]
        while stack:
            n = stack.pop()
            if n in up or n.op.kind == "source" or (n.op.name == "remat_begin" and n.attr("region") == rid):
                continue
            up.add(n)
            stack.extend(n.inputs)
        down: set[Node] = set()
        stack = list(begins.get(rid, []))
        while stack:
            n = stack.pop()
            if n in down:
                continue
            down.add(n)
            stack.extend(r for r in rd.get(n, ()) if r in up)
        outs = {e.inputs[0] for e in es}
        for n in up & down:
            if not n.op.marker and n not in outs and meta(n).role not in ("backward", "recomputed"):
                inside.setdefault(n, []).append(rid)
    names: dict[Node, set] = {}
    new: dict[Node, Node] = {}
    with Builder() as b:
        for n in order:
            if n.op.marker:
                src = new[n.inputs[0]]
                new[n] = src
                if n.op.name == "checkpoint_name":
                    names.setdefault(src, set()).add(n.attr("name"))
                continue
            ins = [new[x] for x in n.inputs]
            if all(a is x for a, x in zip(ins, n.inputs)):
                new[n] = n
                continue
            m = meta(n)
            with source_location(m.location), role(m.role, m.origin):
                new[n] = b.make(n.op, ins, n.attrs, n.tag)
    for n, s in names.items():
        marks.names[n] = frozenset(s)
        _set_names(n, frozenset(s))
    for n, rids in inside.items():
        v = new[n]
        for rid in rids:
            reg = _REGIONS.get(rid)
            if reg is None:
                continue
            if reg.policy(v):
                marks.region_saveable.setdefault(v, f"saveable under policy {reg.policy!r} of checkpoint({reg.name})")
            else:
                marks.must_recompute[v] = f"internal to checkpoint({reg.name}) with policy {reg.policy!r}"
    for v in marks.must_recompute:
        marks.region_saveable.pop(v, None)
    out = Graph(graph.inputs, [new[o] for o in graph.outputs], graph.in_tree, graph.out_tree, name=graph.name)
    return out, marks


# --------------------------------------------------------------------------- analysis of a joint graph


@dataclass
class _Analysis:
    """The forward/backward split of a joint graph and its chain structure."""

    graph: Graph
    order: list[Node]
    cls: dict[Node, str]
    fwd: list[Node]  # forward values (not sources), topological order
    needed: set[Node]  # forward values read by backward nodes
    free: set[Node]  # forward values regenerated from sources (random bits, broadcasts of inputs)
    free_random: set[Node]  # the part of `free` derived from random bits
    static: set[Node]  # forward values from constants and integer inputs alone (label indices, masks)
    marks: _Marks
    steps: list[list[Node]] | None = None  # chain steps (non-free forward values), in order
    bounds: list[Node] | None = None  # bounds[k]: the last node of step k (k < len(steps) - 1)
    step_of: dict[Node, int] = field(default_factory=dict)


def _analyze(graph: Graph, marks: _Marks) -> _Analysis:
    order = graph.toposort()
    cls = regions(order)
    fwd = [n for n in order if cls[n] == "F"]
    needed: set[Node] = set()
    for n in order:
        if cls[n] in ("B", "R"):
            for x in n.inputs:
                if cls[x] == "F":
                    needed.add(x)
    free = free_values(order, cls)
    free_random = free_values(order, cls, random_only=True)
    static = static_values(order, cls)
    a = _Analysis(graph, order, cls, fwd, needed, free, free_random, static, marks)
    _find_chain(a)
    return a


def _find_chain(a: _Analysis) -> None:
    """Split the forward values into chain steps at articulation values.

    A value v at position t of the forward order (free and static values left
    out: a label index read by the loss's gather would span the chain) is an
    articulation when it is the only live forward value after it runs: no
    forward edge spans t, and v is read later by the forward (or is last).
    Step bounds are the articulations a such that some value after a, up to
    and including the next articulation, is read by the backward. For
    x = tanh(x @ W + b) that is the pre-activation x @ W + b: every step
    then holds one layer, and only values inside a step are read by its
    backward; in a pre-LayerNorm residual network the bounds are the
    residual-stream sums. The values after the last bound form the last step.

    The chain is looked for in the main forward computation only: the
    connected component of the forward values (free values left out) with
    the most bytes. Other components are side computations that share no
    forward value with it, e.g. an optimizer's step counter t + 1 and its
    bias corrections 1 - b**t in a compiled training step; they are small,
    "not part of the chain" and saved, instead of spanning the chain and
    hiding every articulation. A graph output that no forward value reads is
    held to the end in every plan, like a parameter, so it spans nothing.
    """
    seq = _main_component(forward_order(a.order, a.cls, a.graph.outputs, a.free | a.static))
    N = len(seq)
    if N < 2:
        return
    pos = {n: i for i, n in enumerate(seq)}
    lastf = [i for i in range(N)]
    for i, n in enumerate(seq):
        for x in n.inputs:
            j = pos.get(x)
            if j is not None and i > lastf[j]:
                lastf[j] = i
    span = [0] * (N + 1)
    for j in range(N):
        if lastf[j] > j + 1:
            span[j + 1] += 1
            span[min(lastf[j], N)] -= 1
    art = []
    cur = 0
    for t in range(N):
        cur += span[t]
        # cur counts edges u -> w with pos(u) < t < pos(w)
        if cur == 0 and (lastf[t] > t or t == N - 1):
            art.append(t)
    if len(art) < 2:
        return
    cum = [0]
    for n in seq:
        cum.append(cum[-1] + (n in a.needed))
    # art[i] bounds a step when the values up to the next articulation include one the backward reads.
    bset = [art[i] for i in range(len(art) - 1) if cum[art[i + 1] + 1] > cum[art[i] + 1]]
    if not bset:
        return
    steps: list[list[Node]] = []
    prev = 0
    for bpos in bset:
        steps.append(seq[prev:bpos + 1])
        prev = bpos + 1
    steps.append(seq[prev:])
    if len(steps) < 2 or not steps[-1]:
        return
    a.steps = steps
    a.bounds = [seq[b] for b in bset]
    for k, st in enumerate(steps):
        for n in st:
            a.step_of[n] = k


def _main_component(seq: list[Node]) -> list[Node]:
    """The values of `seq` in its largest (by bytes) connected component, in `seq` order.

    Components are those of the undirected graph of data edges between values of `seq`.
    """
    parent = {n: n for n in seq}

    def find(n: Node) -> Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in seq:
        for x in n.inputs:
            if x in parent:
                rx, rn = find(x), find(n)
                if rx is not rn:
                    parent[rx] = rn
    size: dict[Node, int] = {}
    for n in seq:
        r = find(n)
        size[r] = size.get(r, 0) + n.nbytes
    if len(size) <= 1:
        return seq
    main = max(size, key=lambda r: size[r])
    return [n for n in seq if find(n) is main]
