"""Batching (vmap) as a graph transformation: per-op rules with a leading batch axis.

`batch_nodes` rewrites the nodes that depend on some placeholders so that
each carries an extra leading axis of size B: a batching rule per primitive
turns `op(x, y)` with batched operands into one node (or a few) over the whole
batch, so the graph size does not grow with B. `jacobian` and `hessian` use it
to push a whole identity basis through one pullback (jacrev) or one
pushforward (jacfwd) instead of looping over the basis vectors. `vmap` is the
user-facing transformation (JAX-shaped).

Ops without a rule (none of the primitives; the `custom_vjp_call` /
`custom_jvp_call` wrappers and ops registered by users) fall back to a loop:
one copy of the op per batch element, stacked; that fallback is O(B) in nodes.

References:
    JAX's batching interpreter (`jax.vmap`, "autobatching": Bradbury et al.,
    JAX: composable transformations of Python+NumPy programs, 2018).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from . import lax as L
from .autodiff import placeholder
from .eager import run
from .errors import ShapeError, SymgraphError
from .ir import Node, current_builder, meta, role, source_location, toposort, tracing_active
from .ops.linalg import parse_einsum
from .tree import tree_flatten, tree_unflatten

__all__ = ["batch_nodes", "vmap", "BATCH_RULES", "LOOP_FALLBACK_OPS", "identity_basis"]

BatchRule = Callable[[Node, list, int], Node]
BATCH_RULES: dict[str, BatchRule] = {}

# Ops that are batched by the generic loop (one op per batch element). Kept
# explicit so that a test can tell a deliberate fallback from a missing rule.
LOOP_FALLBACK_OPS = frozenset({"random_uniform", "custom_vjp_call", "custom_jvp_call"})


def _rule(*names: str) -> Callable[[BatchRule], BatchRule]:
    def deco(fn: BatchRule) -> BatchRule:
        for nm in names:
            BATCH_RULES[nm] = fn
        return fn

    return deco


def _bcast(x: Node, size: int) -> Node:
    """An unbatched node broadcast along a new leading axis of `size`."""
    return L.broadcast_to(x, (size,) + x.shape)


def _arg(node: Node, bargs: list, i: int, size: int) -> Node:
    """Input i of node, batched (broadcast if it was not)."""
    b = bargs[i]
    return _bcast(node.inputs[i], size) if b is None else b


def _rebind(node: Node, ins: Sequence[Node], **attrs: Any) -> Node:
    """node's op on new inputs, with the same tag and attrs (some replaced)."""
    params = node.params
    params.update(attrs)
    return current_builder().make(node.op, ins, params, node.tag)


def _move0(x: Node, dst: int) -> Node:
    """Move axis 0 to position dst."""
    perm = list(range(1, x.ndim))
    perm.insert(dst, 0)
    return L.transpose(x, tuple(perm))


def _move_to0(x: Node, src: int) -> Node:
    """Move axis src to position 0."""
    perm = [src] + [i for i in range(x.ndim) if i != src]
    return L.transpose(x, tuple(perm))


# ----- elementwise: broadcast the unbatched operands, same op -----


def _elementwise(node: Node, bargs: list, size: int) -> Node:
    return _rebind(node, [_arg(node, bargs, i, size) for i in range(len(node.inputs))])


# ----- reductions -----


@_rule("sum", "max", "min", "prod")
def _reduce(node: Node, bargs: list, size: int) -> Node:
    return _rebind(node, [bargs[0]], axes=tuple(a + 1 for a in node.attr("axes")))


@_rule("argmax")
def _argmax(node: Node, bargs: list, size: int) -> Node:
    return _rebind(node, [bargs[0]], axis=node.attr("axis") + 1)


# ----- layout -----


@_rule("reshape")
def _reshape(node: Node, bargs: list, size: int) -> Node:
    return _rebind(node, [bargs[0]], shape=(size,) + tuple(node.attr("shape")))


@_rule("expand_dims", "squeeze")
def _shift_axes(node: Node, bargs: list, size: int) -> Node:
    return _rebind(node, [bargs[0]], axes=tuple(a + 1 for a in node.attr("axes")))


@_rule("transpose")
def _transpose(node: Node, bargs: list, size: int) -> Node:
    return _rebind(node, [bargs[0]], perm=(0,) + tuple(p + 1 for p in node.attr("perm")))


@_rule("broadcast_to")
def _broadcast(node: Node, bargs: list, size: int) -> Node:
    x = bargs[0]
    shape = tuple(node.attr("shape"))
    k = len(shape) - (x.ndim - 1)
    if k:
        x = L.reshape(x, (size,) + (1,) * k + x.shape[1:])
    return L.broadcast_to(x, (size,) + shape)


@_rule("slice")
def _slice(node: Node, bargs: list, size: int) -> Node:
    p = node.params
    return _rebind(node, [bargs[0]], starts=(0,) + tuple(p["starts"]), stops=(size,) + tuple(p["stops"]),
                   steps=(1,) + tuple(p["steps"]))


@_rule("unslice")
def _unslice(node: Node, bargs: list, size: int) -> Node:
    p = node.params
    return _rebind(node, [bargs[0]], shape=(size,) + tuple(p["shape"]), starts=(0,) + tuple(p["starts"]),
                   stops=(size,) + tuple(p["stops"]), steps=(1,) + tuple(p["steps"]))


@_rule("concatenate")
def _concatenate(node: Node, bargs: list, size: int) -> Node:
    return _rebind(node, [_arg(node, bargs, i, size) for i in range(len(node.inputs))], axis=node.attr("axis") + 1)


def _flat_index(idx: Node, n: int, size: int) -> Node:
    """Batched indices (B, *ishape) into rows of a (B * n, ...) array: normalized, clamped, offset by b * n."""
    idx = L.where(L.binary("lt", idx, 0), L.add(idx, np.asarray(n, idx.dtype)), idx)
    idx = L.binary("minimum", L.binary("maximum", idx, np.asarray(0, idx.dtype)), np.asarray(max(n - 1, 0), idx.dtype))
    off = np.arange(size, dtype=idx.dtype).reshape((size,) + (1,) * (idx.ndim - 1)) * n
    return L.add(idx, off)


@_rule("gather")
def _gather(node: Node, bargs: list, size: int) -> Node:
    x, i = node.inputs
    axis = node.attr("axis")
    if bargs[1] is None:
        return _rebind(node, [bargs[0], i], axis=axis + 1)
    # batched indices: move (batch, axis) to the front, flatten them, offset the indices per batch element
    xb = _arg(node, bargs, 0, size)                      # (B, pre..., n, rest...)
    n = x.shape[axis]
    xt = _move_to0(_move_to0(xb, axis + 1), 1)            # (B, n, pre..., rest...)
    rest = xt.shape[2:]
    xf = L.reshape(xt, (size * n,) + rest)
    g = L.bind("gather", xf, _flat_index(bargs[1], n, size), axis=0)   # (B, ishape..., pre..., rest...)
    ni, npre = i.ndim, axis
    # to (B, pre..., ishape..., rest...)
    perm = (0,) + tuple(range(1 + ni, 1 + ni + npre)) + tuple(range(1, 1 + ni)) + tuple(range(1 + ni + npre, g.ndim))
    return L.transpose(g, perm)


@_rule("scatter_add")
def _scatter_add(node: Node, bargs: list, size: int) -> Node:
    u, i = node.inputs
    axis = node.attr("axis")
    shape = tuple(node.attr("shape"))
    if bargs[1] is None:
        return _rebind(node, [bargs[0], i], shape=(size,) + shape, axis=axis + 1)
    ub = _arg(node, bargs, 0, size)                      # (B, pre..., ishape..., rest...)
    n, ni, npre = shape[axis], i.ndim, axis
    # to (B, ishape..., pre..., rest...), the layout of a gather along axis 0
    perm = (0,) + tuple(range(1 + npre, 1 + npre + ni)) + tuple(range(1, 1 + npre)) + tuple(range(1 + npre + ni, ub.ndim))
    ut = L.transpose(ub, perm)
    rest = shape[:axis] + shape[axis + 1:]
    out = L.bind("scatter_add", ut, _flat_index(bargs[1], n, size), shape=(size * n,) + rest, axis=0)
    out = L.reshape(out, (size, n) + rest)               # (B, n, pre..., rest...)
    return L.transpose(out, (0,) + tuple(range(2, 2 + npre)) + (1,) + tuple(range(2 + npre, out.ndim)))


# ----- contractions -----


@_rule("matmul")
def _matmul(node: Node, bargs: list, size: int) -> Node:
    a, b = node.inputs
    ba, bb = bargs
    if ba is not None and bb is not None:
        return L.bind("matmul", ba, bb)
    if ba is not None:
        # (B, ..., m, k) -> (..., B*m, k) @ (..., k, n): one product, no copies of b
        nb = a.ndim - 2
        m, k = a.shape[-2:]
        t = L.transpose(ba, tuple(range(1, nb + 1)) + (0, nb + 1, nb + 2))
        t = L.reshape(t, a.shape[:-2] + (size * m, k))
        out = L.bind("matmul", t, b)                     # (..., B*m, n)
        out = L.reshape(out, a.shape[:-2] + (size, m, b.shape[-1]))
        return _move_to0(out, nb)
    # b batched: (B, ..., k, n) -> (..., k, B*n)
    nb = b.ndim - 2
    k, n = b.shape[-2:]
    t = L.transpose(bb, tuple(range(1, nb + 1)) + (nb + 1, 0, nb + 2))
    t = L.reshape(t, b.shape[:-2] + (k, size * n))
    out = L.bind("matmul", a, t)                         # (..., m, B*n)
    out = L.reshape(out, a.shape[:-2] + (a.shape[-2], size, n))
    return _move_to0(out, nb + 1)


@_rule("einsum")
def _einsum(node: Node, bargs: list, size: int) -> Node:
    spec = node.attr("spec")
    terms, out = parse_einsum(spec, len(node.inputs))
    used = set(spec)
    z = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in used)
    ins, new_terms = [], []
    for x, bx, t in zip(node.inputs, bargs, terms):
        ins.append(x if bx is None else bx)
        new_terms.append(t if bx is None else z + t)
    return _rebind(node, ins, spec=",".join(new_terms) + "->" + z + out)


# ----- the generic loop fallback -----


def _take(x: Node, i: int) -> Node:
    nd = x.ndim
    s = L.bind("slice", x, starts=(i,) + (0,) * (nd - 1), stops=(i + 1,) + x.shape[1:], steps=(1,) * nd)
    return L.reshape(s, x.shape[1:])


def loop_rule(node: Node, bargs: list, size: int) -> Node:
    """Batch any op by applying it once per batch element and stacking (O(B) nodes)."""
    outs = []
    for j in range(size):
        ins = [x if b is None else _take(b, j) for x, b in zip(node.inputs, bargs)]
        outs.append(L.reshape(_rebind(node, ins), (1,) + node.shape))
    return outs[0] if size == 1 else L.bind("concatenate", *outs, axis=0)


def _rule_for(node: Node) -> BatchRule:
    op = node.op
    r = op.extra.get("batch")
    if r is not None:
        return r
    r = BATCH_RULES.get(op.name)
    if r is not None:
        return r
    if op.kind == "elementwise" and op.name not in LOOP_FALLBACK_OPS:
        return _elementwise
    return loop_rule


def batch_nodes(outputs: Sequence[Node], subst: dict[Node, Node], size: int) -> list[Node]:
    """Rewrite `outputs` as batched nodes, each with a leading axis of `size`.

    Args:
        outputs: nodes of the current builder.
        subst: maps nodes (usually placeholders) to their batched values,
            of shape (size, *node.shape) and the node's dtype.
        size: the batch size B.

    Returns:
        One node per output of shape (size, *output.shape); outputs that do not
        depend on `subst` are broadcast along the new axis.

    Raises:
        ShapeError: a substitute whose shape is not (size, *node.shape).
    """
    bat: dict[Node, Node] = {}
    for k, v in subst.items():
        if tuple(v.shape) != (size,) + k.shape:
            raise ShapeError(f"batch_nodes: batched value of shape {v.shape} for a node of shape {k.shape} "
                             f"(batch size {size})")
        bat[k] = L.cast(v, k.dtype)
    for n in toposort(outputs):
        if n in bat or not any(x in bat for x in n.inputs):
            continue
        bargs = [bat.get(x) for x in n.inputs]
        m = meta(n)
        with source_location(m.location), role(m.role):
            out = _rule_for(n)(n, bargs, size)
        if out.shape != (size,) + n.shape:  # pragma: no cover - a rule bug
            raise ShapeError(f"batching rule of {n.op.name} gave shape {out.shape}, expected {(size,) + n.shape}")
        bat[n] = out
    return [bat[o] if o in bat else _bcast(o, size) for o in outputs]


def identity_basis(n: int, dtype: Any) -> Node:
    """The n x n identity as a node: eq(iota[:, None], iota[None, :]) cast to dtype.

    Built from two length-n constants, so its node count does not depend on n.
    """
    iota = np.arange(n, dtype=np.int64)
    r = L.broadcast_to(L.constant(iota.reshape(n, 1)), (n, n))
    c = L.broadcast_to(L.constant(iota.reshape(1, n)), (n, n))
    return L.cast(L.binary("eq", r, c), dtype)


# ----- vmap -----


def _norm_axes(axes: Any, n: int, what: str) -> list:
    if axes is None or isinstance(axes, (int, np.integer)):
        return [axes] * n
    axes = list(axes)
    if len(axes) != n:
        raise SymgraphError(f"vmap: {what} has {len(axes)} entries for {n} arguments")
    return axes


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0) -> Callable:
    """Vectorize f over an axis of its arguments (JAX-shaped).

    Traces f once on one example and batches the graph with per-op rules, so
    `vmap(f)(xs)` is one graph over the whole batch, not a Python loop.

    Args:
        f: function of arrays (or pytrees).
        in_axes: int, None, or a tuple with one entry (int or None) per
            positional argument: the batched axis of that argument (applied to
            every leaf of a pytree argument); None = not batched.
        out_axes: int or a tuple per output leaf: where the batch axis goes
            in each result.

    Returns:
        The batched function. On NumPy arrays it traces, simplifies and
        evaluates; on traced values it builds nodes inline (so it nests with
        grad, jacobian and itself).

    Raises:
        ShapeError: batched axes of different sizes, or an axis out of range.
        SymgraphError: no argument is batched.
    """
    fname = f"vmap({getattr(f, '__name__', 'f')})"

    def inline(*args: Any) -> Any:
        axes = _norm_axes(in_axes, len(args), "in_axes")
        new_args = list(args)
        subst: dict[Node, Node] = {}
        size = None
        for a, (arg, ax) in enumerate(zip(args, axes)):
            if ax is None:
                continue
            leaves, td = tree_flatten(arg)
            phs = []
            for leaf in leaves:
                x = L.asnode(leaf)
                if x.ndim == 0:
                    raise ShapeError(f"{fname}: argument {a} is 0-d and cannot be mapped over axis {ax}")
                if not -x.ndim <= ax < x.ndim:
                    raise ShapeError(f"{fname}: in_axes {ax} out of range for argument {a} of shape {x.shape}")
                xb = _move_to0(x, ax % x.ndim)
                if size is None:
                    size = xb.shape[0]
                elif xb.shape[0] != size:
                    raise ShapeError(f"{fname}: mapped axes have different sizes: {size} and {xb.shape[0]} "
                                     f"(argument {a}, shape {x.shape}, axis {ax})")
                ph = placeholder(xb.shape[1:], xb.dtype, name=f"vmap_arg{a}")
                subst[ph] = xb
                phs.append(ph)
            new_args[a] = tree_unflatten(td, phs)
        if size is None:
            raise SymgraphError(f"{fname}: no argument is mapped (in_axes is all None)")
        out = f(*new_args)
        ol, otree = tree_flatten(out)
        ol = [L.as_output(o, i) for i, o in enumerate(ol)]
        outs = batch_nodes(ol, subst, size)
        oax = _norm_axes(out_axes, len(outs), "out_axes")
        res = []
        for o, ax in zip(outs, oax):
            if ax is None:
                raise SymgraphError(f"{fname}: out_axes None is not supported; outputs are always batched")
            if not -o.ndim <= ax < o.ndim:
                raise ShapeError(f"{fname}: out_axes {ax} out of range for an output of shape {o.shape}")
            res.append(_move0(o, ax % o.ndim))
        return tree_unflatten(otree, res)

    @functools.wraps(f)
    def vf(*args: Any) -> Any:
        if tracing_active() or any(isinstance(x, Node) for x in tree_flatten(args)[0]):
            return inline(*args)  # into the graph being traced (f may close over its values)
        return run(inline, args, fname)

    return vf
