"""Structural functions: scans, differences, triangles and diagonals, flips and rolls, tiling and repeating,
splitting, products and selections; and the helpers the structural modules share.

Sorting is in numpy/sorting.py, gathers and scatters along an axis in
numpy/along_axis.py, padding, windows and convolutions in numpy/windows.py.

Every function here is a composite of existing primitives (slice, concatenate,
reshape, transpose, broadcast_to, gather, scatter_add, where, comparisons,
elementwise arithmetic and sums), so it differentiates to every order in both
modes, batches, and compiles natively with no rule of its own. Index arrays
are computed with NumPy at trace time from the (static) shapes, often by
running the NumPy function itself on `arange` (pad, diagonal, repeat), so the
index semantics are NumPy's by construction.

With no traced argument each function calls NumPy itself (the values are
then NumPy's bit for bit).

cumsum / cumprod are the `cumsum` and `cumprod` primitives
(symgraph/ops/scan.py), left to right as NumPy adds and multiplies (bit for
bit), compiled to one sequential pass each (codegen's scan task): 1e6
elements in about 5 ms. cumsum's derivatives are running sums; cumprod's are
linear recurrences by doubling (O(n log n), a polynomial in x with no
division: exact with zeros and negative values, to every order).
"""

from __future__ import annotations

import builtins
import functools
from typing import Any, Sequence

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, ShapeError, SymgraphError, TracerConversionError, UnsupportedOpError
from ..ir import Node, declare_numpy_view
from ..ops.core import normalize_axes
from .arithmetic import multiply, subtract
from .base import _ndim, _shape
from .layout import concatenate, moveaxis, ravel, reshape, transpose
from .logic import isnan, where
from .reductions import sum as _sum

__all__ = [
    "array_split", "cross", "cumprod", "cumsum", "diag", "diagflat", "diagonal", "diff", "dsplit", "ediff1d",
    "flip", "fliplr", "flipud", "gradient", "hsplit", "kron", "nan_to_num", "piecewise", "repeat", "roll",
    "rollaxis", "rot90", "select", "split", "tile", "trace", "tril", "triu", "vsplit",
]


def _traced(*xs: Any) -> bool:
    """Whether any argument (or any element of a list/tuple argument) is a graph node."""
    for x in xs:
        if isinstance(x, Node):
            return True
        if isinstance(x, (list, tuple)) and _traced(*x):
            return True
    return False


def _arr(x: Any) -> Any:
    return x if isinstance(x, Node) else _np.asarray(x)


def _axis(axis: Any, nd: int, op: str) -> int:
    (ax,) = normalize_axes(axis, nd, op=op)
    return ax


def _take_slice(x: Any, axis: int, start: Any, stop: Any, step: Any = 1) -> Any:
    idx = (slice(None),) * axis + (slice(start, stop, step),)
    return x[idx]


def _full(shape: tuple, value: Any, dtype: Any) -> Any:
    return L.broadcast_to(L.constant(_np.asarray(value, dtype)), shape)


def _with_axis(shape: tuple, axis: int, n: int) -> tuple:
    return shape[:axis] + (n,) + shape[axis + 1:]


def _gather_const(x: Any, idx: _np.ndarray, axis: int, view: bool = False) -> Any:
    """x indexed along axis by a constant int64 index array (in range).

    view=True declares the result a NumPy view of x (np.diagonal, sliding windows), so that in-place updates
    refuse to read it after a write into x instead of giving the old values.
    """
    g = L.bind("gather", x, _np.ascontiguousarray(idx, _np.int64), axis=axis)
    return declare_numpy_view(g) if view else g


# ----- scans and differences -----


def _scan_dtype(x: Any, dtype: Any) -> _np.dtype:
    if dtype is not None:
        return _np.dtype(dtype)
    d = _np.dtype(x.dtype)
    if d.kind == "b" or (d.kind == "i" and d.itemsize < 8):
        return _np.dtype(_np.int64)
    if d.kind == "u" and d.itemsize < 8:
        return _np.dtype(_np.uint64)
    return d


def _scan(name: str, a: Any, axis: Any, dtype: Any, out: Any) -> Any:
    """The `name` scan primitive (cumsum / cumprod) along axis, with NumPy's flattening and accumulator dtypes."""
    if out is not None:
        raise UnsupportedOpError(f"{name}(out=...) writes in place, which tracing does not support")
    if not _traced(a):
        return getattr(_np, name)(a, axis=axis, dtype=dtype)
    if axis is None:
        a, axis = ravel(a), 0
    ax = _axis(axis, a.ndim, name)
    return L.bind(name, L.cast(a, _scan_dtype(a, dtype)), axis=ax)


def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative sum along axis (flattened when axis is None); NumPy's accumulator dtypes.

    Shapes: a.shape (a.size when axis is None). Bool and narrow integers
    accumulate in int64 (uint64), as in NumPy. The `cumsum` primitive
    (symgraph/ops/scan.py) adds left to right as NumPy does: the values are
    NumPy's bit for bit; compiled, it is one sequential pass (a scan task).

    Raises:
        ShapeError: axis out of range. UnsupportedOpError: out=.
    """
    return _scan("cumsum", a, axis, dtype, out)


def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """Cumulative product along axis (flattened when axis is None); NumPy's accumulator dtypes.

    The `cumprod` primitive (symgraph/ops/scan.py): left to right as NumPy
    multiplies (bit for bit), one sequential pass compiled. Its derivative is
    a linear recurrence computed by doubling, a polynomial in the inputs:
    exact with zeros and negative values, to every order.
    """
    return _scan("cumprod", a, axis, dtype, out)


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = _np._NoValue, append: Any = _np._NoValue) -> Any:
    """n-th discrete difference along axis: a[1:] - a[:-1], n times (bool: a[1:] != a[:-1], as NumPy).

    prepend/append are broadcast to a's shape with length 1 along axis when
    scalar, and joined first. Raises ShapeError for 0-d input, ValueError-like
    ShapeError for n < 0.
    """
    if not _traced(a, prepend, append):
        return _np.diff(a, n=n, axis=axis, prepend=prepend, append=append)
    if n < 0:
        raise ShapeError(f"diff: order must be non-negative but got {n}")
    a = _arr(a)
    if a.ndim == 0:
        raise ShapeError("diff requires input that is at least one dimensional")
    ax = _axis(axis, a.ndim, "diff")
    parts = []
    for extra in (prepend, append):
        if extra is _np._NoValue:
            parts.append(None)
            continue
        e = _arr(extra)
        if e.ndim == 0:
            e = L.broadcast_to(e, _with_axis(a.shape, ax, 1))
        parts.append(e)
    joined = [p for p in (parts[0], a, parts[1]) if p is not None]
    if len(joined) > 1:
        a = concatenate(joined, axis=ax)
    if n == 0:
        return a
    for _ in range(n):
        m = a.shape[ax]
        hi, lo = _take_slice(a, ax, 1, None), _take_slice(a, ax, 0, builtins.max(m - 1, 0))
        a = L.binary("ne", hi, lo) if a.dtype.kind == "b" else subtract(hi, lo)
    return a


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """Differences of the flattened array, with optional values put before and after (as np.ediff1d)."""
    if not _traced(ary, to_end, to_begin):
        return _np.ediff1d(ary, to_end=to_end, to_begin=to_begin)
    x = ravel(_arr(ary))
    d = diff(x)
    parts = []
    if to_begin is not None:
        parts.append(L.cast(ravel(_arr(to_begin)), x.dtype))
    parts.append(d)
    if to_end is not None:
        parts.append(L.cast(ravel(_arr(to_end)), x.dtype))
    return concatenate(parts, axis=0) if len(parts) > 1 else d


def _along(c: Any, ax: int, nd: int) -> Any:
    """A 1-d coefficient array shaped to broadcast along axis ax of an nd-array."""
    shape = (_shape(c)[0],) + (1,) * (nd - ax - 1)
    return reshape(c, shape) if isinstance(c, Node) else _np.reshape(c, shape)


def gradient(f: Any, *varargs: Any, axis: Any = None, edge_order: int = 1) -> Any:
    """np.gradient: second-order central differences inside, one-sided (edge_order 1 or 2) at the ends.

    Spacings as NumPy takes them: none (1), one scalar for every axis, or one
    per axis, each a scalar or a 1-d array of coordinates (non-uniform
    spacing; evenly spaced coordinates act as their scalar step, as in NumPy).
    NumPy's formulas and coefficients. Returns one array per axis (a tuple,
    as NumPy 2), or the array itself for one axis. Integers give float64.

    Raises:
        ShapeError: an axis with fewer than edge_order + 1 points, a wrong number of spacings, or a
            coordinate array whose length differs from its axis.
    """
    if not _traced(f, *varargs):
        return _np.gradient(f, *varargs, axis=axis, edge_order=edge_order)
    f = _arr(f)
    nd = f.ndim
    axes = list(range(nd)) if axis is None else list(normalize_axes(axis, nd, op="gradient"))
    if len(varargs) == 0:
        dx: list = [1.0] * len(axes)
    elif len(varargs) == 1 and _np.ndim(varargs[0]) == 0:
        dx = list(varargs) * len(axes)
    elif len(varargs) == len(axes):
        dx = list(varargs)
    else:
        raise ShapeError("gradient: invalid number of spacing arguments")
    if edge_order not in (1, 2):
        raise ShapeError("gradient: edge_order must be 1 or 2")
    if f.dtype.kind in "biu":
        f = L.cast(f, _np.float64)
    outs = []
    for ax, h in zip(axes, dx):
        n = f.shape[ax]
        if n < edge_order + 1:
            raise ShapeError("gradient: shape of the array too small to calculate a numerical gradient, "
                             "at least (edge_order + 1) elements are required")
        if _np.ndim(h) != 0:
            if _np.ndim(h) != 1:
                raise ShapeError("gradient: distances must be either scalars or 1d")
            if _shape(h)[0] != n:
                raise ShapeError("gradient: when 1d, distances must match the length of the corresponding dimension")
            h = L.cast(h, f.dtype) if isinstance(h, Node) else _np.asarray(h, _np.float64 if _np.asarray(h).dtype.kind
                                                                            in "biu" else _np.asarray(h).dtype)
            d = diff(h)
            if not isinstance(d, Node) and (d == d[0]).all():
                h = d[0]
            else:
                h = d
        s = lambda a, b=None: _take_slice(f, ax, a, b)  # noqa: E731
        if _np.ndim(h) == 0:
            inner = (s(2, None) - s(0, n - 2)) / (2.0 * h)
            if edge_order == 1:
                first = (s(1, 2) - s(0, 1)) / h
                last = (s(n - 1, n) - s(n - 2, n - 1)) / h
            else:
                a0, b0, c0 = -1.5 / h, 2.0 / h, -0.5 / h
                a1, b1, c1 = 0.5 / h, -2.0 / h, 1.5 / h
                first = a0 * s(0, 1) + b0 * s(1, 2) + c0 * s(2, 3)
                last = a1 * s(n - 3, n - 2) + b1 * s(n - 2, n - 1) + c1 * s(n - 1, n)
        else:
            d1, d2 = _take_slice(h, 0, 0, n - 2), _take_slice(h, 0, 1, n - 1)
            a = -d2 / (d1 * (d1 + d2))
            b = (d2 - d1) / (d1 * d2)
            c = d1 / (d2 * (d1 + d2))
            inner = _along(a, ax, nd) * s(0, n - 2) + _along(b, ax, nd) * s(1, n - 1) + _along(c, ax, nd) * s(2, n)
            if edge_order == 1:
                first = (s(1, 2) - s(0, 1)) / _take_slice(h, 0, 0, 1)
                last = (s(n - 1, n) - s(n - 2, n - 1)) / _take_slice(h, 0, n - 2, n - 1)
            else:
                e1, e2 = _take_slice(h, 0, 0, 1), _take_slice(h, 0, 1, 2)
                first = (-(2.0 * e1 + e2) / (e1 * (e1 + e2)) * s(0, 1) + (e1 + e2) / (e1 * e2) * s(1, 2)
                         - e1 / (e2 * (e1 + e2)) * s(2, 3))
                e1, e2 = _take_slice(h, 0, n - 3, n - 2), _take_slice(h, 0, n - 2, n - 1)
                last = (e2 / (e1 * (e1 + e2)) * s(n - 3, n - 2) - (e2 + e1) / (e1 * e2) * s(n - 2, n - 1)
                        + (2.0 * e2 + e1) / (e2 * (e1 + e2)) * s(n - 1, n))
            first, last = L.broadcast_to(first, _with_axis(f.shape, ax, 1)), L.broadcast_to(last, _with_axis(f.shape, ax, 1))
        outs.append(L.cast(concatenate([first, inner, last], axis=ax), f.dtype))
    return outs[0] if len(outs) == 1 else tuple(outs)   # NumPy 2 returns a tuple


# ----- triangles and diagonals -----


def tril(m: Any, k: int = 0) -> Any:
    """Lower triangle of the last two axes (elements above the k-th diagonal set to 0)."""
    if not _traced(m):
        return _np.tril(m, k)
    m = _arr(m)
    if m.ndim == 0:
        raise ShapeError("tril: needs an array of at least 1 dimension, got a 0-d value")
    shape = m.shape if m.ndim >= 2 else m.shape * 2
    mask = _np.tri(shape[-2], shape[-1], k=k, dtype=bool)
    return where(mask, m, _np.zeros((), m.dtype))


def triu(m: Any, k: int = 0) -> Any:
    """Upper triangle of the last two axes (elements below the k-th diagonal set to 0)."""
    if not _traced(m):
        return _np.triu(m, k)
    m = _arr(m)
    if m.ndim == 0:
        raise ShapeError("triu: needs an array of at least 1 dimension, got a 0-d value")
    shape = m.shape if m.ndim >= 2 else m.shape * 2
    mask = _np.tri(shape[-2], shape[-1], k=k - 1, dtype=bool)
    return where(mask, _np.zeros((), m.dtype), m)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The offset diagonal of axes (axis1, axis2), appended as the last axis (as np.diagonal)."""
    if not _traced(a):
        return _np.diagonal(a, offset, axis1, axis2)
    a = _arr(a)
    if a.ndim < 2:
        raise ShapeError("diagonal requires an array of at least two dimensions")
    a1, a2 = _axis(axis1, a.ndim, "diagonal"), _axis(axis2, a.ndim, "diagonal")
    if a1 == a2:
        raise ShapeError("diagonal: axis1 and axis2 cannot be the same")
    rest = [i for i in range(a.ndim) if i not in (a1, a2)]
    x = transpose(a, rest + [a1, a2])
    n1, n2 = a.shape[a1], a.shape[a2]
    idx = _np.diagonal(_np.arange(n1 * n2, dtype=_np.int64).reshape(n1, n2), offset)
    return _gather_const(reshape(x, x.shape[:-2] + (n1 * n2,)), idx, x.ndim - 2, view=True)


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: Any = None) -> Any:
    """Sum of the offset diagonal (np.trace; NumPy's sum dtypes)."""
    if out is not None:
        raise UnsupportedOpError("trace(out=...) writes in place, which tracing does not support")
    if not _traced(a):
        return _np.trace(a, offset, axis1, axis2, dtype)
    return _sum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v: Any, k: int = 0) -> Any:
    """1-d v: a square matrix with v on the k-th diagonal; 2-d v: its k-th diagonal."""
    if not _traced(v):
        return _np.diag(v, k)
    v = _arr(v)
    if v.ndim == 2:
        return diagonal(v, k)
    if v.ndim != 1:
        raise ShapeError("diag: input must be 1- or 2-d")
    n = v.shape[0]
    size = n + builtins.abs(k)
    # positions into [v, 0]: v's index on the diagonal, n elsewhere
    idx = _np.full((size, size), n, _np.int64)
    i = _np.arange(n)
    if k >= 0:
        idx[i, i + k] = i
    else:
        idx[i - k, i] = i
    ext = concatenate([v, _np.zeros((1,), v.dtype)], axis=0)
    return _gather_const(ext, idx, 0)


def diagflat(v: Any, k: int = 0) -> Any:
    """A 2-d array with the flattened v on the k-th diagonal."""
    if not _traced(v):
        return _np.diagflat(v, k)
    return diag(ravel(_arr(v)), k)


# ----- flips, rolls, rotations, axis moves -----


def flip(m: Any, axis: Any = None) -> Any:
    """m with the order of elements reversed along axis (all axes when None)."""
    if not _traced(m):
        return _np.flip(m, axis)
    m = _arr(m)
    axes = normalize_axes(axis, m.ndim, op="flip")
    idx = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(m.ndim))
    return m[idx] if axes else m


def fliplr(m: Any) -> Any:
    """Reverse the second axis (needs at least 2-d)."""
    if _ndim(m) < 2:
        raise ShapeError("fliplr: input must be >= 2-d")
    return flip(m, 1)


def flipud(m: Any) -> Any:
    """Reverse the first axis (needs at least 1-d)."""
    if _ndim(m) < 1:
        raise ShapeError("flipud: input must be >= 1-d")
    return flip(m, 0)


def roll(a: Any, shift: Any, axis: Any = None) -> Any:
    """Elements shifted cyclically along axis by shift (flattened and restored when axis is None)."""
    if not _traced(a):
        return _np.roll(a, shift, axis)
    a = _arr(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), a.shape)
    axes = _np.atleast_1d(_np.asarray(axis))
    shifts = _np.atleast_1d(_np.asarray(shift))
    axes, shifts = _np.broadcast_arrays(axes, shifts)
    total: dict[int, int] = {}
    for ax, s in zip(axes.tolist(), shifts.tolist()):
        ax = _axis(int(ax), a.ndim, "roll")
        total[ax] = total.get(ax, 0) + int(s)
    for ax, s in total.items():
        n = a.shape[ax]
        if n == 0:
            continue
        s %= n
        if s:
            a = L.bind("concatenate", _take_slice(a, ax, n - s, None), _take_slice(a, ax, 0, n - s), axis=ax)
    return a


def rot90(m: Any, k: int = 1, axes: Sequence[int] = (0, 1)) -> Any:
    """Rotate by 90 degrees k times in the plane of axes (from the first towards the second)."""
    if not _traced(m):
        return _np.rot90(m, k, axes)
    m = _arr(m)
    axes = tuple(axes)
    if len(axes) != 2:
        raise ShapeError("rot90: len(axes) must be 2")
    a0, a1 = _axis(axes[0], m.ndim, "rot90"), _axis(axes[1], m.ndim, "rot90")
    if a0 == a1:
        raise ShapeError("rot90: axes must be different")
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(m.ndim))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    if k == 1:
        return transpose(flip(m, a1), perm)
    return flip(transpose(m, perm), a1)


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """Roll axis backwards until it lies before position start (np.rollaxis)."""
    if not _traced(a):
        return _np.rollaxis(a, axis, start)
    a = _arr(a)
    n = a.ndim
    ax = _axis(axis, n, "rollaxis")
    if start < 0:
        start += n
    if not 0 <= start < n + 1:
        raise ShapeError(f"rollaxis: start {start} out of range for {n} dimensions")
    if ax < start:
        start -= 1
    if ax == start:
        return a
    perm = [i for i in range(n) if i != ax]
    perm.insert(start, ax)
    return transpose(a, perm)


# ----- tiling and repeating -----


def tile(A: Any, reps: Any) -> Any:  # noqa: N803  (NumPy's name)
    """A repeated reps times along each axis (np.tile: the shorter of A.ndim and len(reps) padded with ones)."""
    if not _traced(A):
        return _np.tile(A, reps)
    A = _arr(A)
    reps = tuple(int(r) for r in _np.atleast_1d(_np.asarray(reps)))
    d = builtins.max(len(reps), A.ndim)
    reps = (1,) * (d - len(reps)) + reps
    shape = (1,) * (d - A.ndim) + A.shape
    inter = []
    for s in shape:
        inter += [1, s]
    x = reshape(A, tuple(inter))
    target = []
    for r, s in zip(reps, shape):
        target += [r, s]
    x = L.broadcast_to(x, tuple(target))
    return reshape(x, tuple(r * s for r, s in zip(reps, shape)))


def repeat(a: Any, repeats: Any, axis: Any = None) -> Any:
    """Each element repeated (flattened when axis is None); repeats is a count or one count per element."""
    if not _traced(a):
        return _np.repeat(a, repeats, axis)
    if isinstance(repeats, Node):
        raise TracerConversionError("repeat: the counts give the result's shape and must be concrete, not traced")
    a = _arr(a)
    if axis is None:
        a, axis = ravel(a), 0
    ax = _axis(axis, a.ndim, "repeat")
    n = a.shape[ax]
    r = _np.asarray(repeats)
    if r.dtype.kind not in "iu" and not (r.dtype.kind == "b"):
        raise DTypeError(f"repeat: repeats must be integers, got {r.dtype}")
    if (r < 0).any():
        raise ShapeError("repeat: negative dimensions are not allowed")
    if r.ndim == 0 or r.size == 1:
        c = int(r.reshape(-1)[0]) if r.size else 0
        x = reshape(a, a.shape[:ax + 1] + (1,) + a.shape[ax + 1:])
        x = L.broadcast_to(x, a.shape[:ax + 1] + (c,) + a.shape[ax + 1:])
        return reshape(x, _with_axis(a.shape, ax, n * c))
    idx = _np.repeat(_np.arange(n, dtype=_np.int64), r)   # a wrong length: NumPy's ValueError, as ShapeError
    return _gather_const(a, idx, ax)


# ----- splitting -----


def _split_points(n: int, indices_or_sections: Any, even: bool, op: str) -> list[int]:
    if _np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ShapeError(f"{op}: number sections must be larger than 0")
        if even and n % sections:
            raise ShapeError(f"{op}: array split does not result in an equal division")
        each, extra = divmod(n, sections)
        sizes = [0] + extra * [each + 1] + (sections - extra) * [each]
        return _np.cumsum(sizes).tolist()
    pts = [int(i) for i in indices_or_sections]
    return [0] + pts + [n]


def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """Split into sub-arrays along axis: at the given indices, or into N nearly equal parts."""
    if not _traced(ary):
        return _np.array_split(ary, indices_or_sections, axis)
    a = _arr(ary)
    ax = _axis(axis, a.ndim, "array_split")
    pts = _split_points(a.shape[ax], indices_or_sections, False, "array_split")
    return [_take_slice(a, ax, s, e) for s, e in zip(pts[:-1], pts[1:])]


def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list:
    """Split into equal sub-arrays along axis (ShapeError if N does not divide the axis), or at indices."""
    if not _traced(ary):
        return _np.split(ary, indices_or_sections, axis)
    a = _arr(ary)
    ax = _axis(axis, a.ndim, "split")
    pts = _split_points(a.shape[ax], indices_or_sections, True, "split")
    return [_take_slice(a, ax, s, e) for s, e in zip(pts[:-1], pts[1:])]


def hsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split along axis 1 (axis 0 for 1-d)."""
    if _ndim(ary) == 0:
        raise ShapeError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if _ndim(ary) > 1 else 0)


def vsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split along axis 0 (needs at least 2-d)."""
    if _ndim(ary) < 2:
        raise ShapeError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


def dsplit(ary: Any, indices_or_sections: Any) -> list:
    """Split along axis 2 (needs at least 3-d)."""
    if _ndim(ary) < 3:
        raise ShapeError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


# ----- products and selections -----


def kron(a: Any, b: Any) -> Any:
    """Kronecker product: blocks a[i, j] * b (ranks padded with leading ones to match)."""
    if not _traced(a, b):
        return _np.kron(a, b)
    a, b = _arr(a), _arr(b)
    nd = builtins.max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + tuple(a.shape)
    sb = (1,) * (nd - b.ndim) + tuple(b.shape)
    ia, ib = [], []
    for x, y in zip(sa, sb):
        ia += [x, 1]
        ib += [1, y]
    prod = multiply(reshape(a, tuple(ia)), reshape(b, tuple(ib)))
    return reshape(prod, tuple(x * y for x, y in zip(sa, sb)))


def cross(a: Any, b: Any, axisa: int = -1, axisb: int = -1, axisc: int = -1, axis: Any = None) -> Any:
    """Cross product of 3-vectors (or 2-vectors, as NumPy: the z component for two 2-vectors) along axes."""
    if not _traced(a, b):
        return _np.cross(a, b, axisa, axisb, axisc, axis)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = _arr(a), _arr(b)
    a = moveaxis(a, _axis(axisa, a.ndim, "cross"), -1)
    b = moveaxis(b, _axis(axisb, b.ndim, "cross"), -1)
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError("cross: incompatible dimensions for cross product (dimension must be 2 or 3)")
    c = lambda x, i: _take_slice(x, x.ndim - 1, i, i + 1)[..., 0]  # noqa: E731
    if na == 2 and nb == 2:
        return c(a, 0) * c(b, 1) - c(a, 1) * c(b, 0)
    a0, a1 = c(a, 0), c(a, 1)
    b0, b1 = c(b, 0), c(b, 1)
    a2 = c(a, 2) if na == 3 else None
    b2 = c(b, 2) if nb == 3 else None
    x = (a1 * b2 if b2 is not None else 0) - (a2 * b1 if a2 is not None else 0)
    y = (a2 * b0 if a2 is not None else 0) - (a0 * b2 if b2 is not None else 0)
    z = a0 * b1 - a1 * b0
    shape = _np.broadcast_shapes(_shape(x), _shape(y), _shape(z))
    dtype = L.result_dtype(a, b)
    comps = [L.broadcast_to(L.cast(L.asnode(t), dtype), shape) for t in (x, y, z)]
    out = L.bind("concatenate", *[reshape(t, shape + (1,)) for t in comps], axis=len(shape))
    return moveaxis(out, -1, _axis(axisc, out.ndim, "cross"))


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """The first choice whose condition holds, elementwise (default where none does)."""
    if not _traced(condlist, choicelist, default):
        return _np.select(condlist, choicelist, default)
    if len(condlist) != len(choicelist):
        raise ShapeError("select: list of cases must be same length as list of conditions")
    if len(choicelist) == 0:
        raise ShapeError("select with an empty condition list is not possible")
    for c in condlist:
        if _arr(c).dtype.kind != "b":
            raise DTypeError(f"select: invalid entry in condlist: should be boolean ndarray, got {_arr(c).dtype}")
    dtype = L.result_dtype(*choicelist, default)
    out = default
    for c, ch in zip(reversed(list(condlist)), reversed(list(choicelist))):
        out = where(c, ch, out)
    shape = _np.broadcast_shapes(*[_shape(x) for x in list(condlist) + list(choicelist) + [default]])
    return L.broadcast_to(L.cast(L.asnode(out), dtype), shape)


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """np.piecewise: `funclist[i](x)` where `condlist[i]` holds (the last one wins, as NumPy), else 0 or the
    extra last function where none holds. Each function is called on the whole x (it must be elementwise
    and trace); the result has x's dtype. Gradients: those of where (a branch that is NaN or infinite
    outside its condition gives a NaN derivative there, as with np.where)."""
    if not _traced(x, condlist):
        return _np.piecewise(x, condlist, funclist, *args, **kw)
    x = _arr(x)
    if not isinstance(condlist, (list, tuple)):
        c = _arr(condlist)
        # one condition array of x's shape (or a scalar), else an array stacking the conditions
        condlist = [c] if isinstance(c, Node) or c.ndim == 0 or c.shape == _shape(x) else list(c)
    condlist = list(condlist)
    n = len(condlist)
    funclist = list(funclist)
    if len(funclist) == n + 1:
        any_c = condlist[0]
        for c in condlist[1:]:
            any_c = L.binary("logical_or", any_c, c)
        condlist.append(L.unary("logical_not", L.asnode(any_c), float_op=False))
    elif len(funclist) != n:
        raise ShapeError(f"piecewise: with {n} condition(s), either {n} or {n + 1} functions are expected")
    out = L.broadcast_to(L.constant(_np.zeros((), x.dtype)), x.shape)
    for c, fn in zip(condlist, funclist):
        val = fn(x, *args, **kw) if callable(fn) else fn
        out = L.where(L.broadcast_to(L.cast(L.asnode(c), bool), x.shape), L.cast(L.asnode(val), x.dtype), out)
    return out


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Any:
    """NaN, +inf and -inf replaced by nan, posinf (default: the dtype's max) and neginf (its lowest).

    Derivative 1 at finite values, 0 at replaced ones. Integers and bools pass through. Complex x:
    the real and the imaginary parts each, as NumPy's.
    """
    if not _traced(x):
        return _np.nan_to_num(x, copy=copy, nan=nan, posinf=posinf, neginf=neginf)
    x = _arr(x)
    if x.dtype.kind == "c":
        kw = {"nan": nan, "posinf": posinf, "neginf": neginf}
        return L.bind("complex", nan_to_num(L.bind("real", x), **kw), nan_to_num(L.bind("imag", x), **kw))
    if x.dtype.kind != "f":
        return x
    fi = _np.finfo(x.dtype)
    hi = fi.max if posinf is None else posinf
    lo = fi.min if neginf is None else neginf
    c = lambda v: L.constant(_np.asarray(v, x.dtype))  # noqa: E731
    y = L.where(isnan(x), c(nan), x)
    y = L.where(L.binary("eq", x, c(_np.inf)), c(hi), y)
    return L.where(L.binary("eq", x, c(-_np.inf)), c(lo), y)


def _shape_errors(fn: Any) -> Any:
    """fn, with a ValueError of NumPy's index helpers (bad lengths, shapes that do not broadcast) raised as
    ShapeError (itself a ValueError) naming the function."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SymgraphError:
            raise
        except ValueError as e:
            raise ShapeError(f"{fn.__name__}: {e}") from None

    return wrapper


for _name in __all__:
    globals()[_name] = _shape_errors(globals()[_name])
del _name

# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.cumsum: cumsum, _np.cumprod: cumprod, _np.diff: diff, _np.ediff1d: ediff1d, _np.gradient: gradient,
    
    _np.tril: tril, _np.triu: triu, _np.diag: diag, _np.diagflat: diagflat, _np.diagonal: diagonal,
    _np.trace: trace, _np.repeat: repeat, _np.tile: tile, _np.roll: roll, _np.flip: flip, _np.fliplr: fliplr,
    _np.flipud: flipud, _np.rot90: rot90, _np.rollaxis: rollaxis, _np.split: split, _np.array_split: array_split,
    _np.hsplit: hsplit, _np.vsplit: vsplit, _np.dsplit: dsplit, _np.kron: kron, _np.cross: cross,
    _np.select: select, _np.piecewise: piecewise, _np.nan_to_num: nan_to_num,
}
