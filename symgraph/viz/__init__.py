"""Graph dumps: a text listing (like a jaxpr), Graphviz DOT, rendered pictures, networkx.

`dump` and `to_dot` number nodes the same way (%0, %1, ...: the graph's inputs
first, then every other node in topological order), and print nothing that
depends on the process (no creation counters, no memory addresses), so dumps
of the same program are identical between runs and can be diffed.
`dump_stage` writes both for every pipeline stage when `SYMGRAPH_DUMP=DIR` is
set in the environment.

The modules, one job each: `labels` (numbering and labels), `text` (`dump`),
`dot` (`to_dot`), `style` (colours per role, DOT quoting, the legend),
`kernels` (kernel clusters), `summarize` (large graphs), `render` (Graphviz),
`stages` (`SYMGRAPH_DUMP`), `export` (networkx), `html` (`to_html`, the
offline interactive viewer; `viewer.js`/`viewer.css` are its script and
style), `layout` (its layered layout) and `compare` (stages side by side).

Importing this package installs `Graph.dump`, `Graph.to_dot`, `Graph.render`,
`Graph.to_networkx` and `Graph.to_html`.
"""

from __future__ import annotations

from ..ir import install_graph_methods
from .dot import to_dot
from .export import to_networkx
from .compare import compare_html
from .html import to_html
from .labels import format_attrs, node_ids, node_label, role_counts
from .render import render, render_bytes, run_dot  # noqa: F401  (render_bytes, run_dot: public, not in __all__)
from .stages import dump_stage
from .style import ROLE_STYLES
from .summarize import COLLAPSE_THRESHOLD
from .text import dump

__all__ = [
    "dump",
    "to_dot",
    "render",
    "dump_stage",
    "to_networkx",
    "to_html",
    "compare_html",
    "node_ids",
    "node_label",
    "format_attrs",
    "role_counts",
    "COLLAPSE_THRESHOLD",
    "ROLE_STYLES",
]

install_graph_methods(dump=dump, to_dot=to_dot, render=render, to_networkx=to_networkx, to_html=to_html)  # g.dump(), ...
