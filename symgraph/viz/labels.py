"""Node numbering and labels shared by every view of a graph: ids, attrs, types, source lines, tags, roles.

Nothing here depends on the process (no creation counters, no memory
addresses), so every dump and drawing built from it is the same in every run.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

import numpy as np

from ..ir import Graph, Node, meta

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
