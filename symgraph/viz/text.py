"""The text listing of a graph (`dump`), one node per line, like a jaxpr."""

from __future__ import annotations

from ..ir import Graph, meta
from .labels import _location_str, _op_with_attrs, _TagNames, _type_str, node_ids

__all__ = ["dump"]


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
