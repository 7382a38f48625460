"""Differentiation as a graph pass: reverse mode (VJP) and forward mode (JVP).

Reverse mode walks the nodes between the inputs of interest and the outputs
in reverse topological order, calls each op's VJP rule (written in graph ops)
and sums the contributions that reach a node from several readers (fan-out).
The backward nodes read the forward nodes, which are shared, never copied, so
the result is again a graph and can be differentiated again. `None` is a
symbolic zero; zeros are materialised only at the API boundary.

Guarded branches: a cotangent of the form `where(c, g, 0)` (what the VJP of
`where`, `maximum` and `minimum` produce) stays masked through the elementwise
ops upstream of it: the rule is applied to `g` and the result masked again.
So `where(x > 0, sqrt(x), 0)` has gradient 0 (not NaN) at x <= 0, although
sqrt'(x) is infinite or NaN there: the untaken branch contributes exactly 0
instead of 0 * inf (see docs/differentiation.md, "Guards").

References:
    Griewank & Walther, Evaluating Derivatives (2nd ed., SIAM 2008), ch. 3-4
    (forward and reverse mode); the rule-table design follows JAX's autodidax.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Sequence

import numpy as np

from . import lax as L
from .errors import DTypeError, ShapeError, UnsupportedOpError
from .ir import Graph, Node, current_builder, meta, set_build_context, toposort
from .ops import OPS
from .ops.core import real_dtype

__all__ = ["vjp_nodes", "jvp_nodes", "vjp_pass", "jvp_pass", "fresh", "is_float", "placeholder", "depends_on"]

_fresh_tags = itertools.count()
_group_needed = threading.local()


def needed_inputs() -> tuple[bool, ...] | None:
    """While reverse mode runs a group VJP rule (`Op.extra["group_vjp"]`): per input of the node, whether a
    cotangent of it is used (it depends on a differentiated value); None outside such a rule.

    A rule may skip the cotangents nobody reads (a `while_loop`'s closed-over arrays that are not
    differentiated, whose cotangent would be an accumulator carried through the backward loop).
    """
    return getattr(_group_needed, "value", None)



def is_float(x: Node) -> bool:
    """Whether a node carries derivatives (a floating or complex dtype)."""
    return x.dtype.kind in "fc"


def fresh(x: Node) -> Node:
    """A new node equal to x but distinct from it (a tagged `copy`).

    Transformations differentiate with respect to fresh nodes, so that an
    argument that is also read elsewhere in an enclosing trace is treated as
    an independent variable (no perturbation confusion).
    """
    return L.bind("copy", x, tag=("fresh", next(_fresh_tags)))


def placeholder(shape: tuple, dtype: Any, name: str = "placeholder") -> Node:
    """A fresh unbound node of the current builder standing for a value supplied later.

    Used for seeds and tangents that a transformation substitutes afterwards
    (the identity basis of `jacobian`, the per-example value of `vmap`, the
    tangent variables of a `custom_jvp` rule). It is an `input` node with a
    unique tag; it must not remain in a graph that is evaluated.
    """
    return current_builder().make(
        OPS["input"], (),
        {"shape": tuple(int(d) for d in shape), "dtype": np.dtype(dtype), "index": -1, "name": name},
        tag=("placeholder", next(_fresh_tags)),
    )


def depends_on(nodes: Sequence[Node], sources: Sequence[Node]) -> bool:
    """Whether any of `nodes` reaches any of `sources` through inputs.

    Nodes are immutable, so a node created before all sources cannot read
    them; the walk only descends into younger nodes (cheap when the sources
    are recent placeholders).
    """
    src = set(sources)
    if not src:
        return False
    oldest = min(s.id for s in src)
    seen: set[Node] = set()
    stack = [n for n in nodes if n is not None]
    while stack:
        n = stack.pop()
        if n in src:
            return True
        if n in seen or n.id < oldest:
            continue
        seen.add(n)
        stack.extend(n.inputs)
    return False


def _depends(order: Sequence[Node], wrt: Sequence[Node]) -> set[Node]:
    """Nodes whose value depends differentiably on some node of `wrt`."""
    dep = set(wrt)
    add = dep.add
    for n in order:
        if n in dep or not n.op.differentiable or n.dtype.kind not in "fc":  # (`is_float`)
            continue
        for x in n.inputs:
            if x in dep:
                add(n)
                break
    return dep


# ----- masked cotangents (guards) -----


def _is_zero(x: Node) -> bool:
    """x is a constant zero, possibly broadcast."""
    if x.op.name == "broadcast_to":
        x = x.inputs[0]
    if x.op.name != "constant":
        return False
    a = x.attr("value").array
    return a.size > 0 and not np.any(a)


def _mask_of(ct: Node) -> tuple[Node, Node, bool] | None:
    """(condition, g, polarity) when ct is where(c, g, 0) (True) or where(c, 0, g) (False)."""
    if ct.op.name != "where":
        return None
    c, a, b = ct.inputs
    if _is_zero(b):
        return c, a, True
    if _is_zero(a):
        return c, b, False
    return None


def _masked(cond: Node, g: Node, polarity: bool) -> Node:
    z = L.zeros_like(g)
    return L.bind("where", cond, g, z) if polarity else L.bind("where", cond, z, g)


def _accumulate(prev: Node | None, c: Node) -> Node:
    """prev + c, keeping a common mask: where(m, a, 0) + where(m, b, 0) = where(m, a + b, 0)."""
    if prev is None:
        return c
    mp, mc = _mask_of(prev), _mask_of(c)
    if mp is not None and mc is not None and mp[0] is mc[0]:
        if mp[2] == mc[2]:
            return _masked(mp[0], L.add(mp[1], mc[1]), mp[2])
        # where(m, a, 0) + where(m, 0, b) = where(m, a, b): exact, also where a or b is not finite
        a, b = (mp[1], mc[1]) if mp[2] else (mc[1], mp[1])
        return L.bind("where", mp[0], a, b)
    return L.add(prev, c)


def _carry_mask(op: Any, n: Node, ct: Node, mask: tuple[Node, Node, bool]) -> tuple:
    """The VJP of a linear layout/reduction op on a guarded cotangent, keeping a guard.

    The op's VJP maps the 0/1 indicator of the unmasked positions to a
    non-negative array that is zero exactly where every contribution is
    masked; the input cotangent is then where(that > 0, vjp(ct), 0), which
    equals vjp(ct), so elementwise ops further up still see a guard (a NaN
    derivative in an untaken branch stays out of the gradient).
    """
    c, _, polarity = mask
    active = c if polarity else L.unary("logical_not", c, float_op=False)
    ind = L.cast(active, real_dtype(ct.dtype))  # real for a complex ct too: compared with 0 below
    outs = op.vjp(ct, n)
    inds = op.vjp(ind, n)
    return tuple(None if o is None or m is None else L.where(L.binary("gt", _real(m), 0.0), o, 0.0)
                 for o, m in zip(outs, inds))


def _real(m: Node) -> Node:
    """m's real part (an indicator pulled back through a complex op's VJP is complex with zero imaginary part)."""
    return L.bind("real", m) if m.dtype.kind == "c" else m


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
        cts[o] = _accumulate(cts.get(o), c)
    wrt_set = set(wrt)
    groups = _groups(order, dep)
    for n in reversed(order):
        ct = cts.get(n)
        members = groups.get(n)
        if members is not None:  # an output of a multi-output op: all its siblings' cotangents at once
            if n is not members[0]:
                continue  # the group is handled at its first member, after every member's readers
            group_cts = {m.attr("index"): cts[m] for m in members if m in cts}
            if not group_cts:
                continue
            ct = next(iter(group_cts.values()))
        if ct is None or not n.inputs:
            continue
        if n in wrt_set and not any(x in dep for x in n.inputs):
            continue
        op = n.op
        if not op.differentiable:
            continue
        if members is not None:
            prev = set_build_context(meta(n).location, "backward")
            outer = getattr(_group_needed, "value", None)
            _group_needed.value = tuple(x in dep for x in n.inputs)
            try:
                in_cts = op.extra["group_vjp"](group_cts, n)
            finally:
                _group_needed.value = outer
                set_build_context(*prev)
            _add_input_cts(cts, n, in_cts, dep)
            continue
        if op.vjp is None:
            raise UnsupportedOpError(f"op {op.name} has no derivative rule (VJP), and the derivative is needed",
                                     meta(n).location)
        # source_location(meta(n).location) and role("backward") for the rule, set cheaply (per node)
        prev = set_build_context(meta(n).location, "backward", op.name)
        try:
            mask = None
            # selection ops (`Op.selects`) build their own masks in their VJP rules; masks are not
            # propagated through them (their rule keeps the innermost guard)
            if op.kind == "elementwise" and not op.selects:
                mask = _mask_of(ct) if ct.op.name == "where" else None  # (the test `_mask_of` starts with)
            elif op.linear and op.kind in ("layout", "reduction"):
                mask = _mask_of(ct)
                if mask is not None:
                    in_cts = _carry_mask(op, n, ct, mask)
            if mask is not None and op.kind == "elementwise" and mask[0].shape == n.shape:
                # guarded branch: apply the rule to g, then mask (0 instead of 0 * inf)
                in_cts = tuple(None if c is None else _masked(mask[0], c, mask[2]) for c in op.vjp(mask[1], n))
            elif mask is None or op.kind == "elementwise":
                in_cts = op.vjp(ct, n)
            _add_input_cts(cts, n, in_cts, dep)
        finally:
            set_build_context(*prev)
    return [cts.get(w) for w in wrt]


def _add_input_cts(cts: dict, n: Node, in_cts: Sequence[Node | None], dep: set) -> None:
    """Accumulate the cotangents a VJP rule gave for n's inputs."""
    for x, c in zip(n.inputs, in_cts):
        if c is None or x not in dep:
            continue
        if c.shape != x.shape:  # pragma: no cover - a rule bug
            raise ShapeError(f"VJP rule of {n.op.name} gave a cotangent of shape {c.shape} for input {x.shape}")
        if c.dtype is not x.dtype and c.dtype != x.dtype:  # NumPy's built-in dtypes are singletons
            c = L.cast(c, x.dtype)
        prev = cts.get(x)
        cts[x] = c if prev is None else _accumulate(prev, c)


def _groups(order: Sequence[Node], dep: set) -> dict[Node, list[Node]]:
    """The outputs of multi-output ops (`Op.extra["group_vjp"]`): node -> its siblings in `order`, first first.

    Siblings are the nodes of one op with the same `Op.extra["group_key"]` (a loop's output leaves share
    their inputs and region); reverse mode gives all their cotangents to one rule (`group_vjp`).
    """
    found: dict[tuple, list[Node]] = {}
    for n in order:
        ex = n.op.extra
        if ex and "group_vjp" in ex and n in dep:
            found.setdefault((n.op.name,) + tuple(ex["group_key"](n)), []).append(n)
    return {m: ms for ms in found.values() for m in ms}


def _needed(order: Sequence[Node], outputs: Sequence[Node]) -> set[Node]:
    """Nodes whose tangent some output's tangent reads (ops may block inputs: `jvp_reads`)."""
    need = set(outputs)
    for n in reversed(order):
        if n not in need:
            continue
        reads = n.op.extra.get("jvp_reads")
        if reads is None:
            need.update(n.inputs)
        else:
            need.update(n.inputs[i] for i in reads(n))
    return need


def jvp_nodes(outputs: Sequence[Node], wrt: Sequence[Node], tangents: Sequence[Node | None]) -> list[Node | None]:
    """Forward mode on nodes of the current builder.

    Only the tangents that reach the outputs are built: an op whose JVP rule
    does not read some input's tangent (a `custom_jvp` wrapper and the
    primal computation inside it) blocks the walk there.

    Args:
        outputs: output nodes.
        wrt: nodes whose tangents are given.
        tangents: one tangent node (same shape as its wrt node) or None per wrt node.

    Returns:
        One tangent node per output, or None where it is zero.

    Raises:
        UnsupportedOpError: an op on the path has no JVP rule (raised only when needed).
        ShapeError: a tangent whose shape differs from its primal.
        DTypeError: a tangent for an integer or bool primal.
    """
    tan: dict[Node, Node] = {}
    for w, t in zip(wrt, tangents):
        if t is None:
            continue
        if t.shape != w.shape:
            raise ShapeError(f"tangent of shape {t.shape} for a primal of shape {w.shape}")
        if not is_float(w):
            raise DTypeError(f"tangent given for a primal of dtype {w.dtype}; only float and complex primals have tangents")
        tan[w] = L.cast(t, w.dtype)
    order = toposort(outputs)
    need = _needed(order, outputs)
    for n in order:
        if n in tan or not n.inputs or n not in need:
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
        prev = set_build_context(meta(n).location, "tangent", n.op.name)  # source_location + role, per node
        try:
            t = op.jvp(ts, n)
        finally:
            set_build_context(*prev)
        if t is not None:
            if t.shape != n.shape:  # pragma: no cover - a rule bug
                raise ShapeError(f"JVP rule of {op.name} gave a tangent of shape {t.shape} for output {n.shape}")
            if t.dtype != n.dtype:
                t = L.cast(t, n.dtype)
            tan[n] = t
    return [tan.get(o) for o in outputs]


def vjp_pass(graph: Graph, cotangents: Sequence[Node] | None = None, wrt: Sequence[Node] | None = None) -> Graph:
    """Graph -> Graph: append the reverse sweep; outputs become the cotangents of `wrt`.

    Args:
        graph: the forward graph.
        cotangents: seeds, one per output (shape and dtype of the output);
            default: ones for a single scalar output.
        wrt: nodes to differentiate with respect to (default: the float inputs).

    Returns:
        A graph with the same inputs whose outputs are the cotangents (zeros
        materialised where there is no dependence).

    Raises:
        ShapeError: no cotangents for a graph without a single scalar output.
        UnsupportedOpError: an op on the path has no VJP rule.
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
    extra = [c for c in cotangents if c is not None and c.op.name == "input" and c not in set(graph.inputs)]
    return Graph(graph.inputs + extra, outs, graph.in_tree if not extra else None, None, name=f"vjp({graph.name})")


def jvp_pass(graph: Graph, wrt: Sequence[Node], tangents: Sequence[Node]) -> Graph:
    """Graph -> Graph: push tangents forward; outputs become the output tangents.

    Args:
        graph: the forward graph.
        wrt: nodes of the graph whose tangents are given (usually its inputs).
        tangents: one node per `wrt` node, same shape; usually new input
            nodes, which are appended to the graph's inputs.

    Returns:
        A graph whose outputs are the tangents of the graph's outputs.

    Raises:
        ShapeError, DTypeError: a tangent that does not match its primal.
        UnsupportedOpError: an op on the path has no JVP rule.
    """
    with current_builder():
        ts = jvp_nodes(graph.outputs, wrt, tangents)
        outs = [L.zeros_like(o) if t is None else t for o, t in zip(graph.outputs, ts)]
    extra = [t for t in tangents if t.op.name == "input" and t not in set(graph.inputs)]
    return Graph(graph.inputs + extra, outs, None, None, name=f"jvp({graph.name})")
