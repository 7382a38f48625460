"""Gathers and scatters along an axis: take_along_axis, put_along_axis, and the functional ufunc.at forms.

`add_at` / `maximum_at` are np.add.at / np.maximum.at returning the new
array; on a traced array of the running trace, plain np.put_along_axis,
np.add.at and np.maximum.at write in place through tracing's in-place
updates. Composites of gather, scatter_add and where (numpy/structural.py's
conventions).
"""


from __future__ import annotations

from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, ShapeError, TracerConversionError, UnsupportedOpError
from ..ir import Node
from .base import _shape
from .layout import moveaxis, ravel, reshape
from .structural import _arr, _axis, _shape_errors, _traced

__all__ = ["add_at", "maximum_at", "put_along_axis", "take_along_axis"]


# ----- gathers and scatters along an axis -----


def _take_last(x: Any, idx: Any) -> Any:
    """out[..., k] = x[..., idx[..., k]] for x (..., n) and idx (..., m) of the same leading shape.

    A gather on the flattened x with per-row offsets; traced indices are
    normalized (negative ones wrap once), concrete ones are checked.
    """
    n = x.shape[-1]
    lead = x.shape[:-1]
    rows = int(_np.prod(lead, dtype=_np.int64))
    offsets = (_np.arange(rows, dtype=_np.int64) * n).reshape(lead + (1,))
    if isinstance(idx, Node):
        if idx.dtype.kind not in "iu":
            raise DTypeError(f"take_along_axis: indices must be integers, got {idx.dtype}")
        idx = L.cast(idx, _np.int64)
        idx = L.where(L.binary("lt", idx, L.constant(_np.int64(0))), idx + n, idx)
        flat = L.binary("add", idx, L.constant(offsets))
    else:
        flat = _np.asarray(idx).astype(_np.int64) + offsets
    return L.bind("gather", reshape(x, (rows * n,)), flat, axis=0)


def _along_axis_setup(arr: Any, indices: Any, axis: Any, op: str) -> tuple:
    arr = _arr(arr)
    idx = _arr(indices)
    if axis is None:
        arr, axis = ravel(arr), 0
        if idx.ndim != 1:
            raise ShapeError(f"{op}: when axis=None, `indices` must have a single dimension")
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"{op}: `indices` must be an integer array, got {idx.dtype}")
    if idx.ndim != arr.ndim:
        raise ShapeError(f"{op}: `indices` and `arr` must have the same number of dimensions "
                         f"({idx.ndim} and {arr.ndim})")
    ax = _axis(axis, arr.ndim, op)
    n = arr.shape[ax]
    if not isinstance(idx, Node):
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise ShapeError(f"{op}: index out of bounds for axis {ax} with size {n}")
        idx = _np.where(idx < 0, idx + n, idx).astype(_np.int64)
    lead = _np.broadcast_shapes(tuple(_np.delete(_np.array(arr.shape, dtype=_np.int64), ax)),
                                tuple(_np.delete(_np.array(idx.shape, dtype=_np.int64), ax)))
    lead = tuple(int(d) for d in lead)
    return arr, idx, ax, lead


def _bcast_last(x: Any, ax: int, lead: tuple) -> Any:
    xm = moveaxis(x, ax, -1)
    shape = lead + (_shape(xm)[-1],)
    return L.broadcast_to(xm, shape) if isinstance(xm, Node) else _np.broadcast_to(xm, shape)


def take_along_axis(arr: Any, indices: Any, axis: Any = -1) -> Any:
    """out[..., k, ...] = arr[..., indices[..., k, ...], ...] along axis (non-axis dimensions broadcast).

    Differentiable in arr (the VJP is a scatter-add); indices may be traced
    (e.g. from argsort). Raises ShapeError for out-of-bounds concrete indices
    or mismatched ranks, DTypeError for non-integer indices.
    """
    if not _traced(arr, indices):
        return _np.take_along_axis(arr, indices, axis=axis)
    arr, idx, ax, lead = _along_axis_setup(arr, indices, axis, "take_along_axis")
    out = _take_last(_bcast_last(arr, ax, lead), _bcast_last(idx, ax, lead))
    return moveaxis(out, -1, ax)


def put_along_axis(arr: Any, indices: Any, values: Any, axis: Any, inplace: bool = False) -> Any:
    """The functional np.put_along_axis: a new array equal to arr with values put at indices along axis.

    NumPy's version writes into arr and returns None; this one returns the
    result (`inplace=True` is refused). NumPy's own spelling on a traced arr
    of the running trace (arr = x.copy(), np.zeros_like(x)) is the in-place
    write arr[...] = put_along_axis(...) of tracing's in-place updates.
    With a repeated index the last value wins, as in NumPy (concrete indices:
    found at trace time; traced ones: by comparing every pair of indices of a
    row, O(m**2) for m indices per row). Gradients flow to arr where it is not
    overwritten and to the values that are written (not to overwritten ones).
    """
    if inplace:
        raise TracerConversionError(
            "put_along_axis(inplace=True) would write into a traced array; use the functional result: "
            "arr = symgraph.numpy.put_along_axis(arr, indices, values, axis)")
    if not _traced(arr, indices, values):
        out = _np.array(arr, copy=True)
        _np.put_along_axis(out, indices, values, axis)
        return out
    arr, idx, ax, lead = _along_axis_setup(arr, indices, axis, "put_along_axis")
    if lead != tuple(_np.delete(_np.array(arr.shape, dtype=_np.int64), ax)):
        raise ShapeError("put_along_axis: indices must not broadcast arr to a larger shape")
    xm = moveaxis(L.asnode(arr), ax, -1)                      # (..., n)
    n = xm.shape[-1]
    im = _bcast_last(idx, ax, lead)                           # (..., m)
    m = _shape(im)[-1]
    vm = L.cast(_bcast_last(L.broadcast_to(_arr(values), _shape(idx)) if _np.ndim(values) or isinstance(values, Node)
                            else _np.broadcast_to(_np.asarray(values), _shape(idx)), ax, lead), xm.dtype)
    rows = int(_np.prod(lead, dtype=_np.int64))
    offsets = (_np.arange(rows, dtype=_np.int64) * n).reshape(lead + (1,))
    if isinstance(im, Node):
        im = L.cast(im, _np.int64)
        im = L.where(L.binary("lt", im, L.constant(_np.int64(0))), im + n, im)
        flat = L.binary("add", im, L.constant(offsets))
        keep = _last_writes(im, lead, m)
    else:
        flat = _np.asarray(im, _np.int64) + offsets
        keep = _np.zeros(lead + (m,), bool)                   # the last write of each target wins
        fl = flat.reshape(-1)
        _, last = _np.unique(fl[::-1], return_index=True)
        keep.reshape(-1)[fl.size - 1 - last] = True
    vm = L.where(L.asnode(keep), vm, L.constant(_np.zeros((), xm.dtype)))
    flat_r = reshape(flat, (rows * m,)) if isinstance(flat, Node) else flat.reshape(-1)
    placed = L.bind("scatter_add", reshape(vm, (rows * m,)), flat_r, shape=(rows * n,), axis=0)
    ones = L.cast(keep, _np.int64) if isinstance(keep, Node) else L.constant(keep.astype(_np.int64))
    hit = L.bind("scatter_add", reshape(ones, (rows * m,)), flat_r, shape=(rows * n,), axis=0)
    out = L.where(L.binary("gt", hit, L.constant(_np.int64(0))), placed, reshape(xm, (rows * n,)))
    return moveaxis(reshape(out, xm.shape), -1, ax)


def _last_writes(im: Node, lead: tuple, m: int) -> Node:
    """keep[..., k]: no later update k' > k of the same row has the same index (traced indices, (..., m)).

    NumPy's put_along_axis is an indexed assignment, where the last of repeated indices wins; with traced
    indices the repeats are found by comparing every pair of a row's indices, an (..., m, m) mask (O(m**2)
    work and memory per row).
    """
    if m <= 1:
        return L.broadcast_to(L.constant(_np.bool_(True)), lead + (m,))
    a = L.broadcast_to(reshape(im, lead + (m, 1)), lead + (m, m))
    b = L.broadcast_to(reshape(im, lead + (1, m)), lead + (m, m))
    later = L.broadcast_to(L.constant(_np.triu(_np.ones((m, m), _np.int64), 1)), lead + (m, m))  # k' > k
    dup = L.reduce("max", L.where(L.binary("eq", a, b), later, L.constant(_np.int64(0))), axis=len(lead) + 1)
    return L.binary("eq", dup, L.constant(_np.int64(0)))


def _np_put_along_axis(arr: Any, indices: Any, values: Any, axis: Any) -> None:
    """np.put_along_axis on traced values: an in-place write `arr[...] = new` into a traced arr (tracing's
    in-place updates: arr must belong to the running trace and not be an argument, e.g. arr = x.copy());
    a NumPy arr cannot take traced values."""
    if isinstance(arr, Node):
        arr[...] = put_along_axis(arr, indices, values, axis)   # symgraph.tracing's functional rebinding
        return None
    raise TracerConversionError(
        "np.put_along_axis writes into its array in place, and traced values cannot be written into a NumPy "
        "array. Write into a traced array (arr = np.zeros_like(x); np.put_along_axis(arr, ...)), or use the "
        "functional form, which returns the new array: arr = symgraph.numpy.put_along_axis(arr, indices, values, "
        "axis)")


def _ufunc_at(name: str, combine: str):
    def at(a: Any, indices: Any, b: Any = None) -> Any:
        if not _traced(a, indices, b):
            out = _np.array(a, copy=True)
            getattr(_np, name).at(out, indices, b)
            return out
        a = L.asnode(a)
        if a.ndim == 0:
            raise ShapeError(f"{name}_at: the array must have at least one dimension")
        n = a.shape[0]
        if isinstance(indices, tuple):
            raise UnsupportedOpError(f"{name}_at: tuple indices are not supported; index along the first axis")
        idx = _arr(indices)
        if not isinstance(idx, Node):
            if idx.dtype.kind not in "iu":
                raise DTypeError(f"{name}_at: indices must be integers, got {idx.dtype}")
            if idx.size and (idx.min() < -n or idx.max() >= n):
                raise ShapeError(f"{name}_at: index out of bounds for axis 0 with size {n}")
            idx = _np.where(idx < 0, idx + n, idx).astype(_np.int64)
        want = tuple(_shape(idx)) + a.shape[1:]
        bb = L.cast(L.broadcast_to(L.asnode(b, None), want), a.dtype)
        if combine == "add":
            return a + L.bind("scatter_add", bb, idx, shape=a.shape, axis=0)
        # maximum: each target's value is the max of a and the values sent to it (ties: derivative to a)
        m = _shape(idx)
        # max over the updates that hit each target, via a dense (targets x updates) mask
        k = int(_np.prod(m, dtype=_np.int64))
        flat_i = reshape(idx, (k,)) if isinstance(idx, Node) else idx.reshape(k)
        rest = a.shape[1:]
        hits = L.binary("eq", L.broadcast_to(reshape(L.asnode(flat_i), (1, k) + (1,) * len(rest)), (n, k) + rest),
                        L.broadcast_to(L.constant(_np.arange(n, dtype=_np.int64).reshape((n, 1) + (1,) * len(rest))),
                                       (n, k) + rest))
        vals = L.broadcast_to(reshape(bb, (1, k) + rest), (n, k) + rest)
        neg = L.broadcast_to(L.constant(_np.asarray(-_np.inf if a.dtype.kind == "f" else _np.iinfo(a.dtype).min,
                                                     a.dtype)), (n, k) + rest)
        best = L.reduce("max", L.where(hits, vals, neg), axis=1) if k else None
        if best is None:
            return a
        return L.binary("maximum", best, a)

    at.__name__ = f"{name}_at"
    at.__doc__ = (f"The functional np.{name}.at(a, indices, b) along the first axis: a new array (NumPy's writes "
                  f"into a and returns None). Repeated indices {'accumulate' if combine == 'add' else 'combine'} "
                  f"as in NumPy. " + ("A scatter-add: O(k) for k updates." if combine == "add" else
                                     "A max over a dense (targets x updates) mask: O(n k) for n targets and k "
                                     "updates; ties between a and an update give the derivative to a."))
    return at


add_at = _ufunc_at("add", "add")
maximum_at = _ufunc_at("maximum", "max")


for _name in __all__:  # NumPy's ValueErrors of bad lengths and shapes become ShapeErrors naming the function
    globals()[_name] = _shape_errors(globals()[_name])
del _name

# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.take_along_axis: take_along_axis,
    _np.put_along_axis: _np_put_along_axis,
}
