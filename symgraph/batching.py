"""Batching (vmap) as a graph transformation: per-op rules with a leading batch axis.

`batch_nodes` rewrites the nodes that depend on some placeholders so that
each carries an extra leading axis of size B: a batching rule per primitive
turns `op(x, y)` with batched operands into one node (or a few) over the whole
batch, so the graph size does not grow with B. `jacobian` and `hessian` use it
to push a whole identity basis through one pullback (jacrev) or one
pushforward (jacfwd) instead of looping over the basis vectors. `vmap` is the
user-facing transformation (JAX-shaped).

Each primitive's rule is a fact of its op record (`Op.batch`, written next
to its VJP and JVP); elementwise ops without one use the generic rule (the
same op on broadcast operands). Ops declared `batch="loop"` (random bits, the
`custom_vjp_call` / `custom_jvp_call` wrappers) and ops registered by users
without a rule fall back to a loop: one copy of the op per batch element,
stacked; that fallback is O(B) in nodes.

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
from .ir import Node, meta, role, source_location, toposort, tracing_active
from .ops import OPS
from .ops.batch import LOOP, bcast, elementwise_rule, loop_rule, move0, move_to0
from .tree import tree_flatten, tree_unflatten

__all__ = ["batch_nodes", "vmap", "BATCH_RULES", "LOOP_FALLBACK_OPS", "identity_basis"]

BatchRule = Callable[[Node, list, int], Node]

# The rules live in the op records (`Op.batch`, next to each op's VJP and JVP; symgraph.ops.batch
# has the contract and the generic rules). These two views of them are what tests and users ask:
#: op name -> its own batching rule (ops with one).
BATCH_RULES: dict[str, BatchRule] = {n: op.batch for n, op in OPS.items() if callable(op.batch)}
#: Ops batched by the generic loop on purpose (`Op.batch == "loop"`): random bits, user rules.
LOOP_FALLBACK_OPS = frozenset(n for n, op in OPS.items() if op.batch == LOOP)


def _rule_for(node: Node) -> BatchRule:
    op = node.op
    r = op.extra.get("batch")  # ops registered by users may carry their rule in extra
    if r is not None:
        return r
    if callable(op.batch):
        return op.batch
    if op.batch is None and op.kind == "elementwise":
        return elementwise_rule
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
        with source_location(m.location), role(m.role, m.origin):
            out = _rule_for(n)(n, bargs, size)
        if out.shape != (size,) + n.shape:  # pragma: no cover - a rule bug
            raise ShapeError(f"batching rule of {n.op.name} gave shape {out.shape}, expected {(size,) + n.shape}")
        bat[n] = out
    return [bat[o] if o in bat else bcast(o, size) for o in outputs]


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


def _leaf_axes(arg: Any, ax: Any, fname: str, a: int) -> list:
    """The batch axis of each leaf of argument `a` (tree_flatten order), from its in_axes entry `ax`.

    An int or None applies to every leaf; a dict, list or tuple is a prefix of the argument's structure (as
    JAX's in_axes), whose ints and Nones apply to the leaves below them.
    """
    if ax is None or isinstance(ax, (int, np.integer)):
        return [ax] * len(tree_flatten(arg)[0])
    if isinstance(ax, dict) and isinstance(arg, dict):
        if set(ax) != set(arg):
            raise SymgraphError(f"{fname}: in_axes for argument {a} has keys {sorted(map(str, ax))}, the argument "
                                f"{sorted(map(str, arg))}")
        out: list = []
        for k in _keys_in_tree_order(arg):
            out.extend(_leaf_axes(arg[k], ax[k], fname, a))
        return out
    if isinstance(ax, (list, tuple)) and isinstance(arg, (list, tuple)) and len(ax) == len(arg):
        return [x for sub, sa in zip(arg, ax) for x in _leaf_axes(sub, sa, fname, a)]
    raise SymgraphError(f"{fname}: in_axes entry {ax!r} for argument {a} is not an int, None, or a prefix of the "
                        f"argument's structure ({'an array' if isinstance(arg, (Node, np.ndarray)) else type(arg).__name__})")


def _keys_in_tree_order(d: dict) -> list:
    """The keys of d in the order tree_flatten visits them."""
    probe = {k: i for i, k in enumerate(d)}
    leaves, _ = tree_flatten(probe)
    keys = list(d)
    return [keys[i] for i in leaves]


def vmap(f: Callable, in_axes: Any = 0, out_axes: Any = 0) -> Callable:
    """Vectorize f over an axis of its arguments (JAX-shaped).

    Traces f once on one example and batches the graph with per-op rules, so
    `vmap(f)(xs)` is one graph over the whole batch, not a Python loop.

    Args:
        f: function of arrays (or pytrees).
        in_axes: int, None, or a tuple with one entry per positional
            argument: the batched axis of that argument (an int or None applies
            to every leaf of a pytree argument; a dict, list or tuple prefix of
            the argument's structure gives its leaves their own axes, as in
            JAX); None = not batched.
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
        for a, (arg, ax_entry) in enumerate(zip(args, axes)):
            if ax_entry is None:
                continue
            leaves, td = tree_flatten(arg)
            phs = []
            for leaf, ax in zip(leaves, _leaf_axes(arg, ax_entry, fname, a)):
                if ax is None:
                    phs.append(leaf)
                    continue
                x = L.asnode(leaf)
                if x.ndim == 0:
                    raise ShapeError(f"{fname}: argument {a} is 0-d and cannot be mapped over axis {ax}")
                if not -x.ndim <= ax < x.ndim:
                    raise ShapeError(f"{fname}: in_axes {ax} out of range for argument {a} of shape {x.shape}")
                xb = move_to0(x, ax % x.ndim)
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
            res.append(move0(o, ax % o.ndim))
        return tree_unflatten(otree, res)

    @functools.wraps(f)
    def vf(*args: Any) -> Any:
        if tracing_active() or any(isinstance(x, Node) for x in tree_flatten(args)[0]):
            return inline(*args)  # into the graph being traced (f may close over its values)
        return run(inline, args, fname)

    return vf
