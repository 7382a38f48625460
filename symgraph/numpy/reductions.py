"""Reductions over axes: sum, prod, max, min, mean, var, std, argmax, argmin (with NumPy's accumulator dtypes)."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import UnsupportedOpError
from ..ir import Node
from ..ops.core import normalize_axes
from .arithmetic import divide, multiply, negative, subtract
from .base import _ndim, _shape
from .complex_order import complex_argextremum, complex_extremum
from .elementary import sqrt
from .layout import reshape
from .logic import equal, greater, not_equal, where

__all__ = ["all", "amax", "amin", "any", "argmax", "argmin", "max", "mean", "min", "nanargmax", "nanargmin", "nanmax", "nanmean",
           "nanmin", "nanprod", "nanstd", "nansum", "nanvar", "prod", "std", "sum", "var"]


def _accumulator(x: Any, dtype: Any) -> Any:
    """x cast to the dtype NumPy's sum/prod accumulate in: `dtype` if given, else bool and
    integers narrower than 64 bits widen to int64 (unsigned: uint64), so small-integer sums do
    not wrap around where NumPy's do not."""
    if dtype is not None:
        return L.cast(x, dtype)
    d = _np.asarray(x).dtype if not isinstance(x, Node) else x.dtype
    if d.kind in "bi" and d.itemsize < 8:
        return L.cast(x, _np.int64)
    if d.kind == "u" and d.itemsize < 8:
        return L.cast(x, _np.uint64)
    return x


def sum(x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Any:  # noqa: A001
    """Sum over axis (None: all); bool and narrow integers accumulate in (u)int64, as in NumPy."""
    return L.reduce("sum", _accumulator(x, dtype), axis, keepdims)


def _count(test: Any, x: Any, axis: Any, keepdims: bool, fn: str, where_: Any) -> Any:
    if where_ is not True:
        raise UnsupportedOpError(f"np.{fn}(where=...) is not supported on traced values; apply np.where first")
    return L.reduce("sum", L.cast(test(x, 0), _np.int64), axis, keepdims)


def any(x: Any, axis: Any = None, keepdims: bool = False, *, where: Any = True) -> Any:  # noqa: A001
    """Whether any element along axis is nonzero (NaN counts as nonzero, as in NumPy); bool, no derivative.

    An empty reduction is False.
    """
    return greater(_count(not_equal, x, axis, keepdims, "any", where), 0)


def all(x: Any, axis: Any = None, keepdims: bool = False, *, where: Any = True) -> Any:  # noqa: A001
    """Whether every element along axis is nonzero (NaN counts as nonzero, as in NumPy); bool, no derivative.

    An empty reduction is True.
    """
    return equal(_count(equal, x, axis, keepdims, "all", where), 0)


def prod(x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Any:
    """Product over axis; exact derivative with zeros; narrow integers accumulate in (u)int64."""
    return L.reduce("prod", _accumulator(x, dtype), axis, keepdims)


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Maximum over axis; ties share the derivative equally. Complex values: NumPy's lexicographic order
    (symgraph.numpy.complex_order)."""
    if _is_complex(x):
        return complex_extremum(x, axis, keepdims, "max")
    return L.reduce("max", x, axis, keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Minimum over axis; ties share the derivative equally. Complex values: NumPy's lexicographic order."""
    if _is_complex(x):
        return complex_extremum(x, axis, keepdims, "min")
    return L.reduce("min", x, axis, keepdims)


def _is_complex(x: Any) -> bool:
    return (x.dtype if isinstance(x, Node) else _np.asarray(x).dtype).kind == "c"


amax = max
amin = min


def mean(x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Any:
    """Arithmetic mean over axis (sum / count); integers give float64."""
    x = x if isinstance(x, Node) else _np.asarray(x)
    x = L.to_float(x) if dtype is None else L.cast(x, dtype)
    axes = normalize_axes(axis, _ndim(x), op="mean")
    n = int(_np.prod([_shape(x)[a] for a in axes], dtype=_np.int64))
    return divide(sum(x, axis, keepdims), _np.asarray(n, dtype=x.dtype))


def var(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
    """Variance: mean of squared deviations (two-pass, stable).

    A complex x gives a real variance, mean |x - mean(x)|**2, as NumPy: the squared parts added.
    """
    x = L.to_float(x if isinstance(x, Node) else _np.asarray(x))
    axes = normalize_axes(axis, _ndim(x), op="var")
    n = int(_np.prod([_shape(x)[a] for a in axes], dtype=_np.int64))
    d = subtract(x, mean(x, axis, keepdims=True))
    if d.dtype.kind == "c":
        re, im = L.bind("real", d), L.bind("imag", d)
        sq = L.add(multiply(re, re), multiply(im, im))
        return divide(sum(sq, axis, keepdims), _np.asarray(builtins.max(n - ddof, 0), dtype=re.dtype))
    # NumPy divides by max(n - ddof, 0): a ddof >= n gives inf (or nan for 0 / 0), never a negative variance
    return divide(sum(multiply(d, d), axis, keepdims), _np.asarray(builtins.max(n - ddof, 0), dtype=x.dtype))


def std(x: Any, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Any:
    """Standard deviation sqrt(var); where the variance is 0 (one element, or equal ones) its derivative is 0.

    The derivative there is 0/0 by the chain rule (sqrt's derivative is
    infinite at 0, the variance's is 0); 0 is the subgradient convention of
    `norm` at 0 and what autograd returns, never NaN.
    """
    v = var(x, axis, keepdims, ddof)
    pos = greater(v, 0.0)
    # elsewhere v is 0 or NaN (a NaN input, or 0 / 0 for ddof = n): v * 0 is that value, with derivative 0
    return where(pos, sqrt(where(pos, v, 1.0)), multiply(v, 0.0))


def argmax(x: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """Index of the first maximum (int64); flattened when axis is None; keepdims keeps the axis as size 1.

    Raises:
        UnsupportedOpError: out= (traced values are not written into).
    """
    if out is not None:
        raise UnsupportedOpError("argmax(out=...) is not supported on traced values; use the returned array")
    nd = _ndim(x)
    if _is_complex(x):
        r = complex_argextremum(x, axis, "max")
        return reshape(r, (1,) * nd if axis is None else tuple(
            1 if i == normalize_axes(axis, nd, op="argmax")[0] else d for i, d in enumerate(_shape(x)))) if keepdims else r
    if axis is None:
        r = L.bind("argmax", reshape(x, (-1,)), axis=0)
        return reshape(r, (1,) * nd) if keepdims else r
    (ax,) = normalize_axes(axis, nd, op="argmax")
    r = L.bind("argmax", x, axis=ax)
    return reshape(r, tuple(1 if i == ax else d for i, d in enumerate(_shape(x)))) if keepdims else r


def argmin(x: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """Index of the first minimum (int64); the arguments as argmax's."""
    if out is not None:
        raise UnsupportedOpError("argmin(out=...) is not supported on traced values; use the returned array")
    if _is_complex(x):
        nd = _ndim(x)
        r = complex_argextremum(x, axis, "min")
        return reshape(r, (1,) * nd if axis is None else tuple(
            1 if i == normalize_axes(axis, nd, op="argmin")[0] else d for i, d in enumerate(_shape(x)))) if keepdims else r
    return argmax(negative(x), axis, keepdims=keepdims)


# ----- NaN-ignoring reductions (NumPy's nan* functions) -----


def _nan_mask(x: Any) -> Any:
    """isnan(x) for float x, else None (integer and bool arrays hold no NaN: NumPy's nan* reduce them as is)."""
    d = x.dtype if isinstance(x, Node) else _np.asarray(x).dtype
    return L.unary("isnan", x, float_op=False) if d.kind == "f" else None


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise UnsupportedOpError(f"np.{name}(..., out=...) writes in place, which tracing does not support")


def _nan_count(mask: Any, axis: Any, keepdims: bool, dtype: Any) -> Any:
    """The number of non-NaN elements along axis, as dtype."""
    return L.cast(sum(L.unary("logical_not", mask, float_op=False), axis, keepdims), dtype)


def _nan_filled(x: Any, fill: float) -> Any:
    """x with its NaNs replaced by `fill` (x itself when its dtype cannot hold NaN)."""
    x = x if isinstance(x, Node) else _np.asarray(x)
    mask = _nan_mask(x)
    return x if mask is None else where(mask, fill, x)


def nansum(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Sum treating NaN as 0 (an all-NaN or empty slice sums to 0); NumPy's accumulator dtypes as `sum`.

    Derivative 1 at the non-NaN elements, 0 at the NaNs.

    Raises:
        UnsupportedOpError: `out=`.
    """
    _no_out("nansum", out)
    return sum(_nan_filled(x, 0.0), axis, keepdims, dtype)


def nanprod(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Product treating NaN as 1 (an all-NaN or empty slice gives 1); exact derivative with zeros, as `prod`.

    Raises:
        UnsupportedOpError: `out=`.
    """
    _no_out("nanprod", out)
    return prod(_nan_filled(x, 1.0), axis, keepdims, dtype)


def nanmean(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Mean of the non-NaN elements: nansum / their count (NaN for an all-NaN slice, as NumPy without its warning).

    Integers give float64 (they hold no NaN: `mean`); float32 stays float32.
    Derivative 1/count at each non-NaN element, 0 at the NaNs.

    Raises:
        UnsupportedOpError: `out=`.
    """
    _no_out("nanmean", out)
    x = x if isinstance(x, Node) else _np.asarray(x)
    mask = _nan_mask(x)
    if mask is None:
        return mean(x, axis, keepdims, dtype)
    x = x if dtype is None else L.cast(x, dtype)
    return divide(sum(where(mask, 0.0, x), axis, keepdims), _nan_count(mask, axis, keepdims, x.dtype))


def nanvar(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
           keepdims: bool = False) -> Any:
    """Variance of the non-NaN elements, two-pass as NumPy's nanvar: sum((x - nanmean)**2) / (count - ddof).

    Where count - ddof <= 0 (an all-NaN slice, or ddof too large) the result is
    NaN, as NumPy's nanvar (np.var gives inf there instead). Integers hold no
    NaN and go to `var`. Derivative 2 (x - mean) / (count - ddof) at the
    non-NaN elements, 0 at the NaNs.

    Raises:
        UnsupportedOpError: `out=`.
    """
    _no_out("nanvar", out)
    x = x if isinstance(x, Node) else _np.asarray(x)
    mask = _nan_mask(x)
    if mask is None:
        return var(x if dtype is None else L.cast(x, dtype), axis, keepdims, ddof)
    x = x if dtype is None else L.cast(x, dtype)
    cnt = _nan_count(mask, axis, True, x.dtype)
    avg = divide(sum(where(mask, 0.0, x), axis, True), cnt)
    d = where(mask, 0.0, subtract(x, avg))
    dof = subtract(_nan_count(mask, axis, keepdims, x.dtype), _np.asarray(ddof, dtype=x.dtype))
    v = divide(sum(multiply(d, d), axis, keepdims), dof)
    return where(greater(dof, 0.0), v, _np.asarray(_np.nan, dtype=x.dtype))


def nanstd(x: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
           keepdims: bool = False) -> Any:
    """Standard deviation of the non-NaN elements, sqrt(nanvar); derivative 0 where the variance is 0, as `std`.

    Raises:
        UnsupportedOpError: `out=`.
    """
    _no_out("nanstd", out)
    v = nanvar(x, axis, dtype, None, ddof, keepdims)
    pos = greater(v, 0.0)
    # elsewhere v is 0 or NaN: v * 0 is that value with derivative 0 (std's convention at zero variance)
    return where(pos, sqrt(where(pos, v, 1.0)), multiply(v, 0.0))


def _nan_extreme(name: str, x: Any, axis: Any, keepdims: bool, fill: float) -> Any:
    x = x if isinstance(x, Node) else _np.asarray(x)
    mask = _nan_mask(x)
    if mask is None:
        return L.reduce(name, x, axis, keepdims)
    m = L.reduce(name, where(mask, fill, x), axis, keepdims)
    allnan = L.reduce("min", L.cast(mask, _np.int8), axis, keepdims)  # 1 where every element is NaN
    return where(L.cast(allnan, bool), _np.asarray(_np.nan, dtype=x.dtype), m)


def nanmax(x: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Maximum ignoring NaN (NaN for an all-NaN slice, as NumPy without its warning).

    The derivative is `max`'s on the non-NaN elements (ties share it equally),
    0 at the NaNs.

    Raises:
        UnsupportedOpError: `out=`.
        ShapeError: a zero-size reduction (no identity), as NumPy's ValueError.
    """
    _no_out("nanmax", out)
    return _nan_extreme("max", x, axis, keepdims, -_np.inf)


def nanmin(x: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Minimum ignoring NaN (NaN for an all-NaN slice); derivative as `min` on the non-NaN elements.

    Raises:
        UnsupportedOpError: `out=`.
        ShapeError: a zero-size reduction (no identity).
    """
    _no_out("nanmin", out)
    return _nan_extreme("min", x, axis, keepdims, _np.inf)


def _nan_arg(x: Any, axis: Any, keepdims: bool, fill: float, fn: Any) -> Any:
    x = x if isinstance(x, Node) else _np.asarray(x)
    mask = _nan_mask(x)
    idx = fn(x if mask is None else where(mask, fill, x), axis)
    if keepdims:
        shape = tuple(1 for _ in _shape(x)) if axis is None else tuple(
            1 if i == normalize_axes(axis, _ndim(x), op="nanargmax")[0] else d for i, d in enumerate(_shape(x)))
        idx = reshape(idx, shape)
    return idx


def nanargmax(x: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """Index of the first maximum ignoring NaN (int64): argmax with NaN replaced by -inf, as NumPy.

    NumPy raises ValueError for an all-NaN slice; a traced value cannot raise on
    its data, so such a slice gives index 0 here.

    Raises:
        UnsupportedOpError: `out=`.
    """
    _no_out("nanargmax", out)
    return _nan_arg(x, axis, keepdims, -_np.inf, argmax)


def nanargmin(x: Any, axis: Any = None, out: Any = None, *, keepdims: bool = False) -> Any:
    """Index of the first minimum ignoring NaN (int64); an all-NaN slice gives 0 (NumPy raises).

    Raises:
        UnsupportedOpError: `out=`.
    """
    _no_out("nanargmin", out)
    return _nan_arg(x, axis, keepdims, _np.inf, argmin)


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
}

FUNCTIONS = {
    _np.sum: sum, _np.mean: mean, _np.max: max, _np.min: min, _np.amax: max, _np.amin: min, _np.prod: prod,
    _np.var: var, _np.std: std, _np.argmax: argmax, _np.argmin: argmin, _np.any: any, _np.all: all,
    _np.nansum: nansum, _np.nanprod: nanprod, _np.nanmean: nanmean, _np.nanvar: nanvar, _np.nanstd: nanstd,
    _np.nanmax: nanmax, _np.nanmin: nanmin, _np.nanargmax: nanargmax, _np.nanargmin: nanargmin,
}
