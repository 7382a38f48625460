"""Rules for the guards of reverse mode: indicator masks compared with zero become boolean masks.

Reverse mode keeps a cotangent masked by a `where` guarded through linear ops
(`symgraph.autodiff._carry_mask`): it pulls the 0/1 indicator ``cast(c)`` of the
unmasked positions back through the op's VJP (a sum, a slice, a broadcast, a
sum unrolled into adds of slices) and guards the result with
``where(vjp(indicator) > 0, ..., 0)``. The indicator stays a float array
computed and compared at every element. Since an indicator is non-negative,
its comparison with zero is a boolean expression of the masks it came from:

    cast(b) > 0          -> b                 (b boolean: cast(b) is 0 or 1)
    view(x) > 0          -> view(x > 0)       (reshape, broadcast_to, slice, transpose, expand_dims, squeeze)
    (x + y) > 0          -> (x > 0) | (y > 0) (x, y >= 0)
    (x * y) > 0          -> (x > 0) & (y > 0) (x, y >= 0)
    where(c, x, y) > 0   -> where(c, x > 0, y > 0)
    s > 0                -> True or False     (a splat s >= 0)

(exact: each holds for every non-negative x and y; an operand that is not
built of such pieces, or a piece with several readers, leaves the comparison
as it is). Two guards with one
condition then nest, and

    where(c, where(c, a, u), b) -> where(c, a, b) ;  where(c, a, where(c, u, b)) -> where(c, a, b)

drops the inner one. The guards' conditions are often slices of a
broadcast mask (a (P, 1) condition broadcast to (P, 3), then one column per
coordinate); slicing commutes with broadcasting,

    broadcast_to(x, s)[sl] -> broadcast_to(x[sl'], s')   (sl' slices only the axes x does not broadcast)

so those columns are the one (P, 1) mask again, and their guards share it.
On W9's Jacobian blocks the kernels of the rotation's derivative lose their
float indicator sums.
"""

from __future__ import annotations

import numpy as np

from ...ir import Node
from .analysis import _is, _is_pos_zero, _splat
from .context import _constant, _mk, _single
from .rules import rule

__all__ = ["indicator_mask"]

#: Views through which an indicator's comparison is moved (the same op and attrs on the boolean mask).
_VIEWS = ("reshape", "broadcast_to", "slice", "transpose", "expand_dims", "squeeze")
#: Depth of the walk down an indicator expression.
_MAX_DEPTH = 24


def indicator_mask(x: Node, depth: int = 0) -> Node | None:
    """A boolean node equal to ``x > 0`` when x is a non-negative indicator expression, else None.

    Args:
        x: a float node.
        depth: recursion depth so far (the walk stops at `_MAX_DEPTH`).

    Returns:
        The mask (shape of x, dtype bool) built in the current builder, or None.
    """
    if depth > _MAX_DEPTH or x.tag is not None or x.dtype.kind != "f":
        return None
    s = _splat(x)
    if s is not None:
        v = float(s)
        if not v >= 0.0:  # negative or NaN: not an indicator
            return None
        return _constant(np.bool_(v > 0.0), np.bool_, x.shape)
    name = x.op.name
    if name != "cast" and not _single(x):  # rules never duplicate a node with several readers
        return None
    if name == "cast":
        (b,) = x.inputs
        return b if b.dtype == np.bool_ and b.tag is None else None
    if name in _VIEWS:
        m = indicator_mask(x.inputs[0], depth + 1)
        return None if m is None else _mk(name, m, **dict(x.attrs))
    if name in ("add", "mul"):
        a, b = x.inputs
        if a.shape != x.shape or b.shape != x.shape:
            return None
        ma = indicator_mask(a, depth + 1)
        mb = indicator_mask(b, depth + 1) if ma is not None else None
        if mb is None:
            return None
        return _mk("logical_or" if name == "add" else "logical_and", ma, mb)
    if name == "where":
        c, a, b = x.inputs
        if a.shape != x.shape or b.shape != x.shape or c.shape != x.shape:
            return None
        ma = indicator_mask(a, depth + 1)
        mb = indicator_mask(b, depth + 1) if ma is not None else None
        return None if mb is None else _mk("where", c, ma, mb)
    return None


@rule("gt")
def indicator_positive(node: Node, ins: tuple) -> Node | None:
    # indicator > 0 -> the boolean mask it came from (module docstring)
    x, z = ins
    s = _splat(z)
    if s is None or float(s) != 0.0 or x.shape != node.shape:
        return None
    m = indicator_mask(x)
    if m is None or m.shape != node.shape:
        return None
    return m


@rule("where")
def where_nested_same_condition(node: Node, ins: tuple) -> Node | None:
    # where(c, where(c, a, u), b) -> where(c, a, b) ;  where(c, a, where(c, u, b)) -> where(c, a, b)
    c, a, b = ins
    if _is(a, "where") and a.inputs[0] is c and a.shape == node.shape and a.inputs[1].shape == node.shape:
        return _mk("where", c, a.inputs[1], b)
    if _is(b, "where") and b.inputs[0] is c and b.shape == node.shape and b.inputs[2].shape == node.shape:
        return _mk("where", c, a, b.inputs[2])
    return None


@rule("slice")
def slice_of_broadcast(node: Node, ins: tuple) -> Node | None:
    # broadcast_to(x, s)[sl] -> broadcast_to(x[sl'], s')  (sl' on the axes x does not broadcast)
    b = ins[0]
    if not _is(b, "broadcast_to"):
        return None
    x = b.inputs[0]
    lead = len(b.shape) - len(x.shape)
    st, sp, stp = node.attr("starts"), node.attr("stops"), node.attr("steps")
    xs, xe, xp = [], [], []
    for i, d in enumerate(x.shape):
        ax = lead + i
        if d == b.shape[ax]:
            xs.append(st[ax])
            xe.append(sp[ax])
            xp.append(stp[ax])
        elif d == 1:
            xs.append(0)
            xe.append(1)
            xp.append(1)
        else:
            return None
    if any(node.shape[lead + i] == 0 for i in range(len(x.shape))):
        return None
    if all(a == 0 and e == d and p == 1 for a, e, p, d in zip(xs, xe, xp, x.shape)):
        y = x
    else:
        y = _mk("slice", x, starts=tuple(xs), stops=tuple(xe), steps=tuple(xp))
    return y if y.shape == node.shape else _mk("broadcast_to", y, shape=tuple(node.shape))


@rule("logical_not")
def not_of_broadcast(node: Node, ins: tuple) -> Node | None:
    # !broadcast_to(x, s) -> broadcast_to(!x, s)  (the negation on the smaller array; a guard's
    # polarity on a broadcast condition)
    b = ins[0]
    if not _is(b, "broadcast_to") or b.inputs[0].dtype != node.dtype:
        return None
    return _mk("broadcast_to", _mk("logical_not", b.inputs[0]), shape=tuple(node.shape))


@rule("add")
def add_same_guard(node: Node, ins: tuple) -> Node | None:
    # where(m, a, 0) + where(m, b, 0) -> where(m, a + b, 0) ;  where(m, 0, a) + where(m, 0, b) -> where(m, 0, a + b)
    # (zeros +0.0: 0.0 + 0.0 is the 0.0 kept; one select instead of two)
    x, y = ins
    if not (_is(x, "where") and _is(y, "where")) or x.inputs[0] is not y.inputs[0] or node.dtype.kind != "f":
        return None
    if x.shape != node.shape or y.shape != node.shape:
        return None
    c, xa, xb = x.inputs
    _, ya, yb = y.inputs
    if _is_pos_zero(xb) and _is_pos_zero(yb) and xa.shape == ya.shape == node.shape:
        return _mk("where", c, _mk("add", xa, ya), xb)
    if _is_pos_zero(xa) and _is_pos_zero(ya) and xb.shape == yb.shape == node.shape:
        return _mk("where", c, xa, _mk("add", xb, yb))
    return None
