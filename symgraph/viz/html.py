"""`to_html`: one self-contained HTML file that explores a graph in a browser, offline, with no system program.

The page embeds the graph as JSON (every node: op, attrs, shape, dtype, role,
source line, the forward op of a derivative node, inputs, position) and a
small dependency-free script (`viewer.js`, `viewer.css` beside this module,
inlined) that draws it on a canvas: pan (drag), zoom (wheel), search by op,
input name, source line or %id, click a node for its details with links to
its inputs and readers (fan-in and fan-out highlighted), and collapse or
expand regions. A region is a connected set of nodes of the same role and
source line (the backward nodes of one line, say), or a fused kernel when
`kernels=` is given; big graphs open with every region collapsed. The layout
is computed here (`symgraph.viz.layout`), not in the browser.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any, Iterable

from ..ir import Graph, Node, meta
from .kernels import _kernel_sets
from .labels import _TagNames, format_attrs, node_ids, role_counts
from .layout import NODE_H, NODE_W, layered_layout
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


def _regions(order: list[Node], graph: Graph, where: dict[Node, int],
             y: list[float]) -> tuple[list[int], list[list[int]]]:
    """Region of each node (index into the region list, -1 for none) and each region's members (positions).

    A region is a connected component of the nodes sharing a key: their kernel
    when `where` has them, else (role, source line). Inputs are never in one;
    regions of one node are dropped; a region of more than `REGION_MAX` nodes
    is cut into parts of consecutive layers (`y`: each node's layer position).
    """
    pos = {n: i for i, n in enumerate(order)}
    inputs = set(graph.inputs)
    parent = list(range(len(order)))

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

    keys = [None if n in inputs else key(n) for n in order]
    for i, n in enumerate(order):
        if keys[i] is None:
            continue
        for x in n.inputs:
            j = pos[x]
            if keys[j] == keys[i]:
                a, b = find(i), find(j)
                if a != b:
                    parent[a] = b
    groups: dict[int, list[int]] = {}
    for i in range(len(order)):
        if keys[i] is not None:
            groups.setdefault(find(i), []).append(i)
    region = [-1] * len(order)
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
        for part in parts:
            if len(part) < 2:
                continue
            for i in part:
                region[i] = len(members)
            members.append(part)
    return region, members


def _loc(n: Node) -> tuple[str | None, str | None]:
    loc = meta(n).location
    if loc is None:
        return None, None
    return f"{os.path.basename(loc.filename)}:{loc.lineno} (in {loc.function})", str(loc)


def html_data(graph: Graph, kernels: Iterable[Any] | None = None, collapse: bool | None = None) -> dict:
    """The JSON-ready description of `graph` that `to_html` embeds (one entry per node in each column).

    Keys: name, n (nodes), ids (the `dump` numbers, position -> %id), op, attrs, shape, dtype, role
    (indices into `roles`), loc and file (indices into `locs`/`files`, -1 for none), origin (index into
    `ops` or -1), tag, ins (input positions), x, y, region (-1 for none), regions (label, role, count,
    ops), inputs, outputs, names (position -> input name), roles (name, fill, border, dashed, count),
    node_w, node_h, start_collapsed.
    """
    ids = node_ids(graph)
    order = list(ids)
    pos = {n: i for i, n in enumerate(order)}
    where: dict[Node, int] = {}
    ktitles: list[str] = []
    if kernels is not None:
        klist, where = _kernel_sets(graph, kernels, ids)
        ktitles = [t for t, _ in klist]
    xy = layered_layout(graph, order)
    region, members = _regions(order, graph, where, [xy[n][1] for n in order])

    tables: dict[str, dict[str, int]] = {"ops": {}, "dtypes": {}, "roles": {}, "locs": {}, "files": {}}

    def ix(table: str, v: str | None) -> int:
        if v is None:
            return -1
        t = tables[table]
        k = t.get(v)
        if k is None:
            k = t[v] = len(t)
        return k

    tags = _TagNames()
    col: dict[str, list] = {k: [] for k in ("op", "attrs", "shape", "dtype", "role", "loc", "file", "origin", "tag",
                                            "ins", "x", "y")}
    names: dict[int, str] = {}
    for n in order:
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
        col["ins"].append([pos[x] for x in n.inputs])
        x, y = xy[n]
        col["x"].append(round(x, 1))
        col["y"].append(round(y, 1))
        if n.op.name == "input":
            names[pos[n]] = str(n.attr("name", "arg"))
    locs = list(tables["locs"])
    roles = list(tables["roles"])
    regions = []
    nparts: Counter = Counter()
    part_no: list[int] = []
    for ms in members:
        kk = (meta(order[ms[0]]).role, col["loc"][ms[0]], where.get(order[ms[0]]))
        nparts[kk] += 1
        part_no.append(nparts[kk])
    for k, ms in enumerate(members):
        first = order[ms[0]]
        ops = Counter(order[i].op.name for i in ms)
        r = meta(first).role
        if where.get(first) is not None:
            label = ktitles[where[first]]
        else:
            li = col["loc"][ms[0]]
            label = f"{r} · {locs[li] if li >= 0 else 'no source line'}"
        kk = (r, col["loc"][ms[0]], where.get(first))
        if nparts[kk] > 1:
            label += f" · part {part_no[k]}/{nparts[kk]}"
        regions.append({"label": label, "role": ix("roles", r), "count": len(ms),
                        "ops": [[o, c] for o, c in ops.most_common(6)]})
    roles = list(tables["roles"])
    counts = role_counts(graph)
    role_info = []
    for r in roles:
        fill, border, style, text = ROLE_STYLES.get(r, _OTHER_STYLE)
        role_info.append({"name": r, "fill": fill, "border": border, "dashed": "dashed" in style or "dotted" in style,
                          "text": text if r in ROLE_STYLES else f"{r} (role)", "count": counts.get(r, 0)})
    return {
        "name": graph.name, "n": len(order), "ids": [ids[n] for n in order],
        **col, "region": region, "regions": regions,
        "inputs": [pos[x] for x in graph.inputs], "outputs": [pos[o] for o in graph.outputs],
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
    Graphs of more than `COLLAPSE_AT` nodes open collapsed. The URL fragment
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
    title = title or f"symgraph: {graph.name} ({data['n']} nodes)"
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
        with open(os.fspath(path), "w", encoding="utf-8") as f:
            f.write(text)
    return text
