"""Reductions over axes: sum, prod, max, min, mean, var, std, argmax, argmin (with NumPy's accumulator dtypes)."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from .. import lax as L
from ..ir import Node
from ..ops.core import normalize_axes
from .arithmetic import divide, multiply, negative, subtract
from .base import _ndim, _shape
from .elementary import sqrt
from .layout import reshape
from .logic import greater, where

__all__ = ["amax", "amin", "argmax", "argmin", "max", "mean", "min", "prod", "std", "sum", "var"]


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


def prod(x: Any, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Any:
    """Product over axis; exact derivative with zeros; narrow integers accumulate in (u)int64."""
    return L.reduce("prod", _accumulator(x, dtype), axis, keepdims)


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Maximum over axis; ties share the derivative equally."""
    return L.reduce("max", x, axis, keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Minimum over axis; ties share the derivative equally."""
    return L.reduce("min", x, axis, keepdims)


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
    """Variance: mean of squared deviations (two-pass, stable)."""
    x = L.to_float(x if isinstance(x, Node) else _np.asarray(x))
    axes = normalize_axes(axis, _ndim(x), op="var")
    n = int(_np.prod([_shape(x)[a] for a in axes], dtype=_np.int64))
    d = subtract(x, mean(x, axis, keepdims=True))
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


def argmax(x: Any, axis: Any = None) -> Any:
    """Index of the first maximum (int64); flattened when axis is None."""
    if axis is None:
        x = reshape(x, (-1,))
        axis = 0
    (ax,) = normalize_axes(axis, _ndim(x), op="argmax")
    return L.bind("argmax", x, axis=ax)


def argmin(x: Any, axis: Any = None) -> Any:
    """Index of the first minimum (int64)."""
    return argmax(negative(x), axis)


# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS = {
}

FUNCTIONS = {
    _np.sum: sum, _np.mean: mean, _np.max: max, _np.min: min, _np.amax: max, _np.amin: min, _np.prod: prod,
    _np.var: var, _np.std: std, _np.argmax: argmax, _np.argmin: argmin,
}
