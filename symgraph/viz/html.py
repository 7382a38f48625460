"""`to_html`: one self-contained HTML file that explores a graph in a browser, offline, with no system program.

The page embeds the graph as JSON (every node: op, attrs, shape, dtype, role,
source line, the forward op of a derivative node, inputs, position) and a
small dependency-free script (`viewer.js`, `viewer.css` beside this module,
inlined) that draws it on a canvas: pan (drag), zoom (wheel), search by op,
input name, source line or %id, click a node for its details with links to
its inputs and readers (fan-in and fan-out highlighted), and collapse or
expand regions. A region is a connected set of nodes of the same role and
source line (the backward nodes of one line, say), or a fused kernel when
`kernels=` is given; big graphs open with every region collapsed. The body of
each loop (`scan`, `while`, `cond` nodes: their `subgraphs()`) is inlined as a
loop region that opens collapsed, laid out in the browser as a block. The layout
is computed here (`symgraph.viz.layout`), not in the browser.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any, Iterable

from ..files import write_atomically
from ..ir import Graph, Node, meta
from .kernels import _kernel_sets
from .labels import _TagNames, format_attrs, node_ids, role_counts
from .layout import LAYER_GAP, NODE_H, NODE_W, layered_layout, layered_positions
from .style import ROLE_STYLES, _OTHER_STYLE

__all__ = ["to_html", "html_data", "COLLAPSE_AT"]

#: Graphs with more nodes than this open with their regions collapsed.
COLLAPSE_AT = 1500
#: Regions larger than this are cut into parts of consecutive layers (a loop body traced many times is one
#: source line: its parts are a few iterations each).
REGION_MAX = 200

_HERE = os.path.dirname(os.path.abspath(__file__))


def _asset(name: str) -> str:
    with open(os.path.join(_HERE, name), encoding="utf-8") as f:
        return f.read()


_LOOP_OPS = ("scan", "while", "cond")


def _loop_key(n: Node) -> Any:
    """The sibling group of a loop node (the output leaves of one loop share it), or None.

    A scan that saves residuals for the backward sweep extends the forward loop (`Region.root`) with
    extra ys; backends run both as one loop, and so they are drawn as one.
    """
    region = n.attr("region") if n.op.name in _LOOP_OPS else None
    if region is None:
        return None
    return n.op.name, n.inputs, id(getattr(region, "root", region)), n.tag


class _Flat:
    """A graph with its loop bodies inlined: one entry per drawn node, in a topological order.

    Entry p is `nodes[p]` in container `ctx[p]` (0: the graph itself; L >= 1: the body of loop L). The
    sibling nodes of a loop (its output leaves) belong to the loop's container; its body's inputs are
    drawn reading the loop node's inputs and the loop nodes reading the body's outputs (`ins`), while
    `args` keeps the real inputs of those entries. `port` marks the carry inputs/outputs.
    """

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.ctx: list[int] = []
        self.ids: list[Any] = []
        self.ins: list[list[int]] = []
        self.args: dict[int, list[int]] = {}
        self.port: dict[int, str] = {}
        self.loops: list[dict] = [{}]  # index = container; loops[0] is the graph itself
        self.level: list[int] = []  # the graph namespace (container) each entry's inputs are looked up in
        self.pos: dict[tuple[int, Node], int] = {}

    def add(self, n: Node, ctx: int, level: int, disp: Any, ins: list[int]) -> int:
        p = len(self.nodes)
        self.nodes.append(n)
        self.ctx.append(ctx)
        self.level.append(level)
        self.ids.append(disp)
        self.ins.append(ins)
        self.pos[(level, n)] = p
        return p

    def mark(self, p: int, label: str) -> None:
        self.port[p] = f"{self.port[p]}, {label}" if p in self.port else label

    def walk(self, order: list[Node], level: int, ids: dict[Node, int], prefix: str, skip: set[Node]) -> None:
        """Add the nodes of one graph (`order`, numbered by `ids`) to container `level`, loops inlined."""
        groups: dict[Any, list[Node]] = {}
        for n in order:
            k = _loop_key(n)
            if k is not None:
                groups.setdefault(k, []).append(n)
        outs: dict[Any, Any] = {}
        for n in order:
            if n in skip or (level, n) in self.pos:
                continue
            disp = f"{prefix}{ids[n]}" if prefix else ids[n]
            k = _loop_key(n)
            real = [self.pos[(level, x)] for x in n.inputs]
            if k is None:
                self.add(n, level, level, disp, real)
                continue
            if k not in outs:
                outs[k] = self.loop(groups[k], level, f"{disp}/")
            lp, out_of = outs[k]
            p = self.add(n, lp, level, disp, out_of(n))
            self.args[p] = real
            self.loops[lp]["sibs"].append(p)
            self.mark(p, _out_port(n))

    def loop(self, sibs: list[Node], level: int, prefix: str) -> tuple[int, Any]:
        """Inline the body of the loop whose output leaves are `sibs`; (container, leaf -> drawn inputs)."""
        first = max(sibs, key=lambda n: len(n.attr("region").subgraphs()[0].outputs))  # a saver has them all
        region = first.attr("region")
        lp = len(self.loops)
        self.loops.append({"op": first.op.name, "region": region, "parent": level, "sibs": [], "body": []})
        subs = list(region.subgraphs())
        op = first.op.name
        if op == "while":
            names, outer = ["c", ""], list(first.inputs)
        elif op == "cond":
            names, outer = [f"b{k}." for k in range(len(subs))], list(first.inputs[1:])
        else:
            names, outer = [""], list(first.inputs)
        outer_pos = [self.pos[(level, x)] for x in outer]
        start = len(self.nodes)
        for sub, name in zip(subs, names):
            ids = node_ids(sub)
            for i, x in enumerate(sub.inputs):
                if (lp, x) in self.pos:
                    continue
                p = self.add(x, lp, lp, f"{prefix}{name}{ids[x]}", [outer_pos[i]] if i < len(outer_pos) else [])
                self.args[p] = []
                self.mark(p, _in_port(op, region, i))
            self.walk(list(ids), lp, ids, prefix + name, set(sub.inputs))
        self.loops[lp]["body"] = [p for p in range(start, len(self.nodes)) if self.ctx[p] == lp]
        for b, (sub, name) in enumerate(zip(subs, names)):
            for j, o in enumerate(sub.outputs):
                self.mark(self.pos[(lp, o)], _body_out_port(op, region, b, j))

        def out_of(n: Node) -> list[int]:
            k = n.attr("index")
            if op == "cond":
                return [self.pos[(level, n.inputs[0])]] + [self.pos[(lp, g.outputs[k])] for g in subs]
            if op == "while":
                return [self.pos[(lp, region.body.outputs[k])], self.pos[(lp, region.cond.outputs[0])]]
            return [self.pos[(lp, region.body.outputs[k])]]

        return lp, out_of


def _in_port(op: str, region: Any, i: int) -> str:
    if op == "scan":
        if i < region.nc:
            return f"const {i} (closed over)"
        if i < region.nc + region.nk:
            return f"carry in {i - region.nc}"
        return f"x {i - region.nc - region.nk} (one step's slice)"
    if op == "while":
        return f"carry in {i}" if i < region.nk else f"captured {i - region.nk}"
    return f"operand {i}"


def _body_out_port(op: str, region: Any, branch: int, j: int) -> str:
    if op == "scan":
        return f"carry out {j}" if j < region.nk else f"y {j - region.nk} (per step)"
    if op == "while":
        return "condition" if branch == 0 else f"carry out {j}"
    return f"branch {branch} output {j}"


def _out_port(n: Node) -> str:
    k, region = n.attr("index"), n.attr("region")
    if n.op.name == "scan":
        return f"final carry {k}" if k < region.nk else f"ys {k - region.nk} (stacked over {region.length} steps)"
    if n.op.name == "while":
        return f"final carry {k}"
    return f"output {k} of the taken branch"


def _loop_label(loop: dict) -> str:
    region, op = loop["region"], loop["op"]
    name = getattr(region, "name", op)
    if op == "scan":
        what = f"{region.length} steps{', reverse' if region.reverse else ''}"
    elif op == "while":
        what = "steps known at run time"
    else:
        what = f"{len(region.subgraphs())} branches"
    return f"{name if name.startswith(op) else op + ' ' + name} · {what} · {len(loop['body'])} body nodes"


def _groups(flat: _Flat, ctx: int, where: dict[Node, int], y: list[float]) -> list[list[int]]:
    """The regions of container `ctx`: connected entries that share a key, cut to `REGION_MAX`.

    The key is the entry's kernel when `where` has it, else (role, source line). Inputs, the body's
    inputs and loop nodes are never in one; regions of one node are dropped; a region of more than
    `REGION_MAX` nodes is cut into parts of consecutive layers (`y`: each entry's layer position).
    """
    ps = [p for p in range(len(flat.nodes)) if flat.ctx[p] == ctx and flat.level[p] == ctx and p not in flat.args]
    inputs = set(flat.loops[0].get("inputs", ())) if ctx == 0 else set()
    parent = {p: p for p in ps}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def key(n: Node) -> Any:
        k = where.get(n)
        if k is not None:
            return ("kernel", k)
        m = meta(n)
        return (m.role, m.location)

    keys = {p: None if flat.nodes[p] in inputs else key(flat.nodes[p]) for p in ps}
    for p in ps:
        if keys[p] is None:
            continue
        for j in flat.ins[p]:
            if keys.get(j, None) == keys[p]:
                a, b = find(p), find(j)
                if a != b:
                    parent[a] = b
    groups: dict[int, list[int]] = {}
    for p in ps:
        if keys[p] is not None:
            groups.setdefault(find(p), []).append(p)
    members: list[list[int]] = []
    for ms in groups.values():
        if len(ms) < 2:
            continue
        parts = [ms]
        if len(ms) > REGION_MAX:  # cut in layer order (members are in topological order already)
            srt = sorted(ms, key=lambda i: (y[i], i))
            k = -(-len(ms) // REGION_MAX)
            size = -(-len(ms) // k)
            parts = [sorted(srt[a:a + size]) for a in range(0, len(srt), size)]
        members.extend(part for part in parts if len(part) >= 2)
    return members


def _positions(flat: _Flat, graph: Graph, order: list[Node]) -> list[tuple[float, float]]:
    """Each entry's place: the graph's layered layout, each loop body laid out alone above its loop nodes."""
    top = layered_layout(graph, order)
    xy: list[tuple[float, float]] = [(0.0, 0.0)] * len(flat.nodes)
    for p, n in enumerate(flat.nodes):
        if flat.level[p] == 0:
            xy[p] = top[n]
    for lp in range(1, len(flat.loops)):
        loop = flat.loops[lp]
        body = loop["body"]
        if not body:
            continue
        at = {p: i for i, p in enumerate(body)}
        ins = [[at[j] for j in flat.ins[p] if j in at] for p in body]
        local = layered_positions(ins, {at[p] for p in body if p in flat.args})
        sx = sum(xy[p][0] for p in loop["sibs"]) / len(loop["sibs"])
        sy = min(xy[p][1] for p in loop["sibs"])
        mx = sum(x for x, _ in local) / len(local)
        my = max(y for _, y in local) + LAYER_GAP
        for p, (x, y_) in zip(body, local):
            xy[p] = (x - mx + sx, y_ - my + sy)
    return xy


def _loc(n: Node) -> tuple[str | None, str | None]:
    loc = meta(n).location
    if loc is None:
        return None, None
    return f"{os.path.basename(loc.filename)}:{loc.lineno} (in {loc.function})", str(loc)


def html_data(graph: Graph, kernels: Iterable[Any] | None = None, collapse: bool | None = None) -> dict:
    """The JSON-ready description of `graph` that `to_html` embeds (one entry per drawn node in each column).

    The bodies of `scan`, `while` and `cond` nodes (sg.scan, fori_loop, while_loop, cond/switch, and
    the loops `compile(roll=True)` makes) are inlined after the graph's own nodes' inputs: their
    entries are numbered `%ID/k` (the loop node's id, then the body's own numbering; `c` for a while
    loop's condition, `bK.` for branch K), and each loop is a region that opens collapsed.

    Keys: name, n (entries), n_graph (the graph's own nodes), ids (the `dump` numbers, position -> id),
    op, attrs, shape, dtype, role (indices into `roles`), loc and file (indices into `locs`/`files`, -1
    for none), origin (index into `ops` or -1), tag, ins (drawn input positions), args (position -> the
    real inputs, where they differ: loop nodes and loop bodies' inputs), port (position -> carry
    input/output label), x, y, region (the innermost region, -1 for none), regions (label, role, count,
    ops, parent region or -1, loop: null or {op, name, steps, body}), inputs, outputs, names (position
    -> input name), roles (name, fill, border, dashed, count), node_w, node_h, start_collapsed.
    """
    ids = node_ids(graph)
    order = list(ids)
    flat = _Flat()
    flat.loops[0] = {"inputs": list(graph.inputs)}
    flat.walk(order, 0, ids, "", set())
    where: dict[Node, int] = {}
    ktitles: list[str] = []
    if kernels is not None:
        klist, where = _kernel_sets(graph, kernels, ids)
        ktitles = [t for t, _ in klist]
    xy = _positions(flat, graph, order)
    ys = [p[1] for p in xy]
    # regions: each container's groups (role + line, or kernels), then one per loop (its parent: the loop around)
    members: list[list[int]] = []
    group_ctx: list[int] = []
    for c in range(len(flat.loops)):
        for ms in _groups(flat, c, where if c == 0 else {}, ys):
            members.append(ms)
            group_ctx.append(c)
    ngroups = len(members)
    loop_region = {lp: ngroups + lp - 1 for lp in range(1, len(flat.loops))}
    for lp in range(1, len(flat.loops)):
        members.append([p for p in range(len(flat.nodes)) if flat.ctx[p] == lp])
    parent = [loop_region.get(c, -1) for c in group_ctx] + [
        loop_region.get(flat.loops[lp]["parent"], -1) for lp in range(1, len(flat.loops))]
    region = [loop_region.get(c, -1) for c in flat.ctx]
    for r, ms in enumerate(members[:ngroups]):
        for p in ms:
            region[p] = r

    tables: dict[str, dict[str, int]] = {"ops": {}, "dtypes": {}, "roles": {}, "locs": {}, "files": {}}

    def ix(table: str, v: str | None) -> int:
        if v is None:
            return -1
        t = tables[table]
        k = t.get(v)
        if k is None:
            k = t[v] = len(t)
        return k

    col, names = _columns(flat, xy, ix)
    locs = list(tables["locs"])
    regions = []
    nparts: Counter = Counter()
    part_no: list[int] = []
    inside: dict[int, list[int]] = {k: [] for k in range(ngroups, len(members))}  # a loop's nodes, nested too
    for p in range(len(flat.nodes)):
        r = region[p]
        while r >= 0:
            if r >= ngroups:
                inside[r].append(p)
            r = parent[r]
    for ms, c in zip(members, group_ctx):
        kk = (c, meta(flat.nodes[ms[0]]).role, col["loc"][ms[0]], where.get(flat.nodes[ms[0]]))
        nparts[kk] += 1
        part_no.append(nparts[kk])
    for k, ms in enumerate(members):
        first = flat.nodes[ms[0]]
        r = meta(first).role
        loop = None
        if k >= ngroups:
            lp = k - ngroups + 1
            info = flat.loops[lp]
            first = flat.nodes[info["sibs"][0]]
            r = meta(first).role
            label = _loop_label(info)
            ms = inside[k]
            loop = {"op": info["op"], "name": getattr(info["region"], "name", info["op"]),
                    "steps": getattr(info["region"], "length", None), "body": len(info["body"]),
                    "sibs": info["sibs"]}
        elif where.get(first) is not None:
            label = ktitles[where[first]]
        else:
            li = col["loc"][ms[0]]
            label = f"{r} · {locs[li] if li >= 0 else 'no source line'}"
            kk = (group_ctx[k], r, li, where.get(first))
            if nparts[kk] > 1:
                label += f" · part {part_no[k]}/{nparts[kk]}"
        ops = Counter(flat.nodes[i].op.name for i in ms)
        regions.append({"label": label, "role": ix("roles", r), "count": len(ms),
                        "ops": [[o, c] for o, c in ops.most_common(6)], "parent": parent[k], "loop": loop})
    roles = list(tables["roles"])
    counts = role_counts(graph)
    role_info = [_role_entry(r, counts.get(r, 0)) for r in roles]
    top = {n: flat.pos[(0, n)] for n in order}
    return {
        "name": graph.name, "n": len(flat.nodes), "n_graph": len(order), "ids": flat.ids,
        **col, "ins": flat.ins, "args": {str(p): v for p, v in flat.args.items()},
        "port": {str(p): v for p, v in flat.port.items()}, "region": region, "regions": regions,
        "inputs": [top[x] for x in graph.inputs], "outputs": [top[o] for o in graph.outputs],
        "names": names, "ops": list(tables["ops"]), "dtypes": list(tables["dtypes"]), "roles": role_info,
        "locs": locs, "files": list(tables["files"]), "node_w": NODE_W, "node_h": NODE_H,
        "start_collapsed": len(order) > COLLAPSE_AT if collapse is None else bool(collapse),
    }


def _json_for_script(obj: Any) -> str:
    """JSON that is safe inside a <script> element (no `</script>`, no `<!--`)."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace(
        "\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def to_html(graph: Graph, path: str | os.PathLike | None = None, *, kernels: Iterable[Any] | None = None,
            collapse: bool | None = None, title: str | None = None) -> str:
    """An interactive, offline viewer of the graph: one HTML file with the data and the script inside.

    Open it in any browser (no network, no Graphviz): drag to pan, wheel to
    zoom, type in the search box (op, input name, `file.py:12`, `%17`), click
    a node for its op, attrs, shape, dtype, role, source line, the forward op
    whose derivative it is (backward and tangent nodes), its inputs and
    readers. Regions (connected nodes of one role and source line, or the
    fused kernels given in `kernels`) collapse into one box and expand on a
    double click; the role chips collapse or expand every region of a role.
    Graphs of more than `COLLAPSE_AT` nodes open collapsed. The bodies of
    loops and branches (`scan`, `while` and `cond` nodes) are in the page too,
    each loop a region that opens collapsed and expands into its body graph,
    with the carry inputs and outputs marked. The URL fragment
    drives the page too (`#search=mul&select=12&expand=all`; see
    docs/visualization.md), which is how the tests use it.

    Args:
        graph: the graph.
        path: where to write the file (None: only return the text).
        kernels: fused kernels (as for `to_dot`), used as the regions.
        collapse: open with regions collapsed (default: when the graph has more than `COLLAPSE_AT` nodes).
        title: the page title (default `symgraph: <graph name> (<N> nodes)`).

    Returns:
        The HTML text (also written to `path` when given).
    """
    data = html_data(graph, kernels=kernels, collapse=collapse)
    title = title or f"symgraph: {graph.name} ({data['n_graph']} nodes)"
    text = (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<meta name=\"generator\" content=\"symgraph\">\n<title>{_escape(title)}</title>\n"
        f"<style>\n{_asset('viewer.css')}</style>\n</head>\n<body>\n"
        "<div id=\"sg-bar\">"
        f"<strong id=\"sg-name\">{_escape(graph.name)}</strong>"
        "<input id=\"sg-search\" type=\"search\" placeholder=\"search: op, input name, file.py:12, %17\" "
        "autocomplete=\"off\">"
        "<span id=\"sg-search-count\"></span>"
        "<button id=\"sg-fit\" title=\"fit the graph to the window (f)\">fit</button>"
        "<button id=\"sg-expand-all\">expand all</button>"
        "<button id=\"sg-collapse-all\">collapse all</button>"
        "<span id=\"sg-roles\"></span>"
        "<span id=\"sg-count\"></span>"
        "</div>\n<div id=\"sg-main\"><canvas id=\"sg-canvas\"></canvas>"
        "<div id=\"sg-side\"><div id=\"sg-details\"><p class=\"sg-hint\">Click a node (or a region box) for its "
        "details. Drag to pan, wheel to zoom, double-click a region to expand it.</p></div>"
        "<div id=\"sg-results\"></div></div></div>\n"
        f"<script type=\"application/json\" id=\"sg-data\">{_json_for_script(data)}</script>\n"
        f"<script>\n{_asset('viewer.js')}</script>\n</body>\n</html>\n"
    )
    if path is not None:
        write_atomically(path, lambda f: f.write(text.encode("utf-8")))
    return text


def _columns(flat: "_Flat", xy: list, ix: Any) -> tuple[dict[str, list], dict[int, str]]:
    """`html_data`'s per-node columns (op, attrs, shape, dtype, role, loc, file, origin, tag, x, y), one
    entry per drawn node in `flat` order, with table values as indices through `ix(table, value)`; and
    the input nodes' names by position."""
    tags = _TagNames()
    col: dict[str, list] = {k: [] for k in ("op", "attrs", "shape", "dtype", "role", "loc", "file", "origin", "tag",
                                            "x", "y")}
    names: dict[int, str] = {}
    for p, n in enumerate(flat.nodes):
        m = meta(n)
        col["op"].append(ix("ops", n.op.name))
        a = format_attrs(n)
        col["attrs"].append(a if len(a) <= 200 else a[:199] + "…")
        col["shape"].append(list(n.shape))
        col["dtype"].append(ix("dtypes", str(n.dtype)))
        col["role"].append(ix("roles", m.role))
        short, full = _loc(n)
        col["loc"].append(ix("locs", short))
        col["file"].append(ix("files", full))
        col["origin"].append(ix("ops", m.origin))
        col["tag"].append(None if n.tag is None or n.op.name == "input" else tags(n.tag))
        x, y = xy[p]
        col["x"].append(round(x, 1))
        col["y"].append(round(y, 1))
        if n.op.name == "input":
            names[p] = str(n.attr("name", "arg"))
    return col, names


def _role_entry(role: str, count: int) -> dict:
    """The legend entry of one role: its colours, line style and description (`ROLE_STYLES`), and count."""
    fill, border, style, text = ROLE_STYLES.get(role, _OTHER_STYLE)
    return {"name": role, "fill": fill, "border": border, "dashed": "dashed" in style or "dotted" in style,
            "text": text if role in ROLE_STYLES else f"{role} (role)", "count": count}
