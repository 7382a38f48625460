"""Export of a graph to networkx (`to_networkx`), with every node's data as vertex attributes."""

from __future__ import annotations

from typing import Any

from ..ir import Graph, meta
from .labels import _TagNames, format_attrs, node_ids


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
