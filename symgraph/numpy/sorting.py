"""Sorting along an axis: sort, argsort, partition, argpartition (stable, NaN last, as NumPy); searchsorted.

Two primitives (symgraph/ops/structural.py) sort every row of the last axis
in NumPy's kind="stable" order (NaN last, in input order; -0.0 and 0.0
equal, in input order): `sort` (the values, bit for bit NumPy's stable
sort's; with NumPy's default kind, which is not stable, only the order of
-0.0 and 0.0 and of NaNs with different payloads can differ) and `argsort`
(the permutation, int64, equal to np.argsort(kind="stable")). The sorted
axis is moved last. sort's derivative goes through argsort's permutation
(a scatter back, O(n); its tangent a gather), which differentiates again;
at ties it follows the stable order (the first tied input gets the first
output's cotangent). argsort's value is int64 and has no derivative.

Compiled (the LLVM backend), both are a native LSD radix sort per row on
integer keys of the values (argsort with the index as payload, sort with
the keys alone); rows up to 24 elements by straight insertion
(codegen/llvm/sort.py, after Knuth, TAOCP vol. 3, 5.2.1 and 5.2.5). The
evaluator calls NumPy's stable sort. A gradient of sort runs both: the
values forward, the permutation for the backward sweep. Timings against
NumPy: docs/tracing.md, "Sorting".

partition and argpartition are a selection (the argpartition primitive):
NumPy's contract asks each kth element in place, no larger ones before it
and no smaller ones after, and leaves the order inside the parts
unspecified. The evaluator calls NumPy's introselect; compiled code runs an
MSD radix selection on the same integer keys as the sort (O(n) per kth,
codegen/llvm/sort.py). partition's values are a gather through that
permutation, so its derivative is the gather's.

searchsorted is a vectorized bisection: every value of v keeps its own
bracket [lo, hi) into the sorted array and halves it ceil(log2(n + 1))
times with a gather of a[mid] and one NaN-last comparison, so its cost is
O(len(v) log n) work and O(log n) graph nodes (no sort of a).
"""


from __future__ import annotations

from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import ShapeError, UnsupportedOpError
from ..ir import Node
from .layout import moveaxis, ravel
from .logic import isnan
from ..ops.structural import take_last
from .structural import _arr, _axis, _full, _shape_errors, _traced

__all__ = ["argpartition", "argsort", "partition", "searchsorted", "sort"]


# ----- sorting (the module docstring has the algorithm and its cost) -----


def _argsort_last(x: Node) -> Node:
    """Stable argsort along the last axis (int64): the argsort primitive (symgraph/ops/structural.py)."""
    return L.bind("argsort", L.asnode(x))


def _sort_setup(a: Any, axis: Any, order: Any, op: str) -> tuple[Node, Node, int]:
    """(the values moved to the last axis, the comparison keys likewise, the axis) for a sort along axis."""
    if order is not None:
        raise UnsupportedOpError(f"{op}(order=...) sorts structured arrays, which symgraph does not support")
    a = _arr(a)
    if axis is None:
        a, axis = ravel(a), 0
    if a.ndim == 0:
        raise ShapeError(f"{op}: axis {axis} is out of bounds for array of dimension 0")
    ax = _axis(axis, a.ndim, op)
    keys = L.cast(a, _np.int8) if a.dtype.kind == "b" else a
    return moveaxis(L.asnode(a), ax, -1), moveaxis(L.asnode(keys), ax, -1), ax


def argsort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *, stable: Any = None) -> Any:
    """Indices that sort a along axis (int64; stable, NaN last, as NumPy's stable sort). No derivative.

    Algorithm and cost: the module docstring (the argsort primitive; compiled, a radix sort per row).
    """
    if not _traced(a):
        return _np.argsort(a, axis=axis, kind="stable" if kind is None else kind, order=order)
    _, keys, ax = _sort_setup(a, axis, order, "argsort")
    return moveaxis(_argsort_last(keys), -1, ax)


def sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, *, stable: Any = None) -> Any:
    """a sorted along axis (flattened when axis is None); NaN last. Derivative through the permutation.

    The values are NumPy's stable sort's bit for bit (`kind` is accepted and ignored: every kind gives
    the same values up to the order of -0.0 and 0.0). At ties the derivative follows the stable order.
    Algorithm and cost: the module docstring (the sort primitive; compiled, a radix sort per row).
    """
    if not _traced(a):
        return _np.sort(a, axis=axis, kind=kind, order=order)
    vals, keys, ax = _sort_setup(a, axis, order, "sort")
    out = L.bind("sort", keys)
    if vals.dtype != keys.dtype:  # bool, sorted as int8
        out = L.cast(out, vals.dtype)
    return moveaxis(out, -1, ax)


def _check_kth(kth: Any, n: int, op: str) -> tuple:
    """kth as sorted distinct non-negative positions (NumPy's rule: negative ones count from the end)."""
    ks = _np.atleast_1d(_np.asarray(kth))
    if ks.dtype.kind not in "iu":
        raise ShapeError(f"{op}: kth must be an integer or a sequence of integers, got {kth!r}")
    out = set()
    for k in ks:
        if not -n <= int(k) < n:
            raise ShapeError(f"{op}: kth(={int(k)}) out of bounds ({n})")
        out.add(int(k) % n)
    return tuple(sorted(out))


#: More kth positions than this select through the full sort (each selection is a pass over the rest of the row).
_SELECT_MAX_KTH = 16


def _argpartition_last(keys: Node, kth: tuple) -> Node:
    """The argpartition primitive along the last axis (or the stable argsort, itself a valid partition, for
    many kth or a row too short to gain from a selection)."""
    if len(kth) > _SELECT_MAX_KTH:
        return _argsort_last(keys)
    return L.bind("argpartition", keys, kth=kth)


def partition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None) -> Any:
    """A partition of a around kth along axis (flattened when axis is None), as np.partition.

    Each position in kth holds the value it would hold in the sorted array, no larger value comes before
    it and no smaller one after (NaN last). The order within the parts is unspecified, as NumPy's: the
    evaluator gives NumPy's own arrangement, compiled code another valid one. The values are a gather
    of a through `argpartition`'s permutation, so the derivative routes each output's cotangent to the
    element it came from (at ties, to whichever tied element the selection put there).

    Raises:
        ShapeError: a kth out of bounds or not an integer; a 0-d a.
        UnsupportedOpError: order= (structured arrays).
    """
    if not _traced(a):
        return _np.partition(a, kth, axis=axis, kind=kind, order=order)
    vals, keys, ax = _sort_setup(a, axis, order, "partition")
    ks = _check_kth(kth, vals.shape[-1], "partition")
    return moveaxis(take_last(vals, _argpartition_last(keys, ks)), -1, ax)


def argpartition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None) -> Any:
    """Indices that partition a around kth along axis, as np.argpartition (int64, no derivative).

    See `partition` for the contract. Evaluated with NumPy's introselect; compiled, an MSD radix
    selection per row and kth position on integer keys of the values (codegen/llvm/sort.py): at most
    (key bits / 8) passes over a shrinking range, O(n) per kth whatever the input. More than 16 kth
    positions use the stable argsort instead (also a valid partition).

    Raises:
        ShapeError: a kth out of bounds or not an integer; a 0-d a.
        UnsupportedOpError: order= (structured arrays).
    """
    if not _traced(a):
        return _np.argpartition(a, kth, axis=axis, kind=kind, order=order)
    _, keys, ax = _sort_setup(a, axis, order, "argpartition")
    ks = _check_kth(kth, keys.shape[-1], "argpartition")
    return moveaxis(_argpartition_last(keys, ks), -1, ax)


def _nan_last_less(x: Any, y: Any, or_equal: bool) -> Any:
    """x < y (x <= y with or_equal) in NumPy's sort order, where NaN is larger than every number."""
    cmp = L.binary("le" if or_equal else "lt", x, y)
    if x.dtype.kind != "f":
        return cmp
    nx, ny = isnan(x), isnan(y)
    if or_equal:  # x <= y: y is NaN, or both are numbers and x <= y
        return L.binary("logical_or", cmp, ny)
    return L.binary("logical_or", cmp, L.binary("logical_and", ny, L.unary("logical_not", nx, float_op=False)))


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None) -> Any:
    """Indices where the values v would be inserted into the sorted 1-d array a to keep it sorted.

    side="left" gives the first suitable index i (a[i-1] < v <= a[i]), side="right" the last
    (a[i-1] <= v < a[i]); NaN sorts last, as in NumPy's sort. `sorter` (int indices) sorts a
    first: a[sorter] is searched. a and v (any shape) may both be traced; they are compared in
    their promoted dtype. The result is int64 with v's shape and has no derivative.

    Algorithm: a vectorized bisection (module docstring): ceil(log2(n + 1)) steps, each a gather
    of a[mid] per value and one comparison; O(v.size log n).

    Raises:
        ShapeError: a is not 1-d, or sorter's shape is not a's.
        UnsupportedOpError: side is not "left" or "right".
    """
    if not _traced(a, v, sorter):
        return _np.searchsorted(a, v, side=side, sorter=sorter)
    if side not in ("left", "right"):
        raise UnsupportedOpError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    a, v = _arr(a), _arr(v)
    if a.ndim != 1:
        raise ShapeError(f"searchsorted: a must be 1-d, got shape {tuple(a.shape)}")
    dt = L.result_dtype(a, v)
    if dt.kind == "b":
        dt = _np.dtype(_np.int8)
    if sorter is not None:
        sorter = _arr(sorter)
        if tuple(sorter.shape) != tuple(a.shape):
            raise ShapeError(f"searchsorted: sorter has shape {tuple(sorter.shape)}, a has {tuple(a.shape)}")
        a = L.bind("gather", L.asnode(a), L.asnode(sorter), axis=0)
    a, v = L.asnode(a, dt), L.asnode(v, dt)
    n = a.shape[0]
    shape = tuple(v.shape)
    lo = _full(shape, 0, _np.int64)
    if n == 0:
        return lo
    hi = _full(shape, n, _np.int64)
    two = _full(shape, 2, _np.int64)
    one = _full(shape, 1, _np.int64)
    for _ in range(n.bit_length()):  # ceil(log2(n + 1)) halvings of [lo, hi) close every bracket
        mid = L.binary("int_floordiv", L.binary("add", lo, hi), two)
        am = L.bind("gather", a, mid, axis=0)  # mid <= n - 1 while lo < hi (a closed bracket is clamped)
        # left: go right while a[mid] < v; right: while a[mid] <= v
        right = _nan_last_less(am, v, or_equal=side == "right")
        right = L.binary("logical_and", right, L.binary("lt", lo, hi))  # a closed bracket stays closed
        lo = L.where(right, L.binary("add", mid, one), lo)
        hi = L.where(right, hi, mid)
    return lo


for _name in __all__:  # NumPy's ValueErrors of bad lengths and shapes become ShapeErrors naming the function
    globals()[_name] = _shape_errors(globals()[_name])
del _name

# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.sort: sort,
    _np.argsort: argsort,
    _np.partition: partition,
    _np.argpartition: argpartition,
    _np.searchsorted: searchsorted,
}
