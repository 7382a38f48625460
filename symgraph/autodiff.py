"""Differentiation as a graph pass: reverse mode (VJP) and forward mode (JVP).

Reverse mode walks the nodes between the inputs of interest and the outputs
in reverse topological order, calls each op's VJP rule (written in graph ops)
and sums the contributions that reach a node from several readers (fan-out).
The backward nodes read the forward nodes, which are shared, never copied, so
the result is again a graph and can be differentiated again. `None` is a
symbolic zero; zeros are materialised only at the API boundary.

References:
    Griewank & Walther, Evaluating Derivatives (2nd ed., SIAM 2008), ch. 3-4
    (forward and reverse mode); the rule-table design follows JAX's autodidax.
"""

from __future__ import annotations

from typing import Sequence

from . import lax as L
from .errors import DTypeError, ShapeError, UnsupportedOpError
from .ir import Graph, Node, current_builder, meta, role, source_location, toposort

__all__ = ["vjp_nodes", "jvp_nodes", "vjp_pass", "jvp_pass", "fresh", "is_float"]

_fresh_tags = iter(range(1 << 62))


def is_float(x: Node) -> bool:
    """Whether a node carries derivatives (floating dtype)."""
    return x.dtype.kind == "f"


def fresh(x: Node) -> Node:
    """A new node equal to x but distinct from it (a tagged `copy`).

    Transformations differentiate with respect to fresh nodes, so that an
    argument that is also read elsewhere in an enclosing trace is treated as
    an independent variable (no perturbation confusion).
    """
    return L.bind("copy", x, tag=("fresh", next(_fresh_tags)))


def _depends(order: Sequence[Node], wrt: Sequence[Node]) -> set[Node]:
    """Nodes whose value depends differentiably on some node of `wrt`."""
    dep = set(wrt)
    for n in order:
        if n in dep:
            continue
        if n.op.differentiable and is_float(n) and any(x in dep for x in n.inputs):
            dep.add(n)
    return dep


def vjp_nodes(outputs: Sequence[Node], cotangents: Sequence[Node | None], wrt: Sequence[Node]) -> list[Node | None]:
    """Reverse mode on nodes of the current builder.

    Args:
        outputs: output nodes.
        cotangents: one cotangent node per output (same shape and dtype), or None for zero.
        wrt: nodes to differentiate with respect to.

    Returns:
        One cotangent node per `wrt` node (its shape and dtype), or None where
        the outputs do not depend on it (a symbolic zero).

    Raises:
        UnsupportedOpError: an op on the path has no VJP rule (raised only when needed).
        ShapeError: a cotangent whose shape differs from its output.
    """
    for o, c in zip(outputs, cotangents):
        if c is not None and (c.shape != o.shape):
            raise ShapeError(f"cotangent of shape {c.shape} for an output of shape {o.shape}")
    order = toposort(outputs)
    dep = _depends(order, wrt)
    cts: dict[Node, Node] = {}
    for o, c in zip(outputs, cotangents):
        if c is None or o not in dep:
            continue
        c = L.cast(c, o.dtype)
        cts[o] = c if o not in cts else L.add(cts[o], c)
    wrt_set = set(wrt)
    for n in reversed(order):
        ct = cts.get(n)
        if ct is None or not n.inputs:
            continue
        if n in wrt_set and not any(x in dep for x in n.inputs):
            continue
        op = n.op
        if not op.differentiable:
            continue
        if op.vjp is None:
            raise UnsupportedOpError(f"op {op.name} has no derivative rule (VJP), and the derivative is needed",
                                     meta(n).location)
        with source_location(meta(n).location), role("backward"):
            in_cts = op.vjp(ct, n)
            for x, c in zip(n.inputs, in_cts):
                if c is None or x not in dep:
                    continue
                if c.shape != x.shape:  # pragma: no cover - a rule bug
                    raise ShapeError(f"VJP rule of {op.name} gave a cotangent of shape {c.shape} for input {x.shape}")
                if c.dtype != x.dtype:
                    c = L.cast(c, x.dtype)
                prev = cts.get(x)
                cts[x] = c if prev is None else L.add(prev, c)
    return [cts.get(w) for w in wrt]


def jvp_nodes(outputs: Sequence[Node], wrt: Sequence[Node], tangents: Sequence[Node | None]) -> list[Node | None]:
    """Forward mode on nodes of the current builder.

    Args:
        outputs: output nodes.
        wrt: nodes whose tangents are given.
        tangents: one tangent node (same shape as its wrt node) or None per wrt node.

    Returns:
        One tangent node per output, or None where it is zero.

    Raises:
        UnsupportedOpError: an op on the path has no JVP rule (raised only when needed).
        ShapeError: a tangent whose shape differs from its primal.
    """
    tan: dict[Node, Node] = {}
    for w, t in zip(wrt, tangents):
        if t is None:
            continue
        if t.shape != w.shape:
            raise ShapeError(f"tangent of shape {t.shape} for a primal of shape {w.shape}")
        if not is_float(w):
            raise DTypeError(f"tangent given for a primal of dtype {w.dtype}; only float primals have tangents")
        tan[w] = L.cast(t, w.dtype)
    order = toposort(outputs)
    for n in order:
        if n in tan or not n.inputs:
            continue
        ts = [tan.get(x) for x in n.inputs]
        if all(t is None for t in ts):
            continue
        op = n.op
        if not op.differentiable or not is_float(n):
            continue
        if op.jvp is None:
            raise UnsupportedOpError(f"op {op.name} has no forward-mode rule (JVP), and the derivative is needed",
                                     meta(n).location)
        with source_location(meta(n).location), role("backward"):
            t = op.jvp(ts, n)
        if t is not None:
            if t.dtype != n.dtype:
                t = L.cast(t, n.dtype)
            tan[n] = t
    return [tan.get(o) for o in outputs]


def vjp_pass(graph: Graph, cotangents: Sequence[Node] | None = None, wrt: Sequence[Node] | None = None) -> Graph:
    """Graph -> Graph: append the reverse sweep; outputs become the cotangents of `wrt`.

    Args:
        graph: the forward graph.
        cotangents: seeds, one per output; default: ones for a single scalar output.
        wrt: nodes to differentiate with respect to (default: the float inputs).

    Returns:
        A graph with the same inputs whose outputs are the cotangents (zeros
        materialised where there is no dependence).
    """
    with current_builder():
        if wrt is None:
            wrt = [x for x in graph.inputs if is_float(x)]
        if cotangents is None:
            if len(graph.outputs) != 1 or graph.outputs[0].shape != ():
                raise ShapeError("vjp_pass needs cotangents unless the graph has one scalar output")
            cotangents = [L.full_like(graph.outputs[0], 1.0)]
        cts = vjp_nodes(graph.outputs, cotangents, wrt)
        outs = [L.zeros_like(w) if c is None else c for w, c in zip(wrt, cts)]
    return Graph(graph.inputs, outs, graph.in_tree, None, name=f"vjp({graph.name})")


def jvp_pass(graph: Graph, wrt: Sequence[Node], tangents: Sequence[Node]) -> Graph:
    """Graph -> Graph: push tangents forward; outputs become the output tangents.

    `tangents` are usually new input nodes; they are appended to the inputs.
    """
    with current_builder():
        ts = jvp_nodes(graph.outputs, wrt, tangents)
        outs = [L.zeros_like(o) if t is None else t for o, t in zip(graph.outputs, ts)]
    extra = [t for t in tangents if t.op.name == "input" and t not in set(graph.inputs)]
    return Graph(graph.inputs + extra, outs, None, None, name=f"jvp({graph.name})")
