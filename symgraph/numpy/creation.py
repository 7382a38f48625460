"""Arrays from values and shapes: array/asarray of (nested) sequences of traced values, joining helpers
(column_stack, append, atleast_*d, r_, c_), linspace with traced endpoints, zeros_like and friends
(constants), counter-based random values."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, ShapeError, UnsupportedOpError
from ..ir import Node
from .base import _ndim, _shape
from .layout import sequence_array, holds_node, concatenate, moveaxis, reshape, stack

__all__ = [
    "append", "arange", "array", "asarray", "astype", "atleast_1d", "atleast_2d", "atleast_3d", "c_",
    "column_stack", "eye", "full", "full_like", "linspace", "ones", "ones_like", "r_", "random_uniform", "zeros",
    "zeros_like",
]


def asarray(a: Any, dtype: Any = None, order: Any = None, *, copy: Any = None, like: Any = None,
            device: Any = None, ndmin: int = 0) -> Any:
    """`np.asarray` / `np.array` for traced values: a traced value, or a (nested) list/tuple of them.

    A traced value is returned as is (cast to `dtype` if given; traced values are immutable, so every
    `copy=` is honoured without copying). A list or tuple holding traced values, arrays and numbers
    becomes one array, by NumPy's coercion rules: elements of a level share one shape (else
    `ShapeError`), the dtype is the promotion of the leaves' dtypes with Python floats as float64 (not
    weak: ``np.array([x32, 1.0])`` is float64, as in NumPy). `ndmin` prepends size-1 axes. Anything
    else goes to `np.asarray`.

    Plain NumPy cannot hand a list of tracers to symgraph: ``np.array([x, y])`` converts each element
    to an ndarray before any protocol runs. Write ``np.stack([x, y])`` (which traces), or call
    ``symgraph.numpy.array``.

    Args:
        a: the value; shapes as NumPy's.
        dtype: the result dtype (default: promoted from the leaves).
        order, copy, like, device: accepted for NumPy's signature; only "K", "A", "C" or None order.
        ndmin: minimum number of dimensions.

    Raises:
        ShapeError: a ragged (inhomogeneous) sequence.
        UnsupportedOpError: order="F" on a traced value.
    """
    if isinstance(a, Node) or holds_node(a):
        if order not in (None, "K", "A", "C"):
            raise UnsupportedOpError(f"array(order={order!r}) of a traced value: traced arrays have no memory "
                                     f"layout; leave order out")
        out = a if isinstance(a, Node) else sequence_array(a)
        if dtype is not None:
            out = L.cast(out, dtype)
        if ndmin > _ndim(out):
            out = reshape(out, (1,) * (ndmin - _ndim(out)) + _shape(out))
        return out
    kw: dict = {} if copy is None else {"copy": copy}
    if order is not None:
        kw["order"] = order
    out = _np.array(a, dtype=dtype, ndmin=ndmin, **kw) if ndmin or copy else _np.asarray(a, dtype=dtype, **kw)
    return out


def array(object: Any, dtype: Any = None, *, copy: Any = True, order: Any = "K", subok: bool = False,
          ndmin: int = 0, like: Any = None) -> Any:
    """`np.array` for traced values (see `asarray`; `copy` and `subok` change nothing on traced values)."""
    if isinstance(object, Node) or holds_node(object):
        return asarray(object, dtype, order, ndmin=ndmin)
    return _np.array(object, dtype=dtype, copy=copy, order=order, subok=subok, ndmin=ndmin)


def _atleast(x: Any, n: int) -> Any:
    x = asarray(x)
    nd = _ndim(x)
    if nd >= n:
        return x
    shp = _shape(x)
    if n == 3 and nd == 2:
        return reshape(x, shp + (1,))
    if n == 3:  # 0-d -> (1, 1, 1), (k,) -> (1, k, 1): NumPy's atleast_3d
        return reshape(x, (1,) + (shp or (1,)) + (1,))
    return reshape(x, (1,) * (n - nd) + shp)


def _atleast_all(arys: tuple, n: int) -> Any:
    res = [_atleast(a, n) for a in arys]
    return res[0] if len(res) == 1 else tuple(res)


def atleast_1d(*arys: Any) -> Any:
    """Each argument with at least one axis (0-d -> shape (1,)); one array, or a tuple of them."""
    return _atleast_all(arys, 1)


def atleast_2d(*arys: Any) -> Any:
    """Each argument with at least two axes (0-d -> (1, 1), (n,) -> (1, n)); one array, or a tuple of them."""
    return _atleast_all(arys, 2)


def atleast_3d(*arys: Any) -> Any:
    """At least three axes: 0-d -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) -> (m, n, 1), as NumPy."""
    return _atleast_all(arys, 3)


def column_stack(tup: Sequence[Any]) -> Any:
    """Stack 1-d arrays as columns of a 2-d array (0-d -> (1, 1), (n,) -> (n, 1); 2-d and above unchanged),
    joined along axis 1, as NumPy."""
    cols = []
    for a in tup:
        a = asarray(a)
        if _ndim(a) < 2:
            a = reshape(a, (-1, 1))
        cols.append(a)
    return concatenate(cols, axis=1)


def append(arr: Any, values: Any, axis: Any = None) -> Any:
    """`arr` with `values` appended: both flattened when axis is None, else joined along axis (NumPy's rule)."""
    arr, values = asarray(arr), asarray(values)
    if axis is None:
        if _ndim(arr) != 1:
            arr = reshape(arr, (-1,))
        values = reshape(values, (-1,))
        axis = _ndim(arr) - 1
    return concatenate([arr, values], axis=axis)


class _Concatenator:
    """`symgraph.numpy.r_` and `c_`: NumPy's index tricks for arrays, numbers and traced values.

    ``snp.r_[a, b, 1.0]`` joins along axis 0 (each item at least 1-d); ``snp.c_[a, b]`` makes each
    item at least 2-d with 1-d items as columns and joins along the last axis. Slices (``r_[0:3]``) give
    NumPy's ranges; the string directives (``r_['0,2', ...]``) are not supported. Plain ``np.r_`` and
    ``np.c_`` convert every item to an ndarray first, so on traced values they raise (naming these).
    """

    def __init__(self, columns: bool):
        self.columns = columns

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        name = "c_" if self.columns else "r_"
        parts = []
        kinds: list[Any] = []  # for the result dtype: Python numbers stay weak (NumPy's r_: np.r_[x32, 1.0] is float32)
        for it in items:
            if isinstance(it, str):
                raise UnsupportedOpError(f"symgraph.numpy.{name}: string directives ({it!r}) are not supported; "
                                         f"use np.concatenate / np.stack with axis=")
            if isinstance(it, slice):
                it = (_np.r_[it])
            a = asarray(it)
            kinds.append(it if type(it) in (int, float, complex, bool) else _np.dtype(a.dtype))
            if self.columns:
                a = reshape(a, (-1, 1)) if _ndim(a) == 1 else _atleast(a, 2)
            else:
                a = _atleast(a, 1)
            parts.append(a)
        if not parts:
            return _np.array([])
        dtype = _np.result_type(*kinds)
        parts = [L.cast(p, dtype) if isinstance(p, Node) else _np.asarray(p, dtype=dtype) for p in parts]
        return concatenate(parts, axis=-1 if self.columns else 0)


r_ = _Concatenator(columns=False)
c_ = _Concatenator(columns=True)


def astype(x: Any, dtype: Any) -> Any:
    """x converted to dtype."""
    return L.cast(x, dtype)


def zeros_like(x: Any, dtype: Any = None) -> Any:
    """Zeros of x's shape (a constant)."""
    return _np.zeros(_shape(x), dtype or (x.dtype if hasattr(x, "dtype") else float))


def ones_like(x: Any, dtype: Any = None) -> Any:
    """Ones of x's shape (a constant)."""
    return _np.ones(_shape(x), dtype or (x.dtype if hasattr(x, "dtype") else float))


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Any:
    """fill_value in x's shape (a constant)."""
    return _np.full(_shape(x), fill_value, dtype or (x.dtype if hasattr(x, "dtype") else float))


zeros = _np.zeros
ones = _np.ones
full = _np.full
arange = _np.arange
eye = _np.eye


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False,
             dtype: Any = None, axis: int = 0, *, device: Any = None) -> Any:
    """`np.linspace` with traced `start`/`stop` (arrays broadcast; `num`, `endpoint`, `axis` static).

    NumPy's algorithm, so values match it bit for bit in the evaluator: ``arange(num) * step + start``
    with ``step = (stop - start) / div`` (div = num - 1 with the endpoint, else num), or, as NumPy does
    when any step is 0, ``arange(num) / div * (stop - start) + start`` (a `where` on the data); the last
    sample is `stop` exactly when `endpoint` (for num = 1: start, and step NaN). The derivative flows to both
    endpoints. Integer `dtype` floors, as NumPy. With no traced endpoint it is `np.linspace`.

    Returns:
        The samples, shape (num,) + broadcast(start, stop).shape with that axis moved to `axis`;
        with `retstep`, (samples, step).

    Raises:
        ShapeError: num < 0 or endpoints that do not broadcast.
    """
    if not isinstance(start, Node) and not isinstance(stop, Node):
        return _np.linspace(start, stop, num, endpoint=endpoint, retstep=retstep, dtype=dtype, axis=axis)
    if isinstance(num, Node):
        raise UnsupportedOpError("linspace: num must be a concrete integer (it is the length of the result)")
    num = int(num)
    if num < 0:
        raise ShapeError(f"linspace: number of samples, {num}, must be non-negative")
    dt = L.result_dtype(start, stop, float(num))
    start, stop = L.cast(asarray(start), dt), L.cast(asarray(stop), dt)
    bshape = L.broadcast_shapes(_shape(start), _shape(stop), op="linspace")
    start, stop = L.broadcast_to(start, bshape), L.broadcast_to(stop, bshape)
    div = num - 1 if endpoint else num
    delta = stop - start
    t = L.constant(_np.arange(num, dtype=dt).reshape((-1,) + (1,) * len(bshape)))
    if div > 0:
        step = delta / _np.asarray(div, dt)
        # NumPy's own branch: where any step underflows to 0 (start == stop somewhere, or denormal steps)
        # it scales by delta after dividing (gh-5437); the branch is chosen by the data, so both are built
        zero = L.binary("eq", step, _np.zeros((), dt))
        if zero.ndim:
            zero = L.bind("max", L.cast(zero, _np.int8), axes=tuple(range(zero.ndim)))
            zero = L.binary("ne", zero, _np.zeros((), _np.int8))
        y = L.where(zero, (t / _np.asarray(div, dt)) * delta, t * step)
    else:
        step = L.constant(_np.full(bshape, _np.nan, dt))
        y = t * delta
    y = y + start
    if endpoint and num > 1:
        y = concatenate([y[:-1], reshape(stop, (1,) + bshape)], axis=0)
    if axis != 0:
        y = moveaxis(y, 0, axis)
    if dtype is not None:
        if _np.dtype(dtype).kind in "iu":
            y = L.unary("floor", y)
        y = L.cast(y, dtype)
    return (y, step) if retstep else y


def random_uniform(key: Any, shape: Sequence[int], salt: int = 0, dtype: Any = _np.float64) -> Any:
    """Counter-based uniform [0, 1) values of `shape` from an integer scalar key."""
    if not isinstance(key, Node):
        key = _np.asarray(key, dtype=_np.uint64)
    elif key.dtype.kind not in "iu":
        raise DTypeError(f"random_uniform: key must be an integer, got {key.dtype}")
    return L.bind("random_uniform", key, shape=tuple(int(d) for d in shape), salt=int(salt), dtype=_np.dtype(dtype))


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
}

FUNCTIONS = {
    _np.zeros_like: zeros_like, _np.ones_like: ones_like, _np.full_like: full_like, _np.asarray: asarray,
    _np.array: array, _np.atleast_1d: atleast_1d, _np.atleast_2d: atleast_2d, _np.atleast_3d: atleast_3d,
    _np.column_stack: column_stack, _np.append: append, _np.linspace: linspace,
}
