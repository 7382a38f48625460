"""NaN/inf debugging (`config.debug_nans`): find the first node that produced a NaN or inf, raise naming it.

When the switch is on (`sg.config.debug_nans = True`, or `SYMGRAPH_DEBUG_NANS=1`
in the environment when symgraph is imported), compiled functions (every
backend) and the transformations called on arrays (`grad`, `jvp`, `vmap`, ...)
scan their float outputs. On a NaN or inf, `check_outputs` re-runs the same
graph node by node in the NumPy evaluator, in schedule order, and stops at
the first *producer*: a node whose value holds a NaN while none of its inputs
does (log of a negative number, 0 * inf, inf - inf), or an inf while all its
inputs are finite (overflow, division by zero). A NaN computed from a NaN is
not a producer, it propagates one. The producer's op, role (forward,
backward, tangent, recomputed), the user's source line and, for a node built
by a derivative rule, the forward op whose derivative it is are raised as a
`symgraph.errors.FloatingPointError`. When every non-finite output comes
from the arguments (a NaN passed in), nothing is raised.

The design is JAX's `jax_debug_nans` (re-run op by op after the fact, so
the fast path is unchanged) with PyTorch's `detect_anomaly` naming of the
forward op behind a failing backward one. Cost when off: one module-global
test per compiled call. Cost when on: an `isfinite` scan of the outputs per
call (compiled functions take their checked, slower call path), and a full
op-by-op re-run only when an output is not finite.

A NaN made inside a loop (`scan`, `fori_loop`) is traced into the loop body:
the body is re-run step by step and the error names the op in the body and
the step.

Limits: other region ops are one node here; a backend whose arithmetic
differs from NumPy's (the LLVM backend's vectorized exp/log) may produce a
NaN that the re-run does not, which is reported as such. Communication ops
(data-parallel gradient averaging) are not re-run: the re-run takes each
rank's own value, so a NaN that reached a rank from another one is reported
as not reproduced there, and found on the rank that made it.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .errors import FloatingPointError
from .ir import Graph, Node, meta
from .passes.schedule import last_use, schedule
from .viz.labels import _op_with_attrs, _type_str, node_ids

__all__ = ["DEBUG_NANS", "set_debug_nans", "check_outputs", "find_producer", "Producer"]

#: The switch read by compiled calls and eager transformations (process-wide; `config.debug_nans` sets it).
DEBUG_NANS: bool = os.environ.get("SYMGRAPH_DEBUG_NANS", "").strip().lower() not in ("", "0", "false", "no", "off")


def set_debug_nans(on: bool) -> None:
    """Turn NaN/inf debugging on or off for the whole process (what `sg.config.debug_nans = x` does)."""
    global DEBUG_NANS
    DEBUG_NANS = bool(on)


def _flags(v: Any) -> tuple[bool, bool]:
    """(has a NaN, has an inf) of a value; (False, False) for integer and bool values."""
    a = np.asarray(v)
    if a.dtype.kind not in "fc" or a.size == 0:
        return False, False
    if np.isfinite(a).all():  # the common case: one pass
        return False, False
    nan = bool(np.isnan(a).any())
    return nan, bool(np.isinf(a).any())


class Producer:
    """The first node that produced a NaN or inf (`find_producer`).

    Attributes:
        node: the node; kind: "NaN" or "inf"; count and size: how many of its
        elements are that, of how many; inputs: [(input node, its value's
        summary)], values read by the node.
    """

    __slots__ = ("node", "kind", "count", "size", "inputs", "loops")

    def __init__(self, node: Node, kind: str, count: int, size: int, inputs: list[tuple[Node, str]]):
        self.node = node
        self.kind = kind
        self.count = count
        self.size = size
        self.inputs = inputs
        self.loops: list[tuple[Node, int, int]] = []  # (scan node, step, steps) around `node`, outermost first


def _in_loop(n: Node, vals: list) -> Producer | None:
    """The producer inside the body of the scan node `n` (read `vals`), found by re-running it step by step."""
    region = n.attr("region", None)
    body = getattr(region, "body", None)
    if body is None or not hasattr(region, "nk"):
        return None
    nc, nk, T = region.nc, region.nk, region.length
    consts, carry, seqs = list(vals[:nc]), list(vals[nc:nc + nk]), vals[nc + nk:]
    from .interpreter import evaluate_flat

    order = schedule(body)
    for t in (range(T - 1, -1, -1) if region.reverse else range(T)):
        step = consts + carry + [s[t] for s in seqs]
        p = find_producer(body, step, order)
        if p is not None:
            p.loops.insert(0, (n, t, T))
            return p
        env = {x: np.asarray(v, dtype=x.dtype) for x, v in zip(body.inputs, step)}
        carry = evaluate_flat(body.outputs, order, env)[:nk]
    return None


def _summary(v: Any) -> str:
    a = np.asarray(v)
    if a.size == 0:
        return "empty"
    if a.dtype.kind not in "fciub":
        return str(a.dtype)
    if a.size <= 4:
        return "value " + np.array2string(a.ravel(), separator=", ", precision=6)
    if a.dtype.kind == "c":
        return f"{a.size} elements"
    fin = a[np.isfinite(a)] if a.dtype.kind == "f" else a
    parts = [f"min {fin.min():.6g}, max {fin.max():.6g}" if fin.size else "no finite element"]
    if a.dtype.kind == "f":
        nn, ni = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        if nn:
            parts.append(f"{nn} NaN")
        if ni:
            parts.append(f"{ni} inf")
    return ", ".join(parts)


def find_producer(graph: Graph, leaves: Sequence[Any], order: Sequence[Node] | None = None) -> Producer | None:
    """Re-run `graph` node by node on argument leaves; return the first NaN/inf producer, or None.

    A producer is a node whose value has a NaN while no input's has one, or
    an inf while every input's value is finite (see the module docstring).

    Args:
        graph: the graph that ran (a compiled signature's optimized graph, a
            transformation's simplified graph).
        leaves: one array per graph input, as checked for the call.
        order: the schedule to follow (default `schedule(graph)`).

    Returns:
        The first producer in schedule order, or None when every non-finite
        value comes from the arguments.
    """
    order = schedule(graph) if order is None else list(order)
    outputs = graph.outputs
    env: dict[Node, Any] = {}
    flags: dict[Node, tuple[bool, bool]] = {}
    for x, v in zip(graph.inputs, leaves):
        env[x] = v = np.asarray(v, dtype=x.dtype)  # leaves the run accepted: same shapes, castable dtypes
        flags[x] = _flags(v)
    last = last_use(order, outputs)
    with np.errstate(all="ignore"):
        for i, n in enumerate(order):
            if n not in env:
                vals = [env[x] for x in n.inputs]
                if n.op.extra.get("host"):
                    # communication (symgraph.ops.comm): the re-run runs on one rank only, so it must not
                    # take part in a collective (the other ranks would never join); the local value stands in
                    v = vals[0]
                else:
                    v = n.op.impl(*vals, **n.params)
                if not (isinstance(v, np.ndarray) and v.dtype == n.dtype):
                    v = np.asarray(v, dtype=n.dtype)
                env[n] = v
                nan, inf = f = _flags(v)
                flags[n] = f
                if nan or inf:
                    in_nan = any(flags[x][0] for x in n.inputs)
                    in_inf = any(flags[x][1] for x in n.inputs)
                    kind = "NaN" if nan and not in_nan else "inf" if inf and not (in_nan or in_inf) else None
                    if kind is not None:
                        if n.op.name == "scan":  # a loop: find the op inside its body, and the step
                            inner = _in_loop(n, vals)
                            if inner is not None:
                                return inner
                        a = np.asarray(v)
                        count = int(np.isnan(a).sum() if kind == "NaN" else np.isinf(a).sum())
                        return Producer(n, kind, count, a.size, [(x, _summary(env[x])) for x in n.inputs])
            for x in n.inputs:
                if last.get(x) == i and x in env:
                    del env[x]
            if last.get(n) == i and n in env:
                del env[n]
    return None


_ROLE_WORDS = {
    "forward": "the forward pass",
    "backward": "the backward sweep (reverse mode)",
    "tangent": "the tangent sweep (forward mode)",
    "recomputed": "a forward value recomputed for the backward sweep (checkpointing)",
}


def _message(p: Producer, graph: Graph, where: str) -> str:
    n = p.node
    m = meta(n)
    outer = node_ids(graph)
    # a node in a loop body is numbered as the innermost body's listing (`region.body.dump()`) numbers it
    ids = node_ids(p.loops[-1][0].attr("region").body) if p.loops else outer
    ins = ", ".join(f"%{ids.get(x, '?')}" for x in n.inputs)
    head = f"{where}: {n.op.name} produced {p.kind} in {_ROLE_WORDS.get(m.role, m.role)}"
    if m.origin is not None and m.role in ("backward", "tangent"):
        rule = "VJP" if m.role == "backward" else "JVP"
        head += f", in the derivative ({rule}) of the forward op {m.origin}"
        if m.location is not None:
            head += " at the line below"
    lines = [head,
             f"  node: %{ids.get(n, '?')} = {_op_with_attrs(n)}({ins}) : {_type_str(n)}  # {m.role}"
             f"  ({p.count} of {p.size} elements {p.kind})"]
    if p.loops:  # the node is in a loop body: its ids are the body's (`region.body.dump()`)
        lines[1] = lines[1].replace("  node: %", "  node (in the loop body): %", 1)
        numbering = outer
        for loop, t, steps in p.loops:
            lm = meta(loop)
            lines.append(f"  at step {t} (counting from 0) of the {steps} steps of the loop (scan) %{numbering.get(loop, '?')}"
                         f"{f' at {lm.location}' if lm.location is not None else ''}")
            numbering = node_ids(loop.attr("region").body)
    for x, s in p.inputs:
        lines.append(f"  input %{ids.get(x, '?')} = {x.op.name} : {_type_str(x)}  ({s})")
    lines.append(f"  found by re-running the graph {graph.name!r} ({len(outer)} nodes) op by op in the NumPy "
                 f"evaluator (sg.config.debug_nans)")
    return "\n".join(lines)


def _non_finite(outs: Sequence[Any]) -> list[int]:
    return [k for k, o in enumerate(outs) if _flags(o) != (False, False)]


def check_outputs(graph: Graph, leaves: Sequence[Any], outs: Sequence[Any], where: str,
                  order: Sequence[Node] | None = None) -> None:
    """Raise `FloatingPointError` when `outs` (of `graph` run on `leaves`) hold a NaN/inf a node produced.

    Args:
        graph: the graph that was run.
        leaves: its argument values, one per graph input (not overwritten by the run: copies of donated ones).
        outs: the flat outputs that the run returned.
        where: who ran it, for the message ("compile(loss)", "grad(f)").
        order: the schedule the re-run follows (default `schedule(graph)`).

    Raises:
        FloatingPointError: naming the first producer (`find_producer`); or, when the re-run in the
            evaluator produces none but the outputs of the run were not finite while the evaluator's
            are, saying that the backend's arithmetic made them.
    """
    bad = _non_finite(outs)
    if not bad:
        return
    p = find_producer(graph, leaves, order)
    if p is not None:
        m = meta(p.node)
        raise FloatingPointError(_message(p, graph, where), m.location, node=p.node, op=p.node.op.name,
                                 role=m.role, origin=m.origin, kind=p.kind)
    # No node produced one in the evaluator: either the arguments carried it, or the backend's arithmetic did.
    from .interpreter import evaluate_flat

    env = {x: np.asarray(v, dtype=x.dtype) for x, v in zip(graph.inputs, leaves)}
    ref = evaluate_flat(graph.outputs, schedule(graph) if order is None else order, env)
    for k in bad:
        if _flags(ref[k]) == (False, False):
            kind = "NaN" if _flags(outs[k])[0] else "inf"
            raise FloatingPointError(
                f"{where}: output {k} holds {kind}, but the op-by-op re-run of the graph {graph.name!r} in the "
                f"NumPy evaluator gives a finite value: the backend's arithmetic (not NumPy's) produced it; "
                f"compare with backend='numpy'", None, kind=kind)
