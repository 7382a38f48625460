"""Indexing traced arrays: x[idx] with NumPy's semantics, and the functional updates x.at[idx].set/add.

Basic indices (ints, slices, None, Ellipsis) become one `slice` and a reshape; integer-array indices
(concrete or traced) become `gather`s over the indexed axes flattened into one; concrete boolean masks
become their integer positions. Traced boolean masks are refused (their result shape depends on data).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import lax as L
from .errors import DTypeError, ShapeError, UnsupportedOpError
from .ir import Node

__all__ = ["AtIndexer", "getitem"]



def _is_int(i: Any) -> bool:
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _is_array_index(i: Any) -> bool:
    if isinstance(i, Node):
        return True
    if isinstance(i, (np.ndarray, list)):
        return True
    return False


def _concrete_index(i: Any, n: int, axis: int) -> np.ndarray:
    a = np.asarray(i)
    if a.dtype.kind == "b":
        raise ShapeError("boolean mask indices must have been converted")  # pragma: no cover
    if a.size and a.dtype.kind not in "iu":
        raise DTypeError(f"index arrays must be integers, got dtype {a.dtype}")
    a = a.astype(np.int64)
    if a.size and (a.min() < -n or a.max() >= n):
        raise ShapeError(f"index out of bounds for axis {axis} with size {n}: {a.min()}..{a.max()}")
    return np.where(a < 0, a + n, a)


def getitem(x: Node, idx: Any) -> Any:
    """x[idx] with NumPy semantics: ints, slices, None, Ellipsis, integer arrays, concrete boolean masks.

    Raises:
        ShapeError: indices out of bounds (concrete) or too many indices.
        UnsupportedOpError: traced boolean masks (data-dependent shapes).
    """
    if type(idx) is int and x.shape:  # fast path, x[t]: the nodes the general path makes
        return _first_axis_int(x, idx)
    if not isinstance(idx, tuple):
        idx = (idx,)
    # concrete boolean masks become integer arrays
    expanded: list[Any] = []
    for i in idx:
        if isinstance(i, tuple):
            i = list(i)  # inside an index tuple, a tuple is a sequence of indices (an index array), as in NumPy
        if isinstance(i, Node) and i.dtype.kind == "b":
            raise UnsupportedOpError("indexing with a traced boolean mask has a data-dependent shape; "
                                     "use np.where(mask, x, 0) instead")
        if isinstance(i, (np.ndarray, list)) and np.asarray(i).dtype.kind == "b":
            expanded.extend(np.nonzero(np.asarray(i)))
        elif isinstance(i, (bool, np.bool_)):
            raise UnsupportedOpError("indexing with a Python bool is not supported")
        else:
            expanded.append(i)
    idx = tuple(expanded)
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if sum(1 for i in idx if i is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    if n_real > x.ndim:
        raise ShapeError(f"too many indices for an array of shape {x.shape}: {n_real} indices")
    if Ellipsis in [i for i in idx if not _is_array_index(i) and not isinstance(i, Node)]:
        k = [j for j, i in enumerate(idx) if i is Ellipsis and not _is_array_index(i)][0]
        idx = idx[:k] + (slice(None),) * (x.ndim - n_real) + idx[k + 1:]
    else:
        idx = idx + (slice(None),) * (x.ndim - n_real)
    if any(_is_array_index(i) for i in idx):
        return _advanced_getitem(x, idx)
    return _basic_getitem(x, idx)


def _first_axis_int(x: Node, j: int) -> Node:
    """`x[j]` for a Python int `j` (`_basic_getitem(x, (j, :, ..., :))` without the general index walk)."""
    shape = x.shape
    n = shape[0]
    if not -n <= j < n:
        raise ShapeError(f"index {j} is out of bounds for axis 0 with size {n}")
    j %= n
    rest = shape[1:]
    y = x
    if j != 0 or n != 1:
        y = L.bind("slice", x, starts=(j,) + (0,) * len(rest), stops=(j + 1,) + rest, steps=(1,) * len(shape))
    return L.reshape(y, rest)


def _basic_getitem(x: Node, idx: tuple) -> Node:
    starts, stops, steps, out_shape = [], [], [], []
    d = 0
    for i in idx:
        if i is None:
            out_shape.append(1)
            continue
        n = x.shape[d]
        if _is_int(i):
            j = int(i)
            if not -n <= j < n:
                raise ShapeError(f"index {j} is out of bounds for axis {d} with size {n}")
            j %= n
            starts.append(j)
            stops.append(j + 1)
            steps.append(1)
        elif isinstance(i, slice):
            a, b, c = i.indices(n)
            starts.append(a)
            stops.append(b)
            steps.append(c)
            out_shape.append(len(range(a, b, c)))
        else:
            raise UnsupportedOpError(f"index of type {type(i).__name__} is not supported")
        d += 1
    y = x
    if any(s != 0 or e != n or st != 1 for s, e, st, n in zip(starts, stops, steps, x.shape)):
        y = L.bind("slice", x, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))
    return L.reshape(y, tuple(out_shape))


def _advanced_getitem(x: Node, idx: tuple) -> Node:
    if any(i is None for i in idx):
        raise UnsupportedOpError("mixing None (np.newaxis) with integer-array indices is not supported")
    # basic slicing first, keeping advanced positions whole
    pre = tuple(i if isinstance(i, slice) else slice(None) for i in idx)
    y = _basic_getitem(x, pre)
    adv_pos = [d for d, i in enumerate(idx) if not isinstance(i, slice)]
    arrays = []
    for d in adv_pos:
        i = idx[d]
        n = y.shape[d]
        if isinstance(i, Node):
            if i.dtype.kind not in "iu":
                raise DTypeError(f"index arrays must be integers, got dtype {i.dtype} for axis {d}")
            i = L.cast(i, np.int64)
            i = L.where(L.binary("lt", i, 0), i + n, i)
        else:
            i = _concrete_index(i, n, d)
        arrays.append(i)
    if len(adv_pos) == 1:
        i = arrays[0]
        return L.bind("gather", y, L.asnode(i), axis=adv_pos[0])
    bshape = np.broadcast_shapes(*[tuple(a.shape) for a in arrays])
    # flatten the advanced axes into one, moved to the front
    rest = [d for d in range(y.ndim) if d not in adv_pos]
    yt = L.transpose(y, tuple(adv_pos) + tuple(rest))
    sizes = [y.shape[d] for d in adv_pos]
    yf = L.reshape(yt, (int(np.prod(sizes, dtype=np.int64)),) + tuple(y.shape[d] for d in rest))
    flat: Any = 0
    stride = 1
    for a, n in reversed(list(zip(arrays, sizes))):
        term = L.broadcast_to(a, bshape) if isinstance(a, Node) else np.broadcast_to(a, bshape)
        flat = term * stride + flat if stride != 1 else term + flat
        stride *= n
    g = L.bind("gather", yf, L.asnode(np.asarray(flat, dtype=np.int64) if not isinstance(flat, Node) else flat), axis=0)
    contiguous = adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos)))
    if contiguous and adv_pos[0] != 0:
        nb = len(bshape)
        k = adv_pos[0]
        perm = tuple(range(nb, nb + k)) + tuple(range(nb)) + tuple(range(nb + k, g.ndim))
        g = L.transpose(g, perm)
    return g


class AtIndexer:
    """x.at[idx].set(v) / .add(v): functional updates (JAX-style), for concrete indices."""

    def __init__(self, x: Node, idx: Any = None):
        self.x = x
        self.idx = idx

    def __getitem__(self, idx: Any) -> "AtIndexer":
        return AtIndexer(self.x, idx)

    def _positions(self) -> np.ndarray:
        x = self.x
        idx = self.idx if isinstance(self.idx, tuple) else (self.idx,)
        if any(isinstance(i, Node) for i in idx):
            raise UnsupportedOpError("x.at[idx] with traced indices is not supported; use concrete indices")
        pos = np.arange(x.size, dtype=np.int64).reshape(x.shape)[self.idx]
        return np.asarray(pos, dtype=np.int64)

    def add(self, v: Any) -> Node:
        """x with v added at idx (repeated indices accumulate)."""
        x = self.x
        pos = self._positions()
        v = L.broadcast_to(L.cast(L.asnode(v), x.dtype), pos.shape)
        upd = L.bind("scatter_add", L.reshape(v, (pos.size,)), L.asnode(pos.reshape(-1)), shape=(x.size,), axis=0)
        return x + L.reshape(upd, x.shape)

    def set(self, v: Any) -> Node:
        """x with the entries at idx replaced by v.

        Raises:
            UnsupportedOpError: when idx repeats a position (the result would be order-dependent).
        """
        x = self.x
        pos = self._positions().reshape(-1)
        if len(np.unique(pos)) != pos.size:
            raise UnsupportedOpError("x.at[idx].set(v) with repeated indices is ambiguous; use .add")
        mask = np.zeros(x.size, bool)
        mask[pos] = True
        v = L.broadcast_to(L.cast(L.asnode(v), x.dtype), self._positions().shape)
        upd = L.bind("scatter_add", L.reshape(v, (pos.size,)), L.asnode(pos), shape=(x.size,), axis=0)
        return L.where(mask.reshape(x.shape), L.reshape(upd, x.shape), x)
