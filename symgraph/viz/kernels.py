"""Fused kernels in a drawing: which cluster each node is drawn in, including the nodes computed inline."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..ir import Graph, Node


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
