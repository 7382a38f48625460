"""Graph dumps: a text listing (like a jaxpr), Graphviz DOT, rendered pictures, networkx.

`dump` and `to_dot` number nodes the same way (%0, %1, ...: the graph's inputs
first, then every other node in topological order), and print nothing that
depends on the process (no creation counters, no memory addresses), so dumps
of the same program are identical between runs and can be diffed.
`dump_stage` writes both for every pipeline stage when `SYMGRAPH_DUMP=DIR` is
set in the environment.

Importing this package installs `Graph.dump`, `Graph.to_dot`, `Graph.render`
and `Graph.to_networkx`.
"""

from __future__ import annotations

from ..ir import install_graph_methods
from .dot import (
    COLLAPSE_THRESHOLD,
    ROLE_STYLES,
    dump,
    dump_stage,
    format_attrs,
    node_ids,
    node_label,
    render,
    render_bytes,
    role_counts,
    run_dot,
    to_dot,
    to_networkx,
)

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

install_graph_methods(dump=dump, to_dot=to_dot, render=render, to_networkx=to_networkx)  # g.dump(), ...
