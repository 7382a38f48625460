"""Simplification: rebuild a graph bottom-up through rewrite rules (minimal version).

Rebuilding re-interns every node in a fresh builder (CSE); `copy` nodes made
for nested transformations are removed; constant subgraphs are folded.
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..ir import Builder, Graph, Node, meta, role, source_location, toposort

__all__ = ["simplify"]

_FOLD_LIMIT = 1 << 16  # elements: larger constant results stay computed at run time


def simplify(graph: Graph) -> Graph:
    """Graph -> Graph: CSE, copy removal, constant folding, dead code elimination.

    Returns:
        A new graph computing the same values (its nodes live in a new builder).
    """
    new: dict[Node, Node] = {}
    with Builder():
        for n in toposort(graph.outputs + [x for x in graph.inputs]):
            if n.op.name == "input":
                new[n] = n
                continue
            ins = [new[x] for x in n.inputs]
            if n.op.name == "copy" and n.tag is not None:
                new[n] = ins[0]
                continue
            m = meta(n)
            with source_location(m.location), role(m.role):
                if ins and all(x.op.name == "constant" for x in ins) and n.op.differentiable and n.size <= _FOLD_LIMIT \
                        and n.op.name not in ("random_uniform",):
                    with np.errstate(all="ignore"):
                        v = n.op.impl(*[x.attr("value").array for x in ins], **n.params)
                    new[n] = L.constant(np.asarray(v, dtype=n.dtype))
                else:
                    from ..ir import current_builder

                    new[n] = current_builder().make(n.op, ins, n.attrs, n.tag)
    return Graph(graph.inputs, [new[o] for o in graph.outputs], graph.in_tree, graph.out_tree, name=graph.name)
