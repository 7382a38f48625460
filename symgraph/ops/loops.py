"""Regions: the `scan` (loop) and `cond` (branches) primitives, whose records hold traced sub-graphs.

`scan(*consts, *init, *xs; region, index)` is output leaf `index` of a loop
(JAX's `lax.scan`): the region (a `symgraph.control.Region`) holds the body
sub-graph, traced once, with inputs (consts, carry, x) and outputs (carry, y),
and the static facts (trip count, direction). Outputs 0..nk-1 are the final
carries, the rest the per-step ys stacked along a new leading axis. Nodes are
single values, so a loop with several outputs is several `scan` nodes with the
same inputs and region, one per `index` (siblings):
- the evaluator runs the loop once for all siblings (the region keeps the
  last run, checked against its inputs);
- reverse mode sees the siblings as one group (`Op.extra["group_vjp"]`,
  `"group_key"`): their cotangents go into one backward loop;
- forward mode and batching build one derived loop per region and tangent
  or batch pattern (memoized on the region), so siblings share it.

`cond(index, *operands, *captured; region, index)` is output leaf `index` of
the branch that the first input selects (a `symgraph.branches.Branches`: one
graph per branch; `lax.cond` / `lax.switch`), with the same sibling scheme.

The rules are the region's methods: the record delegates to `node.attr("region")`,
as `custom_vjp_call` delegates to its rule (symgraph.ops.custom).
"""

from __future__ import annotations

import numpy as np

from .. import lax as L
from ..errors import DTypeError, LoopLimitError, ShapeError
from .batch import arg, rebind
from .core import Op, register


def _shape(*shapes, region, index):
    return region.out_shape(index, shapes)


def _dtype(*dtypes, region, index):
    return region.out_dtype(index, dtypes)


def _impl(*xs, region, index):
    return region.run(xs)[index]


def _vjp(ct, node):  # one output at a time (the group rule below is what reverse mode calls)
    return node.attr("region").vjp_group({node.attr("index"): ct}, node)


def _jvp(tangents, node):
    return node.attr("region").jvp(tangents, node)


def _batch(node, bargs, size):
    return node.attr("region").batch(node, bargs, size)


def _flops(node):
    return node.attr("region").flops()


def _group_vjp(cts, node):
    return node.attr("region").vjp_group(cts, node)


def _group_key(node):
    return node.inputs, node.attr("region"), node.tag


for _name, _doc in (("scan", "output leaf `index` of a loop over a traced body (lax.scan): final carries, then "
                              "stacked ys"),
                    ("cond", "output leaf `index` of the traced branch that input 0 selects (lax.switch; only "
                             "that branch runs)"),
                    ("while", "final carry leaf `index` of a while loop over a traced condition and body "
                              "(lax.while_loop; trip count known at run time)")):
    register(Op(_name, None, "opaque", _shape, _dtype, _impl, _vjp, _jvp, doc=_doc, cheap=False, foldable=False,
                batch=_batch, flops=_flops,
                extra={"group_vjp": _group_vjp, "group_key": _group_key, "region": _name}))


# ----- guard: a run-time check on a loop's bound -----


def _guard_shape(x, ok, **_):
    if tuple(ok) != ():
        raise ShapeError(f"guard: the flag has shape {tuple(ok)}; it must be a scalar")
    return x


def _guard_dtype(x, ok, **_):
    if np.dtype(ok) != np.bool_:
        raise DTypeError(f"guard: the flag has dtype {np.dtype(ok)}; it must be bool")
    return x


def _guard_impl(x, ok, message, location):
    if not bool(ok):
        raise LoopLimitError(message, location)
    return x


def _guard_vjp(ct, node):
    return rebind(node, (ct, node.inputs[1])), None


def _guard_jvp(tangents, node):
    t = tangents[0]
    return None if t is None else rebind(node, (t, node.inputs[1]))


def _guard_batch(node, bargs, size):
    x = arg(node, bargs, 0, size)
    ok = node.inputs[1]
    if bargs[1] is not None:  # every example's loop must have ended
        ok = L.binary("eq", L.reduce("sum", L.cast(L.unary("logical_not", bargs[1], float_op=False), np.int64)),
                      np.int64(0))
    return rebind(node, (x, ok))


register(Op("guard", 2, "opaque", _guard_shape, _guard_dtype, _guard_impl, _guard_vjp, _guard_jvp,
            doc="input 0, after checking that the bool flag (input 1) is true: raises LoopLimitError(message, "
                "location) otherwise (a bounded loop that needed more steps; compiled code computes the flag as "
                "an extra output, symgraph.guards)",
            cost=0, cheap=False, foldable=False, batch=_guard_batch))
