"""Control flow that stays in the graph: `scan` and `fori_loop` (JAX's signatures, pytree carries).

`scan(f, init, xs)` traces `f(carry, x) -> (carry, y)` once, on placeholders,
into a loop region (`symgraph.regions.Region`) held by `scan` nodes, so the
graph does not grow with the trip count; values of the enclosing trace that
`f` closes over become explicit inputs of the loop. Reverse mode, forward
mode and vmap are rules of the region (docs/control-flow.md).

Called on arrays outside a trace, these functions trace, simplify and
evaluate, as the transformations do.

References:
    JAX's `lax.scan` / `lax.fori_loop` (the API); Griewank & Walther,
    Evaluating Derivatives (2nd ed., SIAM 2008), ch. 12 (loop reversal).
"""

from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

from . import lax as L
from .autodiff import placeholder
from .eager import run
from .errors import DTypeError, ShapeError, SymgraphError
from .ir import Node, tracing_active
from .regions import Region, capture, scan_node
from .tree import tree_flatten, tree_paths, tree_unflatten

__all__ = ["scan", "fori_loop"]


def _fname(f: Callable) -> str:
    return getattr(f, "__name__", type(f).__name__)


def _leaf_node(x: Any, what: str) -> Node:
    if isinstance(x, Node):
        return x
    if isinstance(x, (np.ndarray, np.generic, numbers.Number)) and not isinstance(x, complex):
        a = np.asarray(x)
        if a.dtype.kind not in "biuf":
            raise DTypeError(f"{what} has dtype {a.dtype}; loop carries and xs are bool, integer or float arrays")
        return L.constant(a)
    raise DTypeError(f"{what} has type {type(x).__name__}; loop carries and xs are arrays, numbers or pytrees "
                     f"of them")


def _has_nodes(tree: Any) -> bool:
    return any(isinstance(x, Node) for x in tree_flatten(tree)[0])


def scan(f: Callable, init: Any, xs: Any = None, length: int | None = None, reverse: bool = False,
         unroll: int | bool = 1) -> tuple[Any, Any]:
    """Loop `carry, y = f(carry, x)` over the leading axis of `xs`, as JAX's `lax.scan`.

    Semantics (a Python loop that stays one loop in the graph)::

        ys = []
        for x in (reversed(xs) if reverse else xs):
            carry, y = f(carry, x)
            ys.append(y)
        return carry, stack(ys)            # ys in the order of xs, also when reverse

    Args:
        f: `f(carry, x) -> (carry, y)`; carry and y are pytrees of arrays. It is
            traced once; it may close over traced values (they become inputs
            of the loop) and over NumPy arrays (constants).
        init: the initial carry (pytree of arrays or numbers); the carry that
            `f` returns must have its structure, shapes and dtypes.
        xs: pytree of arrays with a common leading axis of length T, or None
            (then `length` gives T and `f` gets x = None).
        length: the trip count T (needed when xs is None; checked otherwise).
        reverse: run from the last x to the first.
        unroll: accepted for JAX compatibility (an int >= 1 or a bool); the
            values do not depend on it.

    Returns:
        (final carry, stacked ys): ys leaves have shape (T, *y.shape).

    Raises:
        ShapeError: xs leaves with different leading lengths, a length that
            disagrees with xs or is negative, no length and no xs, or a body
            whose carry output changes a leaf's shape (the message names the leaf).
        DTypeError: a body whose carry output changes a leaf's dtype, or a
            leaf that is not a numeric array.
        SymgraphError: f does not return a (carry, y) pair, or the carry's
            pytree structure changes.

    Shapes and dtypes: carries keep theirs; x leaves are xs leaves without the
    leading axis; any dtype (bool, integer, float) may be carried, only float
    leaves carry derivatives.
    """
    if not callable(f):
        raise SymgraphError(f"scan: f must be callable, got {type(f).__name__}")
    if isinstance(unroll, bool):
        unroll = 1
    if not isinstance(unroll, (int, np.integer)) or unroll < 1:
        raise SymgraphError(f"scan: unroll must be an int >= 1 or a bool, got {unroll!r}")
    if tracing_active() or _has_nodes((init, xs)):
        return _scan(f, init, xs, length, reverse)
    return run(lambda c, x: _scan(f, c, x, length, reverse), (init, xs), f"scan({_fname(f)})")


def _scan(f: Callable, init: Any, xs: Any, length: int | None, reverse: bool) -> tuple[Any, Any]:
    name = f"scan({_fname(f)})"
    c_leaves, c_tree = tree_flatten(init)
    c_paths = tree_paths(c_tree)
    init_nodes = [_leaf_node(c, f"{name}: init{p}") for c, p in zip(c_leaves, c_paths)]
    x_leaves, x_tree = tree_flatten(xs)
    x_paths = tree_paths(x_tree)
    x_nodes = [_leaf_node(x, f"{name}: xs{p}") for x, p in zip(x_leaves, x_paths)]
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool):
            raise ShapeError(f"{name}: length must be a Python int, got {type(length).__name__}")
        if length < 0:
            raise ShapeError(f"{name}: length must be >= 0, got {length}")
    T = length
    for x, p in zip(x_nodes, x_paths):
        if x.ndim == 0:
            raise ShapeError(f"{name}: xs{p} is 0-d; xs leaves need a leading axis to scan over")
        if T is None:
            T = x.shape[0]
        elif x.shape[0] != T:
            what = f"length={length}" if length is not None else f"xs{x_paths[0]} has {T}"
            raise ShapeError(f"{name}: xs{p} has leading length {x.shape[0]}, but {what}")
    if T is None:
        raise ShapeError(f"{name}: give xs or length (the trip count)")
    T = int(T)
    cph = [placeholder(c.shape, c.dtype, f"carry{p}") for c, p in zip(init_nodes, c_paths)]
    xph = [placeholder(x.shape[1:], x.dtype, f"x{p}") for x, p in zip(x_nodes, x_paths)]
    out = f(tree_unflatten(c_tree, cph), tree_unflatten(x_tree, xph) if x_nodes or xs is not None else None)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise SymgraphError(f"{name}: f must return a pair (carry, y), got {type(out).__name__}"
                            f"{f' of length {len(out)}' if isinstance(out, (tuple, list)) else ''}")
    new_c, y = out
    nc_leaves, nc_tree = tree_flatten(new_c)
    if nc_tree != c_tree:
        raise SymgraphError(f"{name}: f returned a carry of structure {nc_tree}; the carry's structure is {c_tree} "
                            f"(the body must keep it)")
    c_outs = []
    for o, c, p in zip(nc_leaves, cph, c_paths):
        if isinstance(o, numbers.Number) and not isinstance(o, (np.generic, complex)):
            o = L.constant(np.asarray(o, dtype=c.dtype))  # a Python number is weakly typed (as in JAX)
        o = _leaf_node(o, f"{name}: the carry{p} that f returned")
        if o.shape != c.shape:
            raise ShapeError(f"{name}: f changed the shape of carry{p}: it goes in as {c.shape} and comes out as "
                             f"{o.shape}; a loop carry keeps its shape")
        if o.dtype != c.dtype:
            raise DTypeError(f"{name}: f changed the dtype of carry{p}: it goes in as {c.dtype} and comes out as "
                             f"{o.dtype}; a loop carry keeps its dtype (cast with .astype, or start from an init "
                             f"of dtype {o.dtype})")
        c_outs.append(o)
    y_leaves, y_tree = tree_flatten(y)
    y_outs = [_leaf_node(v, f"{name}: y{p}") for v, p in zip(y_leaves, tree_paths(y_tree))]
    captured, cap_ph, body_outs = capture(c_outs + y_outs, cph + xph)
    from .ir import Graph

    body = Graph(cap_ph + cph + xph, body_outs, name=_fname(f))
    region = Region(body, len(cap_ph), len(cph), len(xph), T, reverse, name=name)
    ins = captured + init_nodes + x_nodes
    nk = len(cph)
    carry = [scan_node(ins, region, j) for j in range(nk)]
    ys = [scan_node(ins, region, nk + j) for j in range(len(y_outs))]
    return tree_unflatten(c_tree, carry), tree_unflatten(y_tree, ys)


def fori_loop(lower: int, upper: int, body_fun: Callable, init_val: Any) -> Any:
    """`for i in range(lower, upper): val = body_fun(i, val)`, as one loop in the graph (JAX's `lax.fori_loop`).

    The trip count is static here (Python ints), so this is a `scan` over
    `i = lower, ..., upper - 1` (int64), differentiable in both modes.

    Args:
        lower, upper: Python ints (or integer NumPy scalars); no iterations when upper <= lower.
        body_fun: `body_fun(i, val) -> val`, keeping val's structure, shapes and dtypes.
        init_val: the initial value (pytree of arrays or numbers).

    Returns:
        The final value.

    Raises:
        SymgraphError: a traced lower or upper (use sg.while_loop for a trip count known only at run time).
        ShapeError, DTypeError: as `scan`, when body_fun changes the carry.
    """
    for nm, v in (("lower", lower), ("upper", upper)):
        if isinstance(v, Node):
            raise SymgraphError(f"fori_loop: {nm} is a traced value; the trip count must be static (Python ints) "
                                f"for fori_loop. Use sg.while_loop for a trip count known only at run time.")
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise SymgraphError(f"fori_loop: {nm} must be an int, got {type(v).__name__}")
    lower, upper = int(lower), int(upper)
    if upper <= lower:
        return init_val

    def step(c: Any, i: Any) -> tuple[Any, None]:
        return body_fun(i, c), None

    step.__name__ = _fname(body_fun)
    return scan(step, init_val, np.arange(lower, upper, dtype=np.int64))[0]
