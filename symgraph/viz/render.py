"""Pictures of graphs through Graphviz's `dot` program (svg, png, pdf), with a clear error when it is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

from ..errors import SymgraphError
from ..ir import Graph
from .dot import to_dot
from .html import to_html
from .text import dump

_FORMATS = {".svg": "svg", ".png": "png", ".pdf": "pdf"}
_MISSING_DOT = ("Graphviz's `dot` program was not found (looked for {prog!r} on PATH). Install Graphviz: "
                "`sudo apt-get install graphviz` (Debian/Ubuntu package `graphviz`), "
                "`conda install -c conda-forge graphviz` (conda package `graphviz`), or `brew install graphviz`; "
                "or write DOT source with graph.to_dot() / a .dot path and render it elsewhere")


def render(graph: Graph, path: str | os.PathLike, *, timeout: float = 120.0, dot: str = "dot", **kw: Any) -> str:
    """Draw the graph to a picture through Graphviz's `dot` program.

    The output format is chosen by the suffix: `.svg`, `.png`, `.pdf`; a
    `.dot`/`.gv` path gets the DOT source, a `.txt` path the text dump and an
    `.html` path the interactive viewer (`to_html`), none needing Graphviz.

    Args:
        graph: the graph.
        path: output file; its suffix selects the format.
        timeout: seconds to wait for `dot` before giving up.
        dot: the Graphviz program to run (name on PATH or a path).
        **kw: passed to `to_dot` (kernels, collapse, legend, ...).

    Returns:
        The path written (str).

    Raises:
        SymgraphError: unknown suffix; `dot` missing (names the Debian and
            conda package `graphviz`); `dot` failed or exceeded `timeout`.
    """
    path = os.fspath(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix in (".dot", ".gv"):
        with open(path, "w", encoding="utf-8") as f:
            f.write(to_dot(graph, **kw))
        return path
    if suffix in (".html", ".htm"):
        to_html(graph, path, **{k: v for k, v in kw.items() if k in ("kernels", "collapse", "title")})
        return path
    if suffix == ".txt":
        with open(path, "w", encoding="utf-8") as f:
            f.write(dump(graph) + "\n")
        return path
    fmt = _FORMATS.get(suffix)
    if fmt is None:
        raise SymgraphError(f"render: cannot tell the format of {path!r} from its suffix {suffix!r}; "
                            f"use one of .svg, .png, .pdf (Graphviz) or .dot, .txt, .html")
    data = render_bytes(graph, fmt, timeout=timeout, dot=dot, **kw)
    with open(path, "wb") as f:
        f.write(data)
    return path


def render_bytes(graph: Graph, fmt: str = "svg", *, timeout: float = 120.0, dot: str = "dot", **kw: Any) -> bytes:
    """The picture of the graph as bytes, in Graphviz output format `fmt` (svg, png, pdf).

    Raises:
        SymgraphError: as `render`.
    """
    return run_dot(to_dot(graph, **kw), fmt, timeout=timeout, dot=dot)


def run_dot(source: str, fmt: str = "svg", *, timeout: float = 120.0, dot: str = "dot") -> bytes:
    """Run Graphviz's `dot -T<fmt>` on DOT source.

    Args:
        source: DOT source.
        fmt: Graphviz output format (svg, png, pdf, ...).
        timeout: seconds.
        dot: program name or path.

    Returns:
        The output bytes.

    Raises:
        SymgraphError: `dot` missing, failing, or slower than `timeout`.
    """
    prog = shutil.which(dot)
    if prog is None:
        raise SymgraphError(_MISSING_DOT.format(prog=dot))
    try:
        res = subprocess.run([prog, f"-T{fmt}"], input=source.encode("utf-8"), capture_output=True, timeout=timeout,
                             check=False)
    except subprocess.TimeoutExpired:
        raise SymgraphError(f"Graphviz `dot -T{fmt}` did not finish within {timeout:g} s; draw fewer nodes "
                            f"(collapse=True, the default for large graphs) or raise timeout=") from None
    except OSError as e:
        raise SymgraphError(f"could not run Graphviz `{prog}`: {e}. " + _MISSING_DOT.format(prog=dot)) from None
    if res.returncode != 0 or not res.stdout:
        err = res.stderr.decode("utf-8", "replace").strip()
        raise SymgraphError(f"Graphviz `dot -T{fmt}` failed (exit status {res.returncode}): {err[:2000]}")
    return res.stdout
