"""Layout: reshape, transpose and axis moves, broadcasting, squeeze and expand_dims, joining, gathers (take).

Every function here moves or selects elements without computing new values.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, ShapeError, UnsupportedOpError
from ..ir import Node
from ..ops.core import normalize_axes
from .base import _ndim, _shape

__all__ = [
    "broadcast_to", "concatenate", "expand_dims", "flatten", "hstack", "moveaxis", "ravel", "reshape", "squeeze",
    "stack", "swapaxes", "take", "transpose", "vstack", "matrix_transpose", "unstack",
]


def reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Any:
    """a with a new shape (C order only); `newshape=` is NumPy's older spelling of `shape`."""
    if order != "C":
        raise UnsupportedOpError(f"reshape(order={order!r}) is not supported")
    if shape is None:
        shape = newshape
    if shape is None:
        raise ShapeError("reshape: a shape is required")
    return L.reshape(a, shape)


def ravel(a: Any, order: str = "C") -> Any:
    """a flattened (C order only)."""
    if order not in ("C", "K", "A"):
        raise UnsupportedOpError(f"ravel(order={order!r}) is not supported")
    return L.reshape(a, (-1,))


flatten = ravel


def transpose(a: Any, axes: Any = None) -> Any:
    """Permute axes (reverse when axes is None)."""
    return L.transpose(a, axes)


def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    """Swap two axes (NumPy's names: axis1, axis2)."""
    nd = _ndim(a)
    (i,), (j,) = normalize_axes(axis1, nd, op="swapaxes"), normalize_axes(axis2, nd, op="swapaxes")
    perm = list(range(nd))
    perm[i], perm[j] = perm[j], perm[i]
    return L.transpose(a, perm)


def matrix_transpose(x: Any) -> Any:
    """np.matrix_transpose (NumPy 2): the last two axes swapped, (..., m, n) -> (..., n, m).

    Raises:
        ShapeError: x has fewer than 2 dimensions (NumPy: ValueError).
    """
    if _ndim(x) < 2:
        raise ShapeError(f"matrix_transpose: input array must be at least 2-dimensional, but it is {_ndim(x)}")
    return swapaxes(x, -1, -2)


def unstack(x: Any, /, *, axis: int = 0) -> tuple:
    """np.unstack (NumPy 2): the tuple of x's slices along axis (the inverse of np.stack).

    Raises:
        ShapeError: axis out of range (0-d x has none).
    """
    if _ndim(x) == 0:
        raise ShapeError("unstack: input array must be at least 1-d")
    (ax,) = normalize_axes(axis, _ndim(x), op="unstack")
    return tuple(x[(slice(None),) * ax + (i,)] for i in range(_shape(x)[ax]))


def moveaxis(a: Any, source: Any, destination: Any) -> Any:
    """Move axes to new positions (one axis, or sequences of equal length, as np.moveaxis)."""
    nd = _ndim(a)
    src = (source,) if isinstance(source, (int, _np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, _np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise ShapeError("moveaxis: `source` and `destination` arguments must have the same number of elements")
    src = tuple(normalize_axes(s, nd, op="moveaxis")[0] for s in src)
    dst = tuple(normalize_axes(d, nd, op="moveaxis")[0] for d in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError("moveaxis: repeated axis")
    perm = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        perm.insert(d, s)
    return L.transpose(a, perm)


def broadcast_to(array: Any, shape: Sequence[int], subok: bool = False) -> Any:
    """array broadcast to shape."""
    if isinstance(shape, (int, _np.integer)):
        shape = (int(shape),)
    return L.broadcast_to(array, shape)


def expand_dims(a: Any, axis: Any) -> Any:
    """Insert size-1 axes at `axis` (positions in the result)."""
    x = a
    nd = _ndim(x)
    axes = (axis,) if isinstance(axis, (int, _np.integer)) else tuple(axis)
    axes_n = normalize_axes(axes, nd + len(axes), op="expand_dims")
    if not isinstance(x, Node):
        return _np.expand_dims(x, axes_n)
    return L.bind("expand_dims", x, axes=axes_n)


def squeeze(a: Any, axis: Any = None) -> Any:
    """Drop size-1 axes (all of them when axis is None)."""
    x = a
    shp = _shape(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shp) if d == 1)
    else:
        axes = normalize_axes(axis, len(shp), op="squeeze")
    if not axes:
        return x
    if not isinstance(x, Node):
        return _np.squeeze(x, axes)
    return L.bind("squeeze", x, axes=axes)


def _items(arrays: Sequence[Any]) -> list:
    """The arrays to join, each list or tuple holding a traced value one array (np.concatenate([[x[0], 1.0], x]))."""
    return [sequence_array(a) if isinstance(a, (list, tuple)) and holds_node(a) else a for a in arrays]


def holds_node(x: Any) -> bool:
    """Whether x is a traced value or a (nested) list or tuple holds one (numbers skipped cheaply)."""
    if isinstance(x, Node):
        return True
    if not isinstance(x, (list, tuple)):
        return False
    for o in x:
        t = type(o)
        if t is float or t is int or t is complex or t is bool:
            continue
        if isinstance(o, Node) or (isinstance(o, (list, tuple)) and holds_node(o)):
            return True
    return False


def _leaf_dtype(x: Any) -> _np.dtype:
    """The dtype NumPy's array coercion gives a leaf: Python numbers are not weak here (float64, int64, bool)."""
    return x.dtype if isinstance(x, (Node, _np.ndarray, _np.generic)) else _np.asarray(x).dtype


def sequence_array(x: Any) -> Any:
    """A (nested) list/tuple of traced values, arrays and numbers as one array, NumPy's coercion rules.

    Every element of a level must have one shape (NumPy refuses ragged input too); the dtype is the
    promotion of every leaf's own dtype, Python numbers counting as float64/int64/bool.
    """
    leaves: list[Any] = []

    def collect(o: Any) -> None:
        if isinstance(o, (list, tuple)):
            for c in o:
                collect(c)
        else:
            leaves.append(o)

    collect(x)
    dtype = _np.result_type(*[_leaf_dtype(v) for v in leaves]) if leaves else _np.dtype(_np.float64)

    def build(o: Any, path: str) -> Any:
        if not isinstance(o, (list, tuple)):
            return L.cast(o, dtype) if isinstance(o, Node) else _np.asarray(o, dtype=dtype)
        if not o:
            return _np.zeros((0,), dtype)
        parts = [build(c, f"{path}[{i}]") for i, c in enumerate(o)]
        shapes = [_shape(p) for p in parts]
        if len(set(shapes)) != 1:
            raise ShapeError(f"array: the elements of the sequence{path} have different shapes {shapes} (an "
                             f"inhomogeneous sequence); NumPy refuses it too")
        if not any(isinstance(p, Node) for p in parts):
            return _np.stack(parts)
        return stack(parts)

    return build(x, "")


def concatenate(arrays: Sequence[Any], axis: Any = 0, out: Any = None, *, dtype: Any = None,
                casting: str = "same_kind") -> Any:
    """Join arrays along an existing axis (promoted to one dtype, or to `dtype`; flattened when axis is None)."""
    if out is not None:
        raise UnsupportedOpError("concatenate(out=...) writes in place, which tracing does not support")
    arrays = _items(arrays)
    if not arrays:
        raise ShapeError("concatenate needs at least one array")
    if axis is None:
        arrays, axis = [ravel(a) if isinstance(a, Node) else _np.ravel(a) for a in arrays], 0
    dtype = L.result_dtype(*arrays) if dtype is None else _np.dtype(dtype)
    nd = _ndim(arrays[0])
    if nd == 0:
        raise ShapeError("zero-dimensional arrays cannot be concatenated")
    (ax,) = normalize_axes(axis, nd, op="concatenate")
    arrays = [L.cast(a, dtype) if isinstance(a, Node) else _np.asarray(a, dtype) for a in arrays]
    if len(arrays) == 1:
        return arrays[0]
    return L.bind("concatenate", *arrays, axis=ax)


def stack(arrays: Sequence[Any], axis: int = 0, out: Any = None, *, dtype: Any = None,
          casting: str = "same_kind") -> Any:
    """Join arrays along a new axis."""
    if out is not None:
        raise UnsupportedOpError("stack(out=...) writes in place, which tracing does not support")
    arrays = _items(arrays)
    if not arrays:
        raise ShapeError("stack needs at least one array")
    shapes = {_shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ShapeError(f"stack: all input arrays must have the same shape, got {sorted(shapes)}")
    return concatenate([expand_dims(a, axis) for a in arrays], axis=axis, dtype=dtype)


def hstack(arrays: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    """Concatenate along axis 1 (axis 0 for 1-d); `dtype` and `casting` as in np.concatenate."""
    arrays = [reshape(a, (1,)) if _ndim(a) == 0 else a for a in _items(arrays)]  # np.atleast_1d
    return concatenate(arrays, axis=0 if _ndim(arrays[0]) == 1 else 1, dtype=dtype, casting=casting)


def vstack(arrays: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Any:
    """Concatenate along axis 0 (1-d arrays become rows, 0-d ones 1x1: np.atleast_2d).

    `dtype` and `casting` as in np.concatenate (np.row_stack, NumPy's deprecated alias, passes both).
    """
    return concatenate([reshape(a, (1, -1)) if _ndim(a) <= 1 else a for a in _items(arrays)], axis=0, dtype=dtype,
                       casting=casting)


def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
    """Integer-array gather along axis (flattened when axis is None).

    mode: "raise" (concrete out-of-range indices raise ShapeError; traced
    ones clamp), "clip" or "wrap" (concrete indices only), as np.take.
    """
    if out is not None:
        raise UnsupportedOpError("take(out=...) writes in place, which tracing does not support")
    if mode not in ("raise", "clip", "wrap"):
        raise UnsupportedOpError(f"take(mode={mode!r}): mode must be 'raise', 'clip' or 'wrap'")
    x = a
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    (ax,) = normalize_axes(axis, _ndim(x), op="take")
    if isinstance(indices, Node) and mode == "wrap":
        raise UnsupportedOpError("take(mode='wrap') with traced indices is not supported; take them modulo n first")
    if not isinstance(indices, Node):
        n = _shape(x)[ax]
        indices = _np.asarray(indices)
        if indices.dtype.kind not in "iu":
            raise DTypeError(f"take: indices must be integers, got {indices.dtype}")
        if mode == "clip":
            indices = _np.clip(indices, 0, max(n - 1, 0))
        elif mode == "wrap" and n:
            indices = _np.mod(indices, n)
        if indices.size and (indices.min() < -n or indices.max() >= n):
            raise ShapeError(f"take: index out of bounds for axis {ax} with size {n}")
        indices = _np.where(indices < 0, indices + n, indices).astype(_np.int64)
    if not isinstance(x, Node) and not isinstance(indices, Node):
        return _np.take(x, indices, axis=ax)
    return L.bind("gather", L.asnode(x), L.asnode(indices), axis=ax)


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
}

FUNCTIONS = {
    _np.reshape: reshape, _np.ravel: ravel, _np.transpose: transpose, _np.swapaxes: swapaxes,
    _np.moveaxis: moveaxis, _np.broadcast_to: broadcast_to, _np.expand_dims: expand_dims, _np.squeeze: squeeze,
    _np.concatenate: concatenate, _np.stack: stack, _np.hstack: hstack, _np.vstack: vstack, _np.take: take,
    **{getattr(_np, _n): _f for _n, _f in (("matrix_transpose", matrix_transpose), ("unstack", unstack))
       if hasattr(_np, _n)},
}
