"""Summarizing large graphs for drawing: chains merged into groups, depth bands, long edges.

Every group stands for a convex set of nodes, so the drawn (quotient) graph
is still acyclic and its edges are real dependencies.
"""

from __future__ import annotations

from collections import Counter

from ..ir import Graph, Node, meta

#: Graphs with more nodes than this are drawn with elementwise chains summarized.
COLLAPSE_THRESHOLD = 2000

# Along any edge the role never goes back in this order (forward values feed
# recomputations, both feed the backward sweep); summarizing relies on it.
_ROLE_RANK = {"forward": 0, "recomputed": 1, "backward": 2, "tangent": 2}


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


def _summary_groups(graph: Graph, order: list[Node], kernel_of: dict[Node, int], drawn: list[Node], *,
                    min_group: int, max_boxes: int, band_target: int) -> tuple[dict[Node, list[Node]], bool]:
    """The groups of a summarized drawing: chains, or depth bands when chains leave too many boxes.

    Args:
        graph: the graph.
        order: its nodes in numbering order.
        kernel_of: node -> kernel index (a group never spans two kernels).
        drawn: the nodes drawn (constants may be hidden), in numbering order.
        min_group: smallest chain group (`_collapse_groups`).
        max_boxes: when chains leave more boxes than this, cut `drawn` into
            depth bands instead (`_band_groups`).
        band_target: about how many bands.

    Returns:
        (dict representative -> members, whether the groups are depth bands).
    """
    readers: dict[Node, list[Node]] = {n: [] for n in order}
    for n in order:
        for x in n.inputs:
            readers[x].append(n)
    groups = _collapse_groups(graph, order, readers, kernel_of, min_group)
    in_groups = sum(len(m) for m in groups.values())
    boxes = len(drawn) - in_groups + len(groups)
    if boxes > max_boxes:
        return _band_groups(graph, drawn, kernel_of, band_target), True
    return groups, False


def _long_edges(keys: list[str], edges: list[tuple[str, str]], max_span: int) -> set[int]:
    """Indices of the edges of a drawn DAG that span more than `max_span` ranks (longest-path depth)."""
    depth = _ranks(keys, edges)
    return {i for i, (a, b) in enumerate(edges) if depth[b] - depth[a] > max_span}
