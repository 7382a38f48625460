"""Graph dumps: a text listing (like a jaxpr) and conversion to networkx.

`dump` numbers nodes in topological order (%0, %1, ...), so the listing is
stable between runs and can be diffed.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .ir import Graph, Node, meta

__all__ = ["dump", "to_networkx", "node_label", "format_attrs"]


def _fmt_value(v: Any) -> str:
    if isinstance(v, np.dtype):
        return str(v)
    if isinstance(v, tuple):
        return "(" + ",".join(_fmt_value(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v) if not isinstance(v, str) else v


def format_attrs(n: Node) -> str:
    """The node's attrs as `k=v` pairs (inputs' shape/dtype attrs omitted)."""
    skip = {"shape", "dtype", "index"} if n.op.name == "input" else set()
    return " ".join(f"{k}={_fmt_value(v)}" for k, v in n.attrs if k not in skip)


def _type_str(n: Node) -> str:
    return f"{n.dtype}[{','.join(map(str, n.shape))}]"


def node_label(n: Node) -> str:
    """A short label: op name and the distinguishing attrs."""
    a = format_attrs(n)
    return f"{n.op.name}{' ' + a if a else ''}"


def dump(graph: Graph, show_location: bool = True) -> str:
    """A text listing of the graph, one node per line.

    Each line: `%id = op attrs (inputs) : dtype[shape]  # role, file:line`.

    Args:
        graph: the graph.
        show_location: append the user's source line of each node.

    Returns:
        The listing (str), starting with the input signature and ending with the outputs.
    """
    order = graph.toposort()
    ids = {n: i for i, n in enumerate(order)}
    lines = [f"graph {graph.name}(" + ", ".join(f"%{ids[x]}: {_type_str(x)}" for x in graph.inputs) + ") {"]
    for n in order:
        if n.op.name == "input":
            continue
        m = meta(n)
        ins = ", ".join(f"%{ids[x]}" for x in n.inputs)
        line = f"  %{ids[n]} = {node_label(n)}({ins}) : {_type_str(n)}"
        notes = []
        if m.role != "forward":
            notes.append(m.role)
        if n.tag is not None and n.op.name != "input":
            notes.append(f"tag={n.tag!r}")
        if show_location and m.location is not None:
            notes.append(f"{os.path.basename(m.location.filename)}:{m.location.lineno}")
        if notes:
            line += "  # " + ", ".join(notes)
        lines.append(line)
    lines.append("  return " + ", ".join(f"%{ids[o]}" for o in graph.outputs))
    lines.append("}")
    return "\n".join(lines)


def to_networkx(graph: Graph) -> Any:
    """A networkx.DiGraph: one vertex per node (key: position in topological order).

    Vertex attributes: op, attrs (str), shape, dtype (str), role, location (str
    or None), is_input, is_output. Edge attributes: position (input slot).
    """
    import networkx as nx

    order = graph.toposort()
    ids = {n: i for i, n in enumerate(order)}
    outs = set(graph.outputs)
    g = nx.MultiDiGraph() if any(len(set(n.inputs)) != len(n.inputs) for n in order) else nx.DiGraph()
    for n in order:
        m = meta(n)
        g.add_node(ids[n], op=n.op.name, attrs=format_attrs(n), shape=n.shape, dtype=str(n.dtype), role=m.role,
                   location=None if m.location is None else str(m.location), is_input=n.op.name == "input",
                   is_output=n in outs, tag=None if n.tag is None else repr(n.tag))
    for n in order:
        for pos, x in enumerate(n.inputs):
            g.add_edge(ids[x], ids[n], position=pos)
    return g
