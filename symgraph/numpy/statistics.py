"""Order statistics: median, quantile, percentile and their NaN-ignoring variants, as NumPy computes them.

Each is a sort along the reduced axes (the sorting module's stable,
NaN-last sort) followed by gathers of the order statistics it needs and
NumPy's interpolation, written out so that the result is NumPy's bit for
bit (numpy/lib/_function_base_impl.py, `_quantile`, `_get_indexes`,
`_get_gamma` and `_lerp`, read for their semantics; Hyndman & Fan,
"Sample quantiles in statistical packages", The American Statistician 50(4),
1996, for the methods):

- the virtual index v of q among n sorted values is (n - 1) q for "linear",
  n q + (alpha + q (1 - alpha - beta)) - 1 for the Hyndman-Fan methods, with
  floor/ceil/round of (n - 1) q for "lower"/"higher"/"nearest" (no
  interpolation: the result keeps the input's dtype) and the mean of floor
  and ceil for "midpoint";
- the neighbours are i = floor(v) and i + 1, both the last element where
  v >= n - 1 (NumPy marks them -1, so the weight is g = v + 1 there) and
  both the first where v < 0 (g = v); g = v - i otherwise ("midpoint": 0.5,
  or 0 where v is whole);
- lerp(a, b, g) = b - (b - a)(1 - g) where g >= 0.5, else a + (b - a) g
  (so [1, inf] at q = 1 is NaN, as in NumPy); b - a in the input's dtype,
  the rest in the result's (a Python-number q is weak: float32 stays
  float32);
- a NaN anywhere in a slice makes its median or quantile NaN (the last
  sorted element); median is the mean of the middle one or two elements.

The nan variants count the non-NaN elements k of each slice (a traced
value) and take the order statistics of the first k sorted elements (NaN
sorts last); an all-NaN slice gives NaN. The derivative flows through the
sort's gather to the selected order statistics: the interpolation weights
(1 - g, g) go to the two neighbours, the median's 1/2 to each middle one.
At ties the sort's stable order decides which input is the selected one:
the tied input that comes first in the array gets the lowest order
statistic among the tied ones (docs/differentiation.md, "Conventions at
kinks and ties"). Cost: one sort of the array (sorting.py's docstring).
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from .. import lax as L
from ..errors import DTypeError, ShapeError, UnsupportedOpError
from ..ir import Node
from ..ops.core import normalize_axes
from .along_axis import _take_last
from .arithmetic import add, ceil, divide, floor, multiply, rint, subtract
from .layout import moveaxis, ravel, reshape, transpose
from .logic import isnan, where
from .reductions import sum as _sum
from .sorting import sort
from .structural import _shape_errors, _traced

__all__ = ["median", "nanmedian", "nanpercentile", "nanquantile", "percentile", "quantile"]

#: (alpha, beta) of the continuous Hyndman-Fan methods (NumPy's `_QuantileMethods`); "linear" is (1, 1)
#: but computed as (n - 1) q, as NumPy does.
_HYNDMAN_FAN = {"interpolated_inverted_cdf": (0, 1), "hazen": (0.5, 0.5), "weibull": (0, 0),  # ints as NumPy's
                "median_unbiased": (1 / 3.0, 1 / 3.0), "normal_unbiased": (3 / 8.0, 3 / 8.0)}
_INDEX_METHODS = ("lower", "higher", "nearest")
_METHODS = ("linear", "midpoint") + _INDEX_METHODS + tuple(_HYNDMAN_FAN)
_REFUSED = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation")


# ----- setup: the reduced axes merged into one last axis, sorted -----


def _setup(a: Any, axis: Any, op: str) -> tuple[Node, tuple, tuple]:
    """(a with the reduced axes merged last, the kept shape, the keepdims shape)."""
    a = L.asnode(a)
    if a.dtype.kind == "c":
        raise DTypeError(f"{op}: a must be an array of real numbers, got {a.dtype}")
    nd = a.ndim
    if axis is None:
        return ravel(a), (), (1,) * nd
    axes = normalize_axes(axis, nd, op=op)
    keep = [i for i in range(nd) if i not in axes]
    x = transpose(a, tuple(keep) + tuple(axes)) if list(axes) != list(range(nd - len(axes), nd)) else a
    kept = tuple(a.shape[i] for i in keep)
    n = int(_np.prod([a.shape[i] for i in axes], dtype=_np.int64))
    x = reshape(x, kept + (n,))
    return x, kept, tuple(1 if i in axes else a.shape[i] for i in range(nd))


def _finish(r: Any, qshape: tuple, keepshape: tuple, keepdims: bool) -> Any:
    """r of shape kept + q.shape, as NumPy returns it: q's axes first, the reduced ones kept as 1 with keepdims."""
    nq = len(qshape)
    if nq:
        r = moveaxis(r, tuple(range(r.ndim - nq, r.ndim)), tuple(range(nq)))
    if keepdims:
        r = reshape(r, qshape + keepshape)
    return r


def _no_out(out: Any, op: str) -> None:
    if out is not None:
        raise UnsupportedOpError(f"np.{op}(..., out=...) writes in place, which tracing does not support")


def _float_dtype(d: _np.dtype) -> _np.dtype:
    return d if d.kind == "f" else _np.dtype(_np.float64)


# ----- median -----


def _median_sorted(s: Node, k: Any, nan_last: bool) -> Node:
    """The median of the first k elements of each sorted row of s (k: an int, or a traced count per row)."""
    n = s.shape[-1]
    dt = _float_dtype(s.dtype)
    lead = s.shape[:-1]
    if isinstance(k, Node):
        h = L.binary("int_floordiv", k, L.constant(_np.int64(2)))
        odd = L.binary("eq", L.binary("int_mod", k, L.constant(_np.int64(2))), L.constant(_np.int64(1)))
        lo = where(odd, h, L.binary("sub", h, L.constant(_np.int64(1))))
        idx = L.bind("concatenate", reshape(lo, lead + (1,)), reshape(h, lead + (1,)), axis=len(lead))
        idx = L.binary("maximum", idx, L.constant(_np.int64(0)))  # an all-NaN row (k = 0): NaN below
        pair = L.cast(_take_last(s, idx), dt)
        a, b = pair[..., 0], pair[..., 1]
        r = where(odd, b, divide(add(a, b), _np.asarray(2, dt)))
        return where(L.binary("eq", k, L.constant(_np.int64(0))), _np.asarray(_np.nan, dt), r)
    if k == 0:
        return L.broadcast_to(L.constant(_np.asarray(_np.nan, dt)), lead)
    h = k // 2
    if k % 2:  # the mean of one element (integers: as float64)
        r = L.cast(s[..., h], dt)
    else:
        r = divide(add(L.cast(s[..., h - 1], dt), L.cast(s[..., h], dt)), _np.asarray(2, dt))
    if nan_last and s.dtype.kind == "f":
        r = where(isnan(s[..., n - 1]), _np.asarray(_np.nan, dt), r)
    return r


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Any:
    """The median along axis (int, tuple or None: all), as np.median: the middle element of the sorted
    slice, or the mean of the middle two; a NaN in the slice gives NaN. Integers give float64.

    Derivative: 1 (or 1/2 each) to the middle order statistics; ties by the stable sort (module docstring).

    Raises:
        UnsupportedOpError: out= (tracing does not write in place).
    """
    if not _traced(a):
        return _np.median(a, axis=axis, out=out, overwrite_input=overwrite_input, keepdims=keepdims)
    _no_out(out, "median")
    x, _, keepshape = _setup(a, axis, "median")
    s = sort(x, axis=-1)
    return _finish(_median_sorted(s, x.shape[-1], True), (), keepshape, keepdims)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
              keepdims: bool = False) -> Any:
    """The median of the non-NaN elements along axis, as np.nanmedian (NaN for an all-NaN slice, without
    NumPy's warning). Derivative as `median`'s, 0 at the NaNs."""
    if not _traced(a):
        return _np.nanmedian(a, axis=axis, out=out, overwrite_input=overwrite_input, keepdims=keepdims)
    _no_out(out, "nanmedian")
    x, _, keepshape = _setup(a, axis, "nanmedian")
    if x.dtype.kind != "f":
        return median(a, axis=axis, keepdims=keepdims)
    s = sort(x, axis=-1)
    k = _sum(L.cast(L.unary("logical_not", isnan(x), float_op=False), _np.int64), axis=-1)
    return _finish(_median_sorted(s, k, False), (), keepshape, keepdims)


# ----- quantiles -----


def _check_q(q: Any, op: str, scale: float) -> tuple[_np.ndarray, bool]:
    """q as NumPy's quantile sees it (percentile divides by 100) and whether it is weak (a Python number)."""
    if isinstance(q, Node):
        raise UnsupportedOpError(f"np.{op}: a traced q is not supported (q must be concrete: a number or an array)")
    weak = type(q) in (int, float)
    qa = _np.true_divide(q, scale) if scale != 1 else _np.asanyarray(q)
    if qa.ndim > 2:
        raise ShapeError(f"np.{op}: q must be a scalar or 1d")
    if qa.size and not (_np.all(qa >= 0) and _np.all(qa <= 1)):
        rng = "[0, 100]" if scale != 1 else "[0, 1]"
        raise ShapeError(f"np.{op}: {'Percentiles' if scale != 1 else 'Quantiles'} must be in the range {rng}")
    return qa, weak


def _check_method(method: str, weights: Any, interpolation: Any, op: str) -> None:
    if weights is not None:
        raise UnsupportedOpError(f"np.{op}(..., weights=...) is not supported (NumPy allows it only with "
                                 f"method='inverted_cdf', which symgraph does not support either)")
    if interpolation is not None:
        raise UnsupportedOpError(f"np.{op}(..., interpolation=...) is deprecated in NumPy; use method=")
    if method in _REFUSED:
        raise UnsupportedOpError(f"np.{op}(..., method={method!r}) is not supported (a discontinuous method); "
                                 f"the continuous ones are: {', '.join(_METHODS)}")
    if method not in _METHODS:
        raise UnsupportedOpError(f"np.{op}: {method!r} is not a valid method; use one of: {', '.join(_METHODS)}")


def _virtual_index(kf: Any, q: _np.ndarray, method: str) -> Any:
    """NumPy's virtual index of q among kf sorted values (kf in q's dtype: a number or a traced count)."""
    if method in _HYNDMAN_FAN:
        alpha, beta = _HYNDMAN_FAN[method]
        return subtract(add(multiply(kf, q), add(alpha, multiply(q, 1 - alpha - beta))), 1)
    v = multiply(subtract(kf, 1) if isinstance(kf, Node) else kf - 1, q)   # a Python int stays weak
    if method == "midpoint":
        return multiply(0.5, add(floor(v), ceil(v)))
    return {"lower": floor, "higher": ceil, "nearest": rint}.get(method, lambda t: t)(v)


def _quantile_sorted(s: Node, k: Any, q: _np.ndarray, method: str, weak: bool, nan_last: bool) -> Node:
    """The quantiles q of the first k elements of each sorted row of s: shape s.shape[:-1] + q.shape.

    k is the row length (an int) or a traced count of each row (its non-NaN elements, NaN sorting last).
    """
    lead, n = s.shape[:-1], s.shape[-1]
    qf = q.ravel()
    m = qf.size
    traced_k = isinstance(k, Node)
    if not traced_k and k == 0:
        raise ShapeError("quantile of an empty slice (NumPy raises IndexError)")
    kf = L.cast(reshape(k, lead + (1,)), qf.dtype) if traced_k and qf.dtype.kind == "f" else (
        reshape(k, lead + (1,)) if traced_k else k)
    v = _virtual_index(kf, qf, method)
    last = subtract(reshape(k, lead + (1,)), 1) if traced_k else k - 1

    def gather(idx: Any) -> Node:
        if not isinstance(idx, Node):
            idx = _np.broadcast_to(_np.asarray(idx, _np.int64), lead + (m,))
        else:
            idx = L.cast(idx, _np.int64)
            idx = L.broadcast_to(idx, lead + (m,))
            idx = L.binary("maximum", idx, L.constant(_np.int64(0)))  # an all-NaN row: NaN below
        return _take_last(s, idx)

    if method in _INDEX_METHODS or (method == "linear" and qf.dtype.kind in "iub"):
        r = gather(v.astype(_np.int64) if not isinstance(v, Node) else v)    # the order statistics themselves
        rdt = s.dtype
    else:
        prev = floor(v)
        above = L.binary("ge", v, last) if isinstance(v, Node) or isinstance(last, Node) else v >= last
        below = v < 0 if not isinstance(v, Node) else L.binary("lt", v, L.constant(_np.asarray(0, v.dtype)))
        prev = where(below, 0, where(above, -1, prev))   # NumPy's -1 marks the last element (weight v + 1)
        gamma = subtract(v, prev)
        if method == "midpoint":
            gamma = where(_np_equal(floor(v), v), 0.0, 0.5)
        gdt = v.dtype if isinstance(v, Node) else _np.asarray(v).dtype  # NumPy's gamma has v's dtype (even int)
        gamma = L.cast(gamma, gdt)
        rdt = _float_dtype(s.dtype) if weak else _np.result_type(s.dtype, gdt)
        ip = where(L.binary("eq", prev, L.constant(_np.asarray(-1, prev.dtype))) if isinstance(prev, Node)
                   else prev == -1, last, prev)
        a = gather(ip)
        b = gather(where(below, 0, where(above, last, add(prev, 1))))
        diff = L.cast(L.binary("sub", b, a), rdt)                      # b - a in the input's dtype
        one_minus = L.cast(subtract(1, gamma), rdt)                    # 1 - g in g's dtype (double when weak)
        hi = L.binary("ge", gamma, L.constant(_np.asarray(0.5, gdt))) if isinstance(gamma, Node) else gamma >= 0.5
        g = L.cast(gamma, rdt)
        if not isinstance(g, Node):
            g, one_minus, hi = (_np.broadcast_to(t, lead + (m,)) for t in (g, one_minus, hi))
        lo_form = add(L.cast(a, rdt), multiply(diff, g))
        hi_form = subtract(L.cast(b, rdt), multiply(diff, one_minus))
        r = where(hi, hi_form, lo_form)
    if traced_k:
        r = where(L.binary("eq", k, L.constant(_np.int64(0)))[..., None], _np.asarray(_np.nan, rdt), r)
    elif nan_last and s.dtype.kind == "f":
        r = where(isnan(s[..., n - 1:n]), L.cast(s[..., n - 1:n], rdt), r)   # a NaN in the slice: NaN
    return reshape(r, lead + q.shape)


def _np_equal(x: Any, y: Any) -> Any:
    return L.binary("eq", x, y) if isinstance(x, Node) or isinstance(y, Node) else _np.equal(x, y)


def _quantile(a: Any, q: Any, axis: Any, method: str, keepdims: bool, weights: Any, interpolation: Any, op: str,
              scale: float, nan: bool) -> Any:
    _check_method(method, weights, interpolation, op)
    qa, weak = _check_q(q, op, scale)
    x, _, keepshape = _setup(a, axis, op)
    if x.dtype.kind == "b":
        raise DTypeError(f"np.{op} of a bool array (NumPy: boolean subtract is not supported); cast it first")
    s = sort(x, axis=-1)
    if nan and x.dtype.kind == "f":
        k = _sum(L.cast(L.unary("logical_not", isnan(x), float_op=False), _np.int64), axis=-1)
        r = _quantile_sorted(s, k, qa, method, weak, False)
    else:
        r = _quantile_sorted(s, x.shape[-1], qa, method, weak, True)
    return _finish(r, qa.shape, keepshape, keepdims)


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None, interpolation: Any = None) -> Any:
    """The q-th quantiles (q in [0, 1], a number or an array of up to 2 dimensions) along axis, as np.quantile.

    Result shape q.shape + the reduced shape (with keepdims, the reduced axes kept as 1). `method`: "linear"
    (default), "lower", "higher", "midpoint", "nearest", and the Hyndman-Fan methods "weibull", "hazen",
    "median_unbiased", "normal_unbiased", "interpolated_inverted_cdf"; the formulas are the module
    docstring's (NumPy's, bit for bit). q must be concrete. The derivative flows to the two neighbouring
    order statistics with NumPy's interpolation weights.

    Raises:
        UnsupportedOpError: method "inverted_cdf", "averaged_inverted_cdf" or "closest_observation"
            (discontinuous), weights=, interpolation=, out=, a traced q.
        ShapeError: q outside [0, 1] or of more than 2 dimensions; an empty slice.
        DTypeError: a bool or complex array.
    """
    if not _traced(a, q):
        kw = {} if weights is None else {"weights": weights}
        return _np.quantile(a, q, axis=axis, out=out, overwrite_input=overwrite_input, method=method,
                            keepdims=keepdims, **kw)
    _no_out(out, "quantile")
    return _quantile(a, q, axis, method, keepdims, weights, interpolation, "quantile", 1, False)


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, weights: Any = None,
               interpolation: Any = None) -> Any:
    """The q-th percentiles (q in [0, 100]) along axis, as np.percentile: `quantile` of q / 100."""
    if not _traced(a, q):
        kw = {} if weights is None else {"weights": weights}
        return _np.percentile(a, q, axis=axis, out=out, overwrite_input=overwrite_input, method=method,
                              keepdims=keepdims, **kw)
    _no_out(out, "percentile")
    return _quantile(a, q, axis, method, keepdims, weights, interpolation, "percentile", 100, False)


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights: Any = None,
                interpolation: Any = None) -> Any:
    """`quantile` of the non-NaN elements of each slice, as np.nanquantile (NaN for an all-NaN slice)."""
    if not _traced(a, q):
        kw = {} if weights is None else {"weights": weights}
        return _np.nanquantile(a, q, axis=axis, out=out, overwrite_input=overwrite_input, method=method,
                               keepdims=keepdims, **kw)
    _no_out(out, "nanquantile")
    return _quantile(a, q, axis, method, keepdims, weights, interpolation, "nanquantile", 1, True)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights: Any = None,
                  interpolation: Any = None) -> Any:
    """`percentile` of the non-NaN elements of each slice, as np.nanpercentile (NaN for an all-NaN slice)."""
    if not _traced(a, q):
        kw = {} if weights is None else {"weights": weights}
        return _np.nanpercentile(a, q, axis=axis, out=out, overwrite_input=overwrite_input, method=method,
                                 keepdims=keepdims, **kw)
    _no_out(out, "nanpercentile")
    return _quantile(a, q, axis, method, keepdims, weights, interpolation, "nanpercentile", 100, True)


for _name in __all__:  # NumPy's ValueErrors of bad shapes become ShapeErrors naming the function
    globals()[_name] = _shape_errors(globals()[_name])
del _name

# ----- NumPy names that trace here (tracing dispatches through numpy/tables.py, which merges these) -----

UFUNCS: dict = {}

FUNCTIONS = {
    _np.median: median,
    _np.nanmedian: nanmedian,
    _np.quantile: quantile,
    _np.percentile: percentile,
    _np.nanquantile: nanquantile,
    _np.nanpercentile: nanpercentile,
}
