"""Functions of sampled data: np.interp (piecewise-linear interpolation) and np.trapezoid (the trapezoidal rule).

interp follows NumPy's C loop (numpy/_core/src/multiarray/compiled_base.c,
`arr_interp`, read for its semantics) value for value, in float64: the
interval of x is j = searchsorted(xp, x, "right") - 1 (the vectorized
bisection of numpy/sorting.py); x < xp[0] gives `left` (default fp[0]),
x > xp[-1] gives `right` (default fp[-1]), x == xp[-1] gives fp[-1], x at
a knot xp[j] gives fp[j] (no arithmetic: no inf * 0), NaN x gives NaN, and
inside an interval slope * (x - xp[j]) + fp[j] with slope = (fp[j+1] -
fp[j]) / (xp[j+1] - xp[j]), retried from the right end when that is NaN
(infinite fp) and fp[j] where fp[j] == fp[j+1]. `period` wraps x and xp
into [0, period), sorts xp (and fp with it) and pads one point at each end,
as NumPy's Python wrapper does. Derivatives flow to x, fp (and left/right)
and xp through those formulas; at a knot the derivative in x is the slope
of the interval to its right (the value there is fp[j] exactly; a zero term
carries the slope), 0 at the last knot and outside [xp[0], xp[-1]]
(docs/differentiation.md, "Conventions at kinks and ties").

trapezoid is NumPy's formula, sum(d * (y[1:] + y[:-1]) / 2) along axis with
d = diff(x) or dx; NumPy 2 has no np.trapz (this NumPy has none to register).
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import ShapeError, UnsupportedOpError
from ..ir import Node
from .arithmetic import add, divide, multiply, remainder, stop_gradient, subtract
from .layout import reshape
from .logic import isnan, where
from .reductions import sum as _sum
from .sorting import argsort, searchsorted
from .structural import _arr, _axis, _shape_errors, _take_slice, _traced, diff

__all__ = ["interp", "trapezoid"]


def _f64(x: Any) -> Any:
    return L.cast(x, _np.float64) if isinstance(x, Node) else _np.asarray(x, _np.float64)


def _at(a: Any, idx: Any) -> Any:
    """a[idx] for a 1-d a and a (traced) int64 index array in range."""
    return L.bind("gather", L.asnode(a), L.asnode(idx), axis=0)


def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """One-dimensional piecewise-linear interpolation of the points (xp, fp) at x, as np.interp (float64).

    x: any shape (the result's); xp: 1-d, increasing (not checked, as in NumPy); fp: 1-d, as long as xp;
    left/right: the values below xp[0] / above xp[-1] (default fp[0] / fp[-1]); period: a concrete
    nonzero number (then left/right are ignored and xp need not be sorted). Any of x, xp, fp, left and
    right may be traced; the derivative reaches each (module docstring for the conventions at knots).

    Raises:
        ShapeError: xp or fp not 1-d, of different lengths, or empty; period = 0.
        UnsupportedOpError: a traced period, complex fp.
    """
    if not _traced(x, xp, fp, left, right, period):
        return _np.interp(x, xp, fp, left=left, right=right, period=period)
    if isinstance(period, Node):
        raise UnsupportedOpError("np.interp: a traced period is not supported (it must be a concrete number)")
    x, xp, fp = _f64(_arr(x)), _f64(_arr(xp)), _f64(_arr(fp))
    if xp.ndim != 1 or fp.ndim != 1:
        raise ShapeError("np.interp: data points must be 1-D sequences")
    if xp.shape[0] != fp.shape[0]:
        raise ShapeError("np.interp: fp and xp are not of the same length")
    if xp.shape[0] == 0:
        raise ShapeError("np.interp: array of sample points is empty")
    if period is not None:
        if period == 0:
            raise ShapeError("np.interp: period must be a non-zero value")
        period = abs(float(period))
        left = right = None
        x, xp = remainder(x, period), remainder(xp, period)
        order = argsort(xp)
        xp, fp = _at(xp, order), _at(fp, order)
        xp = L.bind("concatenate", L.asnode(subtract(xp[-1:], period)), L.asnode(xp), L.asnode(add(xp[0:1], period)),
                    axis=0)
        fp = L.bind("concatenate", L.asnode(fp[-1:]), L.asnode(fp), L.asnode(fp[0:1]), axis=0)
    n = xp.shape[0]
    lval = fp[0] if left is None else _f64(left)
    rval = fp[n - 1] if right is None else _f64(right)
    if n == 1:
        return where(L.binary("lt", x, xp[0]), lval, where(L.binary("gt", x, xp[0]), rval, fp[0]))
    j = L.binary("sub", L.asnode(searchsorted(xp, x, side="right")), L.constant(_np.int64(1)))
    jc = L.binary("minimum", L.binary("maximum", j, L.constant(_np.int64(0))), L.constant(_np.int64(n - 2)))
    x0, x1 = _at(xp, jc), _at(xp, L.binary("add", jc, L.constant(_np.int64(1))))
    y0, y1 = _at(fp, jc), _at(fp, L.binary("add", jc, L.constant(_np.int64(1))))
    slope = divide(subtract(y1, y0), subtract(x1, x0))
    r = add(multiply(slope, subtract(x, x0)), y0)
    from_right = add(multiply(slope, subtract(x, x1)), y1)  # if we get NaN in one direction, try the other
    from_right = where(L.binary("logical_and", isnan(from_right), L.binary("eq", y0, y1)), y0, from_right)
    r = where(isnan(r), from_right, r)
    # at a knot: fp[j] exactly; t - stop_gradient(t) is +0.0 with the derivative of slope * (x - x0)
    t = multiply(slope, subtract(x, x0))
    knot = where(isnan(subtract(t, t)), y0, subtract(y0, subtract(stop_gradient(t), t)))
    r = where(L.binary("eq", x0, x), knot, r)
    r = where(L.binary("eq", j, L.constant(_np.int64(n - 1))), fp[n - 1], r)
    r = where(L.binary("gt", x, xp[n - 1]), rval, r)
    r = where(L.binary("eq", j, L.constant(_np.int64(-1))), lval, r)
    return where(isnan(x), x, r)


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """The integral of y along axis by the composite trapezoidal rule, as np.trapezoid:
    sum(d * (y[1:] + y[:-1]) / 2.0) with d = diff(x) (x 1-d along axis, or y's shape) or the spacing dx.

    Linear in y (and differentiable in x and dx). Summation order may differ from NumPy's pairwise sum
    in the last bits. Raises ShapeError for an axis out of range or an x that does not fit y.
    """
    if not _traced(y, x, dx):
        return _np.trapezoid(y, x=x, dx=dx, axis=axis)
    y = _arr(y)
    nd = y.ndim
    ax = _axis(axis, nd, "trapezoid")
    if x is None:
        d = dx
    else:
        x = _arr(x)
        if x.ndim == 1:
            d = diff(x)
            shape = [1] * nd
            shape[ax] = d.shape[0]
            d = reshape(d, tuple(shape))
        else:
            d = diff(x, axis=ax)
    n = y.shape[ax]
    s = add(_take_slice(y, ax, 1, None), _take_slice(y, ax, None, n - 1 if n else 0))
    return _sum(divide(multiply(d, s), 2.0), axis=ax)


for _name in __all__:  # NumPy's ValueErrors of bad shapes become ShapeErrors naming the function
    globals()[_name] = _shape_errors(globals()[_name])
del _name

# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.interp: interp,
    _np.trapezoid: trapezoid,
}
