"""Graphviz DOT source of a graph (`to_dot`): boxes styled by role, kernel clusters, summaries, edges.

`to_dot` runs named steps: number the nodes and place them in kernels, pick
the summary groups of a large graph (`summarize`), collect the edges between
drawn boxes, then write the header, the node and group statements (inside
their kernel clusters), the edges (long ones as reference boxes) and the
legend.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..ir import Graph, Node, meta
from .kernels import _kernel_sets
from .labels import _fmt_value, _location_str, _op_with_attrs, _TagNames, _type_str, format_attrs, node_ids, role_counts
from .style import _INPUT_FILL, _KERNEL_COLOR, _KERNEL_FILL, _attrs, _legend, _q, _shorten, _style_for
from .summarize import COLLAPSE_THRESHOLD, _depths, _long_edges, _summary_groups

__all__ = ["to_dot"]

#: One edge of the drawn graph: (from box, to box, colour, role of the value read).
_Edge = tuple[str, str, str, str]


class _Scene:
    """What one drawing shows: the numbering, the drawn nodes, the summary groups and each box's key."""

    def __init__(self, graph: Graph, ids: dict[Node, int], show_constants: bool) -> None:
        self.graph = graph
        self.ids = ids
        self.order = list(ids)
        self.show_constants = show_constants
        #: output node -> its positions among the graph's outputs
        self.outs: dict[Node, list[int]] = {}
        for k, o in enumerate(graph.outputs):
            self.outs.setdefault(o, []).append(k)
        self.groups: dict[Node, list[Node]] = {}
        self.bands = False
        self.rep: dict[Node, Node] = {}  # member of a group -> its representative
        self.band_depth: dict[Node, int] = {}
        self.fan: Counter = Counter()  # box key -> number of distinct boxes reading it
        self.tags = _TagNames()

    def drawn(self, n: Node) -> bool:
        return self.show_constants or n.op.name != "constant" or n in self.outs

    def drawn_nodes(self) -> list[Node]:
        return [n for n in self.order if self.drawn(n)]

    def set_groups(self, groups: dict[Node, list[Node]], bands: bool) -> None:
        self.groups, self.bands = groups, bands
        for r, members in groups.items():
            for m in members:
                self.rep[m] = r
        if bands:
            self.band_depth = _depths(self.drawn_nodes())

    def key(self, n: Node) -> str:
        """The DOT name of the box that draws `n`: `nID` for a node, `gID` for a group."""
        r = self.rep.get(n)
        return f"g{self.ids[r]}" if r is not None else f"n{self.ids[n]}"


def to_dot(graph: Graph, kernels: Iterable[Any] | None = None, collapse: bool | None = None, *,
           collapse_threshold: int = COLLAPSE_THRESHOLD, min_group: int = 3, legend: bool = True,
           show_constants: bool | None = None, title: str | None = None, big_threshold: int = 600,
           max_span: int = 3, max_boxes: int = 1000, band_target: int = 300, infer_fused: bool = True) -> str:
    """Graphviz DOT source of the graph.

    Drawing conventions (all explained by a legend cluster):

    - fill colour and border style by role: forward nodes blue and solid,
      backward (cotangent) nodes orange and dashed, recomputed nodes (made by
      the checkpointing pass) green and dotted, other roles grey and hatched;
    - inputs are yellow house shapes, outputs have a double border and an
      "output k" line, constants are ellipses;
    - every node shows `%id = op[attrs](inputs)` (the ids of `dump`) and its
      dtype[shape]; a node with several readers says "fan-out N" and has a
      thicker border; edges take the colour of the reading node's role;
    - `kernels` (for compiled graphs) are drawn as clusters.

    Every drawn node carries a `class` attribute (`sg-node sg-role-ROLE
    sg-op-OP`, plus `sg-input`/`sg-output`/`sg-summary`/`sg-legend`) that
    Graphviz copies into SVG output, and a tooltip with its source line.

    Large graphs (more than `collapse_threshold` nodes, by default) are
    summarized: groups of elementwise and layout nodes that form chains (each
    node's only reader of its role is the next one) become one box per group
    listing its op counts, and constants are hidden. If that still leaves
    more than `max_boxes` boxes (graphs dominated by matmuls, say), the
    drawing becomes an overview by depth bands (see `max_boxes`). Every box
    of a summary stands for a convex set of nodes, so the drawn graph is
    still acyclic and its edges are real dependencies. A 10k-node gradient
    graph renders in seconds this way. `collapse=False` draws every node.

    Args:
        graph: the graph.
        kernels: for compiled graphs, one entry per fused kernel: a sequence
            of nodes, or an object with a `.nodes` sequence (and optionally
            `.name`). Nodes not in the graph are ignored; a node listed in
            several kernels is drawn in the first.
        collapse: None (default) summarizes graphs over `collapse_threshold`
            nodes; True always; False never.
        collapse_threshold: node count above which `collapse=None` summarizes.
        min_group: smallest group drawn as a summary box.
        legend: draw the legend cluster.
        show_constants: draw constant nodes (default: unless collapsing).
        title: graph label (default: name and node counts per role).
        big_threshold: above this many drawn boxes, dot's layout effort is
            limited and edges spanning more than `max_span` ranks are drawn
            as small reference boxes (`%id` of the value read) beside the
            reader, which keeps dot's running time near linear.
        max_span: see `big_threshold`.
        max_boxes: when summarizing chains still leaves more boxes than
            this, the drawing becomes an overview instead: nodes are sorted
            by role and depth and cut into about `band_target` bands of
            consecutive depths (one box each, listing its op counts); inputs
            and outputs keep their own boxes.
        band_target: see `max_boxes`.
        infer_fused: also draw inside a kernel's cluster the unlisted nodes
            that only that kernel reads (computed inline there); code
            generators often list only the values a kernel stores.

    Returns:
        The DOT source (str).
    """
    ids = node_ids(graph)
    if collapse is None:
        collapse = len(ids) > collapse_threshold
    if show_constants is None:
        show_constants = not collapse
    kernel_list, kernel_of = _kernel_sets(graph, kernels, ids, infer_fused)
    sc = _Scene(graph, ids, show_constants)
    if collapse:
        sc.set_groups(*_summary_groups(graph, sc.order, kernel_of, sc.drawn_nodes(), min_group=min_group,
                                       max_boxes=max_boxes, band_target=band_target))
    edges, dkeys = _drawn_edges(sc)
    sc.fan = Counter(kx for kx, _ in {(e[0], e[1]) for e in edges})
    mult: list[int] = [1] * len(edges)
    if collapse:
        # One edge per pair of boxes, labelled with its multiplicity.
        cnt: Counter = Counter(edges)
        edges = list(cnt)
        mult = [cnt[e] for e in edges]
    big = collapse or len(dkeys) > big_threshold
    long_edges: set[int] = set()
    if big:
        # Edges spanning many ranks make dot route chains of virtual nodes
        # (quadratic in a gradient graph, whose residual edges are long);
        # draw those as a small reference box next to the reader instead.
        long_edges = _long_edges(dkeys, [(a, b) for a, b, _, _ in edges], max_span)
    if title is None:
        title = _title(sc, long_edges)
    out = _header(graph, title, big)
    out.extend(_node_statements(sc, kernel_list, kernel_of))
    ins_drawn = [f"n{ids[x]}" for x in graph.inputs if x in ids and kernel_of.get(x) is None]
    if ins_drawn:
        out.append("  { rank=min; " + "; ".join(ins_drawn) + "; }")
    out.extend(_edge_statements(edges, mult, long_edges, _box_names(sc)))
    if legend:
        out.extend(_legend(sc.order, bool(sc.groups), bool(kernel_list), bool(long_edges)))
    out.append("}")
    return "\n".join(out) + "\n"


# ----- the drawn graph: edges between boxes -----


def _drawn_edges(sc: _Scene) -> tuple[list[_Edge], list[str]]:
    """The edges between drawn boxes (one per node input, with repeats), and the keys of the boxes.

    An edge takes the border colour of the reading node's role; edges inside
    a group are dropped.
    """
    edges: list[_Edge] = []
    dkeys: list[str] = []
    for n in sc.order:
        if not sc.drawn(n):
            continue
        kn = sc.key(n)
        if sc.rep.get(n) is None or sc.rep[n] is n:
            dkeys.append(kn)
        for x in n.inputs:
            if not sc.drawn(x):
                continue
            kx = sc.key(x)
            if kx == kn:
                continue
            edges.append((kx, kn, _style_for(meta(n).role)[1], meta(x).role))
    return edges, dkeys


def _box_names(sc: _Scene) -> dict[str, str]:
    """Box key -> how a reference box names it: `%id`, or `%first…%last` for a group."""
    box_name: dict[str, str] = {}
    for n in sc.order:
        if sc.drawn(n):
            r = sc.rep.get(n)
            if r is None:
                box_name[f"n{sc.ids[n]}"] = f"%{sc.ids[n]}"
            elif r is n:
                box_name[f"g{sc.ids[r]}"] = f"%{sc.ids[sc.groups[r][0]]}…%{sc.ids[sc.groups[r][-1]]}"
    return box_name


# ----- statements -----


def _title(sc: _Scene, long_edges: set[int]) -> str:
    """The default graph label: name, node counts per role, and what the summary hides."""
    graph, order, groups = sc.graph, sc.order, sc.groups
    counts = role_counts(graph)
    title = f"{graph.name}: {len(order)} nodes (" + ", ".join(f"{r} {c}" for r, c in counts.items()) + ")"
    if groups:
        hidden = sum(len(m) for m in groups.values()) - len(groups)
        title += f"\nsummarized: {len(groups)} {'depth bands' if sc.bands else 'groups'} stand for {hidden + len(groups)} nodes"
    if not sc.show_constants and any(n.op.name == "constant" for n in order):
        title += "; constants hidden"
    if long_edges:
        title += f"\n{len(long_edges)} long edges drawn as reference boxes (%id of the value read)"
    return title


def _header(graph: Graph, title: str, big: bool) -> list[str]:
    """`digraph NAME {` and the graph, node and edge defaults."""
    out: list[str] = [f"digraph {_q(graph.name)} {{"]
    gattrs = {"rankdir": "TB", "labelloc": "t", "label": title, "fontname": "Helvetica", "fontsize": 14,
              "nodesep": 0.25, "ranksep": 0.35}
    if big:
        # Layout effort limits: crossing minimization and network simplex
        # dominate dot's time on thousands of nodes; straight edges are cheap.
        gattrs.update(splines="line", mclimit=0.2, nslimit=2, nslimit1=2, remincross="false", searchsize=10)
    out.append("  graph " + _attrs(gattrs) + ";")
    out.append('  node [shape=box, fontname="Helvetica", fontsize=10, margin="0.08,0.03"];')
    out.append('  edge [arrowsize=0.6, fontname="Helvetica", fontsize=8];')
    return out


def _node_stmt(sc: _Scene, n: Node) -> str:
    """The statement of one drawn node: `%id = op(inputs)`, attrs, dtype[shape], output and fan-out lines."""
    ids = sc.ids
    r = meta(n).role
    fill, border, style, _ = _style_for(r)
    i = ids[n]
    ins = ", ".join(f"%{ids[x]}" for x in n.inputs[:4]) + (", …" if len(n.inputs) > 4 else "")
    cls = ["sg-node", f"sg-role-{r}", f"sg-op-{n.op.name}"]
    a: dict[str, Any] = {}
    if n.op.name == "input":
        lines = [f"%{i} {n.attr('name', 'arg')}", "input"]
        a["shape"] = "invhouse"
        fill = _INPUT_FILL
        cls.append("sg-input")
    elif n.op.name == "constant":
        lines = [f"%{i} = {_shorten(_fmt_value(n.attr('value')), 24)}"]
        a["shape"] = "ellipse"
        style = style.replace(",rounded", "")
    else:
        lines = [f"%{i} = {n.op.name}({ins})"]
        attrs = format_attrs(n)
        if attrs:
            lines.append(_shorten(attrs))
    lines.append(_type_str(n))
    if n in sc.outs:
        lines.append("output " + ",".join(map(str, sc.outs[n])))
        a["peripheries"] = 2
        cls.append("sg-output")
    fan = sc.fan[sc.key(n)]
    if fan > 1:
        lines.append(f"fan-out {fan}")
        a["penwidth"] = 2
    elif r == "recomputed":
        a["penwidth"] = 2
    tip = [f"%{i} {_op_with_attrs(n)} : {_type_str(n)}", r]
    loc = _location_str(n, function=True)
    if loc:
        tip.append(loc)
    if n.tag is not None and n.op.name != "input":
        tip.append(f"tag {sc.tags(n.tag)}")
    a.update(label="\n".join(lines), style=style, fillcolor=fill, color=border, tooltip="\n".join(tip),
             id=f"n{i}", **{"class": " ".join(cls)})
    return f"  n{i} {_attrs(a)};"


def _group_stmt(sc: _Scene, r: Node, members: list[Node]) -> str:
    """The statement of one summary box: id range, size (or depth range of a band), op counts."""
    ids = sc.ids
    ro = meta(r).role
    fill, border, style, _ = _style_for(ro)
    ops = Counter(m.op.name for m in members)
    top = ", ".join(f"{op}×{c}" for op, c in ops.most_common(4)) + (", …" if len(ops) > 4 else "")
    first, last = ids[members[0]], ids[members[-1]]
    if sc.bands:
        ds = [sc.band_depth[m] for m in members]
        lines = [f"%{first} … %{last}", f"{len(members)} {ro} ops, depth {min(ds)}–{max(ds)}", _shorten(top)]
    else:
        lines = [f"%{first} … %{last}", f"{len(members)} ops summarized", _shorten(top), _type_str(r)]
    a: dict[str, Any] = {"shape": "box3d", "style": style.replace(",rounded", ""), "fillcolor": fill,
                         "color": border, "class": f"sg-summary sg-role-{ro}", "id": f"g{ids[r]}"}
    fan = sc.fan[sc.key(r)]
    if fan > 1:
        lines.append(f"fan-out {fan}")
        a["penwidth"] = 2
    locs = sorted({s for s in (_location_str(m) for m in members) if s})
    a["label"] = "\n".join(lines)
    a["tooltip"] = f"{len(members)} {ro} nodes: " + ", ".join(f"{op}×{c}" for op, c in ops.most_common()) + \
        ("\n" + ", ".join(locs[:8]) if locs else "")
    return f"  g{ids[r]} {_attrs(a)};"


def _node_statements(sc: _Scene, kernel_list: list[tuple[str, list[Node]]], kernel_of: dict[Node, int]) -> list[str]:
    """The statements of every drawn box, those of each kernel inside its cluster."""
    by_kernel: dict[int | None, list[str]] = {}
    for n in sc.order:
        if not sc.drawn(n):
            continue
        r = sc.rep.get(n)
        if r is not None and r is not n:
            continue
        stmt = _group_stmt(sc, n, sc.groups[n]) if r is n else _node_stmt(sc, n)
        by_kernel.setdefault(kernel_of.get(n), []).append(stmt)
    out = list(by_kernel.get(None, []))
    for k, (ktitle, _members) in enumerate(kernel_list):
        stmts = by_kernel.get(k)
        if not stmts:
            continue
        out.append(f"  subgraph cluster_kernel_{k} {{")
        out.append("    graph " + _attrs({"label": ktitle, "style": "rounded,filled,bold", "color": _KERNEL_COLOR,
                                          "fillcolor": _KERNEL_FILL, "fontcolor": _KERNEL_COLOR, "fontsize": 11,
                                          "class": "sg-kernel", "id": f"kernel{k}"}) + ";")
        out.extend("  " + s for s in stmts)
        out.append("  }")
    return out


def _edge_statements(edges: list[_Edge], mult: list[int], long_edges: set[int], box_name: dict[str, str]) -> list[str]:
    """The edge statements; a long edge starts at a small `from %id` reference box beside its reader."""
    out: list[str] = []
    for i, (kx, kn, color, xrole) in enumerate(edges):
        if i in long_edges:
            fill, border, _, _ = _style_for(xrole)
            ref = f"r{i}"
            name = box_name[kx]
            out.append(f"  {ref} " + _attrs({"label": f"from {name}", "shape": "box", "style": "dashed,filled",
                                            "fillcolor": fill, "color": border, "fontsize": 8, "height": 0.2,
                                            "margin": "0.03,0.01", "class": f"sg-ref sg-role-{xrole}",
                                            "tooltip": f"reads {name} (a long edge, elided)"}) + ";")
            kx = ref
        ea = {"color": color}
        if mult[i] > 1:
            ea["label"] = f"×{mult[i]}"
        out.append(f"  {kx} -> {kn} {_attrs(ea)};")
    return out
