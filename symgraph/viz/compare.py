"""`compare_html`: several stages of one compile (traced, simplified, checkpointed, ...) side by side in one HTML file.

The page holds one `to_html` viewer per stage and shows two of them next to
each other, each pane with its own stage selector; like the single viewer it
is one self-contained file that needs no network and no system program.
The stages of `sg.compile` are `sg.trace`, `sg.simplify` and
`sg.apply_checkpoint` applied in turn (docs/visualization.md).
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from ..files import write_atomically
from ..ir import Graph
from .html import _escape, _json_for_script, to_html

__all__ = ["compare_html"]

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="generator" content="symgraph">
<title>{title}</title>
<style>
html, body {{ margin: 0; height: 100%; font: 13px system-ui, sans-serif; }}
body {{ display: flex; flex-direction: column; }}
#sg-panes {{ flex: 1; display: flex; min-height: 0; }}
.sg-pane {{ flex: 1; display: flex; flex-direction: column; min-width: 0; border-right: 2px solid #bbb; }}
.sg-pane header {{ padding: 4px 8px; background: #e9e9e9; display: flex; gap: 8px; align-items: center; }}
.sg-pane iframe {{ flex: 1; border: 0; width: 100%; }}
</style>
</head>
<body>
<div id="sg-panes">{panes}</div>
<script type="application/json" id="sg-stages">{data}</script>
<script>
(function () {{
  "use strict";
  var S = JSON.parse(document.getElementById("sg-stages").textContent);
  document.querySelectorAll(".sg-pane").forEach(function (pane, k) {{
    var sel = pane.querySelector("select"), frame = pane.querySelector("iframe"), info = pane.querySelector(".sg-info");
    S.forEach(function (s, i) {{
      var o = document.createElement("option");
      o.value = i; o.textContent = s.name + " (" + s.n + " nodes)"; sel.appendChild(o);
    }});
    function show(i) {{ sel.value = i; frame.srcdoc = S[i].page; info.textContent = S[i].n + " nodes";
      pane.dataset.stage = S[i].name; }}
    sel.addEventListener("change", function () {{ show(Number(sel.value)); }});
    var p = new URLSearchParams(location.hash.slice(1)), want = p.get(k ? "right" : "left");
    var start = k ? S.length - 1 : 0;
    S.forEach(function (s, i) {{ if (s.name === want) start = i; }});
    show(start);
  }});
  document.body.dataset.ready = "1";
}})();
</script>
</body>
</html>
"""

_PANE = ('<div class="sg-pane" id="sg-pane-{k}"><header><strong>{side}</strong><select aria-label="stage"></select>'
         '<span class="sg-info"></span></header><iframe title="{side} stage"></iframe></div>')


def compare_html(stages: dict[str, Graph] | Iterable[tuple[str, Graph]], path: str | os.PathLike | None = None, *,
                 title: str | None = None, **kw: Any) -> str:
    """Two stages of a graph side by side, each pane switchable to any stage: one offline HTML file.

    Args:
        stages: stage name -> graph, in pipeline order (a dict or (name, graph) pairs); at least one.
        path: where to write the file (None: only return the text).
        title: the page title (default `symgraph: <first graph's name>, N stages`).
        **kw: passed to `to_html` for every stage (kernels, collapse).

    Returns:
        The HTML text. The left pane starts on the first stage, the right one on the last; the URL
        fragment `#left=traced&right=simplified` chooses others.

    Raises:
        ValueError: no stages.
    """
    items = list(stages.items()) if isinstance(stages, dict) else list(stages)
    if not items:
        raise ValueError("compare_html: no stages given")
    data = []
    for name, g in items:
        page = to_html(g, title=f"{name}: {g.name}", **kw)
        data.append({"name": str(name), "n": len(g), "page": page})
    title = title or f"symgraph: {items[0][1].name}, {len(items)} stages"
    panes = "".join(_PANE.format(k=k, side=side) for k, side in enumerate(("left", "right")))
    text = _PAGE.format(title=_escape(title), panes=panes, data=_json_for_script(data))
    if path is not None:
        write_atomically(path, lambda f: f.write(text.encode("utf-8")))
    return text
