"""NumPy's order on complex values: max, min, argmax and argmin of complex arrays.

NumPy orders complex numbers lexicographically (real parts first, then imaginary
parts), and a value with a NaN part wins every comparison, the first one along
the axis (`np.maximum`, `np.max`, `np.argmax` all follow that rule). Written with
real ops on the parts: the maximum's real part is the maximum of the real parts
(NaN-free elements), its imaginary part the maximum of the imaginary parts among
the elements holding that real part, so both parts' derivatives follow the real
`max` rule (ties share the derivative equally, as for real values).
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from .. import lax as L
from ..ops.core import normalize_axes
from .base import _ndim, _shape
from .layout import reshape

__all__ = ["complex_extremum", "complex_argextremum"]


def _parts(x: Any, sign: float) -> tuple[Any, Any, Any]:
    """(sign * real, sign * imag, NaN mask) of x: the minimum is the maximum of the negated parts."""
    re, im = L.bind("real", x), L.bind("imag", x)
    nan = L.binary("logical_or", L.unary("isnan", re, float_op=False), L.unary("isnan", im, float_op=False))
    if sign < 0:
        re, im = L.neg(re), L.neg(im)
    return re, im, nan


def _lexicographic(x: Any, axes: tuple, sign: float) -> tuple[Any, Any, Any, Any]:
    """(best real part, best imaginary part, mask of the best NaN-free elements, NaN mask), kept axes."""
    re, im, nan = _parts(x, sign)
    low = _np.asarray(-_np.inf, dtype=re.dtype)
    r = L.where(nan, low, re)
    rbest = L.reduce("max", r, axes, True)
    cand = L.binary("logical_and", L.binary("eq", r, rbest), L.unary("logical_not", nan))
    i = L.where(cand, im, low)
    ibest = L.reduce("max", i, axes, True)
    return rbest, ibest, L.binary("logical_and", cand, L.binary("eq", i, ibest)), nan


def _first(mask: Any, axis: int) -> Any:
    """Index of the first True along axis (int64, axis kept as size 1)."""
    return L.reshape(L.bind("argmax", L.cast(mask, _np.int8), axis=axis),
                     tuple(1 if a == axis else d for a, d in enumerate(_shape(mask))))


def complex_extremum(x: Any, axis: Any, keepdims: bool, kind: str) -> Any:
    """np.max (kind "max") or np.min ("min") of a complex array, NumPy's order and NaN rule.

    Args:
        x: complex64 or complex128 array.
        axis: None, an int or a tuple of ints.
        keepdims: keep the reduced axes as size 1.
        kind: "max" or "min".

    Returns:
        The extremum, x's dtype; where the reduced elements hold a value with a NaN part, the first such
        value (in C order over the reduced axes), as NumPy.
    """
    sign = 1.0 if kind == "max" else -1.0
    nd = _ndim(x)
    axes = normalize_axes(axis, nd, op=kind)
    if len(axes) != 1:  # several axes: bring them together as one last axis (C order, as NumPy reduces)
        keep = [a for a in range(nd) if a not in axes]
        xt = L.bind("transpose", x, perm=tuple(keep) + tuple(axes)) if tuple(keep) + tuple(axes) != tuple(range(nd)) else x
        flat = reshape(xt, tuple(_shape(x)[a] for a in keep) + (-1,))
        out = complex_extremum(flat, -1, False, kind)
        if keepdims:
            out = reshape(out, tuple(1 if a in axes else d for a, d in enumerate(_shape(x))))
        return out
    (ax,) = axes
    rbest, ibest, _, nan = _lexicographic(x, axes, sign)
    if sign < 0:
        rbest, ibest = L.neg(rbest), L.neg(ibest)
    best = L.bind("complex", rbest, ibest)
    first_nan = _gather_first(x, nan, ax)
    any_nan = L.reduce("max", L.cast(nan, _np.int8), axes, True)
    out = L.where(L.binary("gt", any_nan, _np.int8(0)), first_nan, best)
    return out if keepdims else reshape(out, tuple(d for a, d in enumerate(_shape(x)) if a != ax))


def complex_argextremum(x: Any, axis: Any, kind: str) -> Any:
    """np.argmax (kind "max") / np.argmin ("min") of a complex array: the first best index, NaN first (int64).

    Args:
        x: complex array; axis: None (over the flattened array) or an int.
    """
    if axis is None:
        return complex_argextremum(reshape(x, (-1,)), 0, kind)
    (ax,) = normalize_axes(axis, _ndim(x), op="arg" + kind)
    _, _, pick, nan = _lexicographic(x, (ax,), 1.0 if kind == "max" else -1.0)
    any_nan = L.reduce("max", L.cast(nan, _np.int8), (ax,), True)
    idx = L.where(L.binary("gt", any_nan, _np.int8(0)), _first(nan, ax), _first(pick, ax))
    return reshape(idx, tuple(d for a, d in enumerate(_shape(x)) if a != ax))


def _gather_first(x: Any, mask: Any, ax: int) -> Any:
    """x at the first True of mask along ax (axis kept): a sum of x where the first-True one-hot is set."""
    idx = _first(mask, ax)
    n = _shape(x)[ax]
    pos = _np.arange(n).reshape(tuple(n if a == ax else 1 for a in range(_ndim(x))))
    hot = L.binary("eq", L.broadcast_to(L.asnode(pos), _shape(x)), L.broadcast_to(idx, _shape(x)))
    zero = _np.asarray(0, dtype=x.dtype)
    return L.reduce("sum", L.where(hot, x, zero), (ax,), True)
