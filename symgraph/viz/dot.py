"""Graph dumps: a text listing (like a jaxpr), Graphviz DOT, rendered pictures, networkx.

`dump` and `to_dot` number nodes the same way (%0, %1, ...: the graph's inputs
first, then every other node in topological order), and print nothing that
depends on the process (no creation counters, no memory addresses), so dumps
of the same program are identical between runs and can be diffed.
`dump_stage` writes both for every pipeline stage when `SYMGRAPH_DUMP=DIR` is
set in the environment.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import threading
import warnings
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import SymgraphError
from ..ir import Graph, Node, meta

__all__ = [
    "dump",
    "to_dot",
    "render",
    "dump_stage",
    "to_networkx",
    "node_ids",
    "node_label",
    "format_attrs",
    "role_counts",
    "COLLAPSE_THRESHOLD",
    "ROLE_STYLES",
]

#: Graphs with more nodes than this are drawn with elementwise chains summarized.
COLLAPSE_THRESHOLD = 2000

# ----- numbering and formatting -----

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def node_ids(graph: Graph) -> dict[Node, int]:
    """The display number of each node: the graph's inputs first, then topological order.

    The numbering is a topological order itself (inputs read nothing) and
    depends only on the graph's structure, so it is the same in every run.

    Returns:
        dict node -> int, covering every node of `graph.toposort()`.
    """
    ids: dict[Node, int] = {}
    for x in graph.inputs:
        if x not in ids:
            ids[x] = len(ids)
    for n in graph.toposort():
        if n not in ids:
            ids[n] = len(ids)
    return ids


def _fmt_value(v: Any) -> str:
    if isinstance(v, np.dtype):
        return str(v)
    if isinstance(v, type):
        return v.__name__
    if isinstance(v, tuple):
        return "(" + ",".join(_fmt_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, str):
        return v
    if isinstance(v, np.generic):
        return repr(v.item())
    if callable(v) and hasattr(v, "__qualname__"):
        return v.__qualname__
    # Default reprs of arbitrary objects embed a memory address: drop it.
    return _ADDRESS.sub("", repr(v))


def format_attrs(n: Node) -> str:
    """The node's attrs as `k=v` pairs (an input's shape/dtype/index attrs omitted)."""
    skip = {"shape", "dtype", "index"} if n.op.name == "input" else set()
    return " ".join(f"{k}={_fmt_value(v)}" for k, v in n.attrs if k not in skip)


def _type_str(n: Node) -> str:
    return f"{n.dtype}[{','.join(map(str, n.shape))}]"


def node_label(n: Node) -> str:
    """A short label: op name and the distinguishing attrs."""
    a = format_attrs(n)
    return f"{n.op.name}{' ' + a if a else ''}"


def _op_with_attrs(n: Node) -> str:
    a = format_attrs(n)
    return f"{n.op.name}[{a}]" if a else n.op.name


def _location_str(n: Node, function: bool = False) -> str | None:
    loc = meta(n).location
    if loc is None:
        return None
    s = f"{os.path.basename(loc.filename)}:{loc.lineno}"
    return f"{s} (in {loc.function})" if function else s


class _TagNames:
    """Graph-local names for identity tags.

    Tags such as ('fresh', 17) carry a process-wide counter; printing it would
    make dumps differ between runs. Each distinct tag is shown as its kind and
    its rank of first appearance in the graph instead: `fresh#0`, `fresh#1`.
    """

    def __init__(self) -> None:
        self._names: dict[Any, str] = {}
        self._count: Counter = Counter()

    def __call__(self, tag: Any) -> str:
        name = self._names.get(tag)
        if name is None:
            kind = tag[0] if isinstance(tag, tuple) and tag and isinstance(tag[0], str) else type(tag).__name__
            name = f"{kind}#{self._count[kind]}"
            self._count[kind] += 1
            self._names[tag] = name
        return name


def role_counts(graph: Graph) -> dict[str, int]:
    """Number of nodes per role ("forward", "backward", "recomputed", ...).

    Returns:
        dict role -> count, in order of first appearance in the numbering.
    """
    c: dict[str, int] = {}
    for n in node_ids(graph):
        r = meta(n).role
        c[r] = c.get(r, 0) + 1
    return c


# ----- text listing -----


def dump(graph: Graph, show_location: bool = True) -> str:
    """A text listing of the graph, one node per line.

    The first line is the signature, `graph NAME(%0 x: float64[3], ...)`;
    then one line per non-input node::

        %4 = mul(%2, %3) : float64[3]  # backward, model.py:12

    that is: id, op with its attrs in brackets, input ids, dtype[shape], role
    and the user's source line (file base name and line number); copies made
    by transformations also show their tag, renumbered per graph. The last
    line lists the outputs. The text depends only on the graph's structure,
    not on the process, so two runs of the same program give the same dump.

    Args:
        graph: the graph.
        show_location: append the user's source line of each node.

    Returns:
        The listing (str).
    """
    ids = node_ids(graph)
    tags = _TagNames()
    bound = set(graph.inputs)
    sig = ", ".join(f"%{ids[x]} {x.attr('name', 'arg')}: {_type_str(x)}" for x in graph.inputs)
    lines = [f"graph {graph.name}({sig}) {{"]
    for n, i in ids.items():
        if n in bound:
            continue
        ins = ", ".join(f"%{ids[x]}" for x in n.inputs)
        line = f"  %{i} = {_op_with_attrs(n)}({ins}) : {_type_str(n)}"
        notes = [meta(n).role]
        if n.tag is not None and n.op.name != "input":
            notes.append(f"tag={tags(n.tag)}")
        loc = _location_str(n) if show_location else None
        if loc is not None:
            notes.append(loc)
        line += "  # " + ", ".join(notes)
        lines.append(line)
    lines.append("  return " + ", ".join(f"%{ids[o]}" for o in graph.outputs))
    lines.append("}")
    return "\n".join(lines)


# ----- DOT -----

#: Per role: (fill colour, border colour, node style, legend text).
ROLE_STYLES: dict[str, tuple[str, str, str, str]] = {
    "forward": ("#cfe2f3", "#1f4e79", "filled,rounded", "forward (primal)"),
    "backward": ("#fce5cd", "#b45f06", "filled,rounded,dashed", "backward (cotangent)"),
    "recomputed": ("#d9ead3", "#38761d", "filled,rounded,dotted", "recomputed (checkpointing)"),
    "tangent": ("#ead1dc", "#741b47", "filled,rounded,dashed", "tangent (forward mode)"),
}
_OTHER_STYLE = ("#eeeeee", "#555555", "filled,rounded,diagonals", "other role")
_INPUT_FILL = "#fff2cc"
_KERNEL_COLOR = "#674ea7"
_KERNEL_FILL = "#f3effa"
# Along any edge the role never goes back in this order (forward values feed
# recomputations, both feed the backward sweep); summarizing relies on it.
_ROLE_RANK = {"forward": 0, "recomputed": 1, "backward": 2, "tangent": 2}


def _q(s: str) -> str:
    """A DOT double-quoted string (newlines become centered line breaks)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(d: dict[str, Any]) -> str:
    return "[" + ", ".join(f"{k}={v if isinstance(v, (int, float)) else _q(str(v))}" for k, v in d.items()) + "]"


def _style_for(r: str) -> tuple[str, str, str, str]:
    return ROLE_STYLES.get(r, _OTHER_STYLE)


def _shorten(s: str, n: int = 48) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _kernel_sets(graph: Graph, kernels: Iterable[Any] | None, ids: dict[Node, int],
                 infer_fused: bool = True) -> tuple[list[tuple[str, list[Node]]], dict[Node, int]]:
    """Normalize `kernels` to [(title, nodes)] and a node -> kernel index map.

    With `infer_fused`, a node listed in no kernel (and not an input or
    constant) whose every reader belongs, directly or through other unlisted
    nodes, to one and the same kernel is drawn in that kernel: it is computed
    inline there (fused), even if the code generator listed only the values
    it stores.
    """
    if kernels is None:
        return [], {}
    listed: list[list[Node]] = []
    where: dict[Node, int] = {}
    names = []
    for k, ker in enumerate(kernels):
        nodes = getattr(ker, "nodes", ker)
        names.append(getattr(ker, "name", None) or f"kernel {k}")
        members = []
        for n in nodes:
            if isinstance(n, Node) and n in ids and n not in where:
                where[n] = k
                members.append(n)
        listed.append(members)
    fused: dict[int, list[Node]] = {}
    if infer_fused:
        order = list(ids)
        readers: dict[Node, list[Node]] = {n: [] for n in order}
        for n in order:
            for x in n.inputs:
                readers[x].append(n)
        outs = set(graph.outputs)
        reach: dict[Node, frozenset] = {}
        for n in reversed(order):
            if n in where:
                reach[n] = frozenset((where[n],))
                continue
            ks = frozenset().union(*(reach[r] for r in readers[n])) if readers[n] else frozenset()
            reach[n] = ks
            if len(ks) == 1 and n.op.kind != "source" and n not in outs:
                fused.setdefault(next(iter(ks)), []).append(n)
        for k, ns in fused.items():
            for n in ns:
                where[n] = k
    out: list[tuple[str, list[Node]]] = []
    for k, members in enumerate(listed):
        extra = sorted(fused.get(k, []), key=ids.__getitem__)
        kinds = Counter(n.op.kind for n in members + extra)
        what = ", ".join(f"{c} {kd}" for kd, c in kinds.most_common())
        title = f"{names[k]}: {len(members) + len(extra)} ops" + (f" ({what})" if what else "")
        out.append((title, sorted(members + extra, key=ids.__getitem__)))
    return out, where


class _Groups:
    """Union-find over nodes: the summarized groups of a collapsed drawing."""

    def __init__(self) -> None:
        self.parent: dict[Node, Node] = {}

    def find(self, n: Node) -> Node:
        p = self.parent.get(n, n)
        if p is n:
            return n
        root = p
        while True:
            q = self.parent.get(root, root)
            if q is root:
                break
            root = q
        while n is not root:  # path compression
            nxt = self.parent.get(n, n)
            self.parent[n] = root
            n = nxt
        return root

    def union(self, a: Node, b: Node) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[ra] = rb


def _collapse_groups(graph: Graph, order: list[Node], readers: dict[Node, list[Node]], kernel_of: dict[Node, int],
                     min_group: int) -> dict[Node, list[Node]]:
    """Groups of cheap (elementwise or layout) nodes to draw as one summarized node.

    A cheap node is merged into its reader when that reader is the only one
    of the same role, both are cheap, have the same role and sit in the same
    kernel, and the node is not a graph output. Merging a node into its only
    reader cannot create a cycle in the drawn (quotient) graph. Readers of a
    later role (a backward node reading a forward value) are not counted when
    roles never go back along an edge in this graph (forward -> recomputed ->
    backward), so the forward chain of a gradient still summarizes; otherwise
    only nodes with a single reader merge.

    Returns:
        dict representative -> members (in numbering order), only for groups of
        at least `min_group` nodes.
    """
    outs = {o for o in graph.outputs}
    role_of = {n: meta(n).role for n in order}
    monotone = all(r in _ROLE_RANK for r in role_of.values()) and all(
        _ROLE_RANK[role_of[x]] <= _ROLE_RANK[role_of[n]] for n in order for x in n.inputs)

    def cheap(n: Node) -> bool:
        # elementwise ops (but random bits) and the views that keep every element (no slices)
        return (n.op.kind == "elementwise" and not n.op.random) or n.op.view in ("reshape", "transpose", "broadcast")

    uf = _Groups()
    for n in order:
        if not cheap(n) or n in outs:
            continue
        rd = readers[n]
        if monotone:
            rd = [r for r in rd if role_of[r] == role_of[n]]
        if not rd or any(r is not rd[0] for r in rd):
            continue
        v = rd[0]
        if cheap(v) and role_of[v] == role_of[n] and kernel_of.get(v) == kernel_of.get(n):
            uf.union(n, v)
    members: dict[Node, list[Node]] = {}
    for n in order:
        members.setdefault(uf.find(n), []).append(n)
    return {r: m for r, m in members.items() if len(m) >= min_group}


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
    order = list(ids)
    readers: dict[Node, list[Node]] = {n: [] for n in order}
    for n in order:
        for x in n.inputs:
            readers[x].append(n)
    if collapse is None:
        collapse = len(order) > collapse_threshold
    if show_constants is None:
        show_constants = not collapse
    kernel_list, kernel_of = _kernel_sets(graph, kernels, ids, infer_fused)
    outs: dict[Node, list[int]] = {}
    for k, o in enumerate(graph.outputs):
        outs.setdefault(o, []).append(k)

    def drawn(n: Node) -> bool:
        return show_constants or n.op.name != "constant" or n in outs

    groups: dict[Node, list[Node]] = {}
    bands = False
    if collapse:
        groups = _collapse_groups(graph, order, readers, kernel_of, min_group)
        in_groups = sum(len(m) for m in groups.values())
        boxes = sum(1 for n in order if drawn(n)) - in_groups + len(groups)
        if boxes > max_boxes:
            groups = _band_groups(graph, [n for n in order if drawn(n)], kernel_of, band_target)
            bands = True
    rep: dict[Node, Node] = {}
    for r, members in groups.items():
        for m in members:
            rep[m] = r

    def key(n: Node) -> str:
        r = rep.get(n)
        return f"g{ids[r]}" if r is not None else f"n{ids[n]}"

    # Edges of the drawn graph (between representatives), with multiplicity.
    edges: list[tuple[str, str, str, str]] = []  # (from, to, colour, from-role)
    dkeys: list[str] = []
    for n in order:
        if not drawn(n):
            continue
        kn = key(n)
        if rep.get(n) is None or rep[n] is n:
            dkeys.append(kn)
        for x in n.inputs:
            if not drawn(x):
                continue
            kx = key(x)
            if kx == kn:
                continue
            edges.append((kx, kn, _style_for(meta(n).role)[1], meta(x).role))
    fan: Counter = Counter(kx for kx, _ in {(e[0], e[1]) for e in edges})
    box_name: dict[str, str] = {}
    for n in order:
        if drawn(n):
            r = rep.get(n)
            if r is None:
                box_name[f"n{ids[n]}"] = f"%{ids[n]}"
            elif r is n:
                box_name[f"g{ids[r]}"] = f"%{ids[groups[r][0]]}…%{ids[groups[r][-1]]}"
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
        depth = _ranks(dkeys, [(a, b) for a, b, _, _ in edges])
        long_edges = {i for i, (a, b, _, _) in enumerate(edges) if depth[b] - depth[a] > max_span}

    counts = role_counts(graph)
    if title is None:
        title = f"{graph.name}: {len(order)} nodes (" + ", ".join(f"{r} {c}" for r, c in counts.items()) + ")"
        if groups:
            hidden = sum(len(m) for m in groups.values()) - len(groups)
            title += f"\nsummarized: {len(groups)} {'depth bands' if bands else 'groups'} stand for {hidden + len(groups)} nodes"
        if not show_constants and any(n.op.name == "constant" for n in order):
            title += "; constants hidden"
        if long_edges:
            title += f"\n{len(long_edges)} long edges drawn as reference boxes (%id of the value read)"

    def node_stmt(n: Node) -> str:
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
        if n in outs:
            lines.append("output " + ",".join(map(str, outs[n])))
            a["peripheries"] = 2
            cls.append("sg-output")
        if fan[key(n)] > 1:
            lines.append(f"fan-out {fan[key(n)]}")
            a["penwidth"] = 2
        elif r == "recomputed":
            a["penwidth"] = 2
        tip = [f"%{i} {_op_with_attrs(n)} : {_type_str(n)}", r]
        loc = _location_str(n, function=True)
        if loc:
            tip.append(loc)
        if n.tag is not None and n.op.name != "input":
            tip.append(f"tag {tags(n.tag)}")
        a.update(label="\n".join(lines), style=style, fillcolor=fill, color=border, tooltip="\n".join(tip),
                 id=f"n{i}", **{"class": " ".join(cls)})
        return f"  n{i} {_attrs(a)};"

    def group_stmt(r: Node, members: list[Node]) -> str:
        ro = meta(r).role
        fill, border, style, _ = _style_for(ro)
        ops = Counter(m.op.name for m in members)
        top = ", ".join(f"{op}×{c}" for op, c in ops.most_common(4)) + (", …" if len(ops) > 4 else "")
        first, last = ids[members[0]], ids[members[-1]]
        if bands:
            ds = [band_depth[m] for m in members]
            lines = [f"%{first} … %{last}", f"{len(members)} {ro} ops, depth {min(ds)}–{max(ds)}", _shorten(top)]
        else:
            lines = [f"%{first} … %{last}", f"{len(members)} ops summarized", _shorten(top), _type_str(r)]
        a: dict[str, Any] = {"shape": "box3d", "style": style.replace(",rounded", ""), "fillcolor": fill,
                             "color": border, "class": f"sg-summary sg-role-{ro}", "id": f"g{ids[r]}"}
        if fan[key(r)] > 1:
            lines.append(f"fan-out {fan[key(r)]}")
            a["penwidth"] = 2
        locs = sorted({s for s in (_location_str(m) for m in members) if s})
        a["label"] = "\n".join(lines)
        a["tooltip"] = f"{len(members)} {ro} nodes: " + ", ".join(f"{op}×{c}" for op, c in ops.most_common()) + \
            ("\n" + ", ".join(locs[:8]) if locs else "")
        return f"  g{ids[r]} {_attrs(a)};"

    tags = _TagNames()
    band_depth = _depths([n for n in order if drawn(n)]) if bands else {}
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

    # Node statements, inside their kernel cluster when kernels are given.
    by_kernel: dict[int | None, list[str]] = {}
    for n in order:
        if not drawn(n):
            continue
        r = rep.get(n)
        if r is not None and r is not n:
            continue
        stmt = group_stmt(n, groups[n]) if r is n else node_stmt(n)
        by_kernel.setdefault(kernel_of.get(n), []).append(stmt)
    out.extend(by_kernel.get(None, []))
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
    ins_drawn = [f"n{ids[x]}" for x in graph.inputs if x in ids and kernel_of.get(x) is None]
    if ins_drawn:
        out.append("  { rank=min; " + "; ".join(ins_drawn) + "; }")
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
    if legend:
        out.extend(_legend(order, bool(groups), bool(kernel_list), bool(long_edges)))
    out.append("}")
    return "\n".join(out) + "\n"


def _depths(nodes: list[Node]) -> dict[Node, int]:
    """Longest-path depth of each node among `nodes` (given in topological order)."""
    depth: dict[Node, int] = {}
    for n in nodes:
        depth[n] = max((depth[x] + 1 for x in n.inputs if x in depth), default=0)
    return depth


def _band_groups(graph: Graph, nodes: list[Node], kernel_of: dict[Node, int], target: int) -> dict[Node, list[Node]]:
    """An overview partition: bands of consecutive depths, one role (and kernel) each.

    Nodes are sorted by (role rank, depth) when roles never go back along an
    edge, else by depth: both are topological orders. Each band is an
    interval of that order, hence convex (a path leaving a band and coming
    back would pass a node inside the interval), so the quotient is acyclic.
    Bands end at a change of role or kernel, and at a depth boundary once
    they hold `len(nodes) / target` nodes; inputs and outputs are their own
    (singleton) bands.

    Returns:
        dict representative (the band's last node) -> members, for bands of
        two or more nodes.
    """
    depth = _depths(nodes)
    role_of = {n: meta(n).role for n in nodes}
    pos = {n: i for i, n in enumerate(nodes)}
    monotone = all(r in _ROLE_RANK for r in role_of.values()) and all(
        _ROLE_RANK[role_of[x]] <= _ROLE_RANK[role_of[n]] for n in nodes for x in n.inputs if x in role_of)
    if monotone:
        srt = sorted(nodes, key=lambda n: (_ROLE_RANK[role_of[n]], depth[n], pos[n]))
    else:
        srt = sorted(nodes, key=lambda n: (depth[n], pos[n]))
    size = max(2, -(-len(nodes) // max(1, target)))
    special = set(graph.inputs) | set(graph.outputs)
    bands: list[list[Node]] = []
    cur: list[Node] = []
    for n in srt:
        if cur and (n in special or cur[-1] in special or role_of[n] != role_of[cur[-1]]
                    or kernel_of.get(n) != kernel_of.get(cur[-1])
                    or (len(cur) >= size and depth[n] != depth[cur[-1]])):
            bands.append(cur)
            cur = []
        cur.append(n)
    if cur:
        bands.append(cur)
    return {b[-1]: sorted(b, key=pos.__getitem__) for b in bands if len(b) >= 2}


def _ranks(keys: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Longest-path depth of each key of a DAG (Kahn's algorithm, iterative)."""
    succ: dict[str, list[str]] = {k: [] for k in keys}
    indeg: Counter = Counter()
    for a, b in edges:
        succ[a].append(b)
        indeg[b] += 1
    depth = {k: 0 for k in keys}
    stack = [k for k in keys if indeg[k] == 0]
    while stack:
        a = stack.pop()
        for b in succ[a]:
            depth[b] = max(depth[b], depth[a] + 1)
            indeg[b] -= 1
            if indeg[b] == 0:
                stack.append(b)
    return depth


def _legend(order: list[Node], summaries: bool, kernels: bool, refs: bool = False) -> list[str]:
    """A legend cluster: one sample node per role present (forward, backward, recomputed always)."""
    roles = list(ROLE_STYLES)
    for n in order:
        r = meta(n).role
        if r not in roles:
            roles.append(r)
    lines = ["  subgraph cluster_legend {",
             '    graph [label="legend", style="rounded", color="#999999", fontsize=11, class="sg-legend-box"];']
    names = []
    for r in roles:
        fill, border, style, text = _style_for(r)
        if r not in ROLE_STYLES:
            text = f"{r} (role)"
        nm = f"legend_{re.sub(r'[^A-Za-z0-9_]', '_', r)}"
        names.append(nm)
        lines.append(f"    {nm} " + _attrs({"label": text, "style": style, "fillcolor": fill, "color": border,
                                             "penwidth": 2 if r == "recomputed" else 1, "class": "sg-legend"}) + ";")
    extra = [("legend_input", {"label": "input", "shape": "invhouse", "style": "filled", "fillcolor": _INPUT_FILL,
                               "color": ROLE_STYLES["forward"][1]}),
             ("legend_output", {"label": "output (double border)", "peripheries": 2, "style": "rounded",
                                "color": "#333333"}),
             ("legend_fanout", {"label": "fan-out N: N readers\n(thick border)", "style": "rounded", "penwidth": 2,
                                "color": "#333333"})]
    if summaries:
        extra.append(("legend_summary", {"label": "summary box: many nodes\n(op counts inside)", "shape": "box3d", "style": "filled",
                                         "fillcolor": "#ffffff", "color": "#333333"}))
    if refs:
        extra.append(("legend_ref", {"label": "from %id: reads a value drawn\nfar above (long edge elided)",
                                     "style": "dashed", "fontsize": 8, "color": "#333333"}))
    if kernels:
        extra.append(("legend_kernel", {"label": "fused kernel (cluster)", "style": "rounded,filled,bold",
                                        "fillcolor": _KERNEL_FILL, "color": _KERNEL_COLOR}))
    for nm, a in extra:
        a["class"] = "sg-legend"
        names.append(nm)
        lines.append(f"    {nm} {_attrs(a)};")
    # Chain the samples with invisible edges so they stack in one column.
    for a_, b_ in itertools.pairwise(names):
        lines.append(f"    {a_} -> {b_} [style=invis];")
    lines.append("  }")
    return lines


# ----- rendering -----

_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}
_MISSING_DOT = ("Graphviz's `dot` program was not found (looked for {prog!r} on PATH). Install Graphviz: "
                "`sudo apt-get install graphviz` (Debian/Ubuntu package `graphviz`), "
                "`conda install -c conda-forge graphviz` (conda package `graphviz`), or `brew install graphviz`; "
                "or write DOT source with graph.to_dot() / a .dot path and render it elsewhere")


def render(graph: Graph, path: str | os.PathLike, *, timeout: float = 120.0, dot: str = "dot", **kw: Any) -> str:
    """Draw the graph to a picture through Graphviz's `dot` program.

    The output format is chosen by the suffix: `.svg`, `.png`, `.pdf`; a
    `.dot`/`.gv` path gets the DOT source and a `.txt` path the text dump,
    neither needing Graphviz.

    Args:
        graph: the graph.
        path: output file; its suffix selects the format.
        timeout: seconds to wait for `dot` before giving up.
        dot: the Graphviz program to run (name on PATH or a path).
        **kw: passed to `to_dot` (kernels, collapse, legend, ...).

    Returns:
        The path written (str).

    Raises:
        SymgraphError: unknown suffix; `dot` missing (names the Debian and
            conda package `graphviz`); `dot` failed or exceeded `timeout`.
    """
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix in (".dot", ".gv"):
        with open(path, "w", encoding="utf-8") as f:
            f.write(to_dot(graph, **kw))
        return path
    if suffix == ".txt":
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump(graph) + "\n")
        return path
    fmt = _FORMATS.get(suffix)
    if fmt is None:
        raise SymgraphError(f"render: cannot tell the format of {path!r} from its suffix {suffix!r}; "
                            f"use one of .svg, .png, .pdf (Graphviz) or .dot, .txt")
    data = render_bytes(graph, fmt, timeout=timeout, dot=dot, **kw)
    with open(path, "wb") as f:
        f.write(data)
    return path


def render_bytes(graph: Graph, fmt: str = "svg", *, timeout: float = 120.0, dot: str = "dot", **kw: Any) -> bytes:
    """The picture of the graph as bytes, in Graphviz output format `fmt` (svg, png, pdf).

    Raises:
        SymgraphError: as `render`.
    """
    return run_dot(to_dot(graph, **kw), fmt, timeout=timeout, dot=dot)


def run_dot(source: str, fmt: str = "svg", *, timeout: float = 120.0, dot: str = "dot") -> bytes:
    """Run Graphviz's `dot -T<fmt>` on DOT source.

    Args:
        source: DOT source.
        fmt: Graphviz output format (svg, png, pdf, ...).
        timeout: seconds.
        dot: program name or path.

    Returns:
        The output bytes.

    Raises:
        SymgraphError: `dot` missing, failing, or slower than `timeout`.
    """
    prog = shutil.which(dot)
    if prog is None:
        raise SymgraphError(_MISSING_DOT.format(prog=dot))
    try:
        res = subprocess.run([prog, f"-T{fmt}"], input=source.encode("utf-8"), capture_output=True, timeout=timeout,
                             check=False)
    except subprocess.TimeoutExpired:
        raise SymgraphError(f"Graphviz `dot -T{fmt}` did not finish within {timeout:g} s; draw fewer nodes "
                            f"(collapse=True, the default for large graphs) or raise timeout=") from None
    except OSError as e:
        raise SymgraphError(f"could not run Graphviz `{prog}`: {e}. " + _MISSING_DOT.format(prog=dot)) from None
    if res.returncode != 0 or not res.stdout:
        err = res.stderr.decode("utf-8", "replace").strip()
        raise SymgraphError(f"Graphviz `dot -T{fmt}` failed (exit status {res.returncode}): {err[:2000]}")
    return res.stdout


# ----- SYMGRAPH_DUMP -----

_stage_counter = itertools.count()
_stage_lock = threading.Lock()
_EXT = {"llvm_ir": ".ll", "ir": ".ll", "asm": ".s", "assembly": ".s", "dot": ".dot"}


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "_", s).strip("_") or "graph"


def _as_text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        return "\n\n".join(f"; ----- {k} -----\n{_as_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "\n\n".join(_as_text(x) for x in v)
    return str(v)


def dump_stage(stage: str, graph: Graph, **extra: Any) -> list[str]:
    """Write the graph of one pipeline stage when `SYMGRAPH_DUMP=DIR` is set.

    Writes `DIR/NNN-<graph name>-<stage>.txt` (the `dump`) and `.dot` (the
    `to_dot` source), where NNN is a counter of this process, so that the
    files sort in pipeline order. Each extra keyword becomes one more file,
    `DIR/NNN-<name>-<stage>-<keyword><ext>` (`.ll` for `llvm_ir`, `.s` for
    `asm`, `.txt` otherwise); values may be str, bytes, a list (joined) or a
    dict (one section per key). The keyword `kernels` is not written as text
    on its own: it is passed to `to_dot` (clusters) and listed in
    `...-kernels.txt` by node id. Does nothing when the variable is unset or
    empty. A failure to write warns (RuntimeWarning) instead of raising, so
    that dumping never breaks a compilation.

    Args:
        stage: pipeline stage name (traced, differentiated, simplified,
            checkpointed, fused, ...).
        graph: the graph after that stage.
        **extra: more text to write (llvm_ir=..., asm=...); `kernels=` as in `to_dot`.

    Returns:
        The paths written (empty when SYMGRAPH_DUMP is unset).
    """
    d = os.environ.get("SYMGRAPH_DUMP")
    if not d:
        return []
    kernels = extra.pop("kernels", None)
    with _stage_lock:
        n = next(_stage_counter)
    base = os.path.join(d, f"{n:03d}-{_safe(graph.name)}-{_safe(stage)}")
    written: list[str] = []
    try:
        os.makedirs(d, exist_ok=True)
        files = {base + ".txt": dump(graph) + "\n", base + ".dot": to_dot(graph, kernels=kernels)}
        if kernels is not None:
            ids = node_ids(graph)
            klist, _ = _kernel_sets(graph, kernels, ids)
            files[base + "-kernels.txt"] = "".join(
                f"{t}\n  " + " ".join(f"%{ids[m]}" for m in members) + "\n" for t, members in klist)
        for k, v in extra.items():
            if v is None:
                continue
            files[f"{base}-{_safe(k)}{_EXT.get(k, '.txt')}"] = _as_text(v)
        for p, text in files.items():
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
            written.append(p)
    except Exception as e:  # noqa: BLE001  (never let a debug dump break the pipeline)
        warnings.warn(f"SYMGRAPH_DUMP: could not write stage {stage!r} of {graph.name!r} to {d!r}: {e}",
                      RuntimeWarning, stacklevel=2)
    return written


# ----- networkx -----


def to_networkx(graph: Graph) -> Any:
    """A networkx.DiGraph: one vertex per node, keyed by its `dump` id.

    Vertex attributes: op, attrs (str), shape, dtype (str), role, location (str
    or None), is_input, is_output, tag (str or None). Edge attributes:
    position (input slot). A MultiDiGraph when some node reads the same input
    twice (so both edges are kept).
    """
    import networkx as nx

    ids = node_ids(graph)
    order = list(ids)
    outs = set(graph.outputs)
    tags = _TagNames()
    g = nx.MultiDiGraph() if any(len(set(n.inputs)) != len(n.inputs) for n in order) else nx.DiGraph()
    for n in order:
        m = meta(n)
        g.add_node(ids[n], op=n.op.name, attrs=format_attrs(n), shape=n.shape, dtype=str(n.dtype), role=m.role,
                   location=None if m.location is None else str(m.location), is_input=n.op.name == "input",
                   is_output=n in outs, tag=None if n.tag is None else tags(n.tag))
    for n in order:
        for pos, x in enumerate(n.inputs):
            g.add_edge(ids[x], ids[n], position=pos)
    return g

