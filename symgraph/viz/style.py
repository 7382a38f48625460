"""How DOT drawings look: colours and border styles per role, DOT quoting, the legend cluster."""

from __future__ import annotations

import itertools
import re
from typing import Any

from ..ir import Node, meta

#: Per role: (fill colour, border colour, node style, legend text).
ROLE_STYLES: dict[str, tuple[str, str, str, str]] = {
    "forward": ("#cfe2f3", "#1f4e79", "filled,rounded", "forward (primal)"),
    "backward": ("#fce5cd", "#b45f06", "filled,rounded,dashed", "backward (cotangent)"),
    "recomputed": ("#d9ead3", "#38761d", "filled,rounded,dotted", "recomputed (checkpointing)"),
    "tangent": ("#ead1dc", "#741b47", "filled,rounded,dashed", "tangent (forward mode)"),
    "communication": ("#fff2cc", "#7f6000", "filled,rounded,bold", "communication (all-reduce across ranks)"),
}
_OTHER_STYLE = ("#eeeeee", "#555555", "filled,rounded,diagonals", "other role")
_INPUT_FILL = "#fff2cc"
_KERNEL_COLOR = "#674ea7"
_KERNEL_FILL = "#f3effa"


def _q(s: str) -> str:
    """A DOT double-quoted string (newlines become centered line breaks)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(d: dict[str, Any]) -> str:
    return "[" + ", ".join(f"{k}={v if isinstance(v, (int, float)) else _q(str(v))}" for k, v in d.items()) + "]"


def _style_for(r: str) -> tuple[str, str, str, str]:
    return ROLE_STYLES.get(r, _OTHER_STYLE)


def _shorten(s: str, n: int = 48) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _legend(order: list[Node], summaries: bool, kernels: bool, refs: bool = False) -> list[str]:
    """A legend cluster: one sample node per role present (forward, backward, recomputed always)."""
    roles = list(ROLE_STYLES)
    for n in order:
        r = meta(n).role
        if r not in roles:
            roles.append(r)
    lines = ["  subgraph cluster_legend {",
             '    graph [label="legend", style="rounded", color="#999999", fontsize=11, class="sg-legend-box"];']
    names = []
    for r in roles:
        fill, border, style, text = _style_for(r)
        if r not in ROLE_STYLES:
            text = f"{r} (role)"
        nm = f"legend_{re.sub(r'[^A-Za-z0-9_]', '_', r)}"
        names.append(nm)
        lines.append(f"    {nm} " + _attrs({"label": text, "style": style, "fillcolor": fill, "color": border,
                                             "penwidth": 2 if r == "recomputed" else 1, "class": "sg-legend"}) + ";")
    extra = [("legend_input", {"label": "input", "shape": "invhouse", "style": "filled", "fillcolor": _INPUT_FILL,
                               "color": ROLE_STYLES["forward"][1]}),
             ("legend_output", {"label": "output (double border)", "peripheries": 2, "style": "rounded",
                                "color": "#333333"}),
             ("legend_fanout", {"label": "fan-out N: N readers\n(thick border)", "style": "rounded", "penwidth": 2,
                                "color": "#333333"})]
    if summaries:
        extra.append(("legend_summary", {"label": "summary box: many nodes\n(op counts inside)", "shape": "box3d", "style": "filled",
                                         "fillcolor": "#ffffff", "color": "#333333"}))
    if refs:
        extra.append(("legend_ref", {"label": "from %id: reads a value drawn\nfar above (long edge elided)",
                                     "style": "dashed", "fontsize": 8, "color": "#333333"}))
    if kernels:
        extra.append(("legend_kernel", {"label": "fused kernel (cluster)", "style": "rounded,filled,bold",
                                        "fillcolor": _KERNEL_FILL, "color": _KERNEL_COLOR}))
    for nm, a in extra:
        a["class"] = "sg-legend"
        names.append(nm)
        lines.append(f"    {nm} {_attrs(a)};")
    # Chain the samples with invisible edges so they stack in one column.
    for a_, b_ in itertools.pairwise(names):
        lines.append(f"    {a_} -> {b_} [style=invis];")
    lines.append("  }")
    return lines
