"""`SYMGRAPH_DUMP=DIR`: the files written for every pipeline stage (listing, DOT, HTML viewer, kernels, extra text)."""

from __future__ import annotations

import itertools
import os
import re
import threading
import warnings
from typing import Any

from ..ir import Graph
from .dot import to_dot
from .html import to_html
from .kernels import _kernel_sets
from .labels import node_ids
from .text import dump

_stage_counter = itertools.count()
_stage_lock = threading.Lock()
_EXT = {"llvm_ir": ".ll", "ir": ".ll", "asm": ".s", "assembly": ".s", "dot": ".dot"}


def _safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+=-]+", "_", s).strip("_") or "graph"


def _as_text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        return "\n\n".join(f"; ----- {k} -----\n{_as_text(x)}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return "\n\n".join(_as_text(x) for x in v)
    return str(v)


def dump_stage(stage: str, graph: Graph, **extra: Any) -> list[str]:
    """Write the graph of one pipeline stage when `SYMGRAPH_DUMP=DIR` is set.

    Writes `DIR/NNN-<graph name>-<stage>.txt` (the `dump`), `.dot` (the
    `to_dot` source) and `.html` (the `to_html` viewer), where NNN is a counter of this process, so that the
    files sort in pipeline order. Each extra keyword becomes one more file,
    `DIR/NNN-<name>-<stage>-<keyword><ext>` (`.ll` for `llvm_ir`, `.s` for
    `asm`, `.txt` otherwise); values may be str, bytes, a list (joined) or a
    dict (one section per key). The keyword `kernels` is not written as text
    on its own: it is passed to `to_dot` (clusters) and listed in
    `...-kernels.txt` by node id. Does nothing when the variable is unset or
    empty. A failure to write warns (RuntimeWarning) instead of raising, so
    that dumping never breaks a compilation.

    Args:
        stage: pipeline stage name (traced, differentiated, simplified,
            checkpointed, fused, ...).
        graph: the graph after that stage.
        **extra: more text to write (llvm_ir=..., asm=...); `kernels=` as in `to_dot`.

    Returns:
        The paths written (empty when SYMGRAPH_DUMP is unset).
    """
    d = os.environ.get("SYMGRAPH_DUMP")
    if not d:
        return []
    kernels = extra.pop("kernels", None)
    with _stage_lock:
        n = next(_stage_counter)
    base = os.path.join(d, f"{n:03d}-{_safe(graph.name)}-{_safe(stage)}")
    written: list[str] = []
    try:
        os.makedirs(d, exist_ok=True)
        files = {base + ".txt": dump(graph) + "\n", base + ".dot": to_dot(graph, kernels=kernels),
                 base + ".html": to_html(graph, kernels=kernels)}
        if kernels is not None:
            ids = node_ids(graph)
            klist, _ = _kernel_sets(graph, kernels, ids)
            files[base + "-kernels.txt"] = "".join(
                f"{t}\n  " + " ".join(f"%{ids[m]}" for m in members) + "\n" for t, members in klist)
        for k, v in extra.items():
            if v is None:
                continue
            files[f"{base}-{_safe(k)}{_EXT.get(k, '.txt')}"] = _as_text(v)
        for p, text in files.items():
            with open(p, "w", encoding="utf-8") as f:
                f.write(text)
            written.append(p)
    except Exception as e:  # noqa: BLE001  (never let a debug dump break the pipeline)
        warnings.warn(f"SYMGRAPH_DUMP: could not write stage {stage!r} of {graph.name!r} to {d!r}: {e}",
                      RuntimeWarning, stacklevel=2)
    return written
