"""Checkpointing reports: which values the backward sweep keeps and why, and memory/recomputation figures.

`saved_residuals(f, *args)` (and `print_saved_residuals`) trace, simplify
and checkpoint f's joint graph and list its residuals with reasons;
`checkpoint_stats(graph)` gives planned peaks and the recomputation bill of
a joint graph, with the plan `apply_checkpoint` recorded for it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from ... import lax as L
from ...autodiff import fresh, is_float, vjp_nodes
from ...ir import Graph, Node, meta
from ...tracing import trace  # saved_residuals traces the joint graph of a function
from ...tree import tree_flatten, tree_paths, tree_unflatten
from ..cost import node_flops as flops
from ..schedule import peak_bytes, regions, schedule
from ..simplify import simplify
from .apply import _INFO, LOOPS, apply_checkpoint


def _residual_list(g: Graph) -> list[tuple[Node, str]]:
    order = g.toposort()
    cls = regions(order)
    res: list[Node] = []
    seen: set[Node] = set()
    for n in order:
        if cls[n] in ("B", "R"):
            for x in n.inputs:
                if x not in seen and (cls[x] == "F" or (cls[x] == "S" and x.op.name == "input")):
                    seen.add(x)
                    res.append(x)
    info = _INFO.get(g)
    reasons = info.plan.reasons if info is not None else {}
    pos = {n: i for i, n in enumerate(order)}
    labels = _input_labels(g)
    out = []
    for x in sorted(res, key=lambda n: pos[n]):
        if x.op.name == "input":
            why = f"argument {labels.get(x, x.attr('name'))!r} (held by the caller)"
        else:
            why = reasons.get(x, "read by the backward sweep")
            loc = meta(x).location
            if loc is not None:
                why = f"{why}; output of {x.op.name} at {loc}"
            else:
                why = f"{why}; output of {x.op.name}"
        out.append((x, why))
    return out


def _input_labels(g: Graph) -> dict[Node, str]:
    """Each input leaf's label with its pytree path: `params[0]['w']`, not the flat `params[1]`.

    The tracer names leaf j of a multi-leaf argument `name[j]` (flat index);
    the path comes from the argument's structure in `g.in_tree`. Graphs
    whose input structure is not a tuple of arguments keep the tracer's names.
    """
    td = g.in_tree
    if td is None or td.kind not in ("tuple", "list") or td.num_leaves != len(g.inputs):
        return {}
    labels: dict[Node, str] = {}
    k = 0
    for child in td.children:
        n = child.num_leaves
        leaves = g.inputs[k:k + n]
        k += n
        if n == 0 or child.kind == "leaf":
            continue
        paths = tree_paths(child)
        first = str(leaves[0].attr("name"))
        if first.endswith(paths[0]):  # already labelled with its path
            continue
        m = re.fullmatch(r"(.*)\[0\]", first) if n > 1 else None
        base = m.group(1) if m else first
        for x, p in zip(leaves, paths):
            labels[x] = f"{base}{p}"
    return labels


def saved_residuals(f: Callable, *args: Any, checkpoint: Any = None) -> list[tuple[Node, str]]:
    """The values the backward sweep of f reads from the forward sweep, and why each is kept.

    Traces f's reverse-mode derivative with respect to every float argument
    leaf (cotangent ones for every output), simplifies, applies
    `apply_checkpoint(graph, checkpoint)` and lists the forward values and
    arguments that backward or recomputed nodes read.

    Args:
        f: a function of arrays (pytrees allowed).
        *args: example arguments (only shapes and dtypes matter).
        checkpoint: a strategy for `apply_checkpoint` (None: save everything).

    Returns:
        list of (node, reason) in forward order; node.shape, node.dtype and
        node.nbytes give the cost.
    """
    g = _joint_graph(f, args)
    g = apply_checkpoint(simplify(g), checkpoint)
    return _residual_list(g)


def print_saved_residuals(f: Callable, *args: Any, checkpoint: Any = None) -> None:
    """Print `saved_residuals(f, *args, checkpoint=...)`, one line per value with its bytes."""
    for n, why in saved_residuals(f, *args, checkpoint=checkpoint):
        print(f"{n.dtype}[{','.join(map(str, n.shape))}] {n.nbytes} bytes  {why}")


def _joint_graph(f: Callable, args: tuple) -> Graph:
    @functools.wraps(f)  # argument names in the residual report follow f's signature
    def joint(*a: Any) -> Any:
        leaves, tree = tree_flatten(a)
        fl = [fresh(x) if isinstance(x, Node) and is_float(x) else x for x in leaves]
        out = f(*tree_unflatten(tree, fl))
        ol = [L.as_output(o, i) for i, o in enumerate(tree_flatten(out)[0])]
        wrt = [x for x in fl if isinstance(x, Node) and is_float(x)]
        fo = [o for o in ol if is_float(o)]
        cts = vjp_nodes(fo, [L.full_like(o, 1.0) for o in fo], wrt)
        return ol, [L.zeros_like(w) if c is None else c for w, c in zip(wrt, cts)]

    return trace(joint, *args, name=getattr(f, "__name__", "f"))


def checkpoint_stats(graph: Graph) -> dict:
    """Memory and recomputation figures of a (checkpointed) joint graph on its schedule.

    Returns:
        dict with
        "peak_bytes": planned peak of `schedule(graph)` (bytes, inputs excluded);
        "peak_activation_bytes": the same counting only forward and recomputed values;
        "residual_bytes" / "residuals": forward values read by backward or recomputed nodes;
        "recomputed_nodes" / "recomputed_flops": the recomputation bill;
        "forward_flops": FLOPs of the forward values; "checkpoint": the plan name
        (when the graph came from `apply_checkpoint`), and for a byte budget
        "checkpoint_candidates": every plan considered with its peak and FLOPs.
    """
    order = schedule(graph)
    cls = regions(order)
    pk = peak_bytes(order, graph.outputs)
    act = peak_bytes(order, graph.outputs, select=lambda n: cls.get(n) in ("F", "R"))
    res = set()
    for n in order:
        if cls[n] in ("B", "R"):
            res.update(x for x in n.inputs if cls[x] == "F")
    stats = {
        "peak_bytes": pk,
        "peak_activation_bytes": act,
        "residuals": len(res),
        "residual_bytes": sum(x.nbytes for x in res),
        "recomputed_nodes": sum(1 for n in order if cls[n] == "R"),
        "recomputed_flops": sum(flops(n) for n in order if cls[n] == "R"),
        "forward_flops": sum(flops(n) for n in order if cls[n] == "F"),
    }
    loops = LOOPS.get(graph)
    if loops:
        stats["checkpointed_loops"] = loops
    info = _INFO.get(graph)
    if info is not None:
        stats["checkpoint"] = info.plan.name
        if info.candidates is not None:
            stats["checkpoint_candidates"] = info.candidates
    return stats
